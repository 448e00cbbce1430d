//! What an item is, for the checker: the model registry's [`decode`](model::decode) (by `_et`,
//! or by key shape for items written before it), plus what the rules ask of an entity: the lock
//! it is, the values it holds with a lock, whether it may carry `expiresAt`.
//!
//! Lock metadata (which attribute names a lock's holder, which attribute of the owner holds the
//! locked value) is the model's own (`EntityType::lock`), so the checker and the API read one
//! definition.

use singlet_functions::accounts::{EmailLock, UsernameLock};
use singlet_functions::fleet::{ChassisLock, PlateLock};
use singlet_functions::library::PatronCard;
use singlet_functions::loans::LoanStatus;
use singlet_functions::model::{self, Decoded, Entity, EntityType, Item, Lock};
use singlet_shared::schema::TTL_ATTRIBUTE;
use singlet_shared::{Key, keys};

/// Entity types that must expire (`docs/API.md`, "Consistency check: `fsck`", rule `expiry`): an
/// idempotency record, an outbox item.
pub const MUST_EXPIRE: [&str; 2] = ["idempotency-record", "outbox"];

/// The locks of unique values (the `ID#` lock of a derived id is not one: it names no holder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    Plate,
    Chassis,
    Email,
    Username,
    Card,
}

impl LockKind {
    fn entity_type(self) -> &'static EntityType {
        match self {
            LockKind::Plate => PlateLock::TYPE,
            LockKind::Chassis => ChassisLock::TYPE,
            LockKind::Email => EmailLock::TYPE,
            LockKind::Username => UsernameLock::TYPE,
            LockKind::Card => PatronCard::TYPE,
        }
    }

    fn of(self) -> (&'static str, &'static str) {
        match self.entity_type().lock {
            Some(Lock::Of { holder, value, .. }) => (holder, value),
            _ => unreachable!("a unique value's lock is a `Lock::Of`"),
        }
    }

    /// The lock's attribute that names its holder (`vehicleId`, `accountId`, `patronId`).
    pub fn holder_field(self) -> &'static str {
        self.of().0
    }

    /// The owner's attribute that holds the locked value (`plate`, `email`, `cardNumber`).
    pub fn owner_field(self) -> &'static str {
        self.of().1
    }
}

/// A lock item: which kind of value it locks, and the id of the owner it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockItem {
    pub kind: LockKind,
    pub holder: String,
}

