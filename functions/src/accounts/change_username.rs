//! `PUT /accounts/{accountId}/username` `{username}` → `200` account; the old username is free at
//! once. `404` for an unknown account, `409` `username` `taken`. The pattern is
//! [`super::change_unique`], exactly as for the email.

use super::{Unique, change_unique};
use crate::context::Ctx;
use crate::http::HandlerResult;
use lambda_http::Request;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    change_unique(ctx, req, Unique::Username).await
}
