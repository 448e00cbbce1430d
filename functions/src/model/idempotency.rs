//! The entities of `Idempotency-Key` (see `crate::idempotency`): the record of a key's first
//! response, and the lock of an id derived from a key.

use super::{
    Domain, Entity, EntityType, Expiry, Item, KeyOf, KeyShape, Lock, Personal, PersonalField,
    from_key_and_attributes,
};
use serde::{Deserialize, Serialize};
use singlet_shared::{Id, Key, keys};

/// What a record keeps of the first response (`IDEMPOTENCY#<route>#<key>`). It expires
/// (`expiresAt`) a day after it was written.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdempotencyRecord {
    /// The record's key: made from the route and the caller's key, neither of which it stores.
    #[serde(skip)]
    pub key: Key,
    pub fingerprint: String,
    pub status: u16,
    pub body: String,
    pub location: Option<String>,
    pub etag: Option<String>,
    pub replay_until: u64,
    pub expires_at: u64,
    /// The entity the first request created has been deleted: the record answers `410` and
    /// keeps nothing else of the response (no personal data outlives its entity).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gone: bool,
}

impl IdempotencyRecord {
    /// What a record becomes when the entity its request created is deleted.
    pub fn tombstone(key: Key, expires_at: u64) -> Self {
        Self {
            key,
            fingerprint: String::new(),
            status: 410,
            body: String::new(),
            location: None,
            etag: None,
            replay_until: 0,
            expires_at,
            gone: true,
        }
    }
}

impl IdempotencyRecord {
    /// The route the record's key names (`register-vehicle`), as [`keys::idempotency_record`]
    /// writes it.
    pub fn route(&self) -> Option<&str> {
        let rest = self.key.pk.strip_prefix(keys::IDEMPOTENCY_PREFIX)?;
        rest.split_once('#').map(|(route, _)| route)
    }
}

impl Entity for IdempotencyRecord {
    const TYPE: &'static EntityType = &EntityType {
        name: "idempotency-record",
        version: 1,
        keys: &[KeyShape::alone(keys::IDEMPOTENCY_PREFIX)],
        lock: None,
        expiry: Expiry::Must,
        personal: &[
            PersonalField::new("body", Personal::JsonText),
            PersonalField::new("fingerprint", Personal::Digest),
        ],
        domain: Domain::OfWriter,
        display: "IdempotencyRecord",
    };

    fn key(&self) -> KeyOf<Self> {
        KeyOf::new(self.key.clone())
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_key_and_attributes(item, "record", Some, |key, attributes| Self {
            key,
            ..attributes
        })
    }
}

/// The lock of a derived id (`ID#<id>`): which route derived it. The id is in the key only.
#[derive(Debug, Clone, Serialize)]
pub struct IdLock {
    #[serde(skip)]
    pub id: Id,
    pub route: String,
}

/// An id lock's stored attributes.
#[derive(Deserialize)]
struct IdLockAttributes {
    route: String,
}

impl Entity for IdLock {
    const TYPE: &'static EntityType = &EntityType {
        name: "id-lock",
        version: 1,
        keys: &[KeyShape::alone(keys::ID_PREFIX)],
        lock: Some(Lock::DerivedId),
        expiry: Expiry::Never,
        personal: &[],
        domain: Domain::OfWriter,
        display: "IdLock",
    };

    fn key(&self) -> KeyOf<Self> {
        KeyOf::new(keys::id_lock(&self.id))
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_key_and_attributes(
            item,
            "id",
            |key| Id::parse(key.pk.strip_prefix(keys::ID_PREFIX)?).ok(),
            |id, IdLockAttributes { route }| Self { id, route },
        )
    }
}
