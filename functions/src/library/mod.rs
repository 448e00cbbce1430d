//! The library catalogue: branches, patrons with unique library cards, books, and the copies
//! each branch holds. Loans build on these entities and helpers.
//!
//! A branch's partition `BRANCH#<branchId>` holds the branch itself (`SK` = `PK`), its patrons
//! (`PATRON#<patronId>`) and its copies (`COPY#<copyId>`), so a branch's patrons or inventory is
//! one `Query` on one partition. These rules are key collisions or conditions:
//! - a card number is unique: the lock `CARD#<cardNumber>` (the number normalised: `C-1` is
//!   `c-1`) is put with the patron in one transaction, each guarded by `attribute_not_exists`, so
//!   neither exists without the other; a reissue or a removal changes the patron and its locks in
//!   one transaction too, releasing a lock only if it still names the patron;
//! - a patron or a copy can only be written at a branch that exists: a `ConditionCheck`
//!   (`attribute_exists`) on the branch, in the same transaction. A copy is added only of a book
//!   that was read first (its title at the time travels with the copy); books are corrected in
//!   place and never deleted;
//! - a book is keyed by its ISBN-13 (`BOOK#<isbn13>`), whatever form it was given in, so an
//!   ISBN-10 and its ISBN-13 can only ever be one book;
//! - a patron is removed only with no active loan, by the delete's own condition, and a checkout
//!   counts a loan only on a patron row that exists.
//!
//! GSI1 finds a patron by id alone (`PATRON#<patronId>`) and lists every branch (`BRANCHES`); GSI2
//! holds a book's copies across branches, by status (`BOOK#<isbn13>` /
//! `<status>#<branchId>#<copyId>`), and projects keys only: availability counts keys, and a loan
//! moving a copy between statuses rewrites the smallest index entry possible.

pub mod add_copy;
pub mod available_copies;
pub mod book_availability;
pub mod change_tier;
pub mod correct_book;
pub mod create_book;
pub mod create_branch;
pub mod find_by_card;
pub mod get_book;
pub mod get_branch;
pub mod get_patron;
pub mod list_branches;
pub mod list_copies;
pub mod list_patrons;
pub mod register_patron;
pub mod reissue_card;
pub mod remove_patron;

use crate::context::Ctx;
use crate::error::ApiError;
use crate::http::HandlerResult;
use crate::paging::Page;
use crate::store::{PRESENT, Query, decode, n, s, value};
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
use aws_sdk_dynamodb::types::builders::{DeleteBuilder, UpdateBuilder};
use lambda_http::Request;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use singlet_shared::keys::{self, CopyStatus};
use singlet_shared::schema::{GSI1, GSI2};
use singlet_shared::{CardNumber, Email, Id, Invalid, Isbn13};

/// The branch row (`BRANCH#<branchId>`), and the body of the branch routes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Branch {
    pub branch_id: Id,
    pub name: String,
    pub address: String,
    pub city: String,
    pub phone: String,
    pub opening_hours: String,
}

/// A patron's membership tier: how many loans they may hold at once, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Standard,
    Premium,
}

impl Tier {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        match raw {
            "standard" => Ok(Tier::Standard),
            "premium" => Ok(Tier::Premium),
            _ => Err(Invalid::Invalid),
        }
    }

    /// The most loans a patron of this tier may hold at once.
    pub fn loan_limit(self) -> u32 {
        match self {
            Tier::Standard => 5,
            Tier::Premium => 10,
        }
    }

    /// Days a loan lasts, and what each renewal adds.
    pub fn loan_period_days(self) -> u32 {
        match self {
            Tier::Standard => 21,
            Tier::Premium => 28,
        }
    }
}

/// The patron row (`BRANCH#<branchId>` / `PATRON#<patronId>`, GSI1 `PATRON#<patronId>`), and the
/// body of the patron routes. `loanLimit` and `loanPeriodDays` are the tier's, copied onto the row
/// so that a checkout can guard its update with `activeLoans < loanLimit` alone.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Patron {
    pub patron_id: Id,
    pub branch_id: Id,
    pub card_number: CardNumber,
    pub first_name: String,
    pub last_name: String,
    pub email: Email,
    pub membership_tier: Tier,
    pub loan_limit: u32,
    pub loan_period_days: u32,
    /// Open loans; a checkout adds one only while it is below `loanLimit`.
    pub active_loans: u32,
    /// ISO-8601 UTC.
    pub created_at: String,
}

/// A `CARD#<cardNumber>` lock: which patron holds the card. Also the body of
/// `GET /cards/{cardNumber}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatronCard {
    pub card_number: CardNumber,
    pub patron_id: Id,
}

/// The attribute of a card lock that names the patron holding it.
pub const CARD_HOLDER: &str = "patronId";

/// The book row (`BOOK#<isbn13>`), and the body of the book routes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Book {
    /// The 13 digits, whichever form the ISBN was given in.
    pub isbn: Isbn13,
    pub title: String,
    pub author: String,
    pub publisher: String,
    pub publish_year: i64,
    pub genre: String,
    pub description: String,
    pub page_count: i64,
}

