//! `POST /patrons/{patronId}/checkouts/{checkoutId}/return` → `200` checkout with `returnedDate`.
//!
//! Read the active loan, then one `TransactWriteItems` that reverses the checkout: delete the
//! active loan (only if it is as read: a concurrent return or renewal fails it), put it back as
//! `RETURNED#<checkoutId>` with no index keys (so it leaves the open-loans and the overdue index
//! at once), make the copy `available` again (its availability key with it), and free the
//! patron's slot. `404` for an unknown loan; `409` `checkoutId` `returned` for a returned one.

use super::{Checkout, LoanStatus, MAX_ATTEMPTS, load_active};
use crate::clock;
use crate::db::{ABSENT, Commit, Ctx, Transaction, item, n, s};
use crate::error::{ApiError, Code, FieldError};
use crate::http::{AllValid, HandlerResult, ok, path_id};
use lambda_http::Request;
use singlet_shared::keys::{self, CopyStatus};
use singlet_shared::schema::GSI2;
use singlet_shared::{Id, Isbn13};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    ActiveLoan,
    ReturnedLoan,
    Copy,
    Patron,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (patron_id, checkout_id) =
        (path_id(&req, "patronId"), path_id(&req, "checkoutId")).all_valid()?;

    for _ in 0..MAX_ATTEMPTS {
        let loan = load_active(ctx, &patron_id, &checkout_id).await?;
        let parse = |raw: &str| Id::parse(raw).map_err(|_| ApiError::Internal);
        let (branch_id, copy_id, home_branch) = (
            parse(&loan.branch_id)?,
            parse(&loan.copy_id)?,
            parse(&loan.patron_branch_id)?,
        );
        let isbn = Isbn13::parse(&loan.isbn).map_err(|_| ApiError::Internal)?;
        let returned = Checkout {
            status: LoanStatus::Returned,
            returned_date: Some(clock::iso(clock::now())),
            ..loan.clone()
        };
        let available = keys::copy_by_book(&isbn, CopyStatus::Available, &branch_id, &copy_id);

        let commit = Transaction::new()
            .delete(
                Part::ActiveLoan,
                ctx.delete(&keys::checkout(&patron_id, &checkout_id))
                    .condition_expression("dueDate = :due AND renewalCount = :renewals")
                    .expression_attribute_values(":due", s(&loan.due_date))
                    .expression_attribute_values(":renewals", n(loan.renewal_count)),
            )
            .put(
                Part::ReturnedLoan,
                ctx.put(item(
                    &keys::returned_checkout(&patron_id, &checkout_id),
                    &returned,
                ))
                .condition_expression(ABSENT),
            )
            .update(
                Part::Copy,
                ctx.update(&keys::copy(&branch_id, &copy_id))
                    .update_expression("SET #status = :available, #gsi2sk = :sk")
                    .condition_expression("#status = :out")
                    .expression_attribute_names("#status", "status")
                    .expression_attribute_names("#gsi2sk", GSI2.sk)
                    .expression_attribute_values(":available", s(CopyStatus::Available.as_str()))
                    .expression_attribute_values(":out", s(CopyStatus::CheckedOut.as_str()))
                    .expression_attribute_values(":sk", s(available.sk)),
            )
            .update(
                Part::Patron,
                ctx.update(&keys::patron(&home_branch, &patron_id))
                    .update_expression("SET activeLoans = activeLoans - :one")
                    .condition_expression("activeLoans > :zero")
                    .expression_attribute_values(":one", n(1))
                    .expression_attribute_values(":zero", n(0)),
            )
            .commit(ctx)
            .await?;

        match commit {
            Commit::Done => {
                tracing::info!(%checkout_id, %patron_id, %copy_id, "book returned");
                return Ok(ok(&returned));
            }
            // Returned or renewed since we read it: read again.
            Commit::Cancelled(cancelled) if cancelled.failed(Part::ActiveLoan) => {}
            Commit::Cancelled(cancelled) if cancelled.failed(Part::ReturnedLoan) => {
                return Err(ApiError::conflict(vec![FieldError::new(
                    "checkoutId",
                    Code::Returned,
                )]));
            }
            Commit::Cancelled(cancelled) => {
                tracing::error!(%checkout_id, failed = ?cancelled.failed, "a loan's copy or patron disagrees with it");
                return Err(ApiError::Internal);
            }
        }
    }
    Err(ApiError::Unavailable)
}
