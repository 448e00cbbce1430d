//! `plates-compact`: plate and chassis locks re-keyed without spaces and hyphens
//! (`PLATE#ka19 xtr` → `PLATE#ka19xtr`), the rule under which `KA19XTR`, `KA 19 XTR` and
//! `KA-19-XTR` are one plate. A vehicle at version 2 becomes version 3: one transaction claims
//! each new lock and deletes each old one (unless another vehicle holds it), and stamps the vehicle
//! while it still has the plate and chassis number the plan read; a vehicle whose values have no
//! separators is only stamped. The API reads version 2 (it finds an old lock by the spelling it was
//! registered with, and releases a vehicle's locks where they are) until every vehicle is 3.
//!
//! Two vehicles whose plates (or chassis numbers) are one under the new rule cannot both hold the
//! new lock. The runner first reads what every vehicle claims (its compact lock keys), and each
//! vehicle of such a pair is a conflict, left as it is, until an operator retires or re-plates
//! one of them.

use super::{Migration, Plan, Settings, Survey};
use crate::fleet::{ChassisLock, PlateLock, Vehicle};
use crate::model::Held;
use crate::model::KeyOf;
use crate::model::stored_version;
use crate::store::migration::Change;
use crate::store::{Condition, Delete, Item, Put, Update};
use singlet_shared::keys;
use singlet_shared::schema::{GSI5, PK};

/// The version this migration writes.
pub const VERSION: u32 = Vehicle::COMPACT_LOCKS_SINCE;

pub const MIGRATION: Migration = Migration {
    name: "plates-compact",
    summary: "re-key plate and chassis locks without spaces and hyphens; report vehicles whose plates then collide",
    after: Some(super::vehicles_by_depot::MIGRATION.name),
    claims: Some(claims),
    plan,
};

fn vehicle_of(item: &Item) -> Option<Vehicle> {
    let pk = item.get(PK)?.as_s().ok()?;
    if !pk.starts_with(keys::VEHICLE_PREFIX) {
        return None;
    }
    serde_dynamo::from_item(item.clone()).ok()
}

/// A vehicle claims its plate and its chassis number as the new rule keys them.
fn claims(item: &Item) -> Vec<String> {
    vehicle_of(item)
        .map(|vehicle| {
            vec![
                PlateLock::key_of(&vehicle.plate).into_key().pk,
                ChassisLock::key_of(&vehicle.chassis).into_key().pk,
            ]
        })
        .unwrap_or_default()
}

fn plan(item: &Item, survey: &Survey, _: &Settings) -> Plan {
    let is_vehicle = item
        .get(PK)
        .and_then(|pk| pk.as_s().ok())
        .is_some_and(|pk| pk.starts_with(keys::VEHICLE_PREFIX));
    if !is_vehicle || stored_version(item).unwrap_or(1) >= VERSION {
        return Plan::Skip;
    }
    let Some(vehicle) = vehicle_of(item) else {
        return Plan::Conflict("the vehicle does not decode".into());
    };
    if !item.contains_key(GSI5.pk) {
        return Plan::Conflict(
            "the vehicle is of version 1: run vehicles-by-depot, then this again".into(),
        );
    }
    let id = &vehicle.vehicle_id;
    let pk = Vehicle::key_of(id).into_key().pk;
    let (plate, chassis) = (
        PlateLock::key_of(&vehicle.plate),
        ChassisLock::key_of(&vehicle.chassis),
    );
    for (what, claim) in [("plate", &*plate), ("chassis number", &*chassis)] {
        let others = survey.others(&claim.pk, &pk);
        if !others.is_empty() {
            return Plan::Conflict(format!(
                "its {what} is one with that of {} under the new rule",
                others.join(", ")
            ));
        }
    }

    let mut change = Change::update(
        Update::<Vehicle>::at(Vehicle::key_of(id))
            .when(
                Condition::equals(Vehicle::PLATE, &vehicle.plate)
                    .and_equals(Vehicle::CHASSIS, &vehicle.chassis),
            )
            .to_version(VERSION),
    );
    let old_plate = PlateLock::key_before_compact(&vehicle.plate);
    if old_plate != plate {
        change = rekey::<PlateLock>(
            change,
            &PlateLock {
                plate: vehicle.plate.clone(),
                vehicle_id: id.clone(),
            },
            old_plate,
        );
    }
    let old_chassis = ChassisLock::key_before_compact(&vehicle.chassis);
    if old_chassis != chassis {
        change = rekey::<ChassisLock>(
            change,
            &ChassisLock {
                chassis: vehicle.chassis.clone(),
                vehicle_id: id.clone(),
            },
            old_chassis,
        );
    }
    Plan::Change(change)
}

