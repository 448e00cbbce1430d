//! What more than one benchmark builds.

// Each bench compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use aws_sdk_dynamodb::types::TransactWriteItem;
use singlet_functions::Ctx;
use singlet_functions::clock;
use singlet_functions::fleet::{ChassisLock, PlateLock, Vehicle};
use singlet_functions::idempotency::new_id;
use singlet_functions::store::{Item, Put, bulk, lock};
use singlet_shared::{Chassis, Plate};

/// The three puts `register-vehicle` commits, for a vehicle with plate `D-n` and chassis `DC-n`.
pub fn registration(ctx: &Ctx, n: usize) -> Vec<TransactWriteItem> {
    let vehicle_id = new_id(None);
    let plate = Plate::parse(&format!("D-{n}")).unwrap();
    let chassis = Chassis::parse(&format!("DC-{n}")).unwrap();
    let vehicle = Vehicle {
        vehicle_id: vehicle_id.clone(),
        plate: plate.clone(),
        chassis: chassis.clone(),
        depot: "north".into(),
        added_at: clock::now_millis(),
    };
    let plate_lock = PlateLock {
        plate: plate.clone(),
        vehicle_id: vehicle_id.clone(),
    };
    let chassis_lock = ChassisLock {
        chassis: chassis.clone(),
        vehicle_id,
    };
    let puts = [
        Put::new_only(&vehicle),
        lock::claim(&plate_lock),
        lock::claim(&chassis_lock),
    ];
    puts.into_iter()
        .map(|put| put.transact_item(&ctx.table))
        .collect()
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
