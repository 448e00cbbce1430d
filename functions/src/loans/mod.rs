//! Library loans: checkout, return, renew, one loan, a patron's active loans and history, and
//! the overdue indexes that the scheduled `mark-overdue` fills.
//!
//! A loan is `PATRON#<patronId>`/`CHECKOUT#<checkoutId>` while active. While it is open and not
//! yet marked it carries GSI1 keys in one of [`keys::OPEN_LOAN_SHARDS`] open-loans partitions,
//! sorted by due date; `mark-overdue` moves each loan that fell due from there into GSI3,
//! `OVERDUE#<branchId>`, and GSI4, `OVERDUE` (every branch), both sorted by due date. A return
//! takes the loan out of all three and moves it to `PATRON#<patronId>`/`RETURNED#<checkoutId>`,
//! whose only index keys are its patron's history (GSI1 `HISTORY#<patronId>`, by return date), so
//! a patron's active loans are one `Query` on the `CHECKOUT#` range that never reads returned
//! history.
//!
//! A loan's `status` is what [`Checkout::as_read`] says at the moment it is answered: an open loan
//! past its due date reads `overdue` at once, whether or not the marker has run. The marker only
//! keeps the overdue indexes; the overdue lists say how fresh they are with `asOf`, the `time` of
//! the last complete run ([`overdue_as_of`]).

pub mod active_checkouts;
pub mod checkout_book;
pub mod find_all_overdue;
pub mod find_overdue;
pub mod get_checkout;
pub mod loan_history;
pub mod mark_overdue;
pub mod renew_checkout;
pub mod return_book;

use crate::clock;
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::http::{HandlerResult, ok};
use crate::model::Entity;
use crate::paging::{Page, Paged};
use crate::store::{Condition, Delete, Query, Update};
use serde::Serialize;
use singlet_shared::schema::GSI1;
use singlet_shared::{Id, Isbn13, keys};
use time::OffsetDateTime;

pub use crate::model::loans::{Checkout, LoanStatus, MarkerRun};

impl Checkout {
    /// The loan as it reads at `now`: an open loan whose due date has passed is `overdue`, the
    /// moment it passes, whether or not `mark-overdue` has marked it yet. Every loan a route
    /// answers passes through here; the stored item keeps its stored status. Its expiry is the
    /// table's business (TTL), not the contract's: it is left out of every answer and event.
    pub fn as_read(mut self, now: OffsetDateTime) -> Self {
        self.expires_at = None;
        if self.status == LoanStatus::Open && self.is_due_before(now) {
            self.status = LoanStatus::Overdue;
        }
        self
    }

    /// Whether a renewal at `now` would be accepted: the loan is open, not yet due, and renewed
    /// fewer than [`MAX_RENEWALS`] times (what `renew-checkout` checks before it writes).
    pub fn renewable(&self, now: OffsetDateTime) -> bool {
        self.status == LoanStatus::Open
            && !self.is_due_before(now)
            && self.renewal_count < MAX_RENEWALS
    }

    /// Whether the due date is before `now`. A due date that does not parse (none the API
    /// writes) counts as not due.
    fn is_due_before(&self, now: OffsetDateTime) -> bool {
        clock::parse_iso(&self.due_date).is_some_and(|due| due < now)
    }
}

/// A page of loans, each as it reads now.
pub fn as_read(page: Paged<Checkout>) -> Paged<Checkout> {
    let now = clock::now();
    Paged {
        items: page.items.into_iter().map(|l| l.as_read(now)).collect(),
        next_cursor: page.next_cursor,
    }
}

/// A loan may be renewed this many times.
pub const MAX_RENEWALS: u32 = 2;

/// The active loan; `409` `checkoutId` `returned` for a returned one; `404` for none (or one
/// whose history expired).
pub async fn load_active(
    ctx: &Ctx,
    patron_id: &Id,
    checkout_id: &Id,
) -> Result<Checkout, ApiError> {
    if let Some(loan) = ctx
        .get(&Checkout::active_key_of(patron_id, checkout_id))
        .await?
    {
        return Ok(loan);
    }
    if ctx
        .get_live_item(
            &Checkout::returned_key_of(patron_id, checkout_id),
            clock::now().unix_timestamp(),
        )
        .await?
        .is_some()
    {
        return Err(ApiError::conflict(vec![FieldError::new(
            "checkoutId",
            Code::Returned,
        )]));
    }
    Err(ApiError::not_found("checkout"))
}

