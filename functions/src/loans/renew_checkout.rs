//! `POST /patrons/{patronId}/checkouts/{checkoutId}/renew` → `200` checkout with a later
//! `dueDate` (by the loan period of the patron's tier) and `renewalCount` + 1.
//!
//! One `TransactWriteItems`: the loan's conditional update, which moves the due date and the
//! open-loans index sort key with it, on the condition that the loan is still as read and still
//! in the open index (not returned, not marked overdue), and the renewal's event (`LoanRenewed`,
//! its outbox item). It was one `UpdateItem` before events: the event needs the caller as its
//! `actor`, which the loan does not hold, so it is written with it (docs/COSTS.md). `409`
//! `checkoutId` `returned`, `overdue` (the loan reads `overdue`, as
//! [`Checkout::as_read`] says: due before now, whether or not `mark-overdue` has run yet) or
//! `renewal_limit` (after 2 renewals); `404` for an unknown loan.
//!
//! Safe to retry with `Idempotency-Key`: the key's record commits in the same transaction, and a
//! retry after a lost response gets the first answer instead of a second renewal.

use super::{Checkout, LoanStatus, MAX_RENEWALS, load_active, renew};
use crate::claims::principal;
use crate::clock;
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, ok, path_id};
use crate::idempotency::{self, IdFrom, Idempotency, Outcome, commit};
use crate::recording::outbox;
use crate::store::{RACE_ATTEMPTS, Transaction};
use lambda_http::Request;

/// The transaction's parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Renewal,
    Event,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (patron_id, checkout_id) =
        (path_id(&req, "patronId"), path_id(&req, "checkoutId")).all_valid()?;
    if !principal(&req).may_reach_patron(&patron_id) {
        return Err(ApiError::not_found("checkout"));
    }
    let idempotency = Idempotency::from_request(ctx, &req, &serde_json::Value::Null)?;
    if let Some(first) = idempotency::recorded(ctx, idempotency.as_ref()).await? {
        return Ok(first);
    }
    let refuse = |code| {
        Err(ApiError::conflict(vec![FieldError::new(
            "checkoutId",
            code,
        )]))
    };

    for _ in 0..RACE_ATTEMPTS {
        let loan = load_active(ctx, &patron_id, &checkout_id).await?;
        let now = clock::now();
        let due = clock::parse_iso(&loan.due_date).ok_or(ApiError::Internal)?;
        if loan.clone().as_read(now).status == LoanStatus::Overdue {
            return refuse(Code::Overdue);
        }
        if loan.renewal_count >= MAX_RENEWALS {
            return refuse(Code::RenewalLimit);
        }
        let new_due = clock::iso(due + clock::days(loan.loan_period_days.into()));
        let update = renew(&loan, &new_due);

        let renewed = Checkout {
            due_date: new_due,
            renewal_count: loan.renewal_count + 1,
            ..loan
        }
        .as_read(now);
        let transaction = Transaction::new().update(Part::Renewal, update).put(
            Part::Event,
            outbox(
                &req,
                Event::new(EventType::LoanRenewed, &checkout_id, &renewed),
            ),
        );
        let response = ok(&renewed);
        let done = commit(ctx, transaction, &idempotency, IdFrom::Request, response);
        match done.await? {
            Outcome::Done(response) => {
                tracing::info!(%checkout_id, due_date = %renewed.due_date, renewals = renewed.renewal_count, "loan renewed");
                return Ok(response);
            }
            // Returned, renewed or marked overdue since we read it: read again.
            Outcome::Cancelled(_) => continue,
        }
    }
    Err(ApiError::Unavailable)
}
