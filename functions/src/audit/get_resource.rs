//! `GET /resources/{resourceId}` → `200` `{resourceId, status, version, updatedAt}` with
//! `etag: "<version>"`, or `404`. One `GetItem` on `CURRENT`; the etag is what a change sends
//! back as `if-match`.

use crate::context::Ctx;
use crate::http::{AllValid, HandlerResult, path_id};
use lambda_http::Request;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (resource_id,) = (path_id(&req, "resourceId"),).all_valid()?;
    Ok(super::state(&super::load(ctx, &resource_id).await?))
}
