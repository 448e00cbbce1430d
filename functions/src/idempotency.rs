//! `Idempotency-Key` on every creating `POST`, written once.
//!
//! The key does three things. It becomes the transaction's `ClientRequestToken` (scoped to the
//! route), so DynamoDB itself refuses to apply one request twice within its 10-minute window.
//! It derives the server-generated id, so a retry names the same entity. And the transaction
//! that creates the entity also puts a record `IDEMPOTENCY#<route>#<key>` holding a fingerprint
//! of the request and the response it got, guarded by `attribute_not_exists`. A retry therefore
//! fails that guard (or DynamoDB's token check) and gets the recorded response back, byte for
//! byte; the same key with another request is `422`. A record replays for 10 minutes
//! (`replayUntil`); after that the key is spent and reusing it is `422`, for as long as the
//! record stays. It stays at least [`KEEP_SECONDS`] (`expiresAt`, the table's TTL attribute;
//! DynamoDB's TTL deletes it some time after that). Once it is gone the key is forgotten: a reuse
//! is a new request (for a server-generated id, the id it derives is still taken while its entity
//! exists, which is `422` again). Only a request that succeeded is recorded, so a retry of a `400`
//! or `409` runs again.

use crate::db::{ABSENT, Ctx, Item, from_item, item};
use crate::error::{ApiError, Code};
use crate::http::header_str;
use aws_sdk_dynamodb::types::{ReturnValuesOnConditionCheckFailure, TransactWriteItem};
use lambda_http::http::{HeaderName, HeaderValue, StatusCode, header};
use lambda_http::{Body, Request, Response};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use singlet_shared::{Id, Key, keys};
use std::time::{SystemTime, UNIX_EPOCH};
use uuid::Uuid;

pub const HEADER: &str = "idempotency-key";
pub const MAX_KEY_LEN: usize = 36;
/// How long a key is remembered: DynamoDB's own window for `ClientRequestToken`.
pub const WINDOW_SECONDS: u64 = 10 * 60;
/// How long a record is kept at least, so that a spent key stays refused: a day.
pub const KEEP_SECONDS: u64 = 24 * 60 * 60;

const NAMESPACE: Uuid = Uuid::from_u128(0x5a1e_7e1d_0000_4000_8000_516e_676c_6574);

pub struct Idempotency {
    route: &'static str,
    key: Id,
    fingerprint: String,
}

/// What a record keeps of the first response.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    fingerprint: String,
    status: u16,
    body: String,
    location: Option<String>,
    etag: Option<String>,
    replay_until: u64,
    expires_at: u64,
}

impl Idempotency {
    /// `None` without the header; `400` for a key that is not 1..36 of `[A-Za-z0-9_-]`.
    /// The fingerprint covers the method, the path and the body as parsed JSON, so neither
    /// white space nor field order makes two requests different.
    pub fn from_request(
        req: &Request,
        route: &'static str,
        body: &serde_json::Value,
    ) -> Result<Option<Self>, ApiError> {
        let Some(raw) = header_str(req, HEADER) else {
            return Ok(None);
        };
        let key = Id::parse(raw)
            .ok()
            .filter(|k| k.as_str().len() <= MAX_KEY_LEN)
            .ok_or(ApiError::field("Idempotency-Key", Code::Invalid))?;
        let mut hash = Sha256::new();
        hash.update(req.method().as_str());
        hash.update([0]);
        hash.update(req.uri().path());
        hash.update([0]);
        canonical(body, &mut hash);
        let fingerprint = format!("{:x}", hash.finalize());
        Ok(Some(Self {
            route,
            key,
            fingerprint,
        }))
    }

    fn uuid(&self) -> Uuid {
        Uuid::new_v5(
            &NAMESPACE,
            format!("{}\0{}", self.route, self.key).as_bytes(),
        )
    }

    /// The id of the entity this request creates: the same for every retry.
    pub fn derived_id(&self) -> Id {
        Id::parse(&self.uuid().simple().to_string()).expect("hex is a valid id")
    }

    /// The `ClientRequestToken`: 36 characters, scoped to the route.
    pub fn token(&self) -> String {
        self.uuid().hyphenated().to_string()
    }

    pub fn record_key(&self) -> Key {
        keys::idempotency_record(self.route, &self.key)
    }

    pub(crate) fn record(&self, response: &Response<Body>) -> Item {
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
        let record = Record {
            fingerprint: self.fingerprint.clone(),
            status: response.status().as_u16(),
            body,
            location: text(header::LOCATION),
            etag: text(header::ETAG),
            replay_until: now_seconds() + WINDOW_SECONDS,
            expires_at: now_seconds() + KEEP_SECONDS,
        };
        item(&self.record_key(), &record)
    }

    /// The recorded response, or `422` if the key was used for another request or is spent.
    pub(crate) fn replay(&self, stored: &Item) -> Result<Response<Body>, ApiError> {
        let record: Record = from_item(stored)?;
        if record.fingerprint != self.fingerprint {
            return Err(ApiError::Unprocessable(
                "this Idempotency-Key was already used with a different request".into(),
            ));
        }
        if record.replay_until <= now_seconds() {
            return Err(spent_key());
        }
        tracing::info!(route = self.route, key = %self.key, "replayed an idempotent request");
        let mut response = Response::new(Body::Text(record.body));
        *response.status_mut() =
            StatusCode::from_u16(record.status).map_err(|_| ApiError::Internal)?;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
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

pub(crate) fn record_put(ctx: &Ctx, record: Item) -> TransactWriteItem {
    let put = ctx
        .put(record)
        .condition_expression(ABSENT)
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .expect("the record put is complete");
    TransactWriteItem::builder().put(put).build()
}

fn now_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}
