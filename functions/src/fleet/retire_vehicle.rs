//! `DELETE /vehicles/{vehicleId}` → `204`; the vehicle and both locks are gone, so the plate and
//! the chassis number can be registered again at once.
//!
//! Read the vehicle (to learn its plate and chassis), then one `TransactWriteItems` deleting the
//! vehicle only if it still has what we read, and releasing each lock only if it still names this
//! vehicle.

use super::{HOLDER, MAX_ATTEMPTS, load};
use crate::context::Ctx;
use crate::error::ApiError;
use crate::events::{Event, EventType, outbox};
use crate::http::{AllValid, HandlerResult, no_content, path_id};
use crate::store::{Commit, Transaction, lock, s};
use lambda_http::Request;
use singlet_shared::keys;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Vehicle,
    PlateLock,
    ChassisLock,
    Event,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (vehicle_id,) = (path_id(&req, "vehicleId"),).all_valid()?;

    for _ in 0..MAX_ATTEMPTS {
        let vehicle = load(ctx, &vehicle_id).await?;
        let commit = Transaction::new()
            .delete(
                Part::Vehicle,
                ctx.delete(&keys::vehicle(&vehicle_id))
                    .condition_expression("plate = :plate AND chassis = :chassis")
                    .expression_attribute_values(":plate", s(vehicle.plate.as_str()))
                    .expression_attribute_values(":chassis", s(vehicle.chassis.as_str())),
            )
            .delete(
                Part::PlateLock,
                lock::release(ctx, &keys::plate_lock(&vehicle.plate), HOLDER, &vehicle_id),
            )
            .delete(
                Part::ChassisLock,
                lock::release(
                    ctx,
                    &keys::chassis_lock(&vehicle.chassis),
                    HOLDER,
                    &vehicle_id,
                ),
            )
            .put(
                Part::Event,
                outbox(
                    ctx,
                    &req,
                    Event::deleted(EventType::VehicleRetired, &vehicle_id),
                ),
            )
            .commit(ctx)
            .await?;

        match commit {
            Commit::Done => {
                tracing::info!(%vehicle_id, "vehicle retired");
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
