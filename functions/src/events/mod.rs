//! Domain events: every committed change becomes exactly one event, published to EventBridge.
//!
//! A route writes its event as one outbox item ([`outbox`], [`crate::recording`]) in the same
//! `TransactWriteItems` as the change, so a change never exists without its event, nor an event
//! without its change (AWS delivers a transaction's stream records item by item, not together: an
//! event rebuilt from several records could be half seen). The one change that is a single item's
//! single write, the marker moving a loan into the overdue index, is its own event: [`stream`]
//! reads it from that loan's stream record, so marking a loan costs no second write.
//!
//! The table's stream feeds the function `publish-events` ([`crate::publish_events`]), which sends
//! every event to the bus named by `EVENT_BUS_NAME` ([`bus`]) with `PutEvents`, and reports the
//! records it could not publish (`batchItemFailures`). Delivery is at least once: a record sent
//! again carries the same `eventId`.

pub mod archive;
pub mod bus;
pub mod mapping;
pub mod outbox;
pub mod stream;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// What happened: every event's `detail-type`, with its `source` and the type of its subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    VehicleRegistered,
    VehiclePlateChanged,
    VehicleRetired,
    AccountCreated,
    AccountEmailChanged,
    AccountUsernameChanged,
    AccountDeleted,
    ResourceCreated,
    ResourceChanged,
    BranchCreated,
    BookAdded,
    BookCorrected,
    CopyAdded,
    PatronRegistered,
    PatronCardReissued,
    PatronTierChanged,
    PatronRemoved,
    LoanCheckedOut,
    LoanReturned,
    LoanRenewed,
    LoanOverdue,
}

impl EventType {
    /// The `detail-type`, and the detail's `type`.
    pub fn name(self) -> &'static str {
        use EventType::*;
        match self {
            VehicleRegistered => "VehicleRegistered",
            VehiclePlateChanged => "VehiclePlateChanged",
            VehicleRetired => "VehicleRetired",
            AccountCreated => "AccountCreated",
            AccountEmailChanged => "AccountEmailChanged",
            AccountUsernameChanged => "AccountUsernameChanged",
            AccountDeleted => "AccountDeleted",
            ResourceCreated => "ResourceCreated",
            ResourceChanged => "ResourceChanged",
            BranchCreated => "BranchCreated",
            BookAdded => "BookAdded",
            BookCorrected => "BookCorrected",
            CopyAdded => "CopyAdded",
            PatronRegistered => "PatronRegistered",
            PatronCardReissued => "PatronCardReissued",
            PatronTierChanged => "PatronTierChanged",
            PatronRemoved => "PatronRemoved",
            LoanCheckedOut => "LoanCheckedOut",
            LoanReturned => "LoanReturned",
            LoanRenewed => "LoanRenewed",
            LoanOverdue => "LoanOverdue",
        }
    }

    /// The event's `source`: one per domain, so a rule can take a whole domain.
    pub fn source(self) -> &'static str {
        use EventType::*;
        match self {
            VehicleRegistered | VehiclePlateChanged | VehicleRetired => "singlet.fleet",
            AccountCreated | AccountEmailChanged | AccountUsernameChanged | AccountDeleted => {
                "singlet.accounts"
            }
            ResourceCreated | ResourceChanged => "singlet.audit",
            BranchCreated | BookAdded | BookCorrected | CopyAdded | PatronRegistered
            | PatronCardReissued | PatronTierChanged | PatronRemoved => "singlet.library",
            LoanCheckedOut | LoanReturned | LoanRenewed | LoanOverdue => "singlet.loans",
        }
    }

    /// `subject.type`, and the stem of its id's name in a deletion's `data` (`vehicleId`).
    pub fn subject_type(self) -> &'static str {
        use EventType::*;
        match self {
            VehicleRegistered | VehiclePlateChanged | VehicleRetired => "vehicle",
            AccountCreated | AccountEmailChanged | AccountUsernameChanged | AccountDeleted => {
                "account"
            }
            ResourceCreated | ResourceChanged => "resource",
            BranchCreated => "branch",
            BookAdded | BookCorrected => "book",
            CopyAdded => "copy",
            PatronRegistered | PatronCardReissued | PatronTierChanged | PatronRemoved => "patron",
            LoanCheckedOut | LoanReturned | LoanRenewed | LoanOverdue => "loan",
        }
    }
}

