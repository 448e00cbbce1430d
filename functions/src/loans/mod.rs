//! Library loans: checkout, return, renew, a patron's active loans, and the overdue index that
//! the scheduled `mark-overdue` fills.
//!
//! A loan is `PATRON#<patronId>`/`CHECKOUT#<checkoutId>` while active. While it is open and not
//! yet overdue it carries GSI1 keys in one of [`keys::OPEN_LOAN_SHARDS`] open-loans partitions,
//! sorted by due date; `mark-overdue` moves each loan that fell due from there into GSI3,
//! `OVERDUE#<branchId>`, sorted by due date. A return takes the loan out of both and moves it to
//! `PATRON#<patronId>`/`RETURNED#<checkoutId>`, so a patron's active loans are one `Query` on the
//! `CHECKOUT#` range that never reads returned history.

pub mod active_checkouts;
pub mod checkout_book;
pub mod find_overdue;
pub mod mark_overdue;
pub mod renew_checkout;
pub mod return_book;

use crate::db::Ctx;
use crate::error::{ApiError, Code, FieldError};
use serde::{Deserialize, Serialize};
use singlet_shared::{Id, keys};

/// Where a loan is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoanStatus {
    Open,
    Overdue,
    Returned,
}

/// The loan row, and the response body of every loan route. Dates are ISO-8601 UTC strings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkout {
    pub checkout_id: String,
    pub patron_id: String,
    /// The patron's home branch: where the patron row (and its loan counter) lives.
    pub patron_branch_id: String,
    /// The branch the copy was lent from.
    pub branch_id: String,
    pub copy_id: String,
    pub isbn: String,
    pub title: String,
    pub status: LoanStatus,
    pub checked_out_at: String,
    pub due_date: String,
    pub renewal_count: u32,
    /// The tier's loan period when the loan was made: what a renewal adds.
    pub loan_period_days: u32,
    pub returned_date: Option<String>,
}

/// A loan may be renewed this many times.
pub const MAX_RENEWALS: u32 = 2;
/// A change that raced another and lost this many times in a row gives up with `503`.
pub const MAX_ATTEMPTS: usize = 3;

/// The active loan; `409` `checkoutId` `returned` for a returned one; `404` for none.
pub async fn load_active(
    ctx: &Ctx,
    patron_id: &Id,
    checkout_id: &Id,
) -> Result<Checkout, ApiError> {
    if let Some(loan) = ctx.get(&keys::checkout(patron_id, checkout_id)).await? {
        return Ok(loan);
    }
    if ctx
        .get_item(&keys::returned_checkout(patron_id, checkout_id))
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
