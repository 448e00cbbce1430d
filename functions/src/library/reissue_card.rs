//! `PUT /patrons/{patronId}/card` `{cardNumber}` → `200` patron with its new card; the old card
//! number is free at once. `400`; `404`; `409` `cardNumber` `taken`.
//!
//! Read the patron (GSI1: its branch and its card), then one `TransactWriteItems` of three
//! parts ([`lock::swap`]): claim the new card's lock `CARD#<cardNumber>` naming the patron
//! (`attribute_not_exists`), release the old card's lock only if it still names this patron, and
//! move the patron row's `cardNumber` only if it still holds the card read. So the patron, its
//! card and the card's lock change together or not at all, and of two reissues racing for one
//! card number one wins and the other is `409` with its own card untouched: no lock is ever left
//! behind. A patron changed meanwhile is retried from the row its cancellation hands back (no
//! new read); a patron removed meanwhile is `404`. The card number is normalised first (`C-1` is
//! `c-1`); reissuing the card a patron already holds changes nothing.

use super::{Patron, PatronCard, change_card, find_patron};
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, JsonBody, ok, path_id};
use crate::recording::outbox;
use crate::store::lock::{self, Swapped};
use crate::store::{RACE_ATTEMPTS, decode};
use lambda_http::Request;
use singlet_shared::CardNumber;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let (patron_id, card) = (
        path_id(&req, "patronId"),
        body.required("cardNumber", CardNumber::parse),
    )
        .all_valid()?;

    let mut fresh: Option<Patron> = None;
    for _ in 0..RACE_ATTEMPTS {
        let mut patron = match fresh.take() {
            Some(patron) => patron,
            None => find_patron(ctx, &patron_id).await?,
        };
        if patron.card_number == card {
            return Ok(ok(&patron));
        }
        let lock_of = |card_number: &CardNumber| PatronCard {
            card_number: card_number.clone(),
            patron_id: patron_id.clone(),
        };
        let (new, old) = (lock_of(&card), lock_of(&patron.card_number));
        let event = outbox(
            &req,
            Event::new(
                EventType::PatronCardReissued,
                &patron_id,
                &Patron {
                    card_number: card.clone(),
                    ..patron.clone()
                },
            ),
        );
        match lock::swap(ctx, &new, &old, change_card(&patron, &card), event).await? {
            Swapped::Done => {
                tracing::info!(%patron_id, "library card reissued");
                patron.card_number = card;
                return Ok(ok(&patron));
            }
            Swapped::Taken => {
                return Err(ApiError::conflict(vec![FieldError::new(
                    "cardNumber",
                    Code::Taken,
                )]));
            }
            // Removed since the index showed it, or changed: go on from the row as it is.
            Swapped::OwnerChanged(row) => {
                let row = row.ok_or_else(|| ApiError::not_found("patron"))?;
                fresh = Some(decode(&row)?);
            }
            Swapped::LockDisagrees => {
                tracing::error!(%patron_id, "a patron's card lock disagrees with it");
                return Err(ApiError::Internal);
            }
        }
    }
    Err(ApiError::Unavailable)
}
