//! `vehicles-by-depot`: the depot index keys (GSI5) on vehicles registered before
//! `GET /depots/{depot}/vehicles` existed. A vehicle at version 1 (no depot index keys, no `_v`)
//! becomes version 2; the API has written version 2 since the route came, and reads both.

use super::{Migration, Plan};
use crate::fleet::Vehicle;
use crate::model::Entity;
use crate::store::migration::{Condition, Write};
use crate::store::{Item, s};
use aws_sdk_dynamodb::types::AttributeValue;
use singlet_shared::schema::{ENTITY_TYPE, GSI5, PK, VERSION};
use singlet_shared::{Depot, keys};

fn n(value: u32) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub const MIGRATION: Migration = Migration {
    name: "vehicles-by-depot",
    summary: "write the depot index keys (GSI5) of vehicles registered before GET /depots/{depot}/vehicles",
    plan,
};

fn plan(item: &Item) -> Plan {
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
    Plan::Change(vec![Write::Update {
        key: keys::vehicle(&vehicle.vehicle_id),
        set: vec![
            (GSI5.pk, s(index.pk)),
            (GSI5.sk, s(index.sk)),
            (ENTITY_TYPE, s(Vehicle::TYPE.name)),
            (VERSION, n(Vehicle::TYPE.version)),
        ],
        conditions: vec![
            Condition::Exists,
            Condition::Missing(GSI5.pk),
            Condition::VersionBelow(Vehicle::TYPE.version),
        ],
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let Plan::Change(writes) = plan(&old_vehicle(" North ")) else {
            panic!("a version-1 vehicle is migrated")
        };
        let [
            Write::Update {
                key,
                set,
                conditions,
            },
        ] = writes.as_slice()
        else {
            panic!("one conditional update: {writes:?}")
        };
        assert_eq!(key.pk, "VEHICLE#v1");
        assert!(set.contains(&(GSI5.pk, s("DEPOT#north"))));
        assert!(set.contains(&(GSI5.sk, s("001795975200000#v1"))));
        assert!(set.contains(&(VERSION, n(2))));
        assert!(conditions.contains(&Condition::VersionBelow(2)));
        assert!(conditions.contains(&Condition::Missing(GSI5.pk)));
    }

    #[test]
    fn migrated_vehicles_and_other_items_are_skipped() {
        let mut done = old_vehicle("north");
        done.insert(GSI5.pk.into(), s("DEPOT#north"));
        assert_eq!(plan(&done), Plan::Skip);
        let lock = Item::from([
            ("PK".into(), s("PLATE#ka19xtr")),
            ("SK".into(), s("PLATE#ka19xtr")),
        ]);
        assert_eq!(plan(&lock), Plan::Skip);
        assert!(matches!(plan(&old_vehicle("\u{202e}x")), Plan::Conflict(_)));
    }
}
