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
use super::{ENTITY_TYPE, Entity, EntityType, Item, KeyOf, VERSION, key_of, stored_version};
use singlet_shared::Key;
use std::fmt;

/// Lists every entity once: the [`TableEntity`] enum, [`ENTITY_TYPES`] and the decoder by type all
/// come from this one list.
macro_rules! registry {
    ($($variant:ident($entity:ty)),+ $(,)?) => {
        /// An item of the table, as the entity it is.
        #[derive(Debug, Clone)]
        pub enum TableEntity {
            $($variant($entity)),+
        }

        /// Every entity type, in the registry's order.
        pub const ENTITY_TYPES: &[&EntityType] = &[$(<$entity as Entity>::TYPE),+];

        impl TableEntity {
            /// The entity's type.
            pub fn entity_type(&self) -> &'static EntityType {
                match self {
                    $(TableEntity::$variant(_) => <$entity as Entity>::TYPE),+
                }
            }

            /// The key the entity is stored under (made from its fields).
            pub fn key(&self) -> Key {
                match self {
                    $(TableEntity::$variant(entity) => entity.key().into_key()),+
                }
            }

            /// The locks the entity holds ([`Entity::locks`]).
            pub fn locks(&self) -> Vec<TableEntity> {
                match self {
                    $(TableEntity::$variant(entity) => entity.locks()),+
                }
            }

            /// The key an earlier rule made of the entity's fields ([`Entity::earlier_key`]).
            pub fn earlier_key(&self) -> Option<Key> {
                match self {
                    $(TableEntity::$variant(entity) => entity.earlier_key().map(KeyOf::into_key)),+
                }
            }

            /// The entity as an item of the current version: what a writer writes.
            pub fn to_item(&self) -> Item {
                match self {
                    $(TableEntity::$variant(entity) => entity.to_item()),+
                }
            }
        }

        /// `item` read as an entity of type `entity_type`.
        fn decode_as(entity_type: &EntityType, item: &Item) -> Result<TableEntity, String> {
            $(
                if entity_type.name == <$entity as Entity>::TYPE.name {
                    return <$entity as Entity>::from_item(item).map(TableEntity::$variant);
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

/// The [`Undecodable`] of the item at `key`, for a reason.
fn undecodable_at(key: Key) -> impl Fn(String) -> Undecodable {
    move |reason| Undecodable {
        pk: key.pk.clone(),
        sk: key.sk.clone(),
        reason,
    }
}

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
pub fn decode(item: &Item) -> Result<TableEntity, Undecodable> {
    let entity_type = type_of(item)?;
    let undecodable = undecodable_at(key_of(item).unwrap_or_default());
    readable_version(entity_type, item).map_err(&undecodable)?;
    decode_as(entity_type, item).map_err(undecodable)
}

/// `item` read as the entity `T` by a route: its `_et` (or, without one, its key's shape) must be
/// `T`'s, and its `_v` a version number no later than `T`'s. An earlier version, however old, is
/// read by its attributes: a route reads the item its key names, so a table the migrations have
/// not caught up with keeps being served (the tools, through [`decode`], read the current version
/// and the one before only). What every typed read of the API goes through (`Ctx::get`).
pub fn decode_as_a<T: Entity>(item: &Item) -> Result<T, Undecodable> {
    let entity_type = type_of(item)?;
    let undecodable = undecodable_at(key_of(item).unwrap_or_default());
    if entity_type != T::TYPE {
        return Err(undecodable(format!(
            "a {} where a {} was expected",
            entity_type.name,
            T::TYPE.name
        )));
    }
    match stored_version(item) {
        None => return Err(undecodable(format!("{VERSION} is not a version number"))),
        Some(version) if version > entity_type.version => {
            return Err(undecodable(format!(
                "{} version {version} is later than this reader's ({})",
                entity_type.name, entity_type.version
            )));
        }
        Some(_) => {}
    }
    T::from_item(item).map_err(undecodable)
}

/// Whether a reader of `entity_type` reads `item`'s `_v`: the current version or the one before
/// (a missing `_v` is 1).
fn readable_version(entity_type: &EntityType, item: &Item) -> Result<(), String> {
    let version =
        stored_version(item).ok_or_else(|| format!("{VERSION} is not a version number"))?;
    if version != entity_type.version && version + 1 != entity_type.version {
        return Err(format!(
            "{} version {version} is neither the current ({}) nor the one before",
            entity_type.name, entity_type.version
        ));
    }
    Ok(())
}

/// The entity type of any item: its `_et`, or for an item without one, the type whose key shape
/// its key has. Whatever its version.
pub fn type_of(item: &Item) -> Result<&'static EntityType, Undecodable> {
    let key = key_of(item).unwrap_or_default();
    let undecodable = undecodable_at(key.clone());
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
                !(entity_type.may_expire() && crate::model::must_never_expire(entity_type)),
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
            .filter(|t| t.may_expire())
            .map(|t| t.name)
            .collect();
        assert_eq!(expiring, ["loan", "idempotency-record", "outbox"]);
        let must: Vec<&str> = ENTITY_TYPES
            .iter()
            .filter(|t| t.expiry == crate::model::Expiry::Must)
            .map(|t| t.name)
            .collect();
        assert_eq!(must, ["idempotency-record", "outbox"]);
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

    /// Every type's decision on personal data, listed either way: a new entity's `personal` is
    /// a decision (`&[]` included), and a new entity fails here, whatever it declares, until its
    /// author lists it as holding personal data or as holding none. (A list of the first kind
    /// alone let an entity that declares `&[]` by mistake through: `export --anonymise` would
    /// copy its personal data unchanged.)
    #[test]
    fn the_entities_with_personal_data_are_these() {
        let (personal, none): (Vec<_>, Vec<_>) = ENTITY_TYPES
            .iter()
            .map(|t| (t.name, !t.personal.is_empty()))
            .partition(|(_, personal)| *personal);
        let names = |types: Vec<(&'static str, bool)>| -> Vec<&'static str> {
            types.into_iter().map(|(name, _)| name).collect()
        };
        assert_eq!(
            names(none),
            [
                "owner-lock",
                "book",
                "book-availability",
                "copy",
                "loan",
                "marker-run",
                "resource",
                "id-lock",
                "migration-checkpoint",
            ],
            "the types that hold no personal data"
        );
        assert_eq!(
            names(personal),
            [
                "vehicle",
                "plate-lock",
                "chassis-lock",
                "account",
                "email-lock",
                "username-lock",
                "branch",
                "patron",
                "card-lock",
                "resource-event",
                "idempotency-record",
                "outbox",
            ]
        );
    }

    /// A lock holds its owner's value: when the owner declares that value personal, the lock
    /// declares a field of its own holding the same, so the anonymiser replaces both alike.
    #[test]
    fn a_lock_of_a_personal_value_is_personal_too() {
        for entity_type in ENTITY_TYPES {
            let Some(lock) = entity_type.lock_of() else {
                continue;
            };
            assert_eq!(lock.lock, *entity_type);
            let owner_holds = lock
                .owner
                .personal
                .iter()
                .find(|field| field.name == lock.value)
                .map(|field| field.holds);
            if let Some(holds) = owner_holds {
                assert!(
                    entity_type
                        .personal
                        .iter()
                        .any(|field| field.holds == holds),
                    "{} locks {}'s {} ({holds:?}) and declares no such field",
                    entity_type.name,
                    lock.owner.name,
                    lock.value
                );
            }
        }
    }

    /// The owners of locks hold them: each one's `locks` makes one lock of each type naming
    /// it, keyed by its value.
    #[test]
    fn every_lock_type_is_held_by_its_owner() {
        use crate::model::Entity;
        use crate::model::accounts::Account;
        use crate::model::library::Tier;
        use singlet_shared::{CardNumber, Chassis, Email, Id, Plate, Username};
        let id = |s: &str| Id::parse(s).unwrap();
        let owners = [
            TableEntity::Vehicle(Vehicle {
                vehicle_id: id("v1"),
                plate: Plate::parse("KA19 XTR").unwrap(),
                chassis: Chassis::parse("WDB 1").unwrap(),
                depot: "north".into(),
                added_at: 1,
            }),
            TableEntity::Account(AccountRow {
                account: Account {
                    account_id: id("a1"),
                    email: Email::parse("ada@example.com").unwrap(),
                    username: Username::parse("ada").unwrap(),
                    display_name: None,
                    created_at: 1,
                },
                owner: "s".into(),
                owners_one: false,
            }),
            TableEntity::Patron(Patron {
                patron_id: id("p1"),
                branch_id: id("b1"),
                card_number: CardNumber::parse("C-1").unwrap(),
                first_name: "Ada".into(),
                last_name: "L".into(),
                email: Email::parse("ada@example.com").unwrap(),
                membership_tier: Tier::Standard,
                loan_limit: 5,
                loan_period_days: 21,
                active_loans: 0,
                created_at: "2026-01-01T00:00:00Z".into(),
            }),
        ];
        let mut held = Vec::new();
        for owner in &owners {
            for lock in owner.locks() {
                let of = lock.entity_type().lock_of().expect("a lock of a value");
                assert_eq!(of.owner, owner.entity_type());
                let item = lock.to_item();
                let holder = item[of.holder].as_s().unwrap();
                let owner_item = owner.to_item();
                assert_eq!(
                    of.owner
                        .key_from_id(&id(holder))
                        .unwrap_or_else(|| owner.key()),
                    owner.key()
                );
                assert!(
                    item.values().any(|v| *v == owner_item[of.value]),
                    "{} holds {}'s {}",
                    lock.entity_type().name,
                    of.owner.name,
                    of.value
                );
                held.push(lock.entity_type().name);
            }
        }
        held.sort_unstable();
        let mut lock_types: Vec<&str> = ENTITY_TYPES
            .iter()
            .filter(|t| t.lock_of().is_some())
            .map(|t| t.name)
            .collect();
        lock_types.sort_unstable();
        assert_eq!(held, lock_types, "every lock of a value is some owner's");
        // A plate with separators was keyed otherwise before `plates-compact`.
        let TableEntity::Vehicle(vehicle) = &owners[0] else {
            unreachable!()
        };
        assert_eq!(
            vehicle.plate_lock().earlier_key().map(KeyOf::into_key),
            Some(singlet_shared::keys::plate_lock_before_compact(
                &vehicle.plate
            ))
        );
        assert_eq!(owners[1].locks()[0].earlier_key(), None);
    }

    /// The items whose keys hold a value a person gave: the locks of personal values.
    #[test]
    fn value_keyed_items_are_the_locks_of_personal_values() {
        let keyed: Vec<&str> = ENTITY_TYPES
            .iter()
            .filter_map(|t| crate::model::value_keyed(t.keys[0].partition))
            .collect();
        assert_eq!(
            keyed,
            [
                "plate-lock",
                "chassis-lock",
                "email-lock",
                "username-lock",
                "card-lock"
            ]
        );
        assert_eq!(crate::model::value_keyed("VEHICLE#v1"), None);
    }

    fn entity_type_named(name: &str) -> bool {
        entity_type(name).is_some()
    }
}
