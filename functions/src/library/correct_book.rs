//! `PATCH /books/{isbn}` `{title?, author?, publisher?, publishYear?, genre?, description?,
//! pageCount?}` → `200` book as corrected; `400`; `404`.
//!
//! Every field is optional, at least one is required (a body naming none is `400`), and each is
//! validated as `POST /books` validates it; `isbn` is the path's and cannot change (it is the
//! key). One conditional `UpdateItem` sets the fields given, only if the book exists
//! (`attribute_exists`: a correction never creates a book), and answers the book as it is after
//! the update (`ALL_NEW`). Two corrections of different fields both land; of the same field, the
//! last one wins.
//!
//! Loans made from then on carry the corrected title: a checkout reads the book. A loan made
//! before keeps the title it was lent under (it records what was lent), and a copy keeps the
//! title it was added with (`GET /branches/{branchId}/copies`): rewriting them would cost a
//! write per copy or loan, unbounded and never one transaction.

use super::{
    Book, FIRST_PUBLISH_YEAR, MAX_DESCRIPTION_LEN, MAX_NAME_LEN, MAX_TITLE_LEN, PAGE_COUNT,
};
use crate::clock;
use crate::context::Ctx;
use crate::error::ApiError;
use crate::http::{AllValid, HandlerResult, JsonBody, ok, path};
use crate::store::{self, Update, decode};
use lambda_http::Request;
use singlet_shared::{Isbn13, keys};

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let next_year = i64::from(clock::now().year()) + 1;
    let (isbn, title, author, publisher, publish_year, genre, description, page_count) = (
        path(&req, "isbn", Isbn13::parse),
        body.optional_text("title", MAX_TITLE_LEN),
        body.optional_text("author", MAX_NAME_LEN),
        body.optional_text("publisher", MAX_NAME_LEN),
        body.optional_integer("publishYear", FIRST_PUBLISH_YEAR..=next_year),
        body.optional_text("genre", MAX_NAME_LEN),
        body.optional_text("description", MAX_DESCRIPTION_LEN),
        body.optional_integer("pageCount", PAGE_COUNT),
    )
        .all_valid()?;

    let mut update = Update::<Book>::at(keys::book(&isbn)).when(store::Condition::exists());
    let mut corrections = 0;
    for (field, value) in [
        (Book::TITLE, title),
        (Book::AUTHOR, author),
        (Book::PUBLISHER, publisher),
        (Book::GENRE, genre),
        (Book::DESCRIPTION, description),
    ] {
        if let Some(value) = value {
            update = update.set(field, value);
            corrections += 1;
        }
    }
    for (field, value) in [
        (Book::PUBLISH_YEAR, publish_year),
        (Book::PAGE_COUNT, page_count),
    ] {
        if let Some(value) = value {
            update = update.set(field, value);
            corrections += 1;
        }
    }
    if corrections == 0 {
        return Err(ApiError::malformed(
            "the body names no field to correct: title, author, publisher, publishYear, genre, \
             description or pageCount",
        ));
    }

    let corrected = ctx
        .update_item(update)
        .await?
        .ok_or_else(|| ApiError::not_found("book"))?;
    let book: Book = decode(&corrected)?;
    tracing::info!(%isbn, "book corrected");
    Ok(ok(&book))
}
