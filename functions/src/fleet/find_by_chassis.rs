//! `GET /chassis/{chassis}` → `200` `{chassis, vehicleId}`, or `404`. One `GetItem` on the
//! chassis lock, the chassis number normalised first; a lock keyed by the old rule is found as
//! `GET /plates/{plate}` finds one.

use super::ChassisLock;
use crate::context::Ctx;
use crate::error::ApiError;
use crate::http::{AllValid, HandlerResult, ok, path};
use lambda_http::Request;
use singlet_shared::Chassis;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (chassis,) = (path(&req, "chassis", Chassis::parse),).all_valid()?;
    let lock: ChassisLock = super::find_lock(
        ctx,
        ChassisLock::key_of(&chassis),
        ChassisLock::key_before_compact(&chassis),
    )
    .await?
    .ok_or_else(|| ApiError::not_found("chassis"))?;
    Ok(ok(&lock))
}
