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
use crate::model::{Entity, Held, KeyOf, stored_version};
use crate::store::{AnyEntity, Check, decode, item::text, lock};
use singlet_shared::Id;

pub use crate::model::fleet::{ChassisLock, PlateLock, Vehicle};

pub const MAX_DEPOT_LEN: usize = 100;

/// One strongly consistent read of a vehicle, or `404`.
pub async fn load(ctx: &Ctx, vehicle_id: &Id) -> Result<Vehicle, ApiError> {
    ctx.get(&Vehicle::key_of(vehicle_id))
        .await?
        .ok_or_else(|| ApiError::not_found("vehicle"))
}

/// Where a vehicle's plate lock and chassis lock are. A vehicle of version 3 holds them keyed
/// without separators (`PLATE#ka19xtr`); one of an earlier version may still hold them as the old
/// rule keyed them (`PLATE#ka19 xtr`), until `plates-compact` re-keys them and stamps it.
#[derive(Debug, Clone)]
pub struct LockKeys {
    pub plate: KeyOf<PlateLock>,
    pub chassis: KeyOf<ChassisLock>,
}

/// One strongly consistent read of a vehicle and where its locks are, or `404`. A vehicle not yet
/// migrated whose plate (or chassis number) has separators costs one more read per such value:
/// its old lock's, to see whether it is still there.
pub async fn load_with_locks(ctx: &Ctx, vehicle_id: &Id) -> Result<(Vehicle, LockKeys), ApiError> {
    let item = ctx
        .get_item(&Vehicle::key_of(vehicle_id))
        .await?
        .ok_or_else(|| ApiError::not_found("vehicle"))?;
    let vehicle: Vehicle = decode(&item)?;
    let compact = stored_version(&item).unwrap_or(1) >= Vehicle::COMPACT_LOCKS_SINCE;
    let plate = held_at::<PlateLock>(
        ctx,
        compact,
        PlateLock::key_of(&vehicle.plate),
        PlateLock::key_before_compact(&vehicle.plate),
        vehicle_id,
    )
    .await?;
    let chassis = held_at::<ChassisLock>(
        ctx,
        compact,
        ChassisLock::key_of(&vehicle.chassis),
        ChassisLock::key_before_compact(&vehicle.chassis),
        vehicle_id,
    )
    .await?;
    Ok((vehicle, LockKeys { plate, chassis }))
}

/// The key of the vehicle's lock `L`: `compact`, unless the vehicle is not migrated and its lock
/// under the old rule (`before`, a different key) still names it.
async fn held_at<L: Held>(
    ctx: &Ctx,
    migrated: bool,
    compact: KeyOf<L>,
    before: KeyOf<L>,
    vehicle_id: &Id,
) -> Result<KeyOf<L>, ApiError> {
    if migrated || compact == before {
        return Ok(compact);
    }
    let old = ctx.get_item(&before).await?;
    let holds_old = old.is_some_and(|lock| text(&lock, L::HOLDER.name()) == vehicle_id.as_str());
    Ok(if holds_old { before } else { compact })
}

/// A lock found by the value's key (`compact`), or, until `plates-compact` has re-keyed it, by
/// the key the old rule made of this spelling (`before`).
pub async fn find_lock<L: Entity>(
    ctx: &Ctx,
    compact: KeyOf<L>,
    before: KeyOf<L>,
) -> Result<Option<L>, ApiError> {
    if let Some(lock) = ctx.get(&compact).await? {
        return Ok(Some(lock));
    }
    if before == compact {
        return Ok(None);
    }
    ctx.get(&before).await
}

/// Until `plates-compact` has run, a plate registered under the old rule is locked at the key
/// that rule made of its spelling (`PLATE#ka19 xtr` for `KA19 XTR`), which a claim of the compact
/// key (`PLATE#ka19xtr`) cannot meet: without this check, the very spelling a vehicle was
/// registered with would register a second one. A transaction that claims `plate` makes this
/// check too, and reads its failure as the claim's: `409 plate taken`. `None` for a plate without
/// spaces or hyphens, whose two keys are one. (Registration claims a vehicle's locks as it
/// declares them, `Transaction::claim_locks_of`, which checks the same.)
///
/// Another spelling of that plate (`KA-19-XTR`) meets neither key: one point read cannot know
/// every spelling registered before. `plates-compact` then reports the two vehicles as a
/// conflict, and `fsck` the second's lock (docs/guide/migrations.md, "Before `plates-compact` has run").
pub fn plate_free_before_compact(lock: &PlateLock) -> Option<Check<AnyEntity>> {
    lock.earlier_key().map(lock::free_at)
}
