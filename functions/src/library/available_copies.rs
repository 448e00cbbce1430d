//! `GET /branches/{branchId}/books/{isbn}/copies` → `200` page of that book's copies at that
//! branch that are available now: `{copyId, branchId, isbn, status}`, in copy-id order; `404`
//! naming the branch, the book or both.
//!
//! One `Query` on the availability index GSI2: `GSI2PK = BOOK#<isbn13>` and
//! `begins_with(GSI2SK, "available#<branchId>#")` (the trailing `#` keeps branch `b1` from
//! reading `b10`'s copies). GSI2 projects keys only (availability counts keys, and a copy moving
//! between statuses rewrites the smallest index entry), so each copy is answered from its keys:
//! its id, its branch, its book and its status. The inventory (`GET /branches/{branchId}/copies`)
//! has every attribute of a copy; fetching them here would cost a read per copy. An available copy
//! proves both the branch and the book exist (neither is ever deleted, and a copy is only written
//! after both were checked), so only an empty first page costs two more reads, a `GetItem` of
//! each, at once. The index is eventually consistent: on AWS a copy lent or returned a moment ago
//! can briefly read as before, and a checkout is the final word (`409` `copyId` `unavailable`).

use crate::context::Ctx;
use crate::error::ApiError;
use crate::http::{AllValid, HandlerResult, ok, path, path_id};
use crate::model::library::{Book, Branch, Copy};
use crate::paging::Page;
use crate::store::Query;
use lambda_http::Request;
use serde::Serialize;
use singlet_shared::keys::{self, CopyStatus};
use singlet_shared::schema::GSI2;
use singlet_shared::{Id, Isbn13};

/// An available copy, as the availability index's keys tell it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AvailableCopy {
    pub copy_id: String,
    pub branch_id: String,
    pub isbn: String,
    pub status: &'static str,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (branch_id, isbn) =
        (path_id(&req, "branchId"), path(&req, "isbn", Isbn13::parse)).all_valid()?;
    let status = CopyStatus::Available;
    let prefix = keys::copies_at_branch_in_status(status, &branch_id);
    let partition = keys::copies_of_book(&isbn);
    // The cursor is bound to the book and the branch.
    let page = Page::from_request(ctx, &req, &format!("{partition}\n{prefix}"))?;
    let query = Query::index(GSI2, partition).sort_begins_with(prefix);
    let entries = ctx
        .query(query.limit(page.limit).start_after(page.start.clone()))
        .await?;
    if entries.items.is_empty() && page.start.is_none() {
        missing(ctx, &branch_id, &isbn).await?;
    }
    let copies = entries
        .items
        .iter()
        .map(|entry| {
            let copy_id = Copy::id_in_availability_entry(entry).ok_or_else(|| {
                tracing::error!(%isbn, %branch_id, "a copy's availability key does not name a copy");
                ApiError::Internal
            })?;
            Ok(AvailableCopy {
                copy_id: copy_id.to_owned(),
                branch_id: branch_id.to_string(),
                isbn: isbn.to_string(),
                status: status.as_str(),
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    Ok(ok(&page.reply(ctx, copies, entries.last_key.as_ref())))
}

/// `404` naming the branch, the book or both, read at once; `Ok` when both exist.
async fn missing(ctx: &Ctx, branch_id: &Id, isbn: &Isbn13) -> Result<(), ApiError> {
    let (branch, book) = (Branch::key_of(branch_id), Book::key_of(isbn));
    let (branch, book) = tokio::try_join!(ctx.get_item(&branch), ctx.get_item(&book))?;
    match (branch.is_some(), book.is_some()) {
        (true, true) => Ok(()),
        (false, true) => Err(ApiError::not_found("branch")),
        (true, false) => Err(ApiError::not_found("book")),
        (false, false) => Err(ApiError::not_found("branch and book")),
    }
}
