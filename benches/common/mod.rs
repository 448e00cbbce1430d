//! What more than one benchmark builds.

use aws_sdk_dynamodb::types::TransactWriteItem;
use singlet_functions::Ctx;
use singlet_functions::clock;
use singlet_functions::fleet::{ChassisLock, PlateLock, Vehicle};
use singlet_functions::idempotency::new_id;
use singlet_functions::store::{Put, lock};
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
