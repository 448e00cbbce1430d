//! `PUT /vehicles/{vehicleId}/plate` `{plate}` → `200` vehicle; the old plate is free at once.
//!
//! Read the vehicle (to learn its current plate), then one `TransactWriteItems`: claim the new
//! plate's lock (`attribute_not_exists`), delete the old lock only if it still names this
//! vehicle, and update the vehicle only if it still has the plate we read. A vehicle changed or
//! retired between the read and the write fails its condition and is read again; a new plate
//! held by another vehicle is `409`.

use super::{HELD_BY_VEHICLE, MAX_ATTEMPTS, PlateLock, load};
use crate::db::{ABSENT, Commit, Ctx, Transaction, from_item, item, s};
use crate::error::{ApiError, Code, FieldError};
use crate::http::{AllValid, HandlerResult, JsonBody, ok, path_id};
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
use lambda_http::Request;
use singlet_shared::{Plate, keys};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    NewPlate,
    OldPlate,
    Vehicle,
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
        if vehicle.plate == plate.as_str() {
            return Ok(ok(&vehicle));
        }
        let old = Plate::parse(&vehicle.plate).map_err(|_| ApiError::Internal)?;
        let lock = PlateLock {
            plate: plate.to_string(),
            vehicle_id: vehicle_id.to_string(),
        };

        let commit = Transaction::new()
            .put(
                Part::NewPlate,
                ctx.put(item(&keys::plate_lock(&plate), &lock))
                    .condition_expression(ABSENT)
                    .return_values_on_condition_check_failure(
                        ReturnValuesOnConditionCheckFailure::AllOld,
                    ),
            )
            .delete(
                Part::OldPlate,
                ctx.delete(&keys::plate_lock(&old))
                    .condition_expression(HELD_BY_VEHICLE)
                    .expression_attribute_values(":vehicleId", s(vehicle_id.as_str())),
            )
            .update(
                Part::Vehicle,
                ctx.update(&keys::vehicle(&vehicle_id))
                    .update_expression("SET plate = :new")
                    .condition_expression("plate = :old")
                    .expression_attribute_values(":new", s(plate.as_str()))
                    .expression_attribute_values(":old", s(old.as_str())),
            )
            .commit(ctx)
            .await?;

        match commit {
            Commit::Done => {
                tracing::info!(%vehicle_id, from = %old, to = %plate, "plate changed");
                vehicle.plate = plate.to_string();
                return Ok(ok(&vehicle));
            }
            Commit::Cancelled(cancelled) => {
                let holder = cancelled
                    .old(Part::NewPlate)
                    .map(from_item::<PlateLock>)
                    .transpose()?;
                if holder.is_some_and(|lock| lock.vehicle_id != vehicle_id.as_str()) {
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
