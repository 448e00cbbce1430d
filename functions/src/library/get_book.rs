//! `GET /books/{isbn}` → `200` book, or `404`. The path takes either form of the ISBN, with or
//! without hyphens (a wrong check digit is `400`); one `GetItem` on its ISBN-13 key.

use crate::context::Ctx;
use crate::http::{AllValid, HandlerResult, ok, path};
use lambda_http::Request;
use singlet_shared::Isbn13;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (isbn,) = (path(&req, "isbn", Isbn13::parse),).all_valid()?;
    Ok(ok(&super::load_book(ctx, &isbn).await?))
}
