//! The fleet registry: a vehicle's plate and its chassis number are each unique across the fleet.
//!
//! Uniqueness is a key collision: each value owns a lock item (`PLATE#<plate>`,
//! `CHASSIS#<chassis>`) that names the vehicle holding it, written in the same transaction as
//! the vehicle and guarded by `attribute_not_exists`. A lock is only ever deleted by a write
//! conditioned on it still naming this vehicle.

pub mod change_plate;
pub mod depot_vehicles;
pub mod find_by_chassis;
pub mod find_by_plate;
pub mod get_vehicle;
pub mod register_vehicle;
pub mod retire_vehicle;

use crate::context::Ctx;
use crate::error::ApiError;
use serde::{Deserialize, Serialize};
use singlet_shared::{Chassis, Id, Plate, keys};

/// The vehicle row, and the response body of every vehicle route.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Vehicle {
    pub vehicle_id: Id,
    pub plate: Plate,
    pub chassis: Chassis,
    pub depot: String,
    pub added_at: i64,
}

/// A `PLATE#` lock: which vehicle holds the plate. Also the body of `GET /plates/{plate}`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlateLock {
    pub plate: Plate,
    pub vehicle_id: Id,
}

/// A `CHASSIS#` lock. Also the body of `GET /chassis/{chassis}`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChassisLock {
    pub chassis: Chassis,
    pub vehicle_id: Id,
}

/// A vehicle's entity type (`_et`) and schema version (`_v`): version 2 carries the depot index
/// keys (GSI5); version 1, written before the depot route, is read the same way and migrated by
/// `vehicles-by-depot`.
pub const VEHICLE_TYPE: &str = "vehicle";
pub const VEHICLE_VERSION: u32 = 2;

/// The attribute of a lock that names the vehicle holding it.
pub const HOLDER: &str = "vehicleId";

pub const MAX_DEPOT_LEN: usize = 100;

/// One strongly consistent read of a vehicle, or `404`.
pub async fn load(ctx: &Ctx, vehicle_id: &Id) -> Result<Vehicle, ApiError> {
    ctx.get(&keys::vehicle(vehicle_id))
        .await?
        .ok_or_else(|| ApiError::not_found("vehicle"))
}

/// A change to a vehicle raced another and lost this many times in a row: give up with `503`.
pub const MAX_ATTEMPTS: usize = 3;
