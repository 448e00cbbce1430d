//! The model: every kind of item singlet keeps in its one table, each an [`Entity`] that owns
//! everything about how it is stored (the modyne rule):
//! - its entity type ([`EntityType`]): the name written on every item as `_et`, the schema version
//!   written as `_v`, the shapes its key takes, whether it is a lock and of what, whether it may
//!   expire;
//! - its key, typed by it ([`KeyOf`]), and its index keys, built by `singlet_shared::keys` from
//!   its own fields;
//! - how it becomes an item ([`Entity::to_item`], the one place `_et` and `_v` are written) and how
//!   an item becomes it again ([`Entity::from_item`]).
//!
//! [`decode`] is the registry: it takes any item of the table and says which entity it is, for
//! the handlers, the consistency checker and the console alike. Items written before `_et`
//! existed are recognised by the shape of their key and read as version 1.
//!
//! This module knows nothing of HTTP or of the SDK's requests: the store (`crate::store`) turns
//! entities into requests, the domain modules (`crate::fleet`, ...) decide what to write.

pub mod accounts;
pub mod audit;
mod display;
pub mod fleet;
pub mod idempotency;
mod key;
pub mod library;
pub mod loans;
pub mod migration;
pub mod outbox;
mod registry;

pub use key::KeyOf;
pub use registry::{
    ENTITY_TYPES, TableEntity, Undecodable, decode, decode_as_a, entity_type, entity_type_of,
    type_of,
};

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Serialize;
use serde::de::DeserializeOwned;
use singlet_shared::schema::{Index, PK, SK};
use singlet_shared::{IndexKey, Key};
use std::collections::HashMap;

/// An attribute of entity `E`, named once (`Patron::ACTIVE_LOANS`): the store's conditions and
/// updates take these, never a string, so a write can only name a field its entity has. Each is
/// declared with `fields!`, which checks the name against the entity's serde names in a test.
pub struct Field<E> {
    name: &'static str,
    entity: std::marker::PhantomData<fn() -> E>,
}

impl<E> Field<E> {
    pub const fn new(name: &'static str) -> Self {
        Self {
            name,
            entity: std::marker::PhantomData,
        }
    }

    /// The attribute's name in the item.
    pub const fn name(self) -> &'static str {
        self.name
    }
}

impl<E> Clone for Field<E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for Field<E> {}

