//! `Idempotency-Key` on the routes that take one (every creating `POST`, return and renew),
//! written once.
//!
//! A key belongs to its caller: its scope is the route, the token's issuer and its subject
//! ([`crate::ids::Caller`]), so another subject's same key is another key, which neither replays
//! the first caller's answer nor blocks it. From that scope and the key, an id is derived under
//! the server's secret (`crate::ids::IdKey`), and it does three things:
//! - it names the new entity, so every retry names the same entity and no client can compute
//!   another's id from a key it guessed; the id's lock `ID#<id>` is put with the entity and never
//!   deleted, so a derived id is never held by two entities, nor comes back after its entity is
//!   deleted, whatever becomes of the key's record;
//! - it is the transaction's `ClientRequestToken`, so DynamoDB itself refuses to apply one
//!   request twice within its 10-minute window;
//! - it keys the record `IDEMPOTENCY#<route>#<id>` the transaction also puts, holding a fingerprint of
//!   the request and the response it got, guarded by `attribute_not_exists`. A retry fails that
//!   guard (or DynamoDB's token check) and gets the recorded response back, byte for byte, with
//!   `idempotent-replayed: true`; the same key with another request is `422`.
//!
//! A record replays for 10 minutes (`replayUntil`); after that the key is spent and reusing it is
//! `422` for as long as the record stays: at least [`KEEP_SECONDS`] (`expiresAt`, the table's TTL
//! attribute). Only a request that succeeded is recorded, so a retry of a `400` or `409` runs
//! again.
//!
//! A recorded `201` holds the created entity, personal data included. Because the record is keyed
//! by the entity's own id, the route that deletes the entity overwrites the record in the same
//! transaction ([`forgetting`]) with a tombstone holding nothing but its expiry: a replay is then
//! `410`, and nothing of the deleted entity lives on in it.

use crate::claims::principal;
use crate::context::Ctx;
use crate::error::{ApiError, Code};
use crate::http::{header_str, served_route};
use crate::ids::Caller;
use crate::model::idempotency::{IdLock, IdempotencyRecord as Record};
use crate::store::{Cancelled, Commit, Item, Put, TokenCommit, Transaction, decode};
use lambda_http::http::{HeaderName, HeaderValue, StatusCode, header};
use lambda_http::{Body, Request, Response};
use sha2::{Digest, Sha256};
use singlet_shared::{Id, Key, keys};
use uuid::Uuid;

pub const HEADER: &str = "idempotency-key";
/// The header marking a replayed answer.
pub const REPLAYED: &str = "idempotent-replayed";
pub const MAX_KEY_LEN: usize = 36;
/// How long a key is remembered: DynamoDB's own window for `ClientRequestToken`.
pub const WINDOW_SECONDS: u64 = 10 * 60;
/// How long a record is kept at least, so that a spent key stays refused: a day.
pub const KEEP_SECONDS: u64 = 24 * 60 * 60;

pub struct Idempotency {
    route: &'static str,
    fingerprint: String,
    derived: Uuid,
}

impl Idempotency {
    /// `None` without the header (or on a route that takes none); `400` for a key that is not
    /// 1..36 of `[A-Za-z0-9_-]`. The fingerprint covers the caller, the method, the path and the
    /// body as parsed JSON, so neither white space nor field order makes two requests different.
    /// A route that takes no body passes `Null`: what was sent is fingerprinted then, so a body
    /// where the first request had none is another request.
    pub fn from_request(
        ctx: &Ctx,
        req: &Request,
        body: &serde_json::Value,
    ) -> Result<Option<Self>, ApiError> {
        let route = served_route(req);
        let Some(raw) = header_str(req, HEADER).filter(|_| route.idempotent) else {
            return Ok(None);
        };
        let key = Id::parse(raw)
            .ok()
            .filter(|k| k.as_str().len() <= MAX_KEY_LEN)
            .ok_or(ApiError::field("Idempotency-Key", Code::Invalid))?;
        let caller = principal(req);
        let caller = Caller {
            issuer: &caller.issuer,
            subject: &caller.subject,
        };
        let mut hash = Sha256::new();
        for part in [caller.issuer, caller.subject, req.method().as_str()] {
            hash.update(part);
            hash.update([0]);
        }
        hash.update(req.uri().path());
        hash.update([0]);
        let sent: &[u8] = req.body().as_ref();
        match (body, serde_json::from_slice::<serde_json::Value>(sent)) {
            (serde_json::Value::Null, Ok(parsed)) => canonical(&parsed, &mut hash),
            (serde_json::Value::Null, Err(_)) if !sent.is_empty() => hash.update(sent),
            (body, _) => canonical(body, &mut hash),
        }
        let fingerprint = format!("{:x}", hash.finalize());
        let derived = ctx.ids.uuid(route.function, caller, &key);
        Ok(Some(Self {
            route: route.function,
            fingerprint,
            derived,
        }))
    }

