//! `DELETE /vehicles/{vehicleId}` → `204`; the vehicle and both locks are gone, so the plate and
//! the chassis number can be registered again at once.
//!
//! Read the vehicle (to learn its plate and chassis), then one `TransactWriteItems` deleting the
//! vehicle only if it still has what we read, and each lock only if it still names this vehicle.

use super::{HELD_BY_VEHICLE, MAX_ATTEMPTS, load};
use crate::db::{Commit, Ctx, Transaction, s};
use crate::error::ApiError;
use crate::http::{AllValid, HandlerResult, no_content, path_id};
use lambda_http::Request;
use singlet_shared::{Chassis, Plate, keys};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Vehicle,
    PlateLock,
    ChassisLock,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (vehicle_id,) = (path_id(&req, "vehicleId"),).all_valid()?;

    for _ in 0..MAX_ATTEMPTS {
        let vehicle = load(ctx, &vehicle_id).await?;
        let plate = Plate::parse(&vehicle.plate).map_err(|_| ApiError::Internal)?;
        let chassis = Chassis::parse(&vehicle.chassis).map_err(|_| ApiError::Internal)?;
        let held = |key| {
            ctx.delete(&key)
                .condition_expression(HELD_BY_VEHICLE)
                .expression_attribute_values(":vehicleId", s(vehicle_id.as_str()))
        };

        let commit = Transaction::new()
            .delete(
                Part::Vehicle,
                ctx.delete(&keys::vehicle(&vehicle_id))
                    .condition_expression("plate = :plate AND chassis = :chassis")
                    .expression_attribute_values(":plate", s(plate.as_str()))
                    .expression_attribute_values(":chassis", s(chassis.as_str())),
            )
            .delete(Part::PlateLock, held(keys::plate_lock(&plate)))
            .delete(Part::ChassisLock, held(keys::chassis_lock(&chassis)))
            .commit(ctx)
            .await?;

        match commit {
            Commit::Done => {
                tracing::info!(%vehicle_id, %plate, %chassis, "vehicle retired");
                return Ok(no_content());
            }
            // Changed or retired since we read it: read again (a retired vehicle is then 404).
            Commit::Cancelled(cancelled) if cancelled.failed(Part::Vehicle) => {}
            Commit::Cancelled(_) => {
                tracing::error!(%vehicle_id, "a lock of this vehicle names another vehicle");
                return Err(ApiError::Internal);
            }
        }
    }
    Err(ApiError::Unavailable)
}
