//! What an item is, for the checker: the model registry's [`decode`](model::decode) (by `_et`,
//! or by key shape for items written before it), plus what the rules ask of an entity: the lock
//! it is, the values it holds with a lock, whether it may carry `expiresAt`.
//!
//! All of it is the model's own declaration (`EntityType::lock`, `Entity::locks`,
//! `Entity::earlier_key`, `EntityType::expiry`), so the checker, the API, `import` and `load`
//! read one definition, and an entity added to the model is checked without a line here.

use singlet_functions::loans::{Checkout, LoanStatus};
use singlet_functions::model::{self, Expiry, Item, LockOf, TableEntity};
use singlet_shared::schema::TTL_ATTRIBUTE;
use singlet_shared::{Id, Key};

/// What a lock of a unique value is a lock of: its type, its owner's type, the attribute naming
/// the holder and the owner's attribute holding the value (the model's [`LockOf`]).
pub type LockKind = LockOf;

/// A lock item: which kind of value it locks, and the id of the owner it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockItem {
    pub kind: LockKind,
    pub holder: String,
}

/// The lock of a unique value `entity` is, if it is one (the `ID#` lock of a derived id is not
/// one: it names no holder), read from the attribute its type declares names the holder.
pub fn lock(entity: &TableEntity) -> Option<LockItem> {
    let kind = entity.entity_type().lock_of()?;
    let item = entity.to_item();
    let holder = item.get(kind.holder)?.as_s().ok()?.clone();
    Some(LockItem { kind, holder })
}

/// The key of the owner a lock names, where the holder's id alone makes it (a vehicle, an
/// account); `None` where the owner is keyed by more (a patron, by its branch too), or the
/// holder is no id.
pub fn owner_key_by_id(kind: LockKind, holder: &str) -> Option<Key> {
    kind.owner.key_from_id(&Id::parse(holder).ok()?)
}

/// A unique value an owner (vehicle, account, patron) holds, and the lock that must name it.
#[derive(Debug, Clone)]
pub struct Claim {
    pub kind: LockKind,
    /// The owner's stored value.
    pub value: String,
    pub owner: Key,
    pub holder: String,
    /// The lock as the API writes it for this value: what a repair puts.
    pub lock: TableEntity,
    pub lock_key: Key,
    /// Where the previous version's rule keyed the lock, if elsewhere: a vehicle not yet
    /// migrated by `plates-compact` holds its plate at `PLATE#ka19 xtr`, and that is held too.
    pub earlier_key: Option<Key>,
}

impl Claim {
    /// Whether a lock at `key` is this value's lock, under the current rule or the one before.
    pub fn keyed_at(&self, key: &Key) -> bool {
        self.lock_key == *key || self.earlier_key.as_ref() == Some(key)
    }
}

/// The unique values `entity` holds, each with its lock: the locks the model declares it holds
/// ([`Entity::locks`](model::Entity::locks)), as the API makes them.
pub fn claims(entity: &TableEntity) -> Vec<Claim> {
    let locks = entity.locks();
    if locks.is_empty() {
        return Vec::new();
    }
    let owner = entity.to_item();
    locks
        .into_iter()
        .filter_map(|lock| {
            let LockItem { kind, holder } = self::lock(&lock)?;
            let value = owner.get(kind.value)?.as_s().ok()?.clone();
            Some(Claim {
                kind,
                value,
                owner: entity.key(),
                holder,
                lock_key: lock.key(),
                earlier_key: lock.earlier_key(),
                lock,
            })
        })
        .collect()
}

/// Why `entity` may never carry `expiresAt`, if it may not (`None`: it may). Read from the model
/// ([`model::must_never_expire`], [`model::EntityType::expiry`]) and the loan's state:
/// - a lock, or an item that owns one: TTL deletes one item at a time, so it would free a value
///   its holder still has, or leave a lock holding a value for no one;
/// - an active loan: its copy's status and its patron's count depend on it (only a returned
///   loan expires, `LoanHistoryDays` after its return);
/// - any other type that does not declare that it expires.
pub fn why_never_expires(entity: &TableEntity) -> Option<&'static str> {
    let entity_type = entity.entity_type();
    if model::must_never_expire(entity_type) {
        return Some("a lock or a lock's owner carries expiresAt: TTL would free its value");
    }
    if let TableEntity::Loan(loan) = entity
        && loan.status != LoanStatus::Returned
    {
        return Some(
            "an active loan carries expiresAt: TTL would delete a loan its copy and its patron's count depend on",
        );
    }
    (!entity_type.may_expire()).then_some("an item whose type never expires carries expiresAt")
}

/// Whether `entity`, stored at schema `version`, must carry `expiresAt` (docs/API.md,
/// "Consistency check", rule `expiry`): every item of an [`Expiry::Must`] type, and a returned
/// loan from the version whose writers all put it ([`Checkout::EXPIRES_SINCE`]: the return, and
/// `returned-loans-expire` for the loans returned before it). A returned loan of an earlier
/// version is one that migration has yet to reach.
pub fn must_expire(entity: &TableEntity, version: u32) -> bool {
    match entity {
        TableEntity::Loan(loan) => {
            loan.status == LoanStatus::Returned && version >= Checkout::EXPIRES_SINCE
        }
        _ => entity.entity_type().expiry == Expiry::Must,
    }
}

/// The key an item is stored under (empty parts when it has none).
pub fn key_of(item: &Item) -> Key {
    model::key_of(item).unwrap_or_default()
}

/// The entity an item is, through the model's registry, or why it is none. An entity whose own
/// fields make another key than the one it is stored under (now, or under the rule before:
/// [`Entity::earlier_key`](model::Entity::earlier_key)) is none either: its rules would be
/// judged against the wrong items.
pub fn decode(item: &Item) -> Result<TableEntity, String> {
    let entity = match model::decode(item) {
        Ok(entity) => entity,
        // An item that must expire and has no `expiresAt` is reported by the `expiry` rule, not
        // as undecodable: it is read with a placeholder for the one field it lacks.
        Err(undecodable)
            if undecodable
                .reason
                .contains(&format!("missing field `{TTL_ATTRIBUTE}`")) =>
        {
            let mut placeholder = item.clone();
            placeholder.insert(
                TTL_ATTRIBUTE.to_owned(),
                aws_sdk_dynamodb::types::AttributeValue::N("0".into()),
            );
            model::decode(&placeholder).map_err(|e| e.reason)?
        }
        Err(undecodable) => return Err(undecodable.reason),
    };
    let stored_under = key_of(item);
    if entity.key() != stored_under && entity.earlier_key() != Some(stored_under) {
        return Err("its fields make another key than the one it is stored under".into());
    }
    Ok(entity)
}