/// What an event is about: `{"type": "vehicle", "id": "<vehicleId>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
}

/// An event's `detail`, as every rule target receives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Detail {
    pub event_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub subject: Subject,
    /// The token's `sub`; `mark-overdue` for the marker.
    pub actor: String,
    /// ISO-8601 UTC with milliseconds.
    pub occurred_at: String,
    /// The entity as the API returns it after the change; `{"<type>Id": "…"}` for a deletion.
    pub data: serde_json::Value,
    /// `ResourceCreated` and `ResourceChanged`: the history event's sequence (the version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
}

/// An event ready to publish: its `source`, `detail-type` and `detail` (as `PutEvents` takes it:
/// JSON text).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub source: String,
    pub detail_type: String,
    pub detail: String,
    /// The detail's `eventId`, and its subject (`vehicle#<id>`), which orders its events.
    pub event_id: String,
    pub subject: String,
}

impl Detail {
    /// A new event about the subject `id` of `kind`'s type, by `actor`, now, with a fresh id.
    pub fn new(kind: EventType, id: &str, actor: &str, data: serde_json::Value) -> Self {
        Self {
            event_id: uuid::Uuid::new_v4().hyphenated().to_string(),
            kind: kind.name().to_owned(),
            subject: Subject {
                kind: kind.subject_type().to_owned(),
                id: id.to_owned(),
            },
            actor: actor.to_owned(),
            occurred_at: timestamp(crate::clock::now()),
            data,
            sequence: None,
        }
    }

    /// The entry that publishes this detail under `kind`'s source.
    pub fn entry(&self, kind: EventType) -> Entry {
        Entry {
            source: kind.source().to_owned(),
            detail_type: kind.name().to_owned(),
            detail: serde_json::to_string(self).expect("a detail serialises"),
            event_id: self.event_id.clone(),
            subject: format!("{}#{}", self.subject.kind, self.subject.id),
        }
    }
}

/// The event about a change of `id`: `data` is the entity as the API answers it after the change.
/// Built by the routes with [`outbox`].
pub struct Event {
    pub kind: EventType,
    pub id: String,
    pub data: serde_json::Value,
    pub sequence: Option<u64>,
}

impl Event {
    pub fn new(kind: EventType, id: impl ToString, data: &impl Serialize) -> Self {
        Self {
            kind,
            id: id.to_string(),
            data: serde_json::to_value(data).expect("entities serialise"),
            sequence: None,
        }
    }

    /// A deletion: `data` is `{"<type>Id": "<id>"}` only, so an event never outlives the
    /// personal data its entity held.
    pub fn deleted(kind: EventType, id: impl ToString) -> Self {
        let id = id.to_string();
        let field = format!("{}Id", kind.subject_type());
        Self {
            kind,
            data: serde_json::json!({ field: id }),
            id,
            sequence: None,
        }
    }

    /// The audit log's events carry the history event's sequence.
    pub fn sequence(mut self, sequence: u64) -> Self {
        self.sequence = Some(sequence);
        self
    }
}

/// `2026-12-01T10:00:00.123Z`: always three digits of milliseconds, so string order is time
/// order.
pub fn timestamp(at: OffsetDateTime) -> String {
    let seconds = crate::clock::iso(at);
    format!(
        "{}.{:03}Z",
        seconds.trim_end_matches('Z'),
        at.to_offset(time::UtcOffset::UTC).millisecond()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deletion_carries_only_its_id() {
        let event = Event::deleted(EventType::VehicleRetired, "v1");
        assert_eq!(event.data, serde_json::json!({"vehicleId": "v1"}));
    }

    #[test]
    fn times_have_milliseconds() {
        let at = OffsetDateTime::from_unix_timestamp(1_795_000_000).unwrap();
        assert_eq!(timestamp(at), "2026-11-18T11:06:40.000Z");
        let at = at + time::Duration::milliseconds(120) + time::Duration::microseconds(456);
        assert_eq!(timestamp(at), "2026-11-18T11:06:40.120Z");
    }
}