/// The lock `entity` is, if it is one.
pub fn lock(entity: &Decoded) -> Option<LockItem> {
    let (kind, holder) = match entity {
        Decoded::PlateLock(lock) => (LockKind::Plate, &lock.vehicle_id),
        Decoded::ChassisLock(lock) => (LockKind::Chassis, &lock.vehicle_id),
        Decoded::EmailLock(lock) => (LockKind::Email, &lock.account_id),
        Decoded::UsernameLock(lock) => (LockKind::Username, &lock.account_id),
        Decoded::CardLock(lock) => (LockKind::Card, &lock.patron_id),
        _ => return None,
    };
    Some(LockItem {
        kind,
        holder: holder.to_string(),
    })
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
    pub lock: Decoded,
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

/// The unique values `entity` holds, each with its lock, made as the API makes them.
pub fn claims(entity: &Decoded) -> Vec<Claim> {
    let claim = |kind, value: &str, owner: Key, holder: &dyn ToString, lock: Decoded| Claim {
        kind,
        value: value.to_owned(),
        owner,
        holder: holder.to_string(),
        lock_key: lock.key(),
        lock,
        earlier_key: None,
    };
    let earlier = |claim: Claim, key: Key| Claim {
        earlier_key: (key != claim.lock_key).then_some(key),
        ..claim
    };
    match entity {
        Decoded::Vehicle(v) => vec![
            earlier(
                claim(
                    LockKind::Plate,
                    v.plate.as_str(),
                    v.key(),
                    &v.vehicle_id,
                    Decoded::PlateLock(PlateLock {
                        plate: v.plate.clone(),
                        vehicle_id: v.vehicle_id.clone(),
                    }),
                ),
                keys::plate_lock_before_compact(&v.plate),
            ),
            earlier(
                claim(
                    LockKind::Chassis,
                    v.chassis.as_str(),
                    v.key(),
                    &v.vehicle_id,
                    Decoded::ChassisLock(ChassisLock {
                        chassis: v.chassis.clone(),
                        vehicle_id: v.vehicle_id.clone(),
                    }),
                ),
                keys::chassis_lock_before_compact(&v.chassis),
            ),
        ],
        Decoded::Account(row) => {
            let account = &row.account;
            vec![
                claim(
                    LockKind::Email,
                    account.email.as_str(),
                    row.key(),
                    &account.account_id,
                    Decoded::EmailLock(EmailLock {
                        account_id: account.account_id.clone(),
                        value: account.email.clone(),
                    }),
                ),
                claim(
                    LockKind::Username,
                    account.username.as_str(),
                    row.key(),
                    &account.account_id,
                    Decoded::UsernameLock(UsernameLock {
                        account_id: account.account_id.clone(),
                        value: account.username.clone(),
                    }),
                ),
            ]
        }
        Decoded::Patron(p) => vec![claim(
            LockKind::Card,
            p.card_number.as_str(),
            p.key(),
            &p.patron_id,
            Decoded::CardLock(PatronCard {
                card_number: p.card_number.clone(),
                patron_id: p.patron_id.clone(),
            }),
        )],
        _ => Vec::new(),
    }
}

/// Why `entity` may never carry `expiresAt`, if it may not (`None`: it may). Read from the model
/// ([`model::must_never_expire`], [`EntityType::may_expire`]) and the loan's state:
/// - a lock, or an item that owns one: TTL deletes one item at a time, so it would free a value
///   its holder still has, or leave a lock holding a value for no one;
/// - an active loan: its copy's status and its patron's count depend on it (only a returned
///   loan expires, `LoanHistoryDays` after its return);
/// - any other type that does not declare that it expires.
pub fn why_never_expires(entity: &Decoded) -> Option<&'static str> {
    let entity_type = entity.entity_type();
    if model::must_never_expire(entity_type) {
        return Some("a lock or a lock's owner carries expiresAt: TTL would free its value");
    }
    if let Decoded::Loan(loan) = entity
        && loan.status != LoanStatus::Returned
    {
        return Some(
            "an active loan carries expiresAt: TTL would delete a loan its copy and its patron's count depend on",
        );
    }
    (!entity_type.may_expire).then_some("an item whose type never expires carries expiresAt")
}

pub fn must_expire(entity: &Decoded) -> bool {
    MUST_EXPIRE.contains(&entity.entity_type().name)
}

/// The key an item is stored under (empty parts when it has none).
pub fn key_of(item: &Item) -> Key {
    model::key_of(item).unwrap_or_default()
}

/// The entity an item is, through the model's registry, or why it is none. An entity whose own
/// fields make another key than the one it is stored under is none either: its rules would be
/// judged against the wrong items.
pub fn decode(item: &Item) -> Result<Decoded, String> {
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
    if entity.key() != stored_under && earlier_key(&entity) != Some(stored_under) {
        return Err("its fields make another key than the one it is stored under".into());
    }
    Ok(entity)
}

/// The key the previous version's rule made of a lock's fields: a plate or chassis lock before
/// `plates-compact` (`PLATE#ka19 xtr`), read until the migration re-keys it.
fn earlier_key(entity: &Decoded) -> Option<Key> {
    match entity {
        Decoded::PlateLock(lock) => Some(keys::plate_lock_before_compact(&lock.plate)),
        Decoded::ChassisLock(lock) => Some(keys::chassis_lock_before_compact(&lock.chassis)),
        _ => None,
    }
}
