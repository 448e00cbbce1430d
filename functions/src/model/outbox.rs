//! The outbox item (`OUTBOX#<subjectType>#<subjectId>` / `EVENT#<eventId>`): one domain event,
//! whole, written in the same transaction as its change (see `crate::events`). It holds the
//! event as `PutEvents` takes it (`source`, `detailType`, `detail` as JSON text) and expires a
//! day after it was written (`expiresAt`), the stream's own retention.

use super::{
    Domain, Entity, EntityType, Expiry, Item, KeyOf, KeyShape, Personal, PersonalField, SortShape,
    from_key_and_attributes,
};
use serde::{Deserialize, Serialize};
use singlet_shared::{Key, keys};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxItem {
    /// Made from the event's subject and id, which its `detail` holds: kept whole here rather
    /// than parsed back out of the JSON text.
    #[serde(skip)]
    pub key: Key,
    pub source: String,
    pub detail_type: String,
    /// The event's `detail`, as JSON text.
    pub detail: String,
    /// Epoch seconds.
    pub expires_at: i64,
}

impl Entity for OutboxItem {
    const TYPE: &'static EntityType = &EntityType {
        name: "outbox",
        version: 1,
        keys: &[KeyShape::new(
            keys::OUTBOX_PREFIX,
            SortShape::Prefix(keys::EVENT_PREFIX),
        )],
        lock: None,
        expiry: Expiry::Must,
        personal: &[PersonalField::new("detail", Personal::JsonText)],
        domain: Domain::OfWriter,
        display: "DomainEvent",
    };

    fn key(&self) -> KeyOf<Self> {
        KeyOf::new(self.key.clone())
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_key_and_attributes(item, "outbox item", Some, |key, attributes| Self {
            key,
            ..attributes
        })
    }
}
