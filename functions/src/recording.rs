//! Recording a route's event: the put of its outbox item ([`crate::events::outbox`]), the part
//! a route adds to its transaction so that the change and its event commit together; and
//! forgetting, with a deleted entity, what the table still keeps of it beside its own items
//! (its outbox items and its creating key's record).
//!
//! Here, above the store, rather than beside the outbox item in `events`: the events module is
//! below the context and the store (the context holds the publisher's bus and archive), and a
//! put is the store's.

use crate::claims::principal;
use crate::context::Ctx;
use crate::error::ApiError;
use crate::events::outbox::OutboxItem;
use crate::events::{Event, EventType};
use crate::idempotency;
use crate::model::KeyOf;
use crate::store::{Delete, MAX_PARTS, Put, Query, Transaction};
use lambda_http::Request;
use singlet_shared::{Id, keys};

/// The put of `event`'s outbox item, its `actor` the request's caller (the token's `sub`): the
/// part a route adds to its transaction for its event.
pub fn outbox(req: &Request, event: Event) -> Put {
    outbox_by(&principal(req).subject, event)
}

/// The put of `event`'s outbox item, by `actor`. Its key holds a fresh event id, so the put
/// only ever creates.
pub fn outbox_by(actor: &str, event: Event) -> Put {
    Put::new_only(&OutboxItem::of(actor, event))
}

/// `transaction`, which deletes the entity `entity_id` and records `deleted` (its deletion
/// event), with, as `part`, what else the table keeps of the entity:
/// - the `Idempotency-Key` record that created it, made a tombstone
///   ([`idempotency::forgetting`]);
/// - its outbox items still in the table, deleted. They hold the entity as each change left
///   it, personal data included, and would otherwise stay until they expire (a day, and up to
///   two more before DynamoDB's TTL deletes them; the `Query` reads those too). Their events are not lost: the publisher
///   reads them from the stream's records, which keep them, and ignores a deleted outbox item.
///
/// One `Query` of the entity's outbox partition first. As many items as the transaction has
/// room for are deleted (about 95). Left to expire: the rest, for an entity changed more often
/// than that in the days its items stay, and an item a change racing the delete wrote after the
/// read. Every change of a vehicle (its plate), an account (its email, its username) or a patron
/// (its card, its tier) makes the delete's own condition fail instead, so it reads again; only
/// a change undone within that moment (an email changed and changed back) gets through.
pub async fn forgetting<P: Copy + PartialEq + std::fmt::Debug>(
    ctx: &Ctx,
    transaction: Transaction<P>,
    part: P,
    req: &Request,
    deleted: EventType,
    entity_id: &Id,
) -> Result<Transaction<P>, ApiError> {
    let mut transaction = idempotency::forgetting(transaction, part, req, entity_id);
    let room = MAX_PARTS.saturating_sub(transaction.len());
    if room == 0 {
        return Ok(transaction);
    }
    let partition = keys::outbox_partition(deleted.subject_type(), entity_id.as_str());
    let page = ctx
        .query(Query::table(partition).limit(room as i32))
        .await?;
    if page.last_key.is_some() {
        tracing::warn!(
            %entity_id,
            room,
            "perhaps more outbox items than the transaction has room for: any left expire"
        );
    }
    for item in &page.items {
        if let Some(key) = crate::model::key_of(item).and_then(KeyOf::<OutboxItem>::checked) {
            transaction = transaction.delete(part, Delete::at(key));
        }
    }
    Ok(transaction)
}
