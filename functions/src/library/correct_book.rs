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
    load_book,
};
use crate::clock;
use crate::context::Ctx;
use crate::error::ApiError;
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, JsonBody, ok, path};
use crate::recording::outbox;
use crate::store::{Commit, Condition, RACE_ATTEMPTS, Transaction, Update};
use lambda_http::Request;
use singlet_shared::Isbn13;

/// The transaction's parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Book,
    Event,
}

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
    if [&title, &author, &publisher, &genre, &description]
        .iter()
        .all(|text| text.is_none())
        && publish_year.is_none()
        && page_count.is_none()
    {
        return Err(ApiError::malformed(
            "the body names no field to correct: title, author, publisher, publishYear, genre, \
             description or pageCount",
        ));
    }

    for _ in 0..RACE_ATTEMPTS {
        let book = load_book(ctx, &isbn).await?;
        let corrected = Book {
            title: title.clone().unwrap_or_else(|| book.title.clone()),
            author: author.clone().unwrap_or_else(|| book.author.clone()),
            publisher: publisher.clone().unwrap_or_else(|| book.publisher.clone()),
            publish_year: publish_year.unwrap_or(book.publish_year),
            genre: genre.clone().unwrap_or_else(|| book.genre.clone()),
            description: description
                .clone()
                .unwrap_or_else(|| book.description.clone()),
            page_count: page_count.unwrap_or(book.page_count),
            isbn: book.isbn.clone(),
        };
        let commit = Transaction::new()
            .update(Part::Book, correction(&book, &corrected))
            .put(
                Part::Event,
                outbox(
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

/// The update from the book as read to the book as corrected: every field a correction can
/// change is set, only if the book is still as read (the event holds the whole book as
/// corrected, so no other correction may land in between).
fn correction(book: &Book, corrected: &Book) -> Update<Book> {
    Update::<Book>::at(Book::key_of(&book.isbn))
        .set(Book::TITLE, &corrected.title)
        .set(Book::AUTHOR, &corrected.author)
        .set(Book::PUBLISHER, &corrected.publisher)
        .set(Book::PUBLISH_YEAR, corrected.publish_year)
        .set(Book::GENRE, &corrected.genre)
        .set(Book::DESCRIPTION, &corrected.description)
        .set(Book::PAGE_COUNT, corrected.page_count)
        .when(
            Condition::equals(Book::TITLE, &book.title)
                .and_equals(Book::AUTHOR, &book.author)
                .and_equals(Book::PUBLISHER, &book.publisher)
                .and_equals(Book::PUBLISH_YEAR, book.publish_year)
                .and_equals(Book::GENRE, &book.genre)
                .and_equals(Book::DESCRIPTION, &book.description)
                .and_equals(Book::PAGE_COUNT, book.page_count),
        )
}
