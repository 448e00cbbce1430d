//! The fleet's entities: a vehicle, and the locks that make its plate and its chassis number
//! unique across the fleet.

use super::{
    Domain, Entity, EntityType, Expiry, Field, Held, Item, KeyOf, KeyShape, Lock, Personal,
    PersonalField, TableEntity, fields, from_attributes,
};
use serde::{Deserialize, Serialize};
use singlet_shared::schema::{GSI5, Index};
use singlet_shared::{Chassis, Depot, Id, IndexKey, Plate, keys};

/// A vehicle (`VEHICLE#<vehicleId>`), and the response body of every vehicle route.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Vehicle {
    pub vehicle_id: Id,
    pub plate: Plate,
    pub chassis: Chassis,
    pub depot: String,
    pub added_at: i64,
}

/// Version 3 holds its plate and chassis locks keyed without separators (`PLATE#ka19xtr`);
/// version 2, migrated by `plates-compact`, may hold them as the old rule keyed them
/// (`PLATE#ka19 xtr`); both carry the depot index keys (GSI5), which version 1, written before
/// `GET /depots/{depot}/vehicles`, lacks until `vehicles-by-depot`.
impl Vehicle {
    /// The key of the vehicle `vehicle_id`.
    pub fn key_of(vehicle_id: &Id) -> KeyOf<Self> {
        KeyOf::new(keys::vehicle(vehicle_id))
    }

    /// The lock that keeps its plate unique, naming it.
    pub fn plate_lock(&self) -> PlateLock {
        PlateLock {
            plate: self.plate.clone(),
            vehicle_id: self.vehicle_id.clone(),
        }
    }

    /// The lock that keeps its chassis number unique, naming it.
    pub fn chassis_lock(&self) -> ChassisLock {
        ChassisLock {
            chassis: self.chassis.clone(),
            vehicle_id: self.vehicle_id.clone(),
        }
    }

    /// The first version whose plate and chassis locks are keyed without separators: what
    /// `plates-compact` writes, and from which the fleet's handlers look a lock up only there.
    pub const COMPACT_LOCKS_SINCE: u32 = 3;
}

impl Entity for Vehicle {
    const TYPE: &'static EntityType = &EntityType {
        name: "vehicle",
        version: Vehicle::COMPACT_LOCKS_SINCE,
        keys: &[KeyShape::alone(keys::VEHICLE_PREFIX)],
        lock: None,
        expiry: Expiry::Never,
        personal: &[
            PersonalField::new("plate", Personal::Plate),
            PersonalField::new("chassis", Personal::Chassis),
        ],
        domain: Domain::Fleet,
        display: "Vehicle",
    };

    fn key(&self) -> KeyOf<Self> {
        Self::key_of(&self.vehicle_id)
    }

    fn locks(&self) -> Vec<TableEntity> {
        vec![
            TableEntity::PlateLock(self.plate_lock()),
            TableEntity::ChassisLock(self.chassis_lock()),
        ]
    }

    /// The depot index: the route refuses a depot that makes no key, so every vehicle it
    /// writes has one.
    fn index_keys(&self) -> Vec<(Index, IndexKey)> {
        Depot::parse(&self.depot)
            .map(|depot| {
                vec![(
                    GSI5,
                    keys::vehicle_by_depot(&depot, self.added_at, &self.vehicle_id),
                )]
            })
            .unwrap_or_default()
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
    }
}

fields!(Vehicle, serde Vehicle, test vehicle_fields_are_serde_names {
    PLATE = "plate",
    CHASSIS = "chassis",
});

/// A `PLATE#` lock: which vehicle holds the plate. Also the body of `GET /plates/{plate}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlateLock {
    pub plate: Plate,
    pub vehicle_id: Id,
}

impl Entity for PlateLock {
    const TYPE: &'static EntityType = &EntityType {
        name: "plate-lock",
        version: 1,
        keys: &[KeyShape::alone(keys::PLATE_PREFIX)],
        lock: Some(Lock::Of {
            owner: Vehicle::TYPE.name,
            holder: Self::HOLDER.name(),
            value: Vehicle::PLATE.name(),
        }),
        expiry: Expiry::Never,
        personal: &[PersonalField::new("plate", Personal::Plate)],
        domain: Domain::Fleet,
        display: "PlateLock",
    };

    fn key(&self) -> KeyOf<Self> {
        Self::key_of(&self.plate)
    }

    /// The plate as normalised, separators and all (`PLATE#ka19 xtr`): the rule before
    /// `plates-compact`.
    fn earlier_key(&self) -> Option<KeyOf<Self>> {
        Some(Self::key_before_compact(&self.plate)).filter(|key| *key != self.key())
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
    }
}

fields!(PlateLock, serde PlateLock, test plate_lock_fields_are_serde_names {
    /// The plate as its holder spells it: another spelling of the same plate rewrites it.
    PLATE = "plate",
});

/// A `CHASSIS#` lock. Also the body of `GET /chassis/{chassis}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChassisLock {
    pub chassis: Chassis,
    pub vehicle_id: Id,
}

impl Entity for ChassisLock {
    const TYPE: &'static EntityType = &EntityType {
        name: "chassis-lock",
        version: 1,
        keys: &[KeyShape::alone(keys::CHASSIS_PREFIX)],
        lock: Some(Lock::Of {
            owner: Vehicle::TYPE.name,
            holder: Self::HOLDER.name(),
            value: Vehicle::CHASSIS.name(),
        }),
        expiry: Expiry::Never,
        personal: &[PersonalField::new("chassis", Personal::Chassis)],
        domain: Domain::Fleet,
        display: "ChassisLock",
    };

    fn key(&self) -> KeyOf<Self> {
        Self::key_of(&self.chassis)
    }

    /// As a plate lock's ([`PlateLock`]'s `earlier_key`).
    fn earlier_key(&self) -> Option<KeyOf<Self>> {
        Some(Self::key_before_compact(&self.chassis)).filter(|key| *key != self.key())
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
    }
}

impl PlateLock {
    /// The key of the lock of `plate`, as every spelling of it meets it.
    pub fn key_of(plate: &Plate) -> KeyOf<Self> {
        KeyOf::new(keys::plate_lock(plate))
    }

    /// Its key under the rule before `plates-compact`, read until the migration has re-keyed it.
    pub fn key_before_compact(plate: &Plate) -> KeyOf<Self> {
        KeyOf::new(keys::plate_lock_before_compact(plate))
    }
}

impl ChassisLock {
    /// The key of the lock of `chassis`.
    pub fn key_of(chassis: &Chassis) -> KeyOf<Self> {
        KeyOf::new(keys::chassis_lock(chassis))
    }

    /// As [`PlateLock::key_before_compact`].
    pub fn key_before_compact(chassis: &Chassis) -> KeyOf<Self> {
        KeyOf::new(keys::chassis_lock_before_compact(chassis))
    }
}

impl Held for PlateLock {
    const HOLDER: Field<Self> = Field::new("vehicleId");

    fn holder(&self) -> &Id {
        &self.vehicle_id
    }
}

impl Held for ChassisLock {
    const HOLDER: Field<Self> = Field::new("vehicleId");

    fn holder(&self) -> &Id {
        &self.vehicle_id
    }
}

#[cfg(test)]
#[test]
fn lock_holders_are_serde_names() {
    use super::serde_fields;
    assert!(serde_fields::<PlateLock>().contains(&PlateLock::HOLDER.name()));
    assert!(serde_fields::<ChassisLock>().contains(&ChassisLock::HOLDER.name()));
}
