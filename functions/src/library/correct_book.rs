//! `PATCH /books/{isbn}` `{title?, author?, publisher?, publishYear?, genre?, description?,
//! pageCount?}` → `200` book as corrected; `400`; `404`.
//!
//! Every field is optional, at least one is required (a body naming none is `400`), and each is
//! validated as `POST /books` validates it; `isbn` is the path's and cannot change (it is the
//! key). Read the book (`404` for none), then one `TransactWriteItems`: the update that sets the
//! fields given, only if the book is still as read, and the correction's event (`BookCorrected`,
//! holding the book as corrected). The answer is that same book. A book corrected between the
//! read and the write fails the condition and is read again, so two corrections of different
//! fields both land; of the same field, the last one wins. It was one `UpdateItem` (`ALL_NEW`)
//! before events: the event needs the caller as its `actor` and the whole book, which a stream
//! record of the update would not say (docs/COSTS.md).
//!
//! Loans made from then on carry the corrected title: a checkout reads the book. A loan made
//! before keeps the title it was lent under (it records what was lent), and a copy keeps the
//! title it was added with (`GET /branches/{branchId}/copies`): rewriting them would cost a
//! write per copy or loan, unbounded and never one transaction.

use super::{
    Book, FIRST_PUBLISH_YEAR, MAX_DESCRIPTION_LEN, MAX_NAME_LEN, MAX_TITLE_LEN, PAGE_COUNT,
};
use super::{MAX_ATTEMPTS, load_book};
use crate::clock;
use crate::context::Ctx;
use crate::error::ApiError;
use crate::events::{Event, EventType, outbox};
use crate::http::{AllValid, HandlerResult, JsonBody, ok, path};
use crate::store::{Commit, Transaction, n, s};
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
        ("title", title.clone().map(s)),
        ("author", author.clone().map(s)),
        ("publisher", publisher.clone().map(s)),
        ("publishYear", publish_year.map(n)),
        ("genre", genre.clone().map(s)),
        ("description", description.clone().map(s)),
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
    for _ in 0..MAX_ATTEMPTS {
        let book = load_book(ctx, &isbn).await?;
        let mut update = ctx
            .update(&keys::book(&isbn))
            .update_expression(format!("SET {}", sets.join(", ")));
        for (field, value) in &changes {
            update = update
                .expression_attribute_names(format!("#{field}"), *field)
                .expression_attribute_values(format!(":{field}"), value.clone());
        }
        // The event holds the whole book as corrected: the book must still be the one read.
        let (unchanged, guard) = as_read(&book);
        update = update.condition_expression(unchanged);
        for (field, value) in guard {
            update = update
                .expression_attribute_names(format!("#was_{field}"), field)
                .expression_attribute_values(format!(":was_{field}"), value);
        }
        let corrected = Book {
            title: title.clone().unwrap_or(book.title),
            author: author.clone().unwrap_or(book.author),
            publisher: publisher.clone().unwrap_or(book.publisher),
            publish_year: publish_year.unwrap_or(book.publish_year),
            genre: genre.clone().unwrap_or(book.genre),
            description: description.clone().unwrap_or(book.description),
            page_count: page_count.unwrap_or(book.page_count),
            isbn: book.isbn,
        };
        let commit = Transaction::new()
            .update(Part::Book, update)
            .put(
                Part::Event,
                outbox(
                    ctx,
                    &req,
                    Event::new(EventType::BookCorrected, &isbn, &corrected),
                ),
            )
            .commit(ctx)
            .await?;
        match commit {
            Commit::Done => {
                tracing::info!(%isbn, "book corrected");
                return Ok(ok(&corrected));
            }
            // Corrected (or removed) since we read it: read again.
            Commit::Cancelled(_) => {}
        }
    }
    Err(ApiError::Unavailable)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Book,
    Event,
}

/// The condition that the book is still as read (every field a correction can change), and the
/// fields and values it names.
fn as_read(book: &Book) -> (String, Vec<(&'static str, AttributeValue)>) {
    let fields = [
        ("title", s(&book.title)),
        ("author", s(&book.author)),
        ("publisher", s(&book.publisher)),
        ("publishYear", n(book.publish_year)),
        ("genre", s(&book.genre)),
        ("description", s(&book.description)),
        ("pageCount", n(book.page_count)),
    ];
    let condition = fields
        .iter()
        .map(|(field, _)| format!("#was_{field} = :was_{field}"))
        .collect::<Vec<_>>()
        .join(" AND ");
    (condition, fields.into())
}
