//! `GET /branches/{branchId}` → `200` branch, or `404`. One `GetItem`.

use crate::context::Ctx;
use crate::http::{AllValid, HandlerResult, ok, path_id};
use lambda_http::Request;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (branch_id,) = (path_id(&req, "branchId"),).all_valid()?;
    Ok(ok(&super::load_branch(ctx, &branch_id).await?))
}
