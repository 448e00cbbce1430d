//! `POST /checkouts` `{patronId, branchId, copyId}` → `201` checkout with `dueDate`.
//!
//! Read the patron (GSI1: its tier and home branch) and, at the same time, the copy (its book)
//! then its book (its title, as corrected last), then one `TransactWriteItems`: put the loan
//! (title denormalised, due date by the patron's tier, open-loans index keys set), move the copy
//! from `available` to `checked_out` on the condition that it is available (its availability
//! index key moves with it), take one from the count of the book's copies available at the
//! branch, and count the loan against the patron on the condition that the patron row exists
//! and `activeLoans < loanLimit`. The cancellation says which part failed:
//! `404` for a patron removed since the index showed it (its row is gone, so no loan is ever
//! made for a removed patron), else `409` `copyId` `unavailable` and/or `patronId`
//! `limit_reached`. Safe to retry with `Idempotency-Key`.
//!
//! Reading the book costs one more read unit per checkout (two round trips instead of one for
//! the copy's side) and keeps `PATCH /books/{isbn}` a single `UpdateItem`: copying a correction
//! onto every copy of the book instead would cost a write per copy, could not be one transaction,
//! and would race copies being added.

use super::{Checkout, LoanStatus};
use crate::clock;
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, JsonBody, json};
use crate::idempotency::{self, IdFrom, Idempotency, commit, new_id};
use crate::library::{
    count_available, find_patron, load_book, load_copy, move_copy, take_loan_slot,
};
use crate::recording::outbox;
use crate::store::{Put, Transaction};
use lambda_http::Request;
use lambda_http::http::StatusCode;
use singlet_shared::Id;
use singlet_shared::keys::CopyStatus;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Loan,
    Copy,
    Patron,
    /// The branch's count of the book's available copies.
    Available,
    Event,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let (patron_id, branch_id, copy_id) = (
        body.required("patronId", Id::parse),
        body.required("branchId", Id::parse),
        body.required("copyId", Id::parse),
    )
        .all_valid()?;
    let idempotency = Idempotency::from_request(ctx, &req, &body.value())?;
    // The patron, and at the same time the copy then its book (the copy names the book): the
    // loan carries the book's title as it is now, corrections included.
    let (patron, (copy, book)) = tokio::try_join!(find_patron(ctx, &patron_id), async {
        let copy = load_copy(ctx, &branch_id, &copy_id).await?;
        let book = load_book(ctx, &copy.isbn).await?;
        Ok::<_, ApiError>((copy, book))
    })?;
    let home_branch = patron.branch_id.clone();

    let checkout_id = new_id(idempotency.as_ref());
    let now = clock::now();
    let due_date = clock::iso(now + clock::days(patron.loan_period_days.into()));
    let loan = Checkout {
        checkout_id: checkout_id.clone(),
        patron_id: patron_id.clone(),
        patron_branch_id: home_branch.clone(),
        branch_id: branch_id.clone(),
        copy_id: copy_id.clone(),
        isbn: copy.isbn.clone(),
        title: book.title,
        status: LoanStatus::Open,
        checked_out_at: clock::iso(now),
        due_date: due_date.clone(),
        renewal_count: 0,
        loan_period_days: patron.loan_period_days,
        returned_date: None,
        expires_at: None,
    };
    let response = json(StatusCode::CREATED, &loan.clone().as_read(now));

    let transaction = Transaction::new()
        .put(Part::Loan, Put::new_only(&loan))
        .update(
            Part::Copy,
            move_copy(loan.copy(), CopyStatus::Available, CopyStatus::CheckedOut),
        )
        .update(Part::Patron, take_loan_slot(&home_branch, &patron_id))
        .update(Part::Available, count_available(&loan.isbn, &branch_id, -1))
        .put(
            Part::Event,
            outbox(
                &req,
                Event::new(
                    EventType::LoanCheckedOut,
                    &checkout_id,
                    &loan.clone().as_read(now),
                ),
            ),
        );

    let done = commit(ctx, transaction, &idempotency, IdFrom::Key, response).await?;
    let response = done.answer(|cancelled| {
        // Only an id derived from a spent Idempotency-Key can already exist.
        if cancelled.failed(Part::Loan) {
            return idempotency::spent_key();
        }
        // Removed since the index showed it: no loan for a patron that is gone.
        if cancelled.failed(Part::Patron) && cancelled.old(Part::Patron).is_none() {
            return ApiError::not_found("patron");
        }
        ApiError::conflict(
            [
                (Part::Copy, "copyId", Code::Unavailable),
                (Part::Patron, "patronId", Code::LimitReached),
            ]
            .into_iter()
            .filter(|(part, _, _)| cancelled.failed(*part))
            .map(|(_, field, code)| FieldError::new(field, code))
            .collect(),
        )
    })?;
    tracing::info!(%checkout_id, %patron_id, %copy_id, %due_date, "book checked out");
    Ok(response)
}
