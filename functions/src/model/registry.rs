//! The registry: every entity type, and [`decode`], which reads any item of the table as the
//! entity it is.

use super::accounts::{AccountRow, EmailLock, OwnerLock, UsernameLock};
use super::audit::{Resource, ResourceEvent};
use super::fleet::{ChassisLock, PlateLock, Vehicle};
use super::idempotency::{IdLock, IdempotencyRecord};
use super::library::{Book, BookAvailability, Branch, Copy, Patron, PatronCard};
use super::loans::{Checkout, MarkerRun};
use super::migration::MigrationCheckpoint;
use super::outbox::OutboxItem;
use super::{ENTITY_TYPE, Entity, EntityType, Item, VERSION, key_of, stored_version};
use singlet_shared::Key;
use std::fmt;

/// Lists every entity once: the [`Decoded`] enum, [`ENTITY_TYPES`] and the decoder by type all
/// come from this one list.
macro_rules! registry {
    ($($variant:ident($entity:ty)),+ $(,)?) => {
        /// An item of the table, as the entity it is.
        #[derive(Debug, Clone)]
        pub enum Decoded {
            $($variant($entity)),+
        }

        /// Every entity type, in the registry's order.
        pub const ENTITY_TYPES: &[&EntityType] = &[$(<$entity as Entity>::TYPE),+];

        impl Decoded {
            /// The entity's type.
            pub fn entity_type(&self) -> &'static EntityType {
                match self {
                    $(Decoded::$variant(_) => <$entity as Entity>::TYPE),+
                }
            }

            /// The key the entity is stored under (made from its fields).
            pub fn key(&self) -> Key {
                match self {
                    $(Decoded::$variant(entity) => entity.key()),+
                }
            }

            /// The entity as an item of the current version: what a writer writes.
            pub fn to_item(&self) -> Item {
                match self {
                    $(Decoded::$variant(entity) => entity.to_item()),+
                }
            }
        }

        /// `item` read as an entity of type `entity_type`.
        fn decode_as(entity_type: &EntityType, item: &Item) -> Result<Decoded, String> {
            $(
                if entity_type.name == <$entity as Entity>::TYPE.name {
                    return <$entity as Entity>::from_item(item).map(Decoded::$variant);
                }
            )+
            Err(format!("no entity type {:?}", entity_type.name))
        }
    };
}

registry! {
    Vehicle(Vehicle),
    PlateLock(PlateLock),
    ChassisLock(ChassisLock),
    Account(AccountRow),
    EmailLock(EmailLock),
    UsernameLock(UsernameLock),
    OwnerLock(OwnerLock),
    Branch(Branch),
    Patron(Patron),
    CardLock(PatronCard),
    Book(Book),
    BookAvailability(BookAvailability),
    Copy(Copy),
    Loan(Checkout),
    MarkerRun(MarkerRun),
    Resource(Resource),
    ResourceEvent(ResourceEvent),
    IdempotencyRecord(IdempotencyRecord),
    IdLock(IdLock),
    MigrationCheckpoint(MigrationCheckpoint),
    // A new entity is one line here (and its `Entity` impl).
    Outbox(OutboxItem),
}

/// An item the registry cannot read, named by its key (never by its values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecodable {
    pub pk: String,
    pub sk: String,
    /// What is wrong: an unknown `_et`, a key no entity type has, a version no reader reads, or
    /// attributes that do not decode.
    pub reason: String,
}

impl fmt::Display for Undecodable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} / {}: {}", self.pk, self.sk, self.reason)
    }
}

impl std::error::Error for Undecodable {}

/// The entity type named `name` (an `_et`).
pub fn entity_type(name: &str) -> Option<&'static EntityType> {
    ENTITY_TYPES.iter().copied().find(|t| t.name == name)
}

/// The entity type whose key `key` is: what a key alone says (a transaction part's key, say).
pub fn entity_type_of(key: &Key) -> Option<&'static EntityType> {
    ENTITY_TYPES
        .iter()
        .copied()
        .find(|t| t.keys.iter().any(|shape| shape.fits(key)))
}

/// Any item of the table as the entity it is. Its type is its `_et`; an item without one (written
/// before `_et` existed) is recognised by the shape of its key and read as version 1. A reader
/// reads its type's current version and the one before (`_v`; missing is 1).
pub fn decode(item: &Item) -> Result<Decoded, Undecodable> {
    let entity_type = type_of(item)?;
    let key = key_of(item).unwrap_or_default();
    let undecodable = |reason: String| Undecodable {
        pk: key.pk.clone(),
        sk: key.sk.clone(),
        reason,
    };
    let version = stored_version(item)
        .ok_or_else(|| undecodable(format!("{VERSION} is not a version number")))?;
    if version != entity_type.version && version + 1 != entity_type.version {
        return Err(undecodable(format!(
            "{} version {version} is neither the current ({}) nor the one before",
            entity_type.name, entity_type.version
        )));
    }
    decode_as(entity_type, item).map_err(undecodable)
}

