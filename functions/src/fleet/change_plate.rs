//! `PUT /vehicles/{vehicleId}/plate` `{plate}` → `200` vehicle; the old plate is free at once.
//!
//! Read the vehicle (to learn its current plate), then one `TransactWriteItems`: claim the new
//! plate's lock (`attribute_not_exists`), release the old lock only if it still names this
//! vehicle, and update the vehicle only if it still has the plate we read. A vehicle changed or
//! retired between the read and the write fails its condition and is read again; a new plate
//! held by another vehicle is `409`.

use super::{HOLDER, MAX_ATTEMPTS, PlateLock, Vehicle, load};
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::events::{Event, EventType, outbox};
use crate::http::{AllValid, HandlerResult, JsonBody, ok, path_id};
use crate::store::{Commit, Transaction, lock, s};
use lambda_http::Request;
use singlet_shared::{Plate, keys};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    NewPlate,
    OldPlate,
    Vehicle,
    Event,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let (vehicle_id, plate) = (
        path_id(&req, "vehicleId"),
        body.required("plate", Plate::parse),
    )
        .all_valid()?;

    for _ in 0..MAX_ATTEMPTS {
        let mut vehicle = load(ctx, &vehicle_id).await?;
        if vehicle.plate == plate {
            return Ok(ok(&vehicle));
        }
        let old = vehicle.plate.clone();
        let new_lock = PlateLock {
            plate: plate.clone(),
            vehicle_id: vehicle_id.clone(),
        };

        let commit = Transaction::new()
            .put(
                Part::NewPlate,
                lock::claim(ctx, &keys::plate_lock(&plate), &new_lock),
            )
            .delete(
                Part::OldPlate,
                lock::release(ctx, &keys::plate_lock(&old), HOLDER, &vehicle_id),
            )
            .update(
                Part::Vehicle,
                ctx.update(&keys::vehicle(&vehicle_id))
                    .update_expression("SET plate = :new")
                    .condition_expression("plate = :old")
                    .expression_attribute_values(":new", s(plate.as_str()))
                    .expression_attribute_values(":old", s(old.as_str())),
            )
            .put(
                Part::Event,
                outbox(
                    ctx,
                    &req,
                    Event::new(
                        EventType::VehiclePlateChanged,
                        &vehicle_id,
                        &Vehicle {
                            plate: plate.clone(),
                            ..vehicle.clone()
                        },
                    ),
                ),
            )
            .commit(ctx)
            .await?;

        match commit {
            Commit::Done => {
                tracing::info!(%vehicle_id, "plate changed");
                vehicle.plate = plate;
                return Ok(ok(&vehicle));
            }
            Commit::Cancelled(cancelled) => {
                let holder = lock::holder(cancelled.old(Part::NewPlate), HOLDER);
                if holder.is_some_and(|holder| holder != vehicle_id.as_str()) {
                    return Err(ApiError::conflict(vec![FieldError::new(
                        "plate",
                        Code::Taken,
                    )]));
                }
                // The vehicle changed (or its new plate became its own) since we read it: again.
            }
        }
    }
    Err(ApiError::Unavailable)
}
