//! `GET /branches/{branchId}/copies?limit=&cursor=` → `200` `{items: [copy], nextCursor}`, the
//! branch's inventory; `404` branch.
//!
//! One `Query` on the branch's partition, `begins_with(SK, "COPY#")`; only an empty first page
//! adds a `GetItem` to tell an empty branch from a missing one (see [`super::branch_page`]). A
//! cursor is bound to this route and this branch: another branch's cursor is `400`.

use super::{Copy, branch_page};
use crate::context::Ctx;
use crate::http::{AllValid, HandlerResult, path_id};
use lambda_http::Request;
use singlet_shared::keys::COPY_PREFIX;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (branch_id,) = (path_id(&req, "branchId"),).all_valid()?;
    branch_page::<Copy>(ctx, &req, &branch_id, COPY_PREFIX).await
}