/// Puts `lock` under its new key and deletes the lock at `old`, each unless another vehicle holds
/// it. Either may be done already (by the API, which writes compact locks, or a run the API's write
/// made refuse after it), so "absent or mine" holds for both; the vehicle's own condition is what
/// makes the change apply once.
fn rekey<L: Held + Clone>(change: Change, lock: &L, old: KeyOf<L>) -> Change {
    let absent_or_mine = Condition::absent_or_equals(L::HOLDER, lock.holder());
    change
        .and_put(Put::new_if(lock, absent_or_mine.clone()))
        .and_delete(Delete::<L>::at(old).when(absent_or_mine))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::s;
    use aws_sdk_dynamodb::types::AttributeValue;

    fn vehicle(id: &str, plate: &str, chassis: &str) -> Item {
        Item::from([
            ("PK".into(), s(format!("VEHICLE#{id}"))),
            ("SK".into(), s(format!("VEHICLE#{id}"))),
            ("vehicleId".into(), s(id)),
            ("plate".into(), s(plate)),
            ("chassis".into(), s(chassis)),
            ("depot".into(), s("north")),
            ("addedAt".into(), AttributeValue::N("1795975200000".into())),
            ("GSI5PK".into(), s("DEPOT#north")),
            ("_v".into(), AttributeValue::N("2".into())),
        ])
    }

    fn survey(items: &[Item]) -> Survey {
        Survey::new(items.iter().map(|item| {
            (
                crate::store::item::text(item, "PK").to_owned(),
                claims(item),
            )
        }))
    }

    #[test]
    fn a_plate_with_separators_is_rekeyed_in_one_transaction_with_the_stamp() {
        let item = vehicle("v1", "ka19 xtr", "wvw1");
        let Plan::Change(change) = plan(
            &item,
            &survey(std::slice::from_ref(&item)),
            &Settings::default(),
        ) else {
            panic!("a version-2 vehicle is migrated")
        };
        let writes = change.readable();
        assert_eq!(writes.len(), 3, "{writes:?}");
        assert!(writes[0].starts_with("update VEHICLE#v1 SET"), "{writes:?}");
        assert!(writes[0].contains("_v = 3"), "{writes:?}");
        assert!(
            writes[0].contains(r#"(attribute_not_exists(_v) OR _v < 3)"#)
                && writes[0].contains(r#"plate = "ka19 xtr" AND chassis = "wvw1""#),
            "{writes:?}"
        );
        assert_eq!(
            writes[1], r#"put PLATE#ka19xtr  IF (attribute_not_exists(PK) OR vehicleId = "v1")"#,
            "{writes:?}"
        );
        assert_eq!(
            writes[2],
            r#"delete PLATE#ka19 xtr  IF (attribute_not_exists(PK) OR vehicleId = "v1")"#,
            "{writes:?}"
        );
    }

    #[test]
    fn a_vehicle_without_separators_is_only_stamped_and_a_migrated_one_skipped() {
        let item = vehicle("v1", "ka19xtr", "wvw1");
        let Plan::Change(change) = plan(&item, &Survey::default(), &Settings::default()) else {
            panic!("stamped")
        };
        assert_eq!(change.len(), 1);
        let mut done = item;
        done.insert("_v".into(), AttributeValue::N("3".into()));
        assert!(matches!(
            plan(&done, &Survey::default(), &Settings::default()),
            Plan::Skip
        ));
    }

    #[test]
    fn two_vehicles_of_one_plate_are_both_conflicts_and_version_1_waits() {
        let items = [
            vehicle("v1", "ka19 xtr", "wvw1"),
            vehicle("v2", "ka-19-xtr", "wvw2"),
            vehicle("v3", "ka 20", "wvw3"),
        ];
        let survey = survey(&items);
        assert_eq!(survey.collisions(), 1);
        for (item, other) in [(&items[0], "VEHICLE#v2"), (&items[1], "VEHICLE#v1")] {
            let Plan::Conflict(detail) = plan(item, &survey, &Settings::default()) else {
                panic!("a conflict")
            };
            assert!(
                detail.contains(other) && detail.contains("plate"),
                "{detail}"
            );
            assert!(!detail.contains("ka"), "no plate in the report: {detail}");
        }
        assert!(matches!(
            plan(&items[2], &survey, &Settings::default()),
            Plan::Change(_)
        ));
        let mut old = vehicle("v4", "ka 21", "wvw4");
        old.remove("GSI5PK");
        old.remove("_v");
        assert!(matches!(
            plan(&old, &survey, &Settings::default()),
            Plan::Conflict(_)
        ));
    }
}