    /// The id of the entity this request creates: the same for every retry.
    pub fn derived_id(&self) -> Id {
        Id::parse(&self.derived.simple().to_string()).expect("hex is a valid id")
    }

    /// The `ClientRequestToken`: 36 characters, scoped to the route.
    fn token(&self) -> String {
        self.derived.hyphenated().to_string()
    }

    fn record_key(&self) -> Key {
        keys::idempotency_record(self.route, &self.derived_id())
    }

    fn record(&self, response: &Response<Body>) -> Record {
        let text = |name: HeaderName| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let body = match response.body() {
            Body::Text(text) => text.clone(),
            _ => String::new(),
        };
        Record {
            key: self.record_key(),
            fingerprint: self.fingerprint.clone(),
            status: response.status().as_u16(),
            body,
            location: text(header::LOCATION),
            etag: text(header::ETAG),
            replay_until: now_seconds() + WINDOW_SECONDS,
            expires_at: now_seconds() + KEEP_SECONDS,
            gone: false,
        }
    }

    /// The recorded response, or `422` if the key was used for another request or is spent.
    fn replay(&self, stored: &Item) -> Result<Response<Body>, ApiError> {
        let record: Record = decode(stored)?;
        if record.gone {
            return Err(ApiError::Gone);
        }
        if record.fingerprint != self.fingerprint {
            return Err(ApiError::Unprocessable(
                "this Idempotency-Key was already used with a different request".into(),
            ));
        }
        if record.replay_until <= now_seconds() {
            return Err(spent_key());
        }
        tracing::info!(route = self.route, "replayed an idempotent request");
        let mut response = Response::new(Body::Text(record.body));
        *response.status_mut() =
            StatusCode::from_u16(record.status).map_err(|_| ApiError::Internal)?;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(REPLAYED, HeaderValue::from_static("true"));
        for (name, value) in [
            (header::LOCATION, record.location),
            (header::ETAG, record.etag),
        ] {
            if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
                headers.insert(name, value);
            }
        }
        Ok(response)
    }
}

/// The response recorded for this key, if a first request with it committed: for a change (a
/// return, a renewal) that a retry could not repeat, since the first one changed what it reads.
pub async fn recorded(
    ctx: &Ctx,
    idempotency: Option<&Idempotency>,
) -> Result<Option<Response<Body>>, ApiError> {
    let Some(idempotency) = idempotency else {
        return Ok(None);
    };
    match live_record(ctx, idempotency).await? {
        Some(stored) => idempotency.replay(&stored).map(Some),
        None => Ok(None),
    }
}

/// The key's record, unless it expired (`expiresAt` passed): an expired record is not there,
/// though TTL deletes it only later.
async fn live_record(ctx: &Ctx, idempotency: &Idempotency) -> Result<Option<Item>, ApiError> {
    ctx.get_live_item(&idempotency.record_key(), now_seconds() as i64)
        .await
}

/// `transaction` with, as `part`, the tombstone a route that deletes an entity adds: when the
/// entity's id was derived from an `Idempotency-Key`, the record of the route that created it
/// (the `tombstones` its route declares, [`crate::http::ServedRoute`]) becomes a tombstone,
/// kept for as long as a record is, so a replay of the create is `410` and no personal data
/// stays in the record. Nothing is added for an id made at random, which no record names.
pub fn forgetting<P: Copy + PartialEq + std::fmt::Debug>(
    transaction: Transaction<P>,
    part: P,
    req: &Request,
    entity_id: &Id,
) -> Transaction<P> {
    let created_by = served_route(req).tombstones.expect(
        "a route that forgets its entity's record declares `tombstones` in the route table",
    );
    if !crate::ids::is_derived(entity_id) {
        return transaction;
    }
    transaction.put(
        part,
        Put::new(&Record::tombstone(
            keys::idempotency_record(created_by, entity_id),
            now_seconds() + KEEP_SECONDS,
        )),
    )
}

/// A transaction's parts, and the two this module adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tagged<P> {
    Part(P),
    Record,
    IdLock,
}

/// How an idempotent write ([`commit`]) ended.
pub enum Outcome<P> {
    /// The response to send: this request's, or the one recorded for the first request with
    /// its `Idempotency-Key`, byte for byte.
    Done(Response<Body>),
    /// Conditions of the pattern's own parts failed.
    Cancelled(Cancelled<P>),
}

impl<P> Outcome<P> {
    /// The answer to the request: the response when the write was done (or replayed), else the
    /// error `refused` makes of the parts whose conditions failed (a `409` naming the values
    /// taken, a `404` for a parent that is gone, [`spent_key`] for a derived id that exists).
    /// With [`commit`], what every creating route ends with.
    pub fn answer(
        self,
        refused: impl FnOnce(Cancelled<P>) -> ApiError,
    ) -> Result<Response<Body>, ApiError> {
        match self {
            Outcome::Done(response) => Ok(response),
            Outcome::Cancelled(cancelled) => Err(refused(cancelled)),
        }
    }
}

