//! `GET /books/{isbn}/availability` → `200` `{isbn, branches: [{branchId, availableCopies}]}`,
//! branches in id order, only those with a copy on the shelf; `404` book.
//!
//! One `Query` on GSI2: `GSI2PK = BOOK#<isbn13>` and `begins_with(GSI2SK, "available#")`, each
//! DynamoDB page read in turn until the last, counting the keys per branch (the sort key names
//! the branch; the index projects keys only, so an entry is about a hundred bytes and one page
//! holds thousands of copies). A copy is only ever added after its book was read, and books are
//! never deleted, so any available copy proves the book exists; only an empty answer adds a `GetItem` to tell
//! "none on the shelves" (`200`, `branches: []`) from "no such book" (`404`). Index reads are
//! eventually consistent: on AWS a copy added or lent a moment ago can briefly count as before.

use crate::context::Ctx;
use crate::error::ApiError;
use crate::http::{AllValid, HandlerResult, ok, path};
use crate::store::Query;
use lambda_http::Request;
use serde::Serialize;
use singlet_shared::Isbn13;
use singlet_shared::keys::{self, CopyStatus};
use singlet_shared::schema::GSI2;
use std::collections::BTreeMap;

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
    let counts = available_copies(ctx, &isbn).await?;
    if counts.is_empty() {
        super::load_book(ctx, &isbn).await?;
    }
    Ok(ok(&Availability {
        isbn: isbn.to_string(),
        branches: counts
            .into_iter()
            .map(|(branch_id, available_copies)| BranchAvailability {
                branch_id,
                available_copies,
            })
            .collect(),
    }))
}

/// A book's available copies per branch, from every page of one GSI2 query.
async fn available_copies(ctx: &Ctx, isbn: &Isbn13) -> Result<BTreeMap<String, u64>, ApiError> {
    let mut counts = BTreeMap::new();
    let mut start = None;
    loop {
        let query = Query::index(GSI2, keys::copies_of_book(isbn))
            .sort_begins_with(keys::copies_in_status(CopyStatus::Available))
            .start_after(start);
        let output = ctx.query(query).await?;
        for item in &output.items {
            let branch = item
                .get(GSI2.sk)
                .and_then(|v| v.as_s().ok())
                .and_then(|sk| keys::branch_of_copy_by_book(sk))
                .ok_or_else(|| {
                    tracing::error!(%isbn, "a copy's availability key does not name a branch");
                    ApiError::Internal
                })?;
            *counts.entry(branch.to_owned()).or_insert(0) += 1;
        }
        start = output.last_key;
        if start.is_none() {
            return Ok(counts);
        }
    }
}
