//! `POST /books` `{isbn, title, author, publisher, publishYear, genre, description, pageCount}`
//! → `201` book, `location: /books/{isbn13}`; `400` for an ISBN whose check digit is wrong;
//! `409` `isbn` `taken`.
//!
//! The ISBN (ISBN-10 or ISBN-13, hyphens and spaces allowed) is verified and turned into its 13
//! digits before it becomes the key `BOOK#<isbn13>`, so both forms of one book collide. One
//! `TransactWriteItems` puts the book guarded by `attribute_not_exists`, with the
//! `Idempotency-Key`'s record when there is one.

use super::{
    Book, FIRST_PUBLISH_YEAR, MAX_DESCRIPTION_LEN, MAX_NAME_LEN, MAX_TITLE_LEN, PAGE_COUNT,
};
use crate::clock;
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, JsonBody, created};
use crate::idempotency::{IdFrom, Idempotency, commit};
use crate::recording::outbox;
use crate::store::{Put, Transaction};
use lambda_http::Request;
use singlet_shared::Isbn13;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Book,
    Event,
}

/// A book from a `POST /books` body, checked as the route checks it (every field at fault in
/// one `400`) when the year is `year`: what the route and `import` make every book with.
pub fn book_from(body: &JsonBody, year: i32) -> Result<Book, ApiError> {
    let next_year = i64::from(year) + 1;
    let (isbn, title, author, publisher, publish_year, genre, description, page_count) = (
        body.required("isbn", Isbn13::parse),
        body.text("title", MAX_TITLE_LEN),
        body.text("author", MAX_NAME_LEN),
        body.text("publisher", MAX_NAME_LEN),
        body.integer("publishYear", FIRST_PUBLISH_YEAR..=next_year),
        body.text("genre", MAX_NAME_LEN),
        body.text("description", MAX_DESCRIPTION_LEN),
        body.integer("pageCount", PAGE_COUNT),
    )
        .all_valid()?;
    Ok(Book {
        isbn,
        title,
        author,
        publisher,
        publish_year,
        genre,
        description,
        page_count,
    })
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let book = book_from(&body, clock::now().year())?;
    let isbn = book.isbn.clone();
    let idempotency = Idempotency::from_request(ctx, &req, &body.value())?;
    let response = created(format!("/books/{isbn}"), &book);

    let transaction = Transaction::new()
        .put(Part::Book, Put::new_only(&book))
        .put(
            Part::Event,
            outbox(&req, Event::new(EventType::BookAdded, &isbn, &book)),
        );

    let done = commit(ctx, transaction, &idempotency, IdFrom::Request, response).await?;
    let response =
        done.answer(|_| ApiError::conflict(vec![FieldError::new("isbn", Code::Taken)]))?;
    tracing::info!(%isbn, "book created");
    Ok(response)
}
