//! `POST /patrons/{patronId}/checkouts/{checkoutId}/return` → `200` checkout with `returnedDate`.
//!
//! Read the active loan, then one `TransactWriteItems` that reverses the checkout: remove the
//! active loan (only if it is as read: a concurrent return or renewal fails it), put it back as
//! `RETURNED#<checkoutId>` with no open or overdue index keys (so it leaves the open-loans and
//! both overdue indexes at once) and with its patron's history keys (GSI1 `HISTORY#<patronId>`),
//! make the copy `available` again (its availability key with it) and add one to the count of
//! the book's copies available at its branch, and free the patron's slot. `404` for an unknown
//! loan; `409` `checkoutId` `returned` for a returned one.
//! The returned loan expires `LoanHistoryDays` after its return (`expiresAt`, the table's TTL):
//! from then on no read shows it, and DynamoDB's TTL deletes it later, to the archive
//! ([`crate::events::archive`]).
//! Safe to retry with `Idempotency-Key`: a retry after a lost response gets the first answer,
//! where a retry without one would be told `409 returned`.

use super::{Checkout, LoanStatus, load_active, remove_active};
use crate::clock;
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, ok, path_id};
use crate::idempotency::{self, IdFrom, Idempotency, Outcome, commit};
use crate::library::{count_available, free_loan_slot, move_copy};
use crate::recording::outbox;
use crate::store::{Put, RACE_ATTEMPTS, Transaction};
use lambda_http::Request;
use singlet_shared::keys::CopyStatus;
use time::OffsetDateTime;

/// When a loan returned at `returned` leaves its patron's history: `LoanHistoryDays` later,
/// epoch seconds.
pub fn history_ends(ctx: &Ctx, returned: OffsetDateTime) -> i64 {
    Checkout::history_ends(returned, ctx.loan_history_days)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    ActiveLoan,
    ReturnedLoan,
    Copy,
    Patron,
    /// The branch's count of the book's available copies.
    Available,
    Event,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (patron_id, checkout_id) =
        (path_id(&req, "patronId"), path_id(&req, "checkoutId")).all_valid()?;
    let idempotency = Idempotency::from_request(ctx, &req, &serde_json::Value::Null)?;
    if let Some(first) = idempotency::recorded(ctx, idempotency.as_ref()).await? {
        return Ok(first);
    }

    for _ in 0..RACE_ATTEMPTS {
        let loan = load_active(ctx, &patron_id, &checkout_id).await?;
        let now = clock::now();
        let returned = Checkout {
            status: LoanStatus::Returned,
            returned_date: Some(clock::iso(now)),
            expires_at: Some(history_ends(ctx, now)),
            ..loan.clone()
        };
        let transaction = Transaction::new()
            .delete(Part::ActiveLoan, remove_active(&loan))
            .put(Part::ReturnedLoan, Put::new_only(&returned))
            .update(
                Part::Copy,
                move_copy(loan.copy(), CopyStatus::CheckedOut, CopyStatus::Available),
            )
            .update(
                Part::Patron,
                free_loan_slot(&loan.patron_branch_id, &patron_id),
            )
            .update(
                Part::Available,
                count_available(&loan.isbn, &loan.branch_id, 1),
            )
            .put(
                Part::Event,
                outbox(
                    &req,
                    Event::new(
                        EventType::LoanReturned,
                        &checkout_id,
                        &returned.clone().as_read(now),
                    ),
                ),
            );

        let response = ok(&returned.clone().as_read(now));
        let done = commit(ctx, transaction, &idempotency, IdFrom::Request, response);
        match done.await? {
            Outcome::Done(response) => {
                tracing::info!(%checkout_id, %patron_id, "book returned");
                return Ok(response);
            }
            // Returned or renewed since we read it: read again.
            Outcome::Cancelled(cancelled) if cancelled.failed(Part::ActiveLoan) => {}
            Outcome::Cancelled(cancelled) if cancelled.failed(Part::ReturnedLoan) => {
                return Err(ApiError::conflict(vec![FieldError::new(
                    "checkoutId",
                    Code::Returned,
                )]));
            }
            Outcome::Cancelled(cancelled) => {
                tracing::error!(%checkout_id, failed = ?cancelled.parts(), "a loan's copy or patron disagrees with it");
                return Err(ApiError::Internal);
            }
        }
    }
    Err(ApiError::Unavailable)
}