// ---- A loan's index lifecycle: open → overdue → returned ----------------------------------
//
// These are the only changes of a loan after its checkout; its keys and index keys in each state
// are the model's (`Checkout::key`, `Checkout::index_keys`). An open loan sits in one of the
// open-loans shards of GSI1, sorted by due date; `mark-overdue` moves it to its branch's partition
// of the sparse GSI3 and to GSI4; a return deletes it and puts it under `RETURNED#` with only its
// patron's history keys (GSI1 `HISTORY#`), so it leaves the open and overdue indexes in the
// return's transaction.

impl Checkout {
    /// The copy lent: its book, its branch, its id.
    pub fn copy(&self) -> (&Isbn13, &Id, &Id) {
        (&self.isbn, &self.branch_id, &self.copy_id)
    }
}

/// Open → overdue: out of the open-loans index, into the overdue indexes an overdue loan has
/// (its branch's, GSI3, and the library's, GSI4), only if the loan is still open with the due
/// date that was read.
pub fn mark_overdue(loan: &Checkout) -> Update<Checkout> {
    let overdue = Checkout {
        status: LoanStatus::Overdue,
        ..loan.clone()
    };
    let open = keys::open_loan(&loan.checkout_id, &loan.due_date);
    let update = Update::at(loan.active_key())
        .set(Checkout::STATUS, LoanStatus::Overdue)
        .remove_index(GSI1);
    overdue
        .index_keys()
        .into_iter()
        .fold(update, |update, (index, key)| update.set_index(index, key))
        .when(
            Condition::in_index_partition(GSI1, open.pk)
                .and_equals(Checkout::DUE_DATE, &loan.due_date),
        )
}

/// Open, renewed: the due date and the open-index sort key move together, only if the loan is
/// still as read and still open.
pub fn renew(loan: &Checkout, new_due: &str) -> Update<Checkout> {
    let open = keys::open_loan(&loan.checkout_id, new_due);
    Update::at(loan.active_key())
        .set(Checkout::DUE_DATE, new_due)
        .add(Checkout::RENEWAL_COUNT, 1)
        .set_index_sort(GSI1, open.sk)
        .when(
            Condition::equals(Checkout::DUE_DATE, &loan.due_date)
                .and_equals(Checkout::RENEWAL_COUNT, loan.renewal_count)
                .and_in_index(GSI1),
        )
}

/// Returned, part one: the active loan goes (from whichever index it is in), only if it is as read.
/// Part two is the returned loan's put: a `Checkout` whose status is `returned` is keyed, and
/// indexed, as history.
pub fn remove_active(loan: &Checkout) -> Delete<Checkout> {
    Delete::at(loan.active_key()).when(
        Condition::equals(Checkout::DUE_DATE, &loan.due_date)
            .and_equals(Checkout::RENEWAL_COUNT, loan.renewal_count),
    )
}

// ---- The overdue lists ----------------------------------------------------------------------

/// A complete run records its time, only ever moving it forward: of two overlapping runs, the
/// one that completes last with the earlier time leaves the later time in place.
pub fn record_run(time: &str) -> Update<MarkerRun> {
    Update::at(MarkerRun::the_key())
        .set(MarkerRun::TIME, time)
        .when(Condition::missing_or_below(MarkerRun::TIME, time))
}

/// `asOf`: the time of the last complete `mark-overdue` run, `None` before the first. One
/// strongly consistent `GetItem`.
pub async fn overdue_as_of(ctx: &Ctx) -> Result<Option<String>, ApiError> {
    Ok(ctx
        .get::<MarkerRun>(&MarkerRun::the_key())
        .await?
        .map(|run| run.time))
}

/// An overdue list's body: a page of loans and how fresh the index they come from is.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OverduePage {
    #[serde(flatten)]
    pub page: Paged<Checkout>,
    pub as_of: Option<String>,
}

/// One page of an overdue index (`query`, ascending: oldest due first) and `asOf`, read at once
/// (one `Query` and one `GetItem`). `missing` tells an empty first page from a missing owner.
pub async fn overdue_page<M>(ctx: &Ctx, page: Page, query: Query, missing: M) -> HandlerResult
where
    M: std::future::Future<Output = Result<(), ApiError>>,
{
    let (loans, as_of) = tokio::try_join!(
        page.read_or_missing::<Checkout, _>(ctx, query, missing),
        overdue_as_of(ctx)
    )?;
    Ok(ok(&OverduePage {
        page: as_read(loans),
        as_of,
    }))
}
