//! `DELETE /patrons/{patronId}` → `204`; the patron and its card lock are gone, and the card
//! number can be claimed again at once. `404`; `409` `patronId` `has_loans` while the patron has
//! active loans.
//!
//! Read the patron (GSI1: its branch and its card), then one `TransactWriteItems`: delete the
//! patron row only if it still holds the card read and `activeLoans = 0`, and release the card's
//! lock only if it still names this patron. The `has_loans` rule is the row's own condition, not
//! a read: a checkout adds to `activeLoans` with a condition that the row exists, so of a removal
//! and a checkout racing, either the checkout commits first (the removal is `409`) or the removal
//! does (the checkout finds no row and is `404`), and there is never a loan for a removed patron.
//! A failed delete hands back the row as it stood (`ALL_OLD`): none is `404`, active loans are
//! `409`, another card (reissued meanwhile) is retried with that card. The transaction forgets
//! what else the table keeps of the patron: the registering key's record becomes a tombstone,
//! and its outbox items (its name, email and cards) go ([`recording::forgetting`]).
//!
//! The patron's returned loans stay, under `PATRON#<patronId>`/`RETURNED#…`: they name the patron
//! only by id (its name, email and card go with the row) and are the library's record of what
//! was lent, readable by staff through the patron's history and its loans by id.

use super::{Patron, PatronCard, find_patron, remove};
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, no_content, path_id};
use crate::recording::{self, outbox};
use crate::store::{Commit, RACE_ATTEMPTS, Transaction, decode, lock};
use lambda_http::Request;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Patron,
    Card,
    /// What the table keeps of the deleted entity beside it: the record of the
    /// `Idempotency-Key` that created it, if one did (a tombstone now), and its outbox items
    /// ([`crate::recording::forgetting`]).
    Forgotten,
    Event,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (patron_id,) = (path_id(&req, "patronId"),).all_valid()?;

    let mut fresh: Option<Patron> = None;
    for _ in 0..RACE_ATTEMPTS {
        // The index's copy of the row may be stale: only the delete's condition decides.
        let patron = match fresh.take() {
            Some(patron) => patron,
            None => find_patron(ctx, &patron_id).await?,
        };
        let removal = Transaction::new()
            .delete(Part::Patron, remove(&patron))
            .delete(
                Part::Card,
                lock::release(&PatronCard {
                    card_number: patron.card_number.clone(),
                    patron_id: patron_id.clone(),
                }),
            )
            .put(
                Part::Event,
                outbox(&req, Event::deleted(EventType::PatronRemoved, &patron_id)),
            );
        let removal = recording::forgetting(
            ctx,
            removal,
            Part::Forgotten,
            &req,
            EventType::PatronRemoved,
            &patron_id,
        )
        .await?;
        let commit = removal.commit(ctx).await?;

        match commit {
            Commit::Done => {
                tracing::info!(%patron_id, "patron removed");
                return Ok(no_content());
            }
            Commit::Cancelled(cancelled) if cancelled.failed(Part::Patron) => {
                // Removed, lending, or holding another card: decided on the row as it stood.
                let row = cancelled
                    .old(Part::Patron)
                    .ok_or_else(|| ApiError::not_found("patron"))?;
                let row: Patron = decode(row)?;
                if row.active_loans > 0 {
                    return Err(ApiError::conflict(vec![FieldError::new(
                        "patronId",
                        Code::HasLoans,
                    )]));
                }
                fresh = Some(row);
            }
            Commit::Cancelled(_) => {
                tracing::error!(%patron_id, "a patron's card lock names another patron");
                return Err(ApiError::Internal);
            }
        }
    }
    Err(ApiError::Unavailable)
}
