//! `POST /patrons/{patronId}/checkouts/{checkoutId}/renew` → `200` checkout with a later
//! `dueDate` (by the loan period of the patron's tier) and `renewalCount` + 1.
//!
//! One item changes, so one conditional `UpdateItem` is atomic on its own (a transaction would
//! only double its cost): it moves the due date and the open-loans index sort key with it, on the
//! condition that the loan is still as read and still in the open index (not returned, not
//! marked overdue). `409` `checkoutId` `returned`, `overdue` (the loan reads `overdue`, as
//! [`Checkout::as_read`] says: due before now, whether or not `mark-overdue` has run yet) or
//! `renewal_limit` (after 2 renewals); `404` for an unknown loan.
//!
//! Safe to retry with `Idempotency-Key`: the update then commits in one transaction with the
//! key's record (twice the write units, paid only by a request that asks for it), and a retry
//! after a lost response gets the first answer instead of a second renewal.

use super::{Checkout, LoanStatus, MAX_RENEWALS, load_active, renew};
use crate::claims::principal;
use crate::clock;
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::http::{AllValid, HandlerResult, ok, path_id};
use crate::idempotency::{self, Idempotency, Outcome};
use crate::store::{MAX_ATTEMPTS, Transaction, decode};
use lambda_http::Request;

/// The renewal, the one part of its transaction when it carries an `Idempotency-Key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Renewal;

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

    for _ in 0..MAX_ATTEMPTS {
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

        let renewed = match &idempotency {
            None => match ctx.update_item(update).await? {
                Some(item) => decode::<Checkout>(&item)?,
                // Returned, renewed or marked overdue since we read it: read again.
                None => continue,
            },
            Some(_) => {
                let renewed = Checkout {
                    due_date: new_due,
                    renewal_count: loan.renewal_count + 1,
                    ..loan
                };
                let transaction = Transaction::new().update(Renewal, update);
                let response = ok(&renewed.clone().as_read(now));
                match idempotency::commit(ctx, transaction, idempotency.as_ref(), false, response)
                    .await?
                {
                    Outcome::Done(response) => {
                        tracing::info!(%checkout_id, renewals = renewed.renewal_count, "loan renewed");
                        return Ok(response);
                    }
                    Outcome::Cancelled(_) => continue,
                }
            }
        };
        tracing::info!(%checkout_id, due_date = %renewed.due_date, renewals = renewed.renewal_count, "loan renewed");
        return Ok(ok(&renewed.as_read(now)));
    }
    Err(ApiError::Unavailable)
}
