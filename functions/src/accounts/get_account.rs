//! `GET /accounts/{accountId}` → `200` account, or `404`. One `GetItem`.

use crate::context::Ctx;
use crate::http::{AllValid, HandlerResult, ok, path_id};
use lambda_http::Request;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (account_id,) = (path_id(&req, "accountId"),).all_valid()?;
    Ok(ok(&super::load(ctx, &account_id).await?))
}
