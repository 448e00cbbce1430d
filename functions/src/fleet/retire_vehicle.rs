//! `DELETE /vehicles/{vehicleId}` → `204`; the vehicle and both locks are gone, so the plate and
//! the chassis number can be registered again at once.
//!
//! Read the vehicle (to learn its plate and chassis), then one `TransactWriteItems` deleting the
//! vehicle only if it still has what we read, and releasing each lock only if it still names this
//! vehicle (where it is: a vehicle not yet migrated by `plates-compact` may hold locks keyed by
//! the old rule). The transaction forgets what else the table keeps of the vehicle: the record
//! of the `Idempotency-Key` that registered it becomes a tombstone, and its outbox items, which
//! hold its plates, go ([`recording::forgetting`]).

use super::{ChassisLock, PlateLock, Vehicle, load_with_locks};
use crate::context::Ctx;
use crate::error::ApiError;
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, no_content, path_id};
use crate::recording::{self, outbox};
use crate::store::{Commit, Condition, Delete, RACE_ATTEMPTS, Transaction, lock};
use lambda_http::Request;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Vehicle,
    PlateLock,
    ChassisLock,
    /// What the table keeps of the deleted entity beside it: the record of the
    /// `Idempotency-Key` that created it, if one did (a tombstone now), and its outbox items
    /// ([`crate::recording::forgetting`]).
    Forgotten,
    Event,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (vehicle_id,) = (path_id(&req, "vehicleId"),).all_valid()?;

    let mut lock_disagreed = false;
    for _ in 0..RACE_ATTEMPTS {
        let (vehicle, locks) = load_with_locks(ctx, &vehicle_id).await?;
        let retire = Transaction::new()
            .delete(
                Part::Vehicle,
                Delete::<Vehicle>::at(Vehicle::key_of(&vehicle_id)).when(
                    Condition::equals(Vehicle::PLATE, &vehicle.plate)
                        .and_equals(Vehicle::CHASSIS, &vehicle.chassis),
                ),
            )
            .delete(
                Part::PlateLock,
                lock::release_at::<PlateLock>(locks.plate, &vehicle_id),
            )
            .delete(
                Part::ChassisLock,
                lock::release_at::<ChassisLock>(locks.chassis, &vehicle_id),
            )
            .put(
                Part::Event,
                outbox(&req, Event::deleted(EventType::VehicleRetired, &vehicle_id)),
            );
        let retire = recording::forgetting(
            ctx,
            retire,
            Part::Forgotten,
            &req,
            EventType::VehicleRetired,
            &vehicle_id,
        )
        .await?;
        let commit = retire.commit(ctx).await?;

        match commit {
            Commit::Done => {
                tracing::info!(%vehicle_id, "vehicle retired");
                return Ok(no_content());
            }
            // Changed or retired since we read it: read again (a retired vehicle is then 404).
            Commit::Cancelled(cancelled) if cancelled.failed(Part::Vehicle) => {
                lock_disagreed = false;
            }
            // A lock is not where we read it: `plates-compact` may have re-keyed it since (the
            // vehicle's plate is the same, so its part held). Read again, and find it there.
            Commit::Cancelled(_) => lock_disagreed = true,
        }
    }
    if lock_disagreed {
        tracing::error!(
            %vehicle_id,
            "a lock of this vehicle is missing or names another vehicle: `singlet fsck` finds it"
        );
        return Err(ApiError::Internal);
    }
    Err(ApiError::Unavailable)
}
