//! The outbox item: one event, whole, written in the same `TransactWriteItems` as its change.
//!
//! `OUTBOX#<subjectType>#<subjectId>` / `EVENT#<eventId>`: a subject's events share a partition,
//! so their stream records come in the order they were written, and the publisher keeps that
//! order. The item holds the event as `PutEvents` takes it (`source`, `detailType`, `detail` as
//! JSON text), so publishing it re-encodes nothing. It expires a day after it was written
//! (`expiresAt`, the table's TTL attribute): the stream keeps a record 24 hours, so by then it
//! has been published or can no longer be, and the item is only the table's record of it.

use super::{Detail, Entry, Event};
use crate::claims::principal;
use crate::context::Ctx;
use crate::store::item;
use aws_sdk_dynamodb::types::builders::PutBuilder;
use lambda_http::Request;
use serde::{Deserialize, Serialize};
use singlet_shared::keys;

/// The entity type an outbox item carries in `_et`.
pub const ENTITY_TYPE: &str = "outbox";
/// Its schema version, in `_v`.
pub const VERSION: u32 = 1;
/// How long an outbox item stays after it was written: a day, the stream's own retention.
pub const KEEP_SECONDS: i64 = 24 * 60 * 60;

/// The stored outbox item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxItem {
    #[serde(rename = "_et")]
    pub entity_type: String,
    #[serde(rename = "_v")]
    pub version: u32,
    pub source: String,
    pub detail_type: String,
    /// The event's `detail`, as JSON text.
    pub detail: String,
    /// Epoch seconds.
    pub expires_at: i64,
}

impl OutboxItem {
    /// The entry to publish; `None` when the item is not an outbox item of a version this code
    /// reads, or its detail is not an event's.
    pub fn entry(&self) -> Option<Entry> {
        if self.entity_type != ENTITY_TYPE || self.version != VERSION {
            return None;
        }
        let detail: Detail = serde_json::from_str(&self.detail).ok()?;
        Some(Entry {
            source: self.source.clone(),
            detail_type: self.detail_type.clone(),
            detail: self.detail.clone(),
            subject: format!("{}#{}", detail.subject.kind, detail.subject.id),
            event_id: detail.event_id,
        })
    }
}

/// The put of `event`'s outbox item, its `actor` the request's caller (the token's `sub`): the
/// one part a route adds to its transaction.
pub fn outbox(ctx: &Ctx, req: &Request, event: Event) -> PutBuilder {
    outbox_by(ctx, &principal(req).subject, event)
}

/// The put of `event`'s outbox item, by `actor`.
pub fn outbox_by(ctx: &Ctx, actor: &str, event: Event) -> PutBuilder {
    let mut detail = Detail::new(event.kind, &event.id, actor, event.data);
    detail.sequence = event.sequence;
    let entry = detail.entry(event.kind);
    let stored = OutboxItem {
        entity_type: ENTITY_TYPE.to_owned(),
        version: VERSION,
        source: entry.source,
        detail_type: entry.detail_type,
        detail: entry.detail,
        expires_at: crate::clock::now().unix_timestamp() + KEEP_SECONDS,
    };
    let key = keys::outbox(&detail.subject.kind, &detail.subject.id, &detail.event_id);
    ctx.put(item(&key, &stored))
}
