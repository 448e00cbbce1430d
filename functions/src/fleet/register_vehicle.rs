//! `POST /vehicles` `{plate, chassis, depot}` → `201` vehicle, `location: /vehicles/{id}`.
//!
//! One `TransactWriteItems`: the vehicle and both locks, each put guarded by
//! `attribute_not_exists`. When the transaction is cancelled, the reason at each part's position
//! says whether the plate, the chassis or both were taken, and the `409` names each of them.
//! Safe to retry with `Idempotency-Key`.

use super::{ChassisLock, MAX_DEPOT_LEN, PlateLock, Vehicle};
use crate::clock;
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::events::{Event, EventType, outbox};
use crate::http::{AllValid, HandlerResult, JsonBody, created};
use crate::idempotency::{self, Idempotency, Outcome, new_id};
use crate::store::{Put, Transaction, lock};
use lambda_http::Request;
use singlet_shared::{Chassis, Depot, Plate};

/// The transaction's parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Vehicle,
    Plate,
    Chassis,
    Event,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let (plate, chassis, depot) = (
        body.required("plate", Plate::parse),
        body.required("chassis", Chassis::parse),
        body.text("depot", MAX_DEPOT_LEN),
    )
        .all_valid()?;
    // The depot is also a key of the depot index (GSI5): one that cannot be one is refused here.
    Depot::parse(&depot).map_err(|invalid| ApiError::field("depot", invalid))?;
    let idempotency = Idempotency::from_request(ctx, &req, &body.value())?;
    let vehicle_id = new_id(idempotency.as_ref());

    let vehicle = Vehicle {
        vehicle_id: vehicle_id.clone(),
        plate: plate.clone(),
        chassis: chassis.clone(),
        depot,
        added_at: clock::now_millis(),
    };
    let plate_lock = PlateLock {
        plate: plate.clone(),
        vehicle_id: vehicle_id.clone(),
    };
    let chassis_lock = ChassisLock {
        chassis: chassis.clone(),
        vehicle_id: vehicle_id.clone(),
    };
    let response = created(format!("/vehicles/{vehicle_id}"), &vehicle);

    let transaction = Transaction::new()
        .put(Part::Vehicle, Put::new_only(&vehicle))
        .put(Part::Plate, lock::claim(&plate_lock))
        .put(Part::Chassis, lock::claim(&chassis_lock))
        .put(
            Part::Event,
            outbox(
                &req,
                Event::new(EventType::VehicleRegistered, &vehicle_id, &vehicle),
            ),
        );

    match idempotency::commit(ctx, transaction, idempotency.as_ref(), true, response).await? {
        Outcome::Done(response) => {
            tracing::info!(%vehicle_id, "vehicle registered");
            Ok(response)
        }
        // Only an id derived from a spent Idempotency-Key can already exist.
        Outcome::Cancelled(cancelled) if cancelled.failed(Part::Vehicle) => {
            Err(idempotency::spent_key())
        }
        Outcome::Cancelled(cancelled) => Err(ApiError::conflict(
            [(Part::Plate, "plate"), (Part::Chassis, "chassis")]
                .into_iter()
                .filter(|(part, _)| cancelled.failed(*part))
                .map(|(_, field)| FieldError::new(field, Code::Taken))
                .collect(),
        )),
    }
}
