//! The fleet registry: a vehicle's plate and its chassis number are each unique across the fleet.
//!
//! Uniqueness is a key collision: each value owns a lock item (`PLATE#<plate>`,
//! `CHASSIS#<chassis>`) that names the vehicle holding it, written in the same transaction as
//! the vehicle and guarded by `attribute_not_exists`. A lock is only ever deleted by a write
//! conditioned on it still naming this vehicle.

pub mod change_plate;
pub mod find_by_chassis;
pub mod find_by_plate;
pub mod get_vehicle;
pub mod register_vehicle;
pub mod retire_vehicle;

use crate::context::Ctx;
use crate::error::ApiError;
use singlet_shared::{Id, keys};

pub use crate::model::fleet::{ChassisLock, PlateLock, Vehicle};

pub const MAX_DEPOT_LEN: usize = 100;

/// One strongly consistent read of a vehicle, or `404`.
pub async fn load(ctx: &Ctx, vehicle_id: &Id) -> Result<Vehicle, ApiError> {
    ctx.get(&keys::vehicle(vehicle_id))
        .await?
        .ok_or_else(|| ApiError::not_found("vehicle"))
}