/// Where the id of what a write creates comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdFrom {
    /// Derived from the `Idempotency-Key` (or made at random without one): the id's lock is
    /// put with the write, so that a key reused with another body cannot make a second entity.
    Key,
    /// The request names it (a path or body id such as an ISBN), or the write creates nothing.
    Request,
}

/// Commits a write that may carry an `Idempotency-Key`: with one, `response` is recorded under
/// the key in the same transaction, the key's token is the `ClientRequestToken`, and (when the
/// entity's id was derived from the key, [`IdFrom::Key`]) the id's lock is put with it; a retry
/// gets the first request's response back instead of a conflict.
pub async fn commit<'k, P: Copy + PartialEq + std::fmt::Debug>(
    ctx: &Ctx,
    transaction: Transaction<P>,
    idempotency: impl Into<Option<&'k Idempotency>>,
    id_from: IdFrom,
    response: Response<Body>,
) -> Result<Outcome<P>, ApiError> {
    let idempotency = idempotency.into();
    let Some(idempotency) = idempotency else {
        return Ok(match transaction.commit(ctx).await? {
            Commit::Done => Outcome::Done(response),
            Commit::Cancelled(cancelled) => Outcome::Cancelled(cancelled),
        });
    };
    // A record that expired is not there, though TTL has not deleted it yet: its key is taken
    // afresh (a derived id's lock still refuses a spent key).
    let record =
        Put::new_unless_live(&idempotency.record(&response), now_seconds() as i64).old_on_failure();
    let mut tagged = transaction.map(Tagged::Part).put(Tagged::Record, record);
    if id_from == IdFrom::Key {
        tagged = tagged.put(
            Tagged::IdLock,
            Put::new_only(&IdLock {
                id: idempotency.derived_id(),
                route: idempotency.route.to_owned(),
            }),
        );
    }
    let commit = match tagged
        .clone()
        .commit_with_token(ctx, Some(idempotency.token()))
        .await?
    {
        TokenCommit::Committed(commit) => commit,
        // Another request used this token within DynamoDB's 10 minutes: what it did is in the
        // record; if there is none, it wrote nothing, and the record's own guard is enough to run
        // once more without the token.
        TokenCommit::TokenReused => {
            if let Some(stored) = live_record(ctx, idempotency).await? {
                return idempotency.replay(&stored).map(Outcome::Done);
            }
            tagged.commit(ctx).await?
        }
    };
    match commit {
        Commit::Done => Ok(Outcome::Done(response)),
        Commit::Cancelled(cancelled) if cancelled.failed(Tagged::Record) => {
            let stored = match cancelled.old(Tagged::Record) {
                Some(stored) => stored.clone(),
                None => live_record(ctx, idempotency)
                    .await?
                    .ok_or(ApiError::Unavailable)?,
            };
            idempotency.replay(&stored).map(Outcome::Done)
        }
        // The key's record is gone, but the id it derives was used: the key is spent.
        Commit::Cancelled(cancelled) if cancelled.failed(Tagged::IdLock) => Err(spent_key()),
        Commit::Cancelled(cancelled) => Ok(Outcome::Cancelled(cancelled.map(|t| match t {
            Tagged::Part(part) => Some(part),
            _ => None,
        }))),
    }
}

/// Hashes a JSON value with object keys in sorted order at every depth, so that neither white
/// space nor field order (nor serde_json's `preserve_order` feature) changes a fingerprint.
fn canonical(value: &serde_json::Value, hash: &mut Sha256) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut fields: Vec<_> = map.iter().collect();
            fields.sort_by(|a, b| a.0.cmp(b.0));
            hash.update(b"{");
            for (name, field) in fields {
                hash.update(serde_json::to_string(name).expect("strings serialise"));
                hash.update(b":");
                canonical(field, hash);
                hash.update(b",");
            }
            hash.update(b"}");
        }
        Value::Array(items) => {
            hash.update(b"[");
            for item in items {
                canonical(item, hash);
                hash.update(b",");
            }
            hash.update(b"]");
        }
        scalar => hash.update(scalar.to_string()),
    }
}

/// `422` for a key used more than 10 minutes ago: it is spent.
pub fn spent_key() -> ApiError {
    ApiError::Unprocessable(
        "this Idempotency-Key was used more than 10 minutes ago; use a new key".into(),
    )
}

/// The id of a new entity: derived from the `Idempotency-Key` when there is one.
pub fn new_id(idempotency: Option<&Idempotency>) -> Id {
    match idempotency {
        Some(idempotency) => idempotency.derived_id(),
        None => Id::parse(&Uuid::new_v4().simple().to_string()).expect("hex is a valid id"),
    }
}

/// Now by the clock of the request being served (`crate::clock`), in epoch seconds.
fn now_seconds() -> u64 {
    crate::clock::now().unix_timestamp().max(0) as u64
}
