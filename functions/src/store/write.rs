//! Writes as typed values: [`Put`], [`Update`], [`Delete`] and [`Check`] of one entity type, each
//! guarded by a [`Condition`] on that type's fields. A pattern says what changes and on what
//! condition; only this module spells DynamoDB's expressions, and it names every attribute through
//! a placeholder, so no field name is ever a reserved word or typed twice.
//!
//! A field is a [`Field<E>`] const of its entity (`Patron::ACTIVE_LOANS`), checked against the
//! entity's serde names by a test, so renaming a field cannot compile half-done. An update also
//! writes `_et` when the item lacks it; `_v` comes only with a whole item (a put, a migration).

use super::item::{Item, key_item};
use crate::model::{
    ENTITY_TYPE, Entity, EntityType, Field, KeyOf, TableEntity, VERSION, stored_version,
};
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete as SdkDelete, Put as SdkPut,
    ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update as SdkUpdate,
};
use serde::Serialize;
use singlet_shared::schema::{Index, PK, TTL_ATTRIBUTE};
use singlet_shared::{IndexKey, Key};
use std::collections::HashMap;
use std::marker::PhantomData;

/// One clause of a condition; a condition is its clauses, all of which must hold.
#[derive(Debug, Clone)]
enum Clause {
    /// The item exists.
    Exists,
    /// No item has the key.
    Absent,
    Equals(&'static str, AttributeValue),
    Above(&'static str, AttributeValue),
    /// One attribute below another of the same item.
    BelowField(&'static str, &'static str),
    /// The attribute is missing, or below the value.
    MissingOrBelow(&'static str, AttributeValue),
    Has(&'static str),
    /// The attribute is missing.
    Missing(&'static str),
    /// `_et` or `_v` is missing: an item written before they existed.
    Unstamped,
    /// No item has the key, or the attribute holds the value.
    AbsentOrEquals(&'static str, AttributeValue),
    /// No item has the key, or the one that has it expired (its `expiresAt` is before this
    /// time, epoch seconds): TTL deletes an item days after it expires, and until then the item
    /// is, to every reader and writer, not there.
    AbsentOrExpired(AttributeValue),
}

/// What must hold of an item of `E` for a write to apply.
#[derive(Debug, Clone)]
pub struct Condition<E> {
    clauses: Vec<Clause>,
    entity: PhantomData<fn() -> E>,
}

impl<E> Condition<E> {
    fn of(clause: Clause) -> Self {
        Self {
            clauses: vec![clause],
            entity: PhantomData,
        }
    }

    /// The item exists (`attribute_exists(PK)`).
    pub fn exists() -> Self {
        Self::of(Clause::Exists)
    }

    /// No item has the key (`attribute_not_exists(PK)`): of two writers claiming one key, one
    /// wins.
    pub fn absent() -> Self {
        Self::of(Clause::Absent)
    }

    /// No item has the key, or its `field` is `value` already: a write that may have been made
    /// before (a lock re-keyed by a migration, whoever wrote it first).
    pub fn absent_or_equals(field: Field<E>, value: impl Serialize) -> Self {
        Self::of(Clause::AbsentOrEquals(field.name(), attribute(value)))
    }

    /// `field` is `value`.
    pub fn equals(field: Field<E>, value: impl Serialize) -> Self {
        Self::of(Clause::Equals(field.name(), attribute(value)))
    }

    /// And `field` is `value`.
    pub fn and_equals(self, field: Field<E>, value: impl Serialize) -> Self {
        self.and(Clause::Equals(field.name(), attribute(value)))
    }

    /// `field` is above `value`.
    pub fn above(field: Field<E>, value: impl Serialize) -> Self {
        Self::of(Clause::Above(field.name(), attribute(value)))
    }

    /// And `field` is below `bound`, another field of the item.
    pub fn and_below_field(self, field: Field<E>, bound: Field<E>) -> Self {
        self.and(Clause::BelowField(field.name(), bound.name()))
    }

    /// `field` is missing or below `value`.
    pub fn missing_or_below(field: Field<E>, value: impl Serialize) -> Self {
        Self::of(Clause::MissingOrBelow(field.name(), attribute(value)))
    }

    /// The item's partition key in `index` is `partition`.
    pub fn in_index_partition(index: Index, partition: impl Into<String>) -> Self {
        Self::of(Clause::Equals(
            index.pk,
            AttributeValue::S(partition.into()),
        ))
    }

    /// And the item has keys in `index`.
    pub fn and_in_index(self, index: Index) -> Self {
        self.and(Clause::Has(index.pk))
    }

    /// And the item has no keys in `index` (a migration writing them).
    pub fn and_not_in_index(self, index: Index) -> Self {
        self.and(Clause::Missing(index.pk))
    }

    /// And the item's keys in `index` are as a reader saw them (`None`: it had that attribute
    /// not at all): fsck rewriting a loan's index keys writes only over what it judged.
    pub fn and_index_as(self, index: Index, pk: Option<&str>, sk: Option<&str>) -> Self {
        let clause = |name, seen: Option<&str>| match seen {
            Some(value) => Clause::Equals(name, AttributeValue::S(value.to_owned())),
            None => Clause::Missing(name),
        };
        self.and(clause(index.pk, pk)).and(clause(index.sk, sk))
    }

    /// And `field` is missing (fsck: an item that must expire has no `expiresAt` yet).
    pub fn and_missing(self, field: Field<E>) -> Self {
        self.and(Clause::Missing(field.name()))
    }

    fn and(mut self, clause: Clause) -> Self {
        self.clauses.push(clause);
        self
    }
}

/// A put of one entity.
#[derive(Debug, Clone)]
pub struct Put {
    item: Item,
    clauses: Vec<Clause>,
    old_on_failure: bool,
}

impl Put {
    /// `entity` as an item (with `_et` and `_v`), put whatever is there.
    ///
    /// An item with `expiresAt` is only ever put for a type that declares it may expire: a lock,
    /// or an entity that owns one, that TTL deleted would leave the other half of its pair
    /// behind for ever (the registry's test keeps every such type from declaring it).
    pub fn new<E: Entity>(entity: &E) -> Self {
        Self::of(E::TYPE, entity.to_item())
    }

    /// An entity of whichever type ([`TableEntity`]), put as [`Put::new_only`] puts one: a lock
    /// an owner declares ([`Entity::locks`]).
    pub fn new_only_any(entity: &TableEntity) -> Self {
        Self {
            clauses: vec![Clause::Absent],
            ..Self::of(entity.entity_type(), entity.to_item())
        }
    }

    fn of(entity_type: &'static EntityType, item: Item) -> Self {
        // An entity left out of the registry would be written and never read back: every test
        // that writes one fails here.
        debug_assert!(
            crate::model::ENTITY_TYPES.contains(&entity_type),
            "{} is not in the model's registry",
            entity_type.name
        );
        assert!(
            entity_type.may_expire() || !item.contains_key(TTL_ATTRIBUTE),
            "a {} may never expire",
            entity_type.name
        );
        Self {
            item,
            clauses: Vec::new(),
            old_on_failure: false,
        }
    }

    /// `entity`, only if no item has its key.
    pub fn new_only<E: Entity>(entity: &E) -> Self {
        Self {
            clauses: vec![Clause::Absent],
            ..Self::new(entity)
        }
    }

    /// `entity`, only if `condition` holds of the item at its key.
    pub fn new_if<E: Entity>(entity: &E, condition: Condition<E>) -> Self {
        Self {
            clauses: condition.clauses,
            ..Self::new(entity)
        }
    }

    /// `entity`, only if no item has its key or the one that has it expired before `now`
    /// (epoch seconds): a key whose item expired is free again, though TTL has not deleted it.
    pub fn new_unless_live<E: Entity>(entity: &E, now: i64) -> Self {
        Self {
            clauses: vec![Clause::AbsentOrExpired(attribute(now))],
            ..Self::new(entity)
        }
    }

    /// When the condition fails, the cancellation hands back the item as it stood.
    pub fn old_on_failure(mut self) -> Self {
        self.old_on_failure = true;
        self
    }

    /// The put as one part of a `TransactWriteItems` on `table`, for a caller that sends its own
    /// (the benchmarks' bulk loads).
    pub fn transact_item(self, table: &str) -> TransactWriteItem {
        Write::from(self).transact_item(table)
    }
}

/// An update of the item of `E` at a key.
#[derive(Debug, Clone)]
pub struct Update<E> {
    raw: RawUpdate,
    entity: PhantomData<fn() -> E>,
}

impl<E: Entity> Update<E> {
    /// An update of the item at `key`; its `_et` is written with it when missing. Its `_v` is
    /// not moved on: an update changes some attributes, not the item's shape, so only a whole
    /// put (or a migration, which writes what the new version adds) may say the item is of a
    /// later version. An item without `_v` is version 1 and stays so until migrated.
    ///
    /// `key` is typed by `E`: an update of another entity's item under `E`'s fields does not
    /// compile.
    pub fn at(key: KeyOf<E>) -> Self {
        let key = key.into_key();
        let mut set = vec![(ENTITY_TYPE, AttributeValue::S(E::TYPE.name.to_owned()))];
        // While an entity type has only its first version, every item of it is that version, so
        // saying so is true (and an update that creates its item, an upsert, writes it whole).
        if E::TYPE.version == 1 {
            set.push((VERSION, AttributeValue::N("1".to_owned())));
        }
        Self::typed(RawUpdate::new(key, set, Vec::new()))
    }

    /// Moves the item to `version` of `E`, on condition that it is of an earlier one (a missing
    /// `_v` is version 1): only a migration says this, with the attributes that version adds.
    pub fn to_version(mut self, version: u32) -> Self {
        self.raw.set.retain(|(attribute, _)| *attribute != VERSION);
        self.raw.version = Some(version);
        self.raw.clauses.push(Clause::MissingOrBelow(
            VERSION,
            AttributeValue::N(version.to_string()),
        ));
        self
    }

    /// [`Update::to_version`] for the item `read`, when it is of an earlier version. An item
    /// read at `version` or later keeps its version: the migration then mends only what it
    /// lacks (an attribute lost to a hand edit or a restore, which `fsck` reports), where
    /// `to_version`'s condition would refuse it at every try.
    pub fn to_version_from(self, read: &Item, version: u32) -> Self {
        if stored_version(read).unwrap_or(1) < version {
            self.to_version(version)
        } else {
            self
        }
    }

    /// Sets `field` to `value`.
    pub fn set(mut self, field: Field<E>, value: impl Serialize) -> Self {
        self.raw.set.push((field.name(), attribute(value)));
        self
    }

    /// Adds `by` (negative: subtracts) to the number `field`, in place.
    pub fn add(mut self, field: Field<E>, by: i64) -> Self {
        self.raw.add.push((field.name(), by));
        self
    }

    /// Sets the item's keys in `index`.
    pub fn set_index(mut self, index: Index, key: IndexKey) -> Self {
        self.raw.set.push((index.pk, AttributeValue::S(key.pk)));
        self.raw.set.push((index.sk, AttributeValue::S(key.sk)));
        self
    }

    /// Sets the item's sort key in `index` (its partition stays).
    pub fn set_index_sort(mut self, index: Index, sort: String) -> Self {
        self.raw.set.push((index.sk, AttributeValue::S(sort)));
        self
    }

    /// Takes the item out of `index`.
    pub fn remove_index(mut self, index: Index) -> Self {
        self.raw.remove.extend([index.pk, index.sk]);
        self
    }

    /// Removes `field` (fsck: `expiresAt` from an item that must never expire).
    pub fn remove(mut self, field: Field<E>) -> Self {
        self.raw.remove.push(field.name());
        self
    }
}

/// An item of whatever entity type, for the one write that is about no entity's fields: the
/// stamp of `_et` and `_v` on an item written before they existed.
#[derive(Debug, Clone, Copy)]
pub enum AnyEntity {}

impl Update<AnyEntity> {
    /// Writes `_et` (`entity_type`) and `_v` (1: an item without `_v` is of the first version) on
    /// the item at `key` where either is missing, keeping the one it has; only if the item exists
    /// and lacks one of them.
    pub fn stamp(key: Key, entity_type: &EntityType) -> Self {
        let set = vec![
            (ENTITY_TYPE, AttributeValue::S(entity_type.name.to_owned())),
            (VERSION, AttributeValue::N("1".to_owned())),
        ];
        Self::typed(RawUpdate::new(
            key,
            set,
            vec![Clause::Exists, Clause::Unstamped],
        ))
    }
}

/// A delete of the item of `E` at a key.
#[derive(Debug, Clone)]
pub struct Delete<E> {
    raw: RawDelete,
    entity: PhantomData<fn() -> E>,
}

impl<E: Entity> Delete<E> {
    pub fn at(key: KeyOf<E>) -> Self {
        Self::typed(RawDelete::new(key.into_key(), Vec::new()))
    }
}

impl Delete<AnyEntity> {
    /// A delete of whatever item is at `key`, a key that came as text (the console's delete,
    /// a lock of whichever type `fsck` or a release found): its conditions name attributes, not
    /// one entity's fields.
    pub fn any(key: Key) -> Self {
        Self::typed(RawDelete::new(key, Vec::new()))
    }
}

/// A condition on the item of `E` at a key, written nothing: a transaction's `ConditionCheck`.
#[derive(Debug, Clone)]
pub struct Check<E> {
    raw: RawCheck,
    entity: PhantomData<fn() -> E>,
}

impl<E> Check<E> {
    /// The check as one part of a `TransactWriteItems` on `table`, for a caller that sends its
    /// own (the benchmarks' bare calls).
    pub fn transact_item(self, table: &str) -> TransactWriteItem {
        Write::from(self).transact_item(table)
    }
}

impl<E: Entity> Check<E> {
    pub fn at(key: KeyOf<E>, condition: Condition<E>) -> Self {
        Self::typed(RawCheck::new(key.into_key(), condition.clauses))
    }
}

impl Check<AnyEntity> {
    /// A condition on whatever item is at `key`: an owner `fsck` found by its key, a lock an
    /// earlier rule keyed (which must be absent, whoever it would be).
    pub fn any(key: Key, condition: Condition<AnyEntity>) -> Self {
        Self::typed(RawCheck::new(key, condition.clauses))
    }
}

/// What the typed writes that name their item by key ([`Update`], [`Delete`], [`Check`]) have
/// alike: each is its untyped part (what a transaction holds) and the entity type whose
/// [`Condition`]s it takes.
macro_rules! typed_by_key {
    ($($write:ident($raw:ident)),+) => {$(
        impl<E> $write<E> {
            fn typed(raw: $raw) -> Self {
                Self {
                    raw,
                    entity: PhantomData,
                }
            }

            /// Applies only if `condition` holds (and any condition given before).
            pub fn when(mut self, condition: Condition<E>) -> Self {
                self.raw.clauses.extend(condition.clauses);
                self
            }

            /// When the condition fails, the cancellation hands back the item as it stood.
            pub fn old_on_failure(mut self) -> Self {
                self.raw.old_on_failure = true;
                self
            }

            /// The write without its entity type.
            pub(super) fn raw(self) -> $raw {
                self.raw
            }
        }
    )+};
}

typed_by_key!(Update(RawUpdate), Delete(RawDelete), Check(RawCheck));

/// Any of the four, untyped: what a transaction holds.
#[derive(Debug, Clone)]
pub(super) enum Write {
    Put(Put),
    Update(Box<RawUpdate>),
    Delete(RawDelete),
    Check(RawCheck),
}

#[derive(Debug, Clone)]
pub(super) struct RawUpdate {
    key: Key,
    set: Vec<(&'static str, AttributeValue)>,
    /// The `_v` a migration moves the item to.
    version: Option<u32>,
    add: Vec<(&'static str, i64)>,
    remove: Vec<&'static str>,
    clauses: Vec<Clause>,
    old_on_failure: bool,
}

impl RawUpdate {
    fn new(key: Key, set: Vec<(&'static str, AttributeValue)>, clauses: Vec<Clause>) -> Self {
        Self {
            key,
            set,
            version: None,
            add: Vec::new(),
            remove: Vec::new(),
            clauses,
            old_on_failure: false,
        }
    }
}

/// A delete's or a check's untyped part: a key and a condition on its item.
#[derive(Debug, Clone)]
pub(super) struct RawDelete {
    key: Key,
    clauses: Vec<Clause>,
    old_on_failure: bool,
}

impl RawDelete {
    fn new(key: Key, clauses: Vec<Clause>) -> Self {
        Self {
            key,
            clauses,
            old_on_failure: false,
        }
    }
}

/// A check names its item as a delete does, and writes nothing.
pub(super) type RawCheck = RawDelete;

impl Put {
    /// The partition keys this put writes under, the table's and each index's the item has.
    pub fn keys_written(&self) -> Vec<super::pace::KeyRef> {
        super::pace::keys_of_item(&self.item)
    }
}

impl Write {
    /// The partition keys this write puts units on: the item's, and each index's whose key it
    /// sets (a put's item holds them; an update sets them). What pacing per key counts
    /// ([`super::pace`]); a check writes nothing but is billed on its item's key.
    pub(super) fn keys_written(&self) -> Vec<super::pace::KeyRef> {
        use super::pace::KeyRef;
        match self {
            Write::Put(put) => super::pace::keys_of_item(&put.item),
            Write::Update(update) => {
                let mut keys = vec![KeyRef::table(update.key.pk.clone())];
                for index in singlet_shared::schema::INDEXES {
                    if let Some((_, value)) = update.set.iter().find(|(name, _)| *name == index.pk)
                        && let Ok(pk) = value.as_s()
                    {
                        keys.push(KeyRef::index(index.name, pk.clone()));
                    }
                }
                keys
            }
            Write::Delete(delete) => vec![KeyRef::table(delete.key.pk.clone())],
            Write::Check(check) => vec![KeyRef::table(check.key.pk.clone())],
        }
    }
}

impl From<Put> for Write {
    fn from(put: Put) -> Self {
        Write::Put(put)
    }
}

impl<E> From<Update<E>> for Write {
    fn from(update: Update<E>) -> Self {
        Write::Update(Box::new(update.raw()))
    }
}

impl<E> From<Delete<E>> for Write {
    fn from(delete: Delete<E>) -> Self {
        Write::Delete(delete.raw())
    }
}

impl<E> From<Check<E>> for Write {
    fn from(check: Check<E>) -> Self {
        Write::Check(check.raw())
    }
}

/// An expression's placeholders: `#n<i>` for names, `:v<i>` for values.
#[derive(Default)]
pub(super) struct Placeholders {
    pub names: HashMap<String, String>,
    pub values: HashMap<String, AttributeValue>,
}

impl Placeholders {
    fn name(&mut self, name: &str) -> String {
        if let Some((placeholder, _)) = self.names.iter().find(|(_, n)| n.as_str() == name) {
            return placeholder.clone();
        }
        let placeholder = format!("#n{}", self.names.len());
        self.names.insert(placeholder.clone(), name.to_owned());
        placeholder
    }

    fn value(&mut self, value: AttributeValue) -> String {
        let placeholder = format!(":v{}", self.values.len());
        self.values.insert(placeholder.clone(), value);
        placeholder
    }

    fn names(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| self.names.clone())
    }

    fn values(&self) -> Option<HashMap<String, AttributeValue>> {
        (!self.values.is_empty()).then(|| self.values.clone())
    }

    /// The clauses as one condition expression, `None` for none.
    fn condition(&mut self, clauses: &[Clause]) -> Option<String> {
        let parts: Vec<String> = clauses
            .iter()
            .map(|clause| match clause {
                Clause::Exists => format!("attribute_exists({})", self.name(PK)),
                Clause::Absent => format!("attribute_not_exists({})", self.name(PK)),
                Clause::Has(name) => format!("attribute_exists({})", self.name(name)),
                Clause::Missing(name) => format!("attribute_not_exists({})", self.name(name)),
                Clause::AbsentOrEquals(name, value) => format!(
                    "(attribute_not_exists({}) OR {} = {})",
                    self.name(PK),
                    self.name(name),
                    self.value(value.clone())
                ),
                Clause::Unstamped => format!(
                    "(attribute_not_exists({}) OR attribute_not_exists({}))",
                    self.name(ENTITY_TYPE),
                    self.name(VERSION)
                ),
                Clause::AbsentOrExpired(now) => format!(
                    "(attribute_not_exists({}) OR {} < {})",
                    self.name(PK),
                    self.name(TTL_ATTRIBUTE),
                    self.value(now.clone())
                ),
                Clause::Equals(name, value) => {
                    format!("{} = {}", self.name(name), self.value(value.clone()))
                }
                Clause::Above(name, value) => {
                    format!("{} > {}", self.name(name), self.value(value.clone()))
                }
                Clause::BelowField(name, bound) => {
                    format!("{} < {}", self.name(name), self.name(bound))
                }
                Clause::MissingOrBelow(name, value) => {
                    let name = self.name(name);
                    format!(
                        "(attribute_not_exists({name}) OR {name} < {})",
                        self.value(value.clone())
                    )
                }
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join(" AND "))
    }
}

fn return_old(old_on_failure: bool) -> Option<ReturnValuesOnConditionCheckFailure> {
    old_on_failure.then_some(ReturnValuesOnConditionCheckFailure::AllOld)
}

impl RawUpdate {
    /// `(update expression, condition expression, placeholders)`.
    pub(super) fn render(&self) -> (String, Option<String>, Placeholders) {
        let mut placeholders = Placeholders::default();
        let mut sets: Vec<String> = Vec::new();
        for (attribute, value) in &self.set {
            let (name, value) = (
                placeholders.name(attribute),
                placeholders.value(value.clone()),
            );
            // An item written before `_et` existed gets it from its next change; one already
            // stamped keeps it.
            if *attribute == ENTITY_TYPE || *attribute == VERSION {
                sets.push(format!("{name} = if_not_exists({name}, {value})"));
            } else {
                sets.push(format!("{name} = {value}"));
            }
        }
        if let Some(version) = self.version {
            let (name, value) = (
                placeholders.name(VERSION),
                placeholders.value(AttributeValue::N(version.to_string())),
            );
            sets.push(format!("{name} = {value}"));
        }
        for (name, by) in &self.add {
            let name = placeholders.name(name);
            let (sign, by) = if *by < 0 { ('-', -by) } else { ('+', *by) };
            let by = placeholders.value(AttributeValue::N(by.to_string()));
            // A count an update creates starts from 0 (an upsert's first add).
            let zero = placeholders.value(AttributeValue::N("0".to_owned()));
            sets.push(format!(
                "{name} = if_not_exists({name}, {zero}) {sign} {by}"
            ));
        }
        let mut expression = format!("SET {}", sets.join(", "));
        if !self.remove.is_empty() {
            let removed: Vec<String> = self.remove.iter().map(|n| placeholders.name(n)).collect();
            expression.push_str(&format!(" REMOVE {}", removed.join(", ")));
        }
        let condition = placeholders.condition(&self.clauses);
        (expression, condition, placeholders)
    }

    pub(super) fn key(&self) -> Item {
        key_item(&self.key)
    }

    pub(super) fn returns_old(&self) -> Option<ReturnValuesOnConditionCheckFailure> {
        return_old(self.old_on_failure)
    }
}

impl RawDelete {
    pub(super) fn render(&self) -> (Option<String>, Placeholders) {
        let mut placeholders = Placeholders::default();
        let condition = placeholders.condition(&self.clauses);
        (condition, placeholders)
    }

    pub(super) fn key(&self) -> Item {
        key_item(&self.key)
    }
}

impl Write {
    /// The write as one part of a `TransactWriteItems` on `table`.
    pub(super) fn transact_item(&self, table: &str) -> TransactWriteItem {
        let built = match self {
            Write::Put(put) => {
                let mut placeholders = Placeholders::default();
                let condition = placeholders.condition(&put.clauses);
                SdkPut::builder()
                    .table_name(table)
                    .set_item(Some(put.item.clone()))
                    .set_condition_expression(condition)
                    .set_expression_attribute_names(placeholders.names())
                    .set_expression_attribute_values(placeholders.values())
                    .set_return_values_on_condition_check_failure(return_old(put.old_on_failure))
                    .build()
                    .map(|put| TransactWriteItem::builder().put(put).build())
            }
            Write::Update(update) => {
                let (expression, condition, placeholders) = update.render();
                SdkUpdate::builder()
                    .table_name(table)
                    .set_key(Some(update.key()))
                    .update_expression(expression)
                    .set_condition_expression(condition)
                    .set_expression_attribute_names(placeholders.names())
                    .set_expression_attribute_values(placeholders.values())
                    .set_return_values_on_condition_check_failure(update.returns_old())
                    .build()
                    .map(|update| TransactWriteItem::builder().update(update).build())
            }
            Write::Delete(delete) => {
                let (condition, placeholders) = delete.render();
                SdkDelete::builder()
                    .table_name(table)
                    .set_key(Some(delete.key()))
                    .set_condition_expression(condition)
                    .set_expression_attribute_names(placeholders.names())
                    .set_expression_attribute_values(placeholders.values())
                    .set_return_values_on_condition_check_failure(return_old(delete.old_on_failure))
                    .build()
                    .map(|delete| TransactWriteItem::builder().delete(delete).build())
            }
            Write::Check(check) => {
                let mut placeholders = Placeholders::default();
                let condition = placeholders
                    .condition(&check.clauses)
                    .expect("a check has a condition");
                ConditionCheck::builder()
                    .table_name(table)
                    .set_key(Some(key_item(&check.key)))
                    .condition_expression(condition)
                    .set_expression_attribute_names(placeholders.names())
                    .set_expression_attribute_values(placeholders.values())
                    .set_return_values_on_condition_check_failure(return_old(check.old_on_failure))
                    .build()
                    .map(|check| TransactWriteItem::builder().condition_check(check).build())
            }
        };
        // The builders only fail when a required member is missing: a bug in this module.
        built.expect("every write names its table, key and expressions")
    }
}

#[cfg(test)]
impl Write {
    /// The write as text, every placeholder replaced by what it stands for: what a test reads.
    pub(super) fn readable(&self) -> String {
        let (kind, key, expression, condition, placeholders) = match self {
            Write::Put(put) => {
                let mut placeholders = Placeholders::default();
                let condition = placeholders.condition(&put.clauses);
                let key = super::item::text(&put.item, PK).to_owned();
                ("put", key, String::new(), condition, placeholders)
            }
            Write::Update(update) => {
                let (expression, condition, placeholders) = update.render();
                (
                    "update",
                    update.key.pk.clone(),
                    expression,
                    condition,
                    placeholders,
                )
            }
            Write::Delete(delete) => {
                let (condition, placeholders) = delete.render();
                (
                    "delete",
                    delete.key.pk.clone(),
                    String::new(),
                    condition,
                    placeholders,
                )
            }
            Write::Check(check) => {
                let mut placeholders = Placeholders::default();
                let condition = placeholders.condition(&check.clauses);
                (
                    "check",
                    check.key.pk.clone(),
                    String::new(),
                    condition,
                    placeholders,
                )
            }
        };
        let mut text = format!(
            "{kind} {key} {expression} IF {}",
            condition.unwrap_or_default()
        );
        let mut names: Vec<_> = placeholders.names.iter().collect();
        names.sort_by_key(|(placeholder, _)| std::cmp::Reverse(placeholder.len()));
        for (placeholder, name) in names {
            text = text.replace(placeholder.as_str(), name);
        }
        let mut values: Vec<_> = placeholders.values.iter().collect();
        values.sort_by_key(|(placeholder, _)| std::cmp::Reverse(placeholder.len()));
        for (placeholder, value) in values {
            let shown = match value {
                AttributeValue::S(s) => format!("{s:?}"),
                AttributeValue::N(n) => n.clone(),
                other => format!("{other:?}"),
            };
            text = text.replace(placeholder.as_str(), &shown);
        }
        text
    }
}

/// A value of an entity's field type as an attribute value (an enum as its string).
fn attribute(value: impl Serialize) -> AttributeValue {
    serde_dynamo::to_attribute_value(value).expect("field values serialise")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::library::Patron;
    use crate::model::loans::MarkerRun;
    use singlet_shared::schema::GSI1;

    fn key() -> KeyOf<Patron> {
        KeyOf::new(Key {
            pk: "BRANCH#b".into(),
            sk: "PATRON#p".into(),
        })
    }

    #[test]
    fn an_update_names_every_attribute_through_a_placeholder_and_stamps_the_entity() {
        let update = Update::<Patron>::at(key())
            .add(Patron::ACTIVE_LOANS, -1)
            .remove_index(GSI1)
            .when(Condition::exists().and_below_field(Patron::ACTIVE_LOANS, Patron::LOAN_LIMIT))
            .raw();
        let (expression, condition, placeholders) = update.render();
        assert_eq!(
            expression,
            "SET #n0 = if_not_exists(#n0, :v0), #n1 = if_not_exists(#n1, :v1), \
             #n2 = if_not_exists(#n2, :v3) - :v2 REMOVE #n3, #n4"
        );
        assert_eq!(
            condition.as_deref(),
            Some("attribute_exists(#n5) AND #n2 < #n6")
        );
        let name = |placeholder: &str| placeholders.names[placeholder].as_str();
        assert_eq!(
            [
                name("#n0"),
                name("#n1"),
                name("#n2"),
                name("#n3"),
                name("#n4")
            ],
            ["_et", "_v", "activeLoans", "GSI1PK", "GSI1SK"]
        );
        assert_eq!([name("#n5"), name("#n6")], ["PK", "loanLimit"]);
        assert_eq!(
            placeholders.values[":v0"],
            AttributeValue::S("patron".into())
        );
        assert_eq!(placeholders.values[":v2"], AttributeValue::N("1".into()));
    }

    #[test]
    fn a_missing_or_earlier_time_is_one_clause() {
        let update = Update::<MarkerRun>::at(MarkerRun::the_key())
            .set(MarkerRun::TIME, "t")
            .when(Condition::missing_or_below(MarkerRun::TIME, "t"))
            .raw();
        let (_, condition, _) = update.render();
        assert_eq!(
            condition.as_deref(),
            Some("(attribute_not_exists(#n2) OR #n2 < :v3)")
        );
    }

    #[test]
    fn a_delete_without_a_condition_has_no_expression() {
        let (condition, placeholders) = Delete::<Patron>::at(key()).raw().render();
        assert_eq!(condition, None);
        assert!(placeholders.names.is_empty() && placeholders.values.is_empty());
    }
}
