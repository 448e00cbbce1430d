//! `POST /branches/{branchId}/copies` `{isbn, condition}` → `201` copy with
//! `status: "available"`; `404` naming the branch, the book or both when they do not exist.
//!
//! First one `GetItem` of the book: it must exist, and the copy carries its title as it is now (for
//! the inventory; a later correction of the book does not rewrite its copies). Then one
//! `TransactWriteItems`: a `ConditionCheck` that the branch exists and the copy's put (guarded by
//! `attribute_not_exists`) into the branch's partition, with its GSI2 keys `BOOK#<isbn13>` /
//! `available#<branchId>#<copyId>` so that it counts in the book's inventory at once, and one to
//! the branch's count of the book's available copies. `condition` is one of `new`, `good`, `fair`,
//! `poor`. The copy id is generated here, derived from the `Idempotency-Key` when there is one.
//! There is no route for one copy, so the `201` has no `location`.

use super::{Book, Branch, Condition, Copy, count_available};
use crate::clock;
use crate::context::Ctx;
use crate::error::{ApiError, FieldError};
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, JsonBody, json, path_id};
use crate::idempotency::{self, IdFrom, Idempotency, commit, new_id};
use crate::recording::outbox;
use crate::store::{self, Check, Put, Transaction};
use lambda_http::Request;
use lambda_http::http::StatusCode;
use singlet_shared::keys::CopyStatus;
use singlet_shared::{Id, Isbn13};

/// The transaction's parts, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Branch,
    Copy,
    /// The branch's count of the book's available copies.
    Available,
    Event,
}

/// A valid `POST /branches/{branchId}/copies` body at its branch: what the route and `import`
/// check every copy with.
pub struct NewCopy {
    pub branch_id: Id,
    pub isbn: Isbn13,
    condition: Condition,
}

/// Checks a body and its branch's id (the path's, or an imported row's `branchId`) as the route
/// does: every field at fault in one `400`.
pub fn validate(body: &JsonBody, branch_id: Result<Id, FieldError>) -> Result<NewCopy, ApiError> {
    let (branch_id, isbn, condition) = (
        branch_id,
        body.required("isbn", Isbn13::parse),
        body.required("condition", Condition::parse),
    )
        .all_valid()?;
    Ok(NewCopy {
        branch_id,
        isbn,
        condition,
    })
}

impl NewCopy {
    /// The copy of `book` (whose title it carries), named `copy_id`, added at `at`: available.
    pub fn copy(self, book: &Book, copy_id: Id, at: time::OffsetDateTime) -> Copy {
        Copy {
            copy_id,
            branch_id: self.branch_id,
            isbn: self.isbn,
            title: book.title.clone(),
            condition: self.condition,
            status: CopyStatus::Available,
            added_at: clock::iso(at),
        }
    }
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let valid = validate(&body, path_id(&req, "branchId"))?;
    let idempotency = Idempotency::from_request(ctx, &req, &body.value())?;
    let Some(book) = ctx.get::<Book>(&Book::key_of(&valid.isbn)).await? else {
        let branch = ctx.get_item(&Branch::key_of(&valid.branch_id)).await?;
        return Err(ApiError::not_found(if branch.is_none() {
            "branch and book"
        } else {
            "book"
        }));
    };
    let copy_id = new_id(idempotency.as_ref());
    let copy = valid.copy(&book, copy_id.clone(), clock::now());
    let (branch_id, isbn) = (copy.branch_id.clone(), copy.isbn.clone());
    let response = json(StatusCode::CREATED, &copy);

    let transaction = Transaction::new()
        .check(
            Part::Branch,
            Check::<Branch>::at(Branch::key_of(&branch_id), store::Condition::exists()),
        )
        .put(Part::Copy, Put::new_only(&copy))
        .update(Part::Available, count_available(&isbn, &branch_id, 1))
        .put(
            Part::Event,
            outbox(&req, Event::new(EventType::CopyAdded, &copy_id, &copy)),
        );

    let done = commit(ctx, transaction, &idempotency, IdFrom::Key, response).await?;
    let response = done.answer(|cancelled| {
        if cancelled.failed(Part::Branch) {
            return ApiError::not_found("branch");
        }
        // Only an id derived from a spent Idempotency-Key can already exist.
        idempotency::spent_key()
    })?;
    tracing::info!(%copy_id, %branch_id, %isbn, "copy added");
    Ok(response)
}
