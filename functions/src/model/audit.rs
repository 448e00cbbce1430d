//! The change & audit log's entities: a resource's present state and each event of its history.

use super::{
    Domain, Entity, EntityType, Expiry, Item, KeyOf, KeyShape, Personal, PersonalField, SortShape,
    fields, from_attributes, from_key_and_attributes,
};
use serde::{Deserialize, Serialize};
use singlet_shared::{Id, Status, keys};

/// A resource's present state (`RESOURCE#<resourceId>`/`CURRENT`), and the body of every route
/// that returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    pub resource_id: Id,
    pub status: Status,
    pub version: u64,
    /// Epoch milliseconds of the last change.
    pub updated_at: i64,
}

impl Resource {
    /// The key of the present state of the resource `resource_id`.
    pub fn key_of(resource_id: &Id) -> KeyOf<Self> {
        KeyOf::new(keys::resource_current(resource_id))
    }
}

impl Entity for Resource {
    const TYPE: &'static EntityType = &EntityType {
        name: "resource",
        version: 1,
        keys: &[KeyShape::new(
            keys::RESOURCE_PREFIX,
            SortShape::Exactly(keys::CURRENT),
        )],
        lock: None,
        expiry: Expiry::Never,
        personal: &[],
        domain: Domain::Audit,
        display: "CurrentState",
    };

    fn key(&self) -> KeyOf<Self> {
        Self::key_of(&self.resource_id)
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
    }
}

fields!(Resource, serde Resource, test resource_fields_are_serde_names {
    STATUS = "status",
    VERSION = "version",
    UPDATED_AT = "updatedAt",
});

/// One change, as the history lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// The version this change produced.
    pub sequence: u64,
    pub action: String,
    pub actor: String,
    /// Epoch milliseconds; the `updatedAt` of the state it produced.
    pub at: i64,
    /// `null` for the event that created the resource.
    pub from_status: Option<Status>,
    pub to_status: Status,
}

/// A stored event, `RESOURCE#<resourceId>`/`EVENT#<seq>`: the event, under its resource's
/// partition. The resource's id is in the key only, as it always was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceEvent {
    #[serde(skip)]
    pub resource_id: Id,
    #[serde(flatten)]
    pub event: Event,
}

impl Entity for ResourceEvent {
    const TYPE: &'static EntityType = &EntityType {
        name: "resource-event",
        version: 1,
        keys: &[KeyShape::new(
            keys::RESOURCE_PREFIX,
            SortShape::Prefix(keys::EVENT_PREFIX),
        )],
        lock: None,
        expiry: Expiry::Never,
        personal: &[PersonalField::new("actor", Personal::Subject)],
        domain: Domain::Audit,
        display: "ChangeEvent",
    };

    fn key(&self) -> KeyOf<Self> {
        KeyOf::new(keys::resource_event(&self.resource_id, self.event.sequence))
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_key_and_attributes(
            item,
            "resource",
            |key| Id::parse(key.pk.strip_prefix(keys::RESOURCE_PREFIX)?).ok(),
            |resource_id, event| Self { resource_id, event },
        )
    }
}
