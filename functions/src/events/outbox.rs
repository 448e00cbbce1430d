//! The outbox item ([`OutboxItem`], an entity of the model): one event, whole, written in the
//! same `TransactWriteItems` as its change.
//!
//! `OUTBOX#<subjectType>#<subjectId>` / `EVENT#<eventId>`: a subject's events share a partition,
//! so their stream records come in the order they were written, and the publisher keeps that
//! order. The item holds the event as `PutEvents` takes it (`source`, `detailType`, `detail` as
//! JSON text), so publishing it re-encodes nothing. It expires a day after it was written
//! (`expiresAt`, the table's TTL attribute): the stream keeps a record 24 hours, so by then it
//! has been published or can no longer be, and the item is only the table's record of it. An
//! entity's deletion deletes its outbox items at once, but the deletion's own
//! ([`crate::recording::forgetting`]): they hold the entity, and the stream has their events.

use super::{Detail, Entry, Event};
use crate::model::Entity;
use singlet_shared::keys;

pub use crate::model::outbox::OutboxItem;

/// The entity type an outbox item carries in `_et`.
pub const ENTITY_TYPE: &str = OutboxItem::TYPE.name;
/// Its schema version, in `_v`.
pub const VERSION: u32 = OutboxItem::TYPE.version;
/// How long an outbox item stays after it was written: a day, the stream's own retention.
pub const KEEP_SECONDS: i64 = 24 * 60 * 60;

impl OutboxItem {
    /// The entry to publish; `None` when its detail is not an event's.
    pub fn entry(&self) -> Option<Entry> {
        let detail: Detail = serde_json::from_str(&self.detail).ok()?;
        Some(Entry {
            source: self.source.clone(),
            detail_type: self.detail_type.clone(),
            detail: self.detail.clone(),
            subject: format!("{}#{}", detail.subject.kind, detail.subject.id),
            event_id: detail.event_id,
        })
    }

    /// `event`'s outbox item, by `actor`, written now.
    pub fn of(actor: &str, event: Event) -> Self {
        let detail = Detail::new(event.kind, &event.id, actor, event.data.clone());
        Self::at(actor, event, &detail.event_id, crate::clock::now())
    }

    /// `event`'s outbox item with the id `event_id`, as if it happened at `at`: for a writer that
    /// must write the same item again when it is run again (`import`, whose rows are created
    /// once whatever the number of runs).
    pub fn at(actor: &str, event: Event, event_id: &str, at: time::OffsetDateTime) -> Self {
        let mut detail = Detail::new(event.kind, &event.id, actor, event.data);
        detail.event_id = event_id.to_owned();
        detail.occurred_at = super::timestamp(at);
        detail.sequence = event.sequence;
        let entry = detail.entry(event.kind);
        Self {
            key: keys::outbox(&detail.subject.kind, &detail.subject.id, &detail.event_id),
            source: entry.source,
            detail_type: entry.detail_type,
            detail: entry.detail,
            expires_at: at.unix_timestamp() + KEEP_SECONDS,
        }
    }
}
