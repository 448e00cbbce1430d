//! `PUT /patrons/{patronId}/card` `{cardNumber}` → `200` patron with its new card; the old card
//! number is free at once. `400`; `404`; `409` `cardNumber` `taken`.
//!
//! Read the patron (GSI1: its branch and its card), then one `TransactWriteItems` of three
//! parts: claim the new card's lock `CARD#<cardNumber>` naming the patron
//! (`attribute_not_exists`), release the old card's lock only if it still names this patron, and
//! move the patron row's `cardNumber` only if it still holds the card read. So the patron, its
//! card and the card's lock change together or not at all, and of two reissues racing for one
//! card number one wins and the other is `409` with its own card untouched: no lock is ever left
//! behind. A patron changed meanwhile is retried from the row its cancellation hands back (no
//! new read); a patron removed meanwhile is `404`. The card number is normalised first (`C-1` is
//! `c-1`); reissuing the card a patron already holds changes nothing.

use super::{CARD_HOLDER, MAX_ATTEMPTS, Patron, PatronCard, change_card, find_patron};
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::events::{Event, EventType, outbox};
use crate::http::{AllValid, HandlerResult, JsonBody, ok, path_id};
use crate::store::{Commit, Transaction, decode, lock};
use lambda_http::Request;
use singlet_shared::{CardNumber, keys};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    NewCard,
    OldCard,
    Patron,
    Event,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let (patron_id, card) = (
        path_id(&req, "patronId"),
        body.required("cardNumber", CardNumber::parse),
    )
        .all_valid()?;

    let mut fresh: Option<Patron> = None;
    for _ in 0..MAX_ATTEMPTS {
        let mut patron = match fresh.take() {
            Some(patron) => patron,
            None => find_patron(ctx, &patron_id).await?,
        };
        if patron.card_number == card {
            return Ok(ok(&patron));
        }
        let new_lock = PatronCard {
            card_number: card.clone(),
            patron_id: patron_id.clone(),
        };

        let commit = Transaction::new()
            .put(
                Part::NewCard,
                lock::claim(ctx, &keys::card_lock(&card), &new_lock),
            )
            .delete(
                Part::OldCard,
                lock::release(
                    ctx,
                    &keys::card_lock(&patron.card_number),
                    CARD_HOLDER,
                    &patron_id,
                ),
            )
            .update(Part::Patron, change_card(ctx, &patron, &card))
            .put(
                Part::Event,
                outbox(
                    ctx,
                    &req,
                    Event::new(
                        EventType::PatronCardReissued,
                        &patron_id,
                        &Patron {
                            card_number: card.clone(),
                            ..patron.clone()
                        },
                    ),
                ),
            )
            .commit(ctx)
            .await?;

        match commit {
            Commit::Done => {
                tracing::info!(%patron_id, "library card reissued");
                patron.card_number = card;
                return Ok(ok(&patron));
            }
            Commit::Cancelled(cancelled) => {
                let holder = lock::holder(cancelled.old(Part::NewCard), CARD_HOLDER);
                if holder.is_some_and(|holder| holder != patron_id.as_str()) {
                    return Err(ApiError::conflict(vec![FieldError::new(
                        "cardNumber",
                        Code::Taken,
                    )]));
                }
                if cancelled.failed(Part::Patron) {
                    // Removed since the index showed it, or changed: go on from the row as it is.
                    let row = cancelled
                        .old(Part::Patron)
                        .ok_or_else(|| ApiError::not_found("patron"))?;
                    fresh = Some(decode(row)?);
                    continue;
                }
                tracing::error!(%patron_id, failed = ?cancelled.failed, "a patron's card lock disagrees with it");
                return Err(ApiError::Internal);
            }
        }
    }
    Err(ApiError::Unavailable)
}
