//! `PATCH /resources/{resourceId}` `{status, action}` with `if-match: "<version>"` →
//! `200` the new state with its `etag`; `404`; `428` without `if-match`; `412` when the version
//! is not the current one, the body naming the current version (`currentVersion`, and its
//! `etag`).
//!
//! First one `GetItem` of `CURRENT`: the event must record `fromStatus`, which only the stored
//! state knows. The read also answers a missing resource (`404`) and an `if-match` that is
//! already stale (`412`) without writing anything. Then one `TransactWriteItems`:
//! - update `CURRENT` only if `version = :expected`, to version expected + 1 with the new status
//!   and `updatedAt`;
//! - put `EVENT#<expected + 1>` only if `attribute_not_exists`.
//!
//! The guard, not the read, decides: of any number of writers sending one version, exactly one
//! commits. Each other one fails the guard, and the update asks for the item as it stood
//! (`ALL_OLD` on condition failure), so its `412` names the current version with no second
//! read. Since the version only moves together with its event, `version = :expected` also
//! proves that the status read is still the status stored. A cancellation for any other reason
//! (a transaction conflict, throttling) is never a `412`: the shared transaction code makes it a
//! `503` to retry.
//!
//! A change may keep the status as it is (an action such as `comment` or `review`): it is still
//! a change, with its own event and version. A `PATCH` is not an `Idempotency-Key` route: its
//! `if-match` already makes a retry harmless (a retry of a change that committed gets `412`
//! naming the version it produced).

use super::{Event, MAX_TEXT_LEN, Resource, load, recorded, state};
use crate::claims::principal;
use crate::clock;
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::events::EventType;
use crate::http::{AllValid, HandlerResult, JsonBody, if_match, path_id};
use crate::store::{Commit, Condition, Transaction, Update, decode};
use lambda_http::Request;
use singlet_shared::Status;
use singlet_shared::keys::MAX_VERSION;

/// The transaction's parts, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Current,
    Event,
    DomainEvent,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let (resource_id, status, action, expected) = (
        path_id(&req, "resourceId"),
        body.required("status", Status::parse),
        body.text("action", MAX_TEXT_LEN),
        if_match(&req, MAX_VERSION),
    )
        .all_valid()?;
    let expected = expected.ok_or(ApiError::PreconditionRequired)?;

    let before = load(ctx, &resource_id).await?;
    if before.version != expected {
        return Err(ApiError::PreconditionFailed {
            current_version: before.version,
        });
    }
    if expected >= MAX_VERSION {
        // The next event number would no longer sort: this resource takes no more changes.
        return Err(ApiError::conflict(vec![FieldError::new(
            "resourceId",
            Code::LimitReached,
        )]));
    }

    let next = expected + 1;
    let now = clock::now_millis();
    let after = Resource {
        resource_id: resource_id.clone(),
        status: status.clone(),
        version: next,
        updated_at: now,
    };
    let event = Event {
        sequence: next,
        action,
        actor: principal(&req).subject.clone(),
        at: now,
        from_status: Some(before.status.clone()),
        to_status: status,
    };

    let (event, domain_event) = recorded(&req, &after, event, EventType::ResourceChanged);
    let commit = Transaction::new()
        .update(
            Part::Current,
            Update::<Resource>::at(Resource::key_of(&resource_id))
                .set(Resource::STATUS, &after.status)
                .set(Resource::VERSION, next)
                .set(Resource::UPDATED_AT, now)
                .when(Condition::equals(Resource::VERSION, expected))
                .old_on_failure(),
        )
        .put(Part::Event, event)
        .put(Part::DomainEvent, domain_event)
        .commit(ctx)
        .await?;

    match commit {
        Commit::Done => {
            tracing::info!(
                %resource_id,
                version = next,
                from = %before.status,
                to = %after.status,
                "resource changed"
            );
            Ok(state(&after))
        }
        // Another change committed between our read and our write: its version, from ALL_OLD.
        Commit::Cancelled(cancelled) if cancelled.failed(Part::Current) => {
            match cancelled.old(Part::Current) {
                Some(old) => Err(ApiError::PreconditionFailed {
                    current_version: decode::<Resource>(old)?.version,
                }),
                None => Err(ApiError::not_found("resource")),
            }
        }
        // `CURRENT` was at the version we expected, yet its next event exists.
        Commit::Cancelled(_) => {
            tracing::error!(%resource_id, version = next, "an event exists beyond the current version");
            Err(ApiError::Internal)
        }
    }
}
