//! `GET /vehicles/{vehicleId}` → `200` vehicle, or `404`. One `GetItem`.

use crate::context::Ctx;
use crate::http::{AllValid, HandlerResult, ok, path_id};
use lambda_http::Request;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (vehicle_id,) = (path_id(&req, "vehicleId"),).all_valid()?;
    Ok(ok(&super::load(ctx, &vehicle_id).await?))
}
