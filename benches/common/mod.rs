//! What more than one benchmark builds.

// Each bench compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use aws_sdk_dynamodb::types::TransactWriteItem;
use singlet::serve::auth::Authorizer;
use singlet::serve::front_door;
use singlet_functions::Ctx;
use singlet_functions::clock;
use singlet_functions::events::{Event, EventType};
use singlet_functions::fleet::Vehicle;
use singlet_functions::idempotency::new_id;
use singlet_functions::model::Entity;
use singlet_functions::recording::outbox_by;
use singlet_functions::store::{Item, Put, bulk, lock};
use singlet_shared::{Chassis, Plate};
use std::sync::Arc;

/// The bench's first argument that is a number, how many requests each client sends; `default`
/// without one (`cargo bench --bench load -- 500`).
pub fn requests_per_client(default: usize) -> usize {
    std::env::args()
        .skip(1)
        .find_map(|arg| arg.parse().ok())
        .unwrap_or(default)
}

/// The runner's authorizer (its key kept in the system's temporary directory), and a token it
/// takes with every scope of the route table.
pub fn authorizer_and_token() -> (Authorizer, String) {
    let dir = std::env::temp_dir().join("singlet-bench-keys");
    let (authorizer, issuer) = Authorizer::local(&dir).unwrap();
    let scopes = singlet_functions::routes::all_scopes().join(" ");
    let token = issuer.mint("bench", &scopes, &Default::default(), 3600);
    (authorizer, token)
}

/// The runner's front door serving `ctx` on a loopback port, with the runner's own authorizer:
/// its base URL, and the `authorization` header of a token with every scope.
pub async fn front_door_on_loopback(ctx: &Ctx) -> (String, String) {
    let (authorizer, token) = authorizer_and_token();
    let gateway = front_door::Gateway {
        ctx: ctx.clone(),
        authorizer: Arc::new(authorizer),
        issuer: None,
    };
    let base = front_door::serve_on_loopback(gateway).await.unwrap();
    (base, format!("Bearer {token}"))
}

/// A vehicle to register, with plate `D-n` and chassis `DC-n`.
fn vehicle(n: usize) -> Vehicle {
    Vehicle {
        vehicle_id: new_id(None),
        plate: Plate::parse(&format!("D-{n}")).unwrap(),
        chassis: Chassis::parse(&format!("DC-{n}")).unwrap(),
        depot: "north".into(),
        added_at: clock::now_millis(),
    }
}

/// The three puts that store `vehicle` and its locks: the vehicle's items alone.
fn vehicle_puts(ctx: &Ctx, vehicle: &Vehicle) -> Vec<TransactWriteItem> {
    std::iter::once(Put::new_only(vehicle))
        .chain(vehicle.locks().iter().map(lock::claim_any))
        .map(|put| put.transact_item(&ctx.table))
        .collect()
}

/// The three puts that store a vehicle with plate `D-n` and chassis `DC-n` and its locks: how the
/// benches fill a table with vehicles.
pub fn registration(ctx: &Ctx, n: usize) -> Vec<TransactWriteItem> {
    vehicle_puts(ctx, &vehicle(n))
}

/// The whole `TransactWriteItems` `register-vehicle` sends for a vehicle with plate `D-n` and
/// chassis `DC-n`, built with the handler's own types: the vehicle and its two locks, the old
/// rule's check that each spelling with separators is free (`plates-compact`), and the event's
/// outbox item. The bare call a registration through the API is compared with.
pub fn registration_as_sent(ctx: &Ctx, n: usize) -> Vec<TransactWriteItem> {
    let vehicle = vehicle(n);
    let mut items = vehicle_puts(ctx, &vehicle);
    items.extend(
        vehicle
            .locks()
            .iter()
            .filter_map(|held| held.earlier_key().map(lock::free_any_at))
            .map(|check| check.transact_item(&ctx.table)),
    );
    let event = Event::new(EventType::VehicleRegistered, &vehicle.vehicle_id, &vehicle);
    items.push(outbox_by("bench", event).transact_item(&ctx.table));
    items
}

/// `BatchWriteItem`s of a load in flight at once.
const BATCHES_IN_FLIGHT: usize = 8;

/// Writes `items` into the table as fast as the engine takes them: `BatchWriteItem`s of
/// [`bulk::BATCH_LIMIT`] puts, several in flight, no condition (a bench's table, filled before
/// anything is timed).
pub async fn load_items(ctx: &Ctx, items: Vec<Item>) {
    let mut in_flight = tokio::task::JoinSet::new();
    for batch in items.chunks(bulk::BATCH_LIMIT) {
        if in_flight.len() >= BATCHES_IN_FLIGHT {
            in_flight.join_next().await;
        }
        let (ctx, batch) = (ctx.clone(), batch.to_vec());
        in_flight.spawn(async move {
            bulk::put_batch(&ctx.db, &ctx.table, batch)
                .await
                .expect("the batch is written")
        });
    }
    while in_flight.join_next().await.is_some() {}
}
