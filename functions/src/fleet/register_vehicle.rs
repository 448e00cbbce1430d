//! `POST /vehicles` `{plate, chassis, depot}` → `201` vehicle, `location: /vehicles/{id}`.
//!
//! One `TransactWriteItems`: the vehicle and both locks, each put guarded by
//! `attribute_not_exists` (the locks the model declares a vehicle holds, `Vehicle::locks`). Until
//! `plates-compact` has run, a plate (or chassis number) spelled with spaces or hyphens is also
//! checked free at the key the old rule made of it (its lock's `earlier_key`), where a vehicle
//! registered before holds it. When the
//! transaction is cancelled, the reason at each part's position says whether the plate, the
//! chassis or both were taken, and the `409` names each of them. Safe to retry with
//! `Idempotency-Key`.

use super::{MAX_DEPOT_LEN, Vehicle};
use crate::clock;
use crate::context::Ctx;
use crate::error::ApiError;
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, JsonBody, created};
use crate::idempotency::{self, IdFrom, Idempotency, commit, new_id};
use crate::recording::outbox;
use crate::store::lock::{self, LockPart};
use crate::store::{Put, Transaction};
use lambda_http::Request;
use singlet_shared::{Chassis, Depot, Id, Plate};

/// The transaction's parts: a value's claim is its lock's put and, for a spelling with
/// separators, its old-rule key's check (both `Lock`, of the lock's type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Vehicle,
    Lock(LockPart),
    Event,
}

/// A valid `POST /vehicles` body: what the route and `import` check every vehicle with.
pub struct NewVehicle {
    plate: Plate,
    chassis: Chassis,
    depot: String,
}

/// Checks a body as the route does: every field at fault in one `400`.
pub fn validate(body: &JsonBody) -> Result<NewVehicle, ApiError> {
    let (plate, chassis, depot) = (
        body.required("plate", Plate::parse),
        body.required("chassis", Chassis::parse),
        body.text("depot", MAX_DEPOT_LEN),
    )
        .all_valid()?;
    // The depot is also a key of the depot index (GSI5): one that cannot be one is refused here.
    Depot::parse(&depot).map_err(|invalid| ApiError::field("depot", invalid))?;
    Ok(NewVehicle {
        plate,
        chassis,
        depot,
    })
}

impl NewVehicle {
    /// The vehicle, named `vehicle_id`, registered at `added_at` (epoch milliseconds).
    pub fn vehicle(self, vehicle_id: Id, added_at: i64) -> Vehicle {
        Vehicle {
            vehicle_id,
            plate: self.plate,
            chassis: self.chassis,
            depot: self.depot,
            added_at,
        }
    }
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let valid = validate(&body)?;
    let idempotency = Idempotency::from_request(ctx, &req, &body.value())?;
    let vehicle_id = new_id(idempotency.as_ref());
    let vehicle = valid.vehicle(vehicle_id.clone(), clock::now_millis());
    let response = created(format!("/vehicles/{vehicle_id}"), &vehicle);

    let transaction = Transaction::new()
        .put(Part::Vehicle, Put::new_only(&vehicle))
        .claim_locks_of(&vehicle, Part::Lock)
        .put(
            Part::Event,
            outbox(
                &req,
                Event::new(EventType::VehicleRegistered, &vehicle_id, &vehicle),
            ),
        );

    let done = commit(ctx, transaction, &idempotency, IdFrom::Key, response).await?;
    let response = done.answer(|cancelled| {
        // Only an id derived from a spent Idempotency-Key can already exist.
        if cancelled.failed(Part::Vehicle) {
            return idempotency::spent_key();
        }
        ApiError::conflict(lock::taken(&cancelled, &vehicle, Part::Lock))
    })?;
    tracing::info!(%vehicle_id, "vehicle registered");
    Ok(response)
}
