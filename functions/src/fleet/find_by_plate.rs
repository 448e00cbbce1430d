//! `GET /plates/{plate}` → `200` `{plate, vehicleId}`, or `404`. One `GetItem` on the plate's
//! lock: the plate is normalised first, so every spelling of it finds the same lock. A lock the
//! old rule keyed (separators and all) is found by the spelling it was registered with, at the
//! cost of a second `GetItem`, until `plates-compact` has re-keyed it.

use super::PlateLock;
use crate::context::Ctx;
use crate::error::ApiError;
use crate::http::{AllValid, HandlerResult, ok, path};
use lambda_http::Request;
use singlet_shared::Plate;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (plate,) = (path(&req, "plate", Plate::parse),).all_valid()?;
    let lock: PlateLock = super::find_lock(
        ctx,
        PlateLock::key_of(&plate),
        PlateLock::key_before_compact(&plate),
    )
    .await?
    .ok_or_else(|| ApiError::not_found("plate"))?;
    Ok(ok(&lock))
}
