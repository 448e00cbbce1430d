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
use crate::model::Entity;
use crate::paging::Page;
use crate::store::{self, Delete, Query, Update, decode};
use lambda_http::Request;
use singlet_shared::keys::{self, CopyStatus};
use singlet_shared::schema::{GSI1, GSI2};
use singlet_shared::{CardNumber, Id, Isbn13};

pub use crate::model::library::{
    Book, BookAvailability, Branch, Condition, Copy, Patron, PatronCard, Tier,
};

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
    ctx.get(&Branch::key_of(branch_id))
        .await?
        .ok_or_else(|| ApiError::not_found("branch"))
}

/// One strongly consistent read of a book, or `404`.
pub async fn load_book(ctx: &Ctx, isbn: &Isbn13) -> Result<Book, ApiError> {
    ctx.get(&Book::key_of(isbn))
        .await?
        .ok_or_else(|| ApiError::not_found("book"))
}

/// One strongly consistent read of a copy at a branch, or `404`.
pub async fn load_copy(ctx: &Ctx, branch_id: &Id, copy_id: &Id) -> Result<Copy, ApiError> {
    ctx.get(&Copy::key_of(branch_id, copy_id))
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
pub async fn branch_page<T: crate::model::Entity>(
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

/// The card moves from the card read to `card`, only if the row still holds the card read.
pub fn change_card(patron: &Patron, card: &CardNumber) -> Update<Patron> {
    Update::at(patron.key())
        .set(Patron::CARD_NUMBER, card)
        .when(store::Condition::equals(
            Patron::CARD_NUMBER,
            &patron.card_number,
        ))
        .old_on_failure()
}

/// The tier and its numbers change together, only on a patron that exists. Loans already made
/// keep the loan period they were made with.
pub fn change_tier(patron: &Patron, tier: Tier) -> Update<Patron> {
    Update::at(patron.key())
        .set(Patron::MEMBERSHIP_TIER, tier)
        .set(Patron::LOAN_LIMIT, tier.loan_limit())
        .set(Patron::LOAN_PERIOD_DAYS, tier.loan_period_days())
        .when(store::Condition::exists())
}

/// The patron row goes, only if it still holds the card and the tier read and has no active
/// loan: a checkout committed first makes this fail (`409 has_loans`), and one coming after
/// finds no row.
pub fn remove(patron: &Patron) -> Delete<Patron> {
    Delete::at(patron.key())
        .when(
            store::Condition::equals(Patron::CARD_NUMBER, &patron.card_number)
                .and_equals(Patron::ACTIVE_LOANS, 0)
                // A tier change since the read fails it too: the change's outbox item was
                // written after the removal read the patron's outbox, and is read again.
                .and_equals(Patron::MEMBERSHIP_TIER, patron.membership_tier),
        )
        .old_on_failure()
}

/// A loan takes one of the patron's slots, only if the patron still exists and is under its
/// limit. A failure hands back the row (`None`: the patron was removed).
pub fn take_loan_slot(branch_id: &Id, patron_id: &Id) -> Update<Patron> {
    Update::at(Patron::key_of(branch_id, patron_id))
        .add(Patron::ACTIVE_LOANS, 1)
        .when(store::Condition::exists().and_below_field(Patron::ACTIVE_LOANS, Patron::LOAN_LIMIT))
        .old_on_failure()
}

/// A returned loan gives its slot back.
pub fn free_loan_slot(branch_id: &Id, patron_id: &Id) -> Update<Patron> {
    Update::at(Patron::key_of(branch_id, patron_id))
        .add(Patron::ACTIVE_LOANS, -1)
        .when(store::Condition::above(Patron::ACTIVE_LOANS, 0))
}

/// Adds `delta` (1 for a copy back on the shelf or added, -1 for one lent) to the count of a
/// book's copies available at a branch ([`keys::book_availability`]), in the transaction that
/// changes the copy: so `GET /books/{isbn}/availability` reads counts, never copies. Unconditional
/// (`ADD` makes the item at its first copy); two transactions counting for one book at one branch
/// conflict, and the later is sent again (`store::transaction`).
pub fn count_available(isbn: &Isbn13, branch_id: &Id, delta: i64) -> Update<BookAvailability> {
    Update::at(BookAvailability::key_of(isbn, branch_id))
        .set(BookAvailability::BRANCH_ID, branch_id)
        .add(BookAvailability::AVAILABLE_COPIES, delta)
}

/// A copy's move between `available` and `checked_out`, for a transaction: its status and its
/// availability-index sort key change together, only if it is `from` now. The one place a copy
/// changes status.
pub fn move_copy(
    (isbn, branch_id, copy_id): (&Isbn13, &Id, &Id),
    from: CopyStatus,
    to: CopyStatus,
) -> Update<Copy> {
    let index = keys::copy_by_book(isbn, to, branch_id, copy_id);
    Update::at(Copy::key_of(branch_id, copy_id))
        .set(Copy::STATUS, to.as_str())
        .set_index_sort(GSI2, index.sk)
        .when(store::Condition::equals(Copy::STATUS, from.as_str()))
}
