//! `GET /usernames/{username}` → `200` `{username, available}`, `username` as normalised; `400`
//! for a username sign-up would refuse. One strongly consistent `GetItem` of the lock
//! `UNIQ#HANDLE#<username>` (see [`super::check_unique`]).

use super::{Unique, check_unique};
use crate::context::Ctx;
use crate::http::HandlerResult;
use lambda_http::Request;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    check_unique(ctx, req, Unique::Username).await
}
