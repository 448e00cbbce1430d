//! `stamp-entity-types`: `_et` and `_v` on items written before they existed. Readers recognise
//! such an item by the shape of its key and read it as version 1; stamped, it names its type
//! itself, so a reader (the console, `fsck`, an export) no longer needs the guess. The stamp is
//! `_v = 1` whatever the type's current version: an item without `_v` is of the first one, and
//! the migrations that follow take it on from there.

use super::{Migration, Plan, Settings, Survey};
use crate::model::{ENTITY_TYPE, VERSION, key_of, type_of};
use crate::store::migration::Change;
use crate::store::{Item, Update};

pub const MIGRATION: Migration = Migration {
    name: "stamp-entity-types",
    summary: "write _et and _v on items written before they existed",
    after: None,
    claims: None,
    plan,
};

fn plan(item: &Item, _: &Survey, _: &Settings) -> Plan {
    if item.contains_key(ENTITY_TYPE) && item.contains_key(VERSION) {
        return Plan::Skip;
    }
    match type_of(item) {
        Ok(entity_type) => Plan::Change(Change::update(Update::stamp(
            key_of(item).unwrap_or_default(),
            entity_type,
        ))),
        Err(undecodable) => Plan::Conflict(undecodable.reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::s;

    #[test]
    fn an_unstamped_lock_is_stamped_as_version_1_and_a_stamped_item_skipped() {
        let mut lock = Item::from([
            ("PK".into(), s("PLATE#ka19xtr")),
            ("SK".into(), s("PLATE#ka19xtr")),
            ("plate".into(), s("ka19xtr")),
            ("vehicleId".into(), s("v1")),
        ]);
        let Plan::Change(change) = plan(&lock, &Survey::default(), &Settings::default()) else {
            panic!("stamped")
        };
        let [write] = change.readable().try_into().unwrap();
        assert_eq!(
            write,
            r#"update PLATE#ka19xtr SET _et = if_not_exists(_et, "plate-lock"), _v = if_not_exists(_v, 1) IF attribute_exists(PK) AND (attribute_not_exists(_et) OR attribute_not_exists(_v))"#
        );
        lock.insert("_et".into(), s("plate-lock"));
        lock.insert(
            "_v".into(),
            aws_sdk_dynamodb::types::AttributeValue::N("1".into()),
        );
        assert!(matches!(
            plan(&lock, &Survey::default(), &Settings::default()),
            Plan::Skip
        ));
        let stranger = Item::from([("PK".into(), s("NOPE#1")), ("SK".into(), s("NOPE#1"))]);
        assert!(matches!(
            plan(&stranger, &Survey::default(), &Settings::default()),
            Plan::Conflict(_)
        ));
    }
}