/// The entity type of any item: its `_et`, or for an item without one, the type whose key shape
/// its key has. Whatever its version.
pub fn type_of(item: &Item) -> Result<&'static EntityType, Undecodable> {
    let key = key_of(item).unwrap_or_default();
    let undecodable = |reason: String| Undecodable {
        pk: key.pk.clone(),
        sk: key.sk.clone(),
        reason,
    };
    if key.pk.is_empty() || key.sk.is_empty() {
        return Err(undecodable("the item has no key".into()));
    }
    let entity_type = match item.get(ENTITY_TYPE) {
        Some(name) => {
            let name = name
                .as_s()
                .map_err(|_| undecodable(format!("{ENTITY_TYPE} is not a string")))?;
            let entity_type = entity_type(name)
                .ok_or_else(|| undecodable(format!("unknown entity type {name:?}")))?;
            if !entity_type.keys.iter().any(|shape| shape.fits(&key)) {
                return Err(undecodable(format!(
                    "the key is not the key of a {}",
                    entity_type.name
                )));
            }
            entity_type
        }
        None => {
            entity_type_of(&key).ok_or_else(|| undecodable("no entity type has this key".into()))?
        }
    };
    Ok(entity_type)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::KeyShape;

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = ENTITY_TYPES.iter().map(|t| t.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ENTITY_TYPES.len());
    }

    #[test]
    fn no_key_fits_two_entity_types() {
        let shapes: Vec<(&str, &KeyShape)> = ENTITY_TYPES
            .iter()
            .flat_map(|t| t.keys.iter().map(move |shape| (t.name, shape)))
            .collect();
        for (name, shape) in &shapes {
            // A key made of the shape's own prefixes, each followed by a value.
            let pk = format!("{}x", shape.partition);
            let sk = match shape.sort {
                crate::model::SortShape::SameAsPartition => pk.clone(),
                crate::model::SortShape::Exactly(sk) => sk.to_owned(),
                crate::model::SortShape::Prefix(prefix) => format!("{prefix}x"),
            };
            let key = Key { pk, sk };
            let fitting: Vec<_> = shapes
                .iter()
                .filter(|(_, other)| other.fits(&key))
                .map(|(n, _)| *n)
                .collect();
            assert_eq!(fitting, [*name], "{key:?}");
        }
    }

    /// Retention's rule ([`crate::model::must_never_expire`]): no lock, and no entity that owns
    /// one, declares `expiresAt`. Every type that does is listed, so a new one is a decision.
    #[test]
    fn no_lock_and_no_lock_owner_may_expire() {
        for entity_type in ENTITY_TYPES {
            assert!(
                !(entity_type.may_expire && crate::model::must_never_expire(entity_type)),
                "{} is a lock or owns one, and declares that it expires",
                entity_type.name
            );
            if let Some(crate::model::Lock::Of { owner, .. }) = entity_type.lock {
                assert!(
                    entity_type_named(owner),
                    "{} names {owner}",
                    entity_type.name
                );
            }
        }
        let expiring: Vec<&str> = ENTITY_TYPES
            .iter()
            .filter(|t| t.may_expire)
            .map(|t| t.name)
            .collect();
        assert_eq!(expiring, ["loan", "idempotency-record", "outbox"]);
    }

    /// The rule above catches a lock owner that declares `expiresAt`, and a lock.
    #[test]
    fn the_rule_catches_an_expiring_lock_or_lock_owner() {
        for name in [
            "patron",
            "vehicle",
            "account",
            "card-lock",
            "plate-lock",
            "id-lock",
        ] {
            let entity_type = entity_type(name).unwrap_or_else(|| panic!("no type {name}"));
            assert!(crate::model::must_never_expire(entity_type), "{name}");
        }
        for name in ["loan", "outbox", "idempotency-record", "book", "resource"] {
            let entity_type = entity_type(name).unwrap_or_else(|| panic!("no type {name}"));
            assert!(!crate::model::must_never_expire(entity_type), "{name}");
        }
    }

    fn entity_type_named(name: &str) -> bool {
        entity_type(name).is_some()
    }
}
