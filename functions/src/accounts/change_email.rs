//! `PUT /accounts/{accountId}/email` `{email}` → `200` account; the old email is free at once.
//! `404` for an unknown account, `409` `email` `taken`. The pattern is
//! [`super::change_unique`]: read, then claim the new lock, release the old one only if it still
//! names this account, and update the account only if it still holds the old email, in one
//! transaction.

use super::{Unique, change_unique};
use crate::context::Ctx;
use crate::http::HandlerResult;
use lambda_http::Request;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    change_unique(ctx, req, Unique::Email).await
}