impl<E> std::fmt::Debug for Field<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Declares an entity's [`Field`]s, and a test that each name is one serde writes for the
/// struct `$serde` (the entity itself, or the struct it flattens): renaming a field without its
/// const fails that test.
macro_rules! fields {
    ($entity:ty, serde $serde:ty, test $test:ident {
        $($(#[$doc:meta])* $name:ident = $attribute:literal),+ $(,)?
    }) => {
        impl $entity {
            $($(#[$doc])* pub const $name: $crate::model::Field<$entity> =
                $crate::model::Field::new($attribute);)+
        }

        #[cfg(test)]
        #[test]
        fn $test() {
            let names = $crate::model::serde_fields::<$serde>();
            $(assert!(
                names.contains(&$attribute),
                "{} has no field {:?}: {names:?}",
                stringify!($serde),
                $attribute
            );)+
        }
    };
}
pub(crate) use fields;

/// The field names serde reads for the struct `T`, as its derive declares them.
#[cfg(test)]
pub fn serde_fields<T: DeserializeOwned>() -> &'static [&'static str] {
    use serde::de::{self, Visitor};

    struct Names(Option<&'static [&'static str]>);

    impl<'de> de::Deserializer<'de> for &mut Names {
        type Error = de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = Some(fields);
            Err(de::Error::custom("read the names only"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }

    let mut names = Names(None);
    let _ = T::deserialize(&mut names);
    names.0.expect("a struct")
}

/// A table item as the SDK holds it.
pub type Item = HashMap<String, AttributeValue>;

/// The attributes naming an item's entity type ([`EntityType::name`]) and holding its schema
/// version ([`EntityType::version`]): part of the table's definition.
pub use singlet_shared::schema::{ENTITY_TYPE, VERSION};

/// An item's schema version, its `_v`: version 1 when it has none (written before `_v` was),
/// `None` when `_v` is there but is not a version number.
pub fn stored_version(item: &Item) -> Option<u32> {
    match item.get(VERSION) {
        None => Some(1),
        Some(version) => version.as_n().ok()?.parse().ok(),
    }
}

/// What every item of one kind has in common: every per-entity fact the handlers, the runner's
/// tools (`fsck`, `import`, `export --anonymise`, `load`) and the console read, declared once,
/// beside the entity. A new entity fills in every field (the compiler names any left out), so
/// none of them is decided by silence.
#[derive(Debug, PartialEq, Eq)]
pub struct EntityType {
    /// Written as `_et`: `vehicle`, `plate-lock`, `loan`, ...
    pub name: &'static str,
    /// The version writers write as `_v`. Readers accept it and the one before.
    pub version: u32,
    /// Every shape the entity's key takes (a loan has two: active and returned). An item without
    /// `_et` is recognised by these.
    pub keys: &'static [KeyShape],
    /// `Some` for a lock: an item that exists only to make a value unique, and what holds it.
    /// The locks an owner holds are its [`Entity::locks`].
    pub lock: Option<Lock>,
    /// Whether items of the type carry the table's TTL attribute (`expiresAt`).
    pub expiry: Expiry,
    /// The attributes that hold personal data, and what each holds: `export --anonymise`
    /// replaces these and nothing else. `&[]` says the entity holds none.
    pub personal: &'static [PersonalField],
    /// The part of the API the entity belongs to (the console groups items by it).
    pub domain: Domain,
    /// The entity, for a person: `Vehicle`, `PlateLock`, `ChangeEvent`, ...
    pub display: &'static str,
}

impl EntityType {
    /// Whether an item of this type may carry `expiresAt`.
    pub fn may_expire(&self) -> bool {
        self.expiry != Expiry::Never
    }

    /// The lock's attribute naming its holder's id and the owner's attribute holding the locked
    /// value (`vehicleId`, `plate`), for a lock of a unique value.
    pub fn lock_of(&'static self) -> Option<LockOf> {
        match self.lock {
            Some(Lock::Of {
                owner,
                holder,
                value,
            }) => Some(LockOf {
                lock: self,
                owner: registry::entity_type(owner).expect("a lock names a registered owner"),
                holder,
                value,
            }),
            _ => None,
        }
    }

    /// The key of the item of this type that `id` names, where the id alone makes it (a vehicle,
    /// an account); `None` where the key needs more (a patron is keyed by its branch too).
    pub fn key_from_id(&self, id: &singlet_shared::Id) -> Option<Key> {
        let shape = self.keys.first()?;
        let pk = format!("{}{id}", shape.partition);
        match shape.sort {
            SortShape::SameAsPartition => Some(Key { sk: pk.clone(), pk }),
            SortShape::Exactly(sk) => Some(Key {
                pk,
                sk: sk.to_owned(),
            }),
            SortShape::Prefix(_) => None,
        }
    }
}

/// A lock of a unique value, with its owner's type: [`EntityType::lock_of`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockOf {
    /// The lock's type.
    pub lock: &'static EntityType,
    /// The owner's type.
    pub owner: &'static EntityType,
    /// The lock's attribute naming the owner's id (`vehicleId`, `accountId`, `patronId`).
    pub holder: &'static str,
    /// The owner's attribute holding the locked value (`plate`, `email`, `cardNumber`): also the
    /// field a `409` names when the value is taken.
    pub value: &'static str,
}

/// Whether an entity's items carry the table's TTL attribute, `expiresAt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Every item does: `fsck` reports one without it (rule `expiry`). An idempotency record, an
    /// outbox item.
    Must,
    /// Some items do: a returned loan, `LoanHistoryDays` after its return.
    May,
    /// None may. Locks and every entity a lock names as its owner must be this
    /// ([`must_never_expire`]).
    Never,
}

/// An attribute that holds personal data, and what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PersonalField {
    pub name: &'static str,
    pub holds: Personal,
}

