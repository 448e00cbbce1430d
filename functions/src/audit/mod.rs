//! The change & audit log: a resource's present state and its append-only history, with
//! optimistic locking.
//!
//! One partition per resource, `RESOURCE#<resourceId>`, holds exactly two kinds of item:
//! `CURRENT` (status, version, updatedAt) and one `EVENT#<seq>` per change, `seq` zero-padded to
//! [`singlet_shared::keys::SEQUENCE_WIDTH`] digits so that string order is numeric order.
//! `CURRENT` sorts before every `EVENT#`, so one `Query` on the partition reads the present and
//! then the history, oldest first.
//!
//! The version is the number of events: a change updates `CURRENT` only if its version is the one
//! the client read (`if-match`), sets it to the next number, and appends the event with that
//! number (`attribute_not_exists`), in one transaction. Two writers can therefore never share a
//! number, a version never exists without its event, and the history has no gap.

pub mod change_resource;
pub mod create_resource;
pub mod get_resource;
pub mod resource_history;

use crate::context::Ctx;
use crate::error::ApiError;
use crate::events::EventType;
use crate::headers::etag;
use crate::http::ok;
use crate::recording::outbox;
use crate::store::Put;
use lambda_http::http::header;
use lambda_http::{Body, Request, Response};
use singlet_shared::Id;

pub use crate::model::audit::{Event, Resource, ResourceEvent};

/// The action recorded by the event that creates a resource.
pub const CREATE_ACTION: &str = "create";
/// The longest `action` and `actor`, in characters.
pub const MAX_TEXT_LEN: usize = 200;

/// One strongly consistent read of `CURRENT`, or `404`.
pub async fn load(ctx: &Ctx, resource_id: &Id) -> Result<Resource, ApiError> {
    ctx.get(&Resource::key_of(resource_id))
        .await?
        .ok_or_else(|| ApiError::not_found("resource"))
}

/// `response` with the `etag` of `resource`'s version, the value a change sends as `if-match`.
pub fn with_etag(mut response: Response<Body>, resource: &Resource) -> Response<Body> {
    response
        .headers_mut()
        .insert(header::ETAG, etag(resource.version));
    response
}

/// `200` state with its `etag`.
pub fn state(resource: &Resource) -> Response<Body> {
    with_etag(ok(resource), resource)
}

/// The two puts that record the change that made `state`, beside its `CURRENT`: its `event`
/// (`EVENT#<version>`, only if there is none: a version has one event), and its domain event
/// `kind` carrying `state`, numbered by its version.
pub fn recorded(req: &Request, state: &Resource, event: Event, kind: EventType) -> (Put, Put) {
    let resource_id = &state.resource_id;
    (
        Put::new_only(&ResourceEvent {
            resource_id: resource_id.clone(),
            event,
        }),
        outbox(
            req,
            crate::events::Event::new(kind, resource_id, state).sequence(state.version),
        ),
    )
}
