//! `POST /checkouts` `{patronId, branchId, copyId}` → `201` checkout with `dueDate`.
//!
//! Read the patron (GSI1: its tier and home branch) and the copy (its book and title) at once,
//! then one `TransactWriteItems`: put the loan (title denormalised, due date by the patron's tier,
//! open-loans index keys set), move the copy from `available` to `checked_out` on the condition
//! that it is available (its availability index key moves with it), and count the loan against
//! the patron on the condition `activeLoans < loanLimit`. The cancellation says which part
//! failed: `409` `copyId` `unavailable` and/or `patronId` `limit_reached`. Safe to retry with
//! `Idempotency-Key`.

use super::{Checkout, LoanStatus};
use crate::clock;
use crate::db::{ABSENT, Creation, Ctx, Transaction, item, n, s, with_index};
use crate::error::{ApiError, Code, FieldError};
use crate::http::{AllValid, HandlerResult, JsonBody, json};
use crate::idempotency::{self, Idempotency, new_id};
use crate::library::{find_patron, load_copy};
use lambda_http::Request;
use lambda_http::http::StatusCode;
use singlet_shared::keys::{self, CopyStatus};
use singlet_shared::schema::{GSI1, GSI2};
use singlet_shared::{Id, Isbn13};

pub const ROUTE: &str = "checkout-book";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Loan,
    /// No returned loan has this id: an id derived from a spent key must not come back.
    Unused,
    Copy,
    Patron,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let (patron_id, branch_id, copy_id) = (
        body.required("patronId", Id::parse),
        body.required("branchId", Id::parse),
        body.required("copyId", Id::parse),
    )
        .all_valid()?;
    let idempotency = Idempotency::from_request(&req, ROUTE, &body.value())?;
    let (patron, copy) = tokio::try_join!(
        find_patron(ctx, &patron_id),
        load_copy(ctx, &branch_id, &copy_id)
    )?;
    let isbn = Isbn13::parse(&copy.isbn).map_err(|_| ApiError::Internal)?;
    let home_branch = Id::parse(&patron.branch_id).map_err(|_| ApiError::Internal)?;

    let checkout_id = new_id(idempotency.as_ref());
    let now = clock::now();
    let due_date = clock::iso(now + clock::days(patron.loan_period_days.into()));
    let loan = Checkout {
        checkout_id: checkout_id.to_string(),
        patron_id: patron_id.to_string(),
        patron_branch_id: home_branch.to_string(),
        branch_id: branch_id.to_string(),
        copy_id: copy_id.to_string(),
        isbn: isbn.to_string(),
        title: copy.title.clone(),
        status: LoanStatus::Open,
        checked_out_at: clock::iso(now),
        due_date: due_date.clone(),
        renewal_count: 0,
        loan_period_days: patron.loan_period_days,
        returned_date: None,
    };
    let response = json(StatusCode::CREATED, &loan);
    let loan_item = with_index(
        item(&keys::checkout(&patron_id, &checkout_id), &loan),
        GSI1,
        &keys::open_loan(&checkout_id, &due_date),
    );
    let checked_out = keys::copy_by_book(&isbn, CopyStatus::CheckedOut, &branch_id, &copy_id);

    let commit = Transaction::new()
        .put(Part::Loan, ctx.put(loan_item).condition_expression(ABSENT))
        .check(
            Part::Unused,
            ctx.check(&keys::returned_checkout(&patron_id, &checkout_id))
                .condition_expression(ABSENT),
        )
        .update(
            Part::Copy,
            ctx.update(&keys::copy(&branch_id, &copy_id))
                .update_expression("SET #status = :out, #gsi2sk = :sk")
                .condition_expression("#status = :available")
                .expression_attribute_names("#status", "status")
                .expression_attribute_names("#gsi2sk", GSI2.sk)
                .expression_attribute_values(":out", s(CopyStatus::CheckedOut.as_str()))
                .expression_attribute_values(":available", s(CopyStatus::Available.as_str()))
                .expression_attribute_values(":sk", s(checked_out.sk)),
        )
        .update(
            Part::Patron,
            ctx.update(&keys::patron(&home_branch, &patron_id))
                .update_expression("SET activeLoans = activeLoans + :one")
                .condition_expression("activeLoans < loanLimit")
                .expression_attribute_values(":one", n(1)),
        )
        .commit_creating(ctx, idempotency, response)
        .await?;

    match commit {
        Creation::Created(response) => {
            tracing::info!(%checkout_id, %patron_id, %copy_id, %due_date, "book checked out");
            Ok(response)
        }
        // Only an id derived from a spent Idempotency-Key can already exist.
        Creation::Cancelled(cancelled)
            if cancelled.failed(Part::Loan) || cancelled.failed(Part::Unused) =>
        {
            Err(idempotency::spent_key())
        }
        Creation::Cancelled(cancelled) => Err(ApiError::conflict(
            [
                (Part::Copy, "copyId", Code::Unavailable),
                (Part::Patron, "patronId", Code::LimitReached),
            ]
            .into_iter()
            .filter(|(part, _, _)| cancelled.failed(*part))
            .map(|(_, field, code)| FieldError::new(field, code))
            .collect(),
        )),
    }
}
