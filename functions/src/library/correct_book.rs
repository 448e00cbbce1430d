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
use crate::store::{PRESENT, decode, n, s};
use aws_sdk_dynamodb::types::AttributeValue;
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

    let changes: Vec<(&str, AttributeValue)> = [
        ("title", title.map(s)),
        ("author", author.map(s)),
        ("publisher", publisher.map(s)),
        ("publishYear", publish_year.map(n)),
        ("genre", genre.map(s)),
        ("description", description.map(s)),
        ("pageCount", page_count.map(n)),
    ]
    .into_iter()
    .filter_map(|(field, value)| value.map(|value| (field, value)))
    .collect();
    if changes.is_empty() {
        return Err(ApiError::malformed(
            "the body names no field to correct: title, author, publisher, publishYear, genre, \
             description or pageCount",
        ));
    }

    let sets: Vec<String> = changes
        .iter()
        .map(|(field, _)| format!("#{field} = :{field}"))
        .collect();
    let mut update = ctx
        .update(&keys::book(&isbn))
        .update_expression(format!("SET {}", sets.join(", ")))
        .condition_expression(PRESENT);
    for (field, value) in changes {
        update = update
            .expression_attribute_names(format!("#{field}"), field)
            .expression_attribute_values(format!(":{field}"), value);
    }
    let corrected = ctx
        .update_item(update)
        .await?
        .ok_or_else(|| ApiError::not_found("book"))?;
    let book: Book = decode(&corrected)?;
    tracing::info!(%isbn, "book corrected");
    Ok(ok(&book))
}
