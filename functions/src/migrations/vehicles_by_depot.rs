//! `vehicles-by-depot`: the depot index keys (GSI5) on vehicles registered before
//! `GET /depots/{depot}/vehicles` existed. A vehicle at version 1 (no depot index keys, no `_v`)
//! becomes version 2; `plates-compact` then takes it to version 3.

use super::{Migration, Plan, Settings, Survey};
use crate::fleet::Vehicle;
use crate::store::migration::Change;
use crate::store::{Condition, Item, Update};
use singlet_shared::schema::{GSI5, PK};
use singlet_shared::{Depot, keys};

/// The version this migration writes.
pub const VERSION: u32 = 2;

pub const MIGRATION: Migration = Migration {
    name: "vehicles-by-depot",
    summary: "write the depot index keys (GSI5) of vehicles registered before GET /depots/{depot}/vehicles",
    after: None,
    claims: None,
    plan,
};

fn plan(item: &Item, _: &Survey, _: &Settings) -> Plan {
    let is_vehicle = item
        .get(PK)
        .and_then(|pk| pk.as_s().ok())
        .is_some_and(|pk| pk.starts_with(keys::VEHICLE_PREFIX));
    if !is_vehicle || item.contains_key(GSI5.pk) {
        return Plan::Skip;
    }
    let Ok(vehicle) = serde_dynamo::from_item::<_, Vehicle>(item.clone()) else {
        return Plan::Conflict("the vehicle does not decode".into());
    };
    let Ok(depot) = Depot::parse(&vehicle.depot) else {
        return Plan::Conflict("the vehicle's depot does not make a key".into());
    };
    let index = keys::vehicle_by_depot(&depot, vehicle.added_at, &vehicle.vehicle_id);
    // A vehicle at this version or later without its keys (a hand edit, a restore) gets them
    // and keeps its version.
    Plan::Change(Change::update(
        Update::<Vehicle>::at(Vehicle::key_of(&vehicle.vehicle_id))
            .set_index(GSI5, index)
            .to_version_from(item, VERSION)
            .when(Condition::exists().and_not_in_index(GSI5)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::s;
    use aws_sdk_dynamodb::types::AttributeValue;

    fn old_vehicle(depot: &str) -> Item {
        Item::from([
            ("PK".into(), s("VEHICLE#v1")),
            ("SK".into(), s("VEHICLE#v1")),
            ("vehicleId".into(), s("v1")),
            ("plate".into(), s("ka19 xtr")),
            ("chassis".into(), s("wvw1")),
            ("depot".into(), s(depot)),
            ("addedAt".into(), AttributeValue::N("1795975200000".into())),
        ])
    }

    #[test]
    fn an_old_vehicle_gets_its_depot_keys_and_version_2() {
        let Plan::Change(change) = plan(
            &old_vehicle(" North "),
            &Survey::default(),
            &Settings::default(),
        ) else {
            panic!("a version-1 vehicle is migrated")
        };
        let [write] = change
            .readable()
            .try_into()
            .expect("one conditional update");
        assert!(write.starts_with("update VEHICLE#v1 SET "), "{write}");
        for part in [
            r#"GSI5PK = "DEPOT#north""#,
            r#"GSI5SK = "001795975200000#v1""#,
            "_v = 2",
            r#"_et = if_not_exists(_et, "vehicle")"#,
            "IF (attribute_not_exists(_v) OR _v < 2) AND attribute_exists(PK) AND attribute_not_exists(GSI5PK)",
        ] {
            assert!(write.contains(part), "{part} in {write}");
        }
    }

    #[test]
    fn a_later_vehicle_without_its_depot_keys_gets_them_and_keeps_its_version() {
        let mut later = old_vehicle("north");
        later.insert("_v".into(), AttributeValue::N("3".into()));
        let Plan::Change(change) = plan(&later, &Survey::default(), &Settings::default()) else {
            panic!("its keys are written")
        };
        let [write] = change
            .readable()
            .try_into()
            .expect("one conditional update");
        assert!(write.contains(r#"GSI5PK = "DEPOT#north""#), "{write}");
        assert!(
            !write.contains("_v = 2") && !write.contains("_v < 2"),
            "no move to version 2, which its condition would refuse: {write}"
        );
        assert!(
            write.contains("IF attribute_exists(PK) AND attribute_not_exists(GSI5PK)"),
            "{write}"
        );
    }

    #[test]
    fn migrated_vehicles_and_other_items_are_skipped() {
        let mut done = old_vehicle("north");
        done.insert(GSI5.pk.into(), s("DEPOT#north"));
        let survey = Survey::default();
        assert!(matches!(
            plan(&done, &survey, &Settings::default()),
            Plan::Skip
        ));
        let lock = Item::from([
            ("PK".into(), s("PLATE#ka19xtr")),
            ("SK".into(), s("PLATE#ka19xtr")),
        ]);
        assert!(matches!(
            plan(&lock, &survey, &Settings::default()),
            Plan::Skip
        ));
        assert!(matches!(
            plan(&old_vehicle("\u{202e}x"), &survey, &Settings::default()),
            Plan::Conflict(_)
        ));
    }
}
