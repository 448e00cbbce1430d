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
use crate::store::item::text;
use crate::store::{Query, decode};
use lambda_http::Request;
use serde::{Deserialize, Serialize};
use singlet_shared::Isbn13;
use singlet_shared::keys;
use singlet_shared::schema::SK;

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
    let book = keys::book(&isbn);
    let mut found = false;
    let mut branches = Vec::new();
    let mut start = None;
    loop {
        let page = ctx
            .query(Query::table(book.pk.clone()).start_after(start))
            .await?;
        for item in &page.items {
            if text(item, SK) == book.sk {
                found = true;
            } else if text(item, SK).starts_with(keys::AVAILABLE_PREFIX) {
                let count: Count = decode(item)?;
                if count.available_copies > 0 {
                    branches.push(BranchAvailability {
                        branch_id: count.branch_id,
                        available_copies: count.available_copies as u64,
                    });
                }
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

/// A branch's count of a book's available copies, as stored.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Count {
    branch_id: String,
    available_copies: i64,
}
