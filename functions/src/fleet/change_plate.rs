//! `PUT /vehicles/{vehicleId}/plate` `{plate}` → `200` vehicle; the old plate is free at once.
//!
//! Read the vehicle (to learn its current plate), then one `TransactWriteItems`
//! ([`lock::swap`], as for an email, a username or a library card): claim the new plate's lock
//! (`attribute_not_exists`) and, until `plates-compact` has run, check the key the old rule made
//! of a new plate spelled with separators free ([`plate_free_before_compact`]); release the old
//! lock (where it is: under the old rule's key for a vehicle `plates-compact` has not migrated
//! yet) only if it still names this vehicle, and update the vehicle only if it still has the
//! plate we read. A vehicle changed or retired between the read and the write fails its
//! condition and is read again; a new plate held by another vehicle is `409`.
//!
//! Another spelling of the plate the vehicle holds (`KA19XTR` → `KA 19 XTR`) meets the lock it
//! holds already: nothing is claimed or released, the lock and the vehicle take the new spelling
//! together (`lock::swap_spelling`).

use super::{PlateLock, Vehicle, load_with_locks, plate_free_before_compact};
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, JsonBody, ok, path_id};
use crate::recording::outbox;
use crate::store::lock::{self, Swapped};
use crate::store::{Condition, RACE_ATTEMPTS, Update};
use lambda_http::Request;
use singlet_shared::Plate;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let (vehicle_id, plate) = (
        path_id(&req, "vehicleId"),
        body.required("plate", Plate::parse),
    )
        .all_valid()?;

    let mut lock_disagreed = false;
    for _ in 0..RACE_ATTEMPTS {
        let (mut vehicle, locks) = load_with_locks(ctx, &vehicle_id).await?;
        if vehicle.plate == plate {
            return Ok(ok(&vehicle));
        }
        let lock_of = |plate: &Plate| PlateLock {
            plate: plate.clone(),
            vehicle_id: vehicle_id.clone(),
        };
        let update = Update::<Vehicle>::at(Vehicle::key_of(&vehicle_id))
            .set(Vehicle::PLATE, &plate)
            .when(Condition::equals(Vehicle::PLATE, &vehicle.plate));
        let event = outbox(
            &req,
            Event::new(
                EventType::VehiclePlateChanged,
                &vehicle_id,
                &Vehicle {
                    plate: plate.clone(),
                    ..vehicle.clone()
                },
            ),
        );
        // Another spelling of its own plate: the lock it holds takes the new spelling with the
        // vehicle, and the new spelling's key under the old rule is checked free, as a claim
        // would check it.
        let swapped = if locks.plate == PlateLock::key_of(&plate) {
            lock::swap_spelling(
                ctx,
                &lock_of(&plate),
                plate_free_before_compact(&lock_of(&plate)),
                update,
                event,
            )
            .await?
        } else {
            lock::swap_from(
                ctx,
                &lock_of(&plate),
                plate_free_before_compact(&lock_of(&plate)),
                lock::release_at(locks.plate, &vehicle_id),
                update,
                event,
            )
            .await?
        };
        match swapped {
            Swapped::Done => {
                tracing::info!(%vehicle_id, "plate changed");
                vehicle.plate = plate;
                return Ok(ok(&vehicle));
            }
            Swapped::Taken => {
                return Err(ApiError::conflict(vec![FieldError::new(
                    "plate",
                    Code::Taken,
                )]));
            }
            // The vehicle changed since we read it: again.
            Swapped::OwnerChanged(_) => lock_disagreed = false,
            // Its plate is as read, but its lock is not where we read it: `plates-compact` may
            // have re-keyed it since. Read again, and find it there.
            Swapped::LockDisagrees => lock_disagreed = true,
        }
    }
    // Every read found the lock elsewhere than the vehicle says: the table disagrees with
    // itself (a lost or foreign lock), which no retry mends; `fsck --repair` does.
    if lock_disagreed {
        tracing::error!(
            %vehicle_id,
            "the vehicle's plate lock is missing or names another vehicle: `singlet fsck` finds it"
        );
        return Err(ApiError::Internal);
    }
    Err(ApiError::Unavailable)
}