/// A copy's physical condition, as the branch records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Condition {
    New,
    Good,
    Fair,
    Poor,
}

impl Condition {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        match raw {
            "new" => Ok(Condition::New),
            "good" => Ok(Condition::Good),
            "fair" => Ok(Condition::Fair),
            "poor" => Ok(Condition::Poor),
            _ => Err(Invalid::Invalid),
        }
    }
}

/// The copy row (`BRANCH#<branchId>` / `COPY#<copyId>`, GSI2 from [`keys::copy_by_book`]), and
/// the body of the copy routes. It carries what a checkout needs to build every key it touches
/// (its branch, its book's ISBN-13), the book's title as it was when the copy was added (for the
/// inventory; a checkout reads the book, so a loan carries the title as corrected last) and the
/// `status` a checkout guards on.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Copy {
    pub copy_id: Id,
    pub branch_id: Id,
    pub isbn: Isbn13,
    pub title: String,
    pub condition: Condition,
    #[serde(with = "copy_status")]
    pub status: CopyStatus,
    /// ISO-8601 UTC.
    pub added_at: String,
}

/// [`CopyStatus`] as its string: `available`, `checked_out`.
mod copy_status {
    use super::*;

    pub fn serialize<S: Serializer>(status: &CopyStatus, to: S) -> Result<S::Ok, S::Error> {
        to.serialize_str(status.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<CopyStatus, D::Error> {
        let raw = String::deserialize(from)?;
        CopyStatus::parse(&raw)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown copy status {raw:?}")))
    }
}

/// A change that raced another and lost this many times in a row gives up with `503`.
pub const MAX_ATTEMPTS: usize = 3;

pub const MAX_NAME_LEN: usize = 100;
pub const MAX_ADDRESS_LEN: usize = 200;
pub const MAX_PHONE_LEN: usize = 40;
pub const MAX_OPENING_HOURS_LEN: usize = 200;
pub const MAX_TITLE_LEN: usize = 300;
pub const MAX_DESCRIPTION_LEN: usize = 4000;
/// The first printed books (Gutenberg) to next year's announced titles.
pub const FIRST_PUBLISH_YEAR: i64 = 1450;
pub const PAGE_COUNT: std::ops::RangeInclusive<i64> = 1..=100_000;

/// One strongly consistent read of a branch, or `404`.
pub async fn load_branch(ctx: &Ctx, branch_id: &Id) -> Result<Branch, ApiError> {
    ctx.get(&keys::branch(branch_id))
        .await?
        .ok_or_else(|| ApiError::not_found("branch"))
}

/// One strongly consistent read of a book, or `404`.
pub async fn load_book(ctx: &Ctx, isbn: &Isbn13) -> Result<Book, ApiError> {
    ctx.get(&keys::book(isbn))
        .await?
        .ok_or_else(|| ApiError::not_found("book"))
}

/// One strongly consistent read of a copy at a branch, or `404`.
pub async fn load_copy(ctx: &Ctx, branch_id: &Id, copy_id: &Id) -> Result<Copy, ApiError> {
    ctx.get(&keys::copy(branch_id, copy_id))
        .await?
        .ok_or_else(|| ApiError::not_found("copy"))
}

/// A patron by id alone: one `Query` on GSI1 (`PATRON#<patronId>`), or `404`. Index reads are
/// eventually consistent: the row read here tells where the patron lives (its `branchId` never
/// changes) and its tier's numbers; a counter that must be current, such as `activeLoans`, is
/// guarded by a condition on the row itself, never read from here.
pub async fn find_patron(ctx: &Ctx, patron_id: &Id) -> Result<Patron, ApiError> {
    let key = keys::patron_by_id(patron_id);
    let page = ctx
        .query(Query::index(GSI1, key.pk).sort_equals(key.sk))
        .await?;
    page.items
        .first()
        .map(decode)
        .transpose()?
        .ok_or_else(|| ApiError::not_found("patron"))
}

/// One page of a branch's items whose sort key starts with `prefix` (its patrons, its copies):
/// one strongly consistent `Query` on the branch's partition, paged by [`Page`] (a cursor is
/// bound to the route and this branch).
///
/// `404` for a branch that does not exist, told cheaply: a non-empty page proves the branch
/// (nothing is written into a branch's partition without a `ConditionCheck` that the branch
/// exists, and branches are never deleted), and so does a valid cursor (it was issued for this
/// branch). Only an empty first page costs a second request, a `GetItem` of the branch.
pub async fn branch_page<T: DeserializeOwned + Serialize>(
    ctx: &Ctx,
    req: &Request,
    branch_id: &Id,
    prefix: &str,
) -> HandlerResult {
    let partition = keys::branch_partition(branch_id);
    let page = Page::from_request(ctx, req, &partition)?;
    let query = Query::table(partition).sort_begins_with(prefix);
    page.query::<T, _>(ctx, query, async {
        load_branch(ctx, branch_id).await.map(drop)
    })
    .await
}

// ---- A patron's lifecycle: registered → card reissued / tier changed → removed --------------
//
// These are the only places a patron row changes after its registration. Each is conditioned on
// the row as it was read (or on its mere existence), and the parts of a transaction that fail
// hand back the row as it stood (`ALL_OLD`), so a pattern tells "removed" (no row) from
// "changed" (another row) without reading again.

impl Patron {
    /// The patron row's key.
    pub fn key(&self) -> singlet_shared::Key {
        keys::patron(&self.branch_id, &self.patron_id)
    }
}

/// The card moves from the card read to `card`, only if the row still holds the card read.
pub fn change_card(ctx: &Ctx, patron: &Patron, card: &CardNumber) -> UpdateBuilder {
    ctx.update(&patron.key())
        .update_expression("SET cardNumber = :new")
        .condition_expression("cardNumber = :old")
        .expression_attribute_values(":new", s(card.as_str()))
        .expression_attribute_values(":old", s(patron.card_number.as_str()))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
}

/// The tier and its numbers change together, only on a patron that exists. Loans already made
/// keep the loan period they were made with.
pub fn change_tier(ctx: &Ctx, patron: &Patron, tier: Tier) -> UpdateBuilder {
    ctx.update(&patron.key())
        .update_expression("SET membershipTier = :tier, loanLimit = :limit, loanPeriodDays = :days")
        .condition_expression(PRESENT)
        .expression_attribute_values(":tier", value(tier))
        .expression_attribute_values(":limit", n(tier.loan_limit()))
        .expression_attribute_values(":days", n(tier.loan_period_days()))
}

/// The patron row goes, only if it still holds the card read and has no active loan: a checkout
/// committed first makes this fail (`409 has_loans`), and one coming after finds no row.
pub fn remove(ctx: &Ctx, patron: &Patron) -> DeleteBuilder {
    ctx.delete(&patron.key())
        .condition_expression("cardNumber = :card AND activeLoans = :zero")
        .expression_attribute_values(":card", s(patron.card_number.as_str()))
        .expression_attribute_values(":zero", n(0))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
}

/// A loan takes one of the patron's slots, only if the patron still exists and is under its
/// limit. A failure hands back the row (`None`: the patron was removed).
pub fn take_loan_slot(ctx: &Ctx, branch_id: &Id, patron_id: &Id) -> UpdateBuilder {
    ctx.update(&keys::patron(branch_id, patron_id))
        .update_expression("SET activeLoans = activeLoans + :one")
        .condition_expression(format!("{PRESENT} AND activeLoans < loanLimit"))
        .expression_attribute_values(":one", n(1))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
}

/// A returned loan gives its slot back.
pub fn free_loan_slot(ctx: &Ctx, branch_id: &Id, patron_id: &Id) -> UpdateBuilder {
    ctx.update(&keys::patron(branch_id, patron_id))
        .update_expression("SET activeLoans = activeLoans - :one")
        .condition_expression("activeLoans > :zero")
        .expression_attribute_values(":one", n(1))
        .expression_attribute_values(":zero", n(0))
}

/// A copy's move between `available` and `checked_out`, for a transaction: its status and its
/// availability-index sort key change together, only if it is `from` now. The one place a copy
/// changes status.
/// Adds `delta` (1 for a copy back on the shelf or added, -1 for one lent) to the count of a
/// book's copies available at a branch ([`keys::book_availability`]), in the transaction that
/// changes the copy: so `GET /books/{isbn}/availability` reads counts, never copies. Unconditional
/// (`ADD` makes the item at its first copy); two transactions counting for one book at one branch
/// conflict, and the later is sent again (`store::transaction`).
pub fn count_available(ctx: &Ctx, isbn: &Isbn13, branch_id: &Id, delta: i64) -> UpdateBuilder {
    ctx.update(&keys::book_availability(isbn, branch_id))
        .update_expression("SET branchId = :branch ADD availableCopies :delta")
        .expression_attribute_values(":branch", s(branch_id.as_str()))
        .expression_attribute_values(":delta", n(delta))
}

pub fn move_copy(
    ctx: &Ctx,
    (isbn, branch_id, copy_id): (&Isbn13, &Id, &Id),
    from: CopyStatus,
    to: CopyStatus,
) -> UpdateBuilder {
    let index = keys::copy_by_book(isbn, to, branch_id, copy_id);
    ctx.update(&keys::copy(branch_id, copy_id))
        .update_expression("SET #status = :to, #gsi2sk = :sk")
        .condition_expression("#status = :from")
        .expression_attribute_names("#status", "status")
        .expression_attribute_names("#gsi2sk", GSI2.sk)
        .expression_attribute_values(":to", s(to.as_str()))
        .expression_attribute_values(":from", s(from.as_str()))
        .expression_attribute_values(":sk", s(index.sk))
}
