//! Recording a route's event: the put of its outbox item ([`crate::events::outbox`]), the one
//! part a route adds to its transaction so that the change and its event commit together.
//!
//! Here, above the store, rather than beside the outbox item in `events`: the events module is
//! below the context and the store (the context holds the publisher's bus and archive), and a
//! put is the store's.

use crate::claims::principal;
use crate::events::Event;
use crate::events::outbox::OutboxItem;
use crate::store::Put;
use lambda_http::Request;

/// The put of `event`'s outbox item, its `actor` the request's caller (the token's `sub`): the
/// one part a route adds to its transaction.
pub fn outbox(req: &Request, event: Event) -> Put {
    outbox_by(&principal(req).subject, event)
}

/// The put of `event`'s outbox item, by `actor`. Its key holds a fresh event id, so the put
/// only ever creates.
pub fn outbox_by(actor: &str, event: Event) -> Put {
    Put::new_only(&OutboxItem::of(actor, event))
}
