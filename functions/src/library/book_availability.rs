//! `GET /books/{isbn}/availability` → `200` `{isbn, branches: [{branchId, availableCopies}]}`,
//! branches in id order, only those with a copy on the shelf; `404` book.
//!
//! One strongly consistent `Query` of the book's partition `BOOK#<isbn13>`: the book itself and
//! its per-branch counts `AVAILABLE#<branchId>` (`availableCopies`), which the transactions that
//! add, lend and return a copy keep (`library::count_available`). So the cost is the same
//! whatever the number of copies: one read unit while the book and its counts fit in 4 KB (a
//! book stocked by some hundred branches would take two), where counting the copies' index
//! entries cost half a unit per thousands of copies and grew with them. No book item is `404`.

use crate::context::Ctx;
use crate::error::ApiError;
use crate::http::{AllValid, HandlerResult, ok, path};
use crate::model::TableEntity;
use crate::model::library::Book;
use crate::store::Query;
use crate::store::item::decode_any;
use lambda_http::Request;
use serde::Serialize;
use singlet_shared::Isbn13;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Availability {
    pub isbn: String,
    pub branches: Vec<BranchAvailability>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BranchAvailability {
    pub branch_id: String,
    pub available_copies: u64,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (isbn,) = (path(&req, "isbn", Isbn13::parse),).all_valid()?;
    let book = Book::key_of(&isbn);
    let mut found = false;
    let mut branches = Vec::new();
    let mut start = None;
    loop {
        let page = ctx
            .query(Query::table(book.pk.clone()).start_after(start))
            .await?;
        for item in &page.items {
            match decode_any(item)? {
                TableEntity::Book(_) => found = true,
                TableEntity::BookAvailability(count) if count.available_copies > 0 => {
                    branches.push(BranchAvailability {
                        branch_id: count.branch_id.to_string(),
                        available_copies: count.available_copies.unsigned_abs(),
                    });
                }
                _ => {}
            }
        }
        start = page.last_key;
        if start.is_none() {
            break;
        }
    }
    if !found {
        return Err(ApiError::not_found("book"));
    }
    Ok(ok(&Availability {
        isbn: isbn.to_string(),
        branches,
    }))
}
