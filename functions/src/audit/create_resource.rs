//! `POST /resources` `{resourceId, status}` → `201` state, `etag: "1"`,
//! `location: /resources/{resourceId}`.
//!
//! One `TransactWriteItems`: `CURRENT` at version 1 and `EVENT#…1` (action `create`,
//! `fromStatus: null`), each put guarded by `attribute_not_exists`. A resource that already
//! exists fails the `CURRENT` guard and is `409` `resourceId` `taken`. Safe to retry with
//! `Idempotency-Key`: the id is the client's, so a retry names the same resource and gets the
//! first response back.

use super::{CREATE_ACTION, Event, Resource, recorded, with_etag};
use crate::claims::principal;
use crate::clock;
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::events::EventType;
use crate::http::{AllValid, HandlerResult, JsonBody, created};
use crate::idempotency::{IdFrom, Idempotency, commit};
use crate::store::{Put, Transaction};
use lambda_http::Request;
use singlet_shared::{Id, Status};

/// The transaction's parts, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Current,
    FirstEvent,
    DomainEvent,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let (resource_id, status) = (
        body.required("resourceId", Id::parse),
        body.required("status", Status::parse),
    )
        .all_valid()?;
    let idempotency = Idempotency::from_request(ctx, &req, &body.value())?;

    let now = clock::now_millis();
    let resource = Resource {
        resource_id: resource_id.clone(),
        status: status.clone(),
        version: 1,
        updated_at: now,
    };
    let event = Event {
        sequence: 1,
        action: CREATE_ACTION.into(),
        actor: principal(&req).subject.clone(),
        at: now,
        from_status: None,
        to_status: status,
    };
    let response = with_etag(
        created(format!("/resources/{resource_id}"), &resource),
        &resource,
    );

    let (event, domain_event) = recorded(&req, &resource, event, EventType::ResourceCreated);
    let transaction = Transaction::new()
        .put(Part::Current, Put::new_only(&resource))
        .put(Part::FirstEvent, event)
        .put(Part::DomainEvent, domain_event);

    // The id is the client's, not derived from the key: its own guard is its lock.
    let done = commit(ctx, transaction, &idempotency, IdFrom::Request, response).await?;
    let response = done.answer(|cancelled| {
        if cancelled.failed(Part::Current) {
            return ApiError::conflict(vec![FieldError::new("resourceId", Code::Taken)]);
        }
        // An event without its `CURRENT`: nothing we write can leave one behind.
        tracing::error!(%resource_id, "a resource has events but no current state");
        ApiError::Internal
    })?;
    tracing::info!(%resource_id, status = %resource.status, "resource created");
    Ok(response)
}
