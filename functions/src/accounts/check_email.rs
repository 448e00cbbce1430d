//! `GET /emails/{email}` → `200` `{email, available}`, `email` as normalised; `400` for an email
//! sign-up would refuse. One strongly consistent `GetItem` of the lock `UNIQ#EMAIL#<email>`
//! (see [`super::check_unique`]).

use super::{Unique, check_unique};
use crate::context::Ctx;
use crate::http::HandlerResult;
use lambda_http::Request;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    check_unique(ctx, req, Unique::Email).await
}