impl PersonalField {
    pub const fn new(name: &'static str, holds: Personal) -> Self {
        Self { name, holds }
    }
}

/// What a personal attribute holds: how `export --anonymise` makes a replacement that is valid
/// where the original was (a plate for a plate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Personal {
    Plate,
    Chassis,
    Email,
    Username,
    /// A person's name (first, last, display).
    Name,
    Card,
    Phone,
    Address,
    /// A token's subject: an account's `owner`, an event's `actor` (opaque with most identity
    /// providers, an email with some).
    Subject,
    /// JSON text that holds personal fields by their names (an outbox item's event, an
    /// idempotency record's response body).
    JsonText,
    /// An unkeyed digest of personal data (an idempotency record's fingerprint hashes its caller
    /// and body): anyone holding a copy could hash a guess and compare.
    Digest,
}

/// What a person would call the part of the API an entity belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    Fleet,
    Accounts,
    Library,
    Audit,
    /// The domain of the route or event that wrote the item (an idempotency record, an id lock,
    /// an outbox item), which the item names.
    OfWriter,
    /// The runner's own bookkeeping (a migration's checkpoint): no domain of the API.
    Runner,
}

/// The personal field named `name` in any entity, as every entity that has one declares it; `None`
/// where two entities declare one name to hold different things (a lock's `value`) or none does.
/// For JSON text, whose fields are known by their names only.
pub fn personal_by_name(name: &str) -> Option<Personal> {
    let mut holds = ENTITY_TYPES
        .iter()
        .flat_map(|t| t.personal)
        .filter(|field| field.name == name)
        .map(|field| field.holds);
    let first = holds.next()?;
    holds.all(|other| other == first).then_some(first)
}

/// The entity type of an item whose partition key holds a value a person gave (a plate, a
/// chassis number, an email's skeleton, a username, a card number): a lock of a value its type
/// declares personal. A log names such an item by this and a keyed hash, never by its key, and
/// the anonymiser replaces such a key it cannot rebuild. `None` for keys made of ids.
pub fn value_keyed(pk: &str) -> Option<&'static str> {
    ENTITY_TYPES
        .iter()
        .filter(|t| matches!(t.lock, Some(Lock::Of { .. })) && !t.personal.is_empty())
        .find(|t| t.keys.iter().any(|shape| pk.starts_with(shape.partition)))
        .map(|t| t.name)
}

/// Whether items of `entity_type` must never carry `expiresAt`: it is a lock, or an entity a
/// lock names as its owner. DynamoDB's TTL deletes one item at a time, days after it expired, so
/// an expiring lock frees a value its owner still has, and an expiring owner leaves its lock
/// holding a value for no one. The registry's test keeps every such type at
/// [`Expiry::Never`], and `fsck` reports an item of one that has it.
pub fn must_never_expire(entity_type: &EntityType) -> bool {
    entity_type.lock.is_some()
        || ENTITY_TYPES
            .iter()
            .any(|t| matches!(t.lock, Some(Lock::Of { owner, .. }) if owner == entity_type.name))
}

/// The shape of a key: its partition key's prefix, and its sort key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyShape {
    pub partition: &'static str,
    pub sort: SortShape,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortShape {
    /// The sort key is the partition key (an item alone in its partition).
    SameAsPartition,
    /// The sort key is exactly this (`PROFILE`, `LOCK`, `CURRENT`).
    Exactly(&'static str),
    /// The sort key starts with this (`PATRON#`, `CHECKOUT#`, `EVENT#`).
    Prefix(&'static str),
}

impl KeyShape {
    /// An item alone in its partition, `<prefix><value>` twice.
    pub const fn alone(prefix: &'static str) -> Self {
        Self {
            partition: prefix,
            sort: SortShape::SameAsPartition,
        }
    }

    pub const fn new(partition: &'static str, sort: SortShape) -> Self {
        Self { partition, sort }
    }

    /// Whether `key` has this shape.
    pub fn fits(&self, key: &Key) -> bool {
        key.pk.len() > self.partition.len()
            && key.pk.starts_with(self.partition)
            && match self.sort {
                SortShape::SameAsPartition => key.sk == key.pk,
                SortShape::Exactly(sort) => key.sk == sort,
                SortShape::Prefix(prefix) => {
                    key.sk.len() > prefix.len() && key.sk.starts_with(prefix)
                }
            }
    }
}

/// What a lock belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// A unique value of another entity: the lock's `holder` attribute names the owner's id, and
    /// the owner's `value` attribute holds the value the lock's key is made from.
    Of {
        /// The owner's entity type name.
        owner: &'static str,
        /// The lock's attribute naming the owner's id (`vehicleId`, `accountId`, `patronId`).
        holder: &'static str,
        /// The owner's attribute holding the locked value (`plate`, `email`, `cardNumber`).
        value: &'static str,
    },
    /// An id derived from an `Idempotency-Key` (its key is the id): it is put with the entity
    /// created under that id and never deleted, so the id is never given out twice.
    DerivedId,
}

/// A lock entity: its field naming the owner that holds it.
pub trait Held: Entity {
    /// The lock's attribute naming its holder's id.
    const HOLDER: Field<Self>;

    /// The id of the owner holding it.
    fn holder(&self) -> &singlet_shared::Id;
}

/// One kind of stored item. Implemented by each entity of the submodules; the registry
/// ([`decode`]) lists them all.
pub trait Entity: Serialize + Sized {
    /// This entity's type: `_et`, `_v`, key shapes, lock, expiry.
    const TYPE: &'static EntityType;

    /// The item's primary key, typed by the entity: what the store's reads and writes of it take.
    fn key(&self) -> KeyOf<Self>;

    /// The item's global secondary index keys, as its state calls for (a loan's change with its
    /// status). Most entities have none.
    fn index_keys(&self) -> Vec<(Index, IndexKey)> {
        Vec::new()
    }

    /// The locks the entity holds, one per unique value, each naming it: what creating it
    /// claims (the routes, `import`), and what `fsck` and `load` look for. Only an owner holds
    /// any; each lock's type says what it is ([`EntityType::lock_of`]).
    fn locks(&self) -> Vec<TableEntity> {
        Vec::new()
    }

    /// The key an earlier rule made of the entity's fields, where it differs from [`Entity::key`]:
    /// a plate lock keyed before `plates-compact` (`PLATE#ka19 xtr`), read until the migration
    /// has re-keyed it.
    fn earlier_key(&self) -> Option<KeyOf<Self>> {
        None
    }

    /// The entity from a stored item. Most entities read their attributes only
    /// ([`from_attributes`]); one whose key holds what its attributes do not (a resource's
    /// event, an id lock) reads it from the key too ([`from_key_and_attributes`]).
    fn from_item(item: &Item) -> Result<Self, String>;

    /// The entity as an item: its attributes, its key, its index keys, `_et` and `_v`. The only
    /// place an item is made from an entity.
    fn to_item(&self) -> Item {
        let mut item: Item = serde_dynamo::to_item(self).expect("entities serialise to items");
        let key = self.key().into_key();
        item.insert(PK.to_owned(), AttributeValue::S(key.pk));
        item.insert(SK.to_owned(), AttributeValue::S(key.sk));
        for (index, key) in self.index_keys() {
            item.insert(index.pk.to_owned(), AttributeValue::S(key.pk));
            item.insert(index.sk.to_owned(), AttributeValue::S(key.sk));
        }
        item.extend(stamp(Self::TYPE));
        item
    }
}

/// `_et` and `_v` of `entity_type`'s current version, as attributes.
pub fn stamp(entity_type: &EntityType) -> [(String, AttributeValue); 2] {
    [
        (
            ENTITY_TYPE.to_owned(),
            AttributeValue::S(entity_type.name.to_owned()),
        ),
        (
            VERSION.to_owned(),
            AttributeValue::N(entity_type.version.to_string()),
        ),
    ]
}

/// An entity read from its attributes by serde. The error names what is wrong without quoting
/// the stored value (it can be a person's name or email).
pub fn from_attributes<T: DeserializeOwned>(item: &Item) -> Result<T, String> {
    let item: serde_dynamo::Item = item.clone().into();
    let attributes = serde_dynamo::AttributeValue::M(item.into());
    // Through `serde_path_to_error`, so that the reason names the attribute at fault (its value
    // never: `without_values`).
    serde_path_to_error::deserialize(serde_dynamo::Deserializer::from_attribute_value(attributes))
        .map_err(|e| {
            let reason = without_values(&e.inner().to_string());
            match e.path().to_string().as_str() {
                "." => reason,
                path => format!("{path}: {reason}"),
            }
        })
}

/// An entity that keeps part of itself in its key only (a count's book, an event's resource, an
/// outbox item's whole key): `from_key` takes that part from the item's key, `None` when the key
/// holds no `what`; `join` puts it together with the attributes serde reads.
pub fn from_key_and_attributes<P, A: DeserializeOwned, T>(
    item: &Item,
    what: &str,
    from_key: impl FnOnce(Key) -> Option<P>,
    join: impl FnOnce(P, A) -> T,
) -> Result<T, String> {
    let part = key_of(item)
        .and_then(from_key)
        .ok_or_else(|| format!("the key names no {what}"))?;
    Ok(join(part, from_attributes(item)?))
}

/// An item's key, if it has one.
pub fn key_of(item: &Item) -> Option<Key> {
    let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
    Some(Key {
        pk: text(PK)?,
        sk: text(SK)?,
    })
}

/// A decode error without the stored value serde may quote in it (``unknown variant `…` ``,
/// `invalid type: string "…"`): a stored value can be a person's name or email, and a log names
/// items by their key only. Errors that quote a field's name, not a value, are kept whole.
pub fn without_values(error: &str) -> String {
    if error.starts_with("missing field") || error.starts_with("unknown field") {
        return error.to_owned();
    }
    let kind = error.split(['`', '"']).next().unwrap_or_default();
    kind.trim_end_matches([' ', ':', ',']).to_owned()
}

#[cfg(test)]
mod tests {
    use super::without_values;

    #[test]
    fn a_decode_error_is_logged_without_the_value() {
        assert_eq!(
            without_values("unknown variant `Ada Lovelace`, expected one of `open`, `returned`"),
            "unknown variant"
        );
        assert_eq!(
            without_values("invalid type: string \"ada@example.com\", expected u32"),
            "invalid type: string"
        );
        assert_eq!(
            without_values("missing field `title`"),
            "missing field `title`"
        );
        assert_eq!(
            without_values("not a valid Email: Invalid"),
            "not a valid Email: Invalid"
        );
    }

    /// The reason names the attribute at fault, and still not its value.
    #[test]
    fn a_decode_error_names_the_attribute() {
        use super::{Entity, fleet::Vehicle, from_attributes};
        let vehicle = Vehicle {
            vehicle_id: singlet_shared::Id::parse("v1").unwrap(),
            plate: singlet_shared::Plate::parse("KA19XTR").unwrap(),
            chassis: singlet_shared::Chassis::parse("WDB123").unwrap(),
            depot: "north".into(),
            added_at: 1,
        };
        let mut item = vehicle.to_item();
        item.insert(
            "plate".into(),
            aws_sdk_dynamodb::types::AttributeValue::N("1912".into()),
        );
        let reason = from_attributes::<Vehicle>(&item).err().unwrap();
        assert!(reason.starts_with("plate: "), "{reason}");
        assert!(!reason.contains("1912"), "{reason}");
        item.remove("plate");
        let reason = from_attributes::<Vehicle>(&item).err().unwrap();
        assert!(reason.contains("missing field `plate`"), "{reason}");
    }
}
