//! The engine: the context built once per cold start, item conversion, the one mapping of SDK
//! failures to HTTP, and [`Transaction`], which reads a cancellation by position.

use crate::error::ApiError;
use crate::idempotency::{self, Idempotency};
use crate::paging::CursorKey;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConsumedCapacity, ReturnConsumedCapacity, TransactWriteItem,
    builders::{ConditionCheckBuilder, DeleteBuilder, PutBuilder, UpdateBuilder},
};
use lambda_http::{Body, Response};
use serde::{Serialize, de::DeserializeOwned};
use singlet_shared::schema::{PK, SK};
use singlet_shared::{IndexKey, Key, schema::Index};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tracing::{error, info, warn};

pub type Item = HashMap<String, AttributeValue>;

/// The condition of a put that claims a key: a lock, an id, a sequence number. Two writers of
/// one key can never both succeed.
pub const ABSENT: &str = "attribute_not_exists(PK)";
/// The condition that an item exists: a `ConditionCheck` on a branch or a book.
pub const PRESENT: &str = "attribute_exists(PK)";

/// Everything a handler needs, built once per cold start and shared by every request.
#[derive(Clone)]
pub struct Ctx {
    pub db: Client,
    pub table: Arc<str>,
    pub cursors: Arc<CursorKey>,
}

impl Ctx {
    pub fn new(db: Client, table: impl Into<Arc<str>>, cursors: CursorKey) -> Self {
        Self {
            db,
            table: table.into(),
            cursors: Arc::new(cursors),
        }
    }

    /// The Lambda context: the standard AWS configuration (so `AWS_ENDPOINT_URL_DYNAMODB`
    /// works), the table from `TABLE_NAME`, the cursor key from `CURSOR_KEY`.
    pub async fn from_env() -> Self {
        let table = std::env::var("TABLE_NAME")
            .unwrap_or_else(|_| singlet_shared::schema::DEFAULT_TABLE_NAME.into());
        Self::new(client_from_env(None).await, table, CursorKey::from_env())
    }

    pub fn put(&self, item: Item) -> PutBuilder {
        aws_sdk_dynamodb::types::Put::builder()
            .table_name(&*self.table)
            .set_item(Some(item))
    }

    pub fn update(&self, key: &Key) -> UpdateBuilder {
        aws_sdk_dynamodb::types::Update::builder()
            .table_name(&*self.table)
            .set_key(Some(key_item(key)))
    }

    pub fn delete(&self, key: &Key) -> DeleteBuilder {
        aws_sdk_dynamodb::types::Delete::builder()
            .table_name(&*self.table)
            .set_key(Some(key_item(key)))
    }

    pub fn check(&self, key: &Key) -> ConditionCheckBuilder {
        aws_sdk_dynamodb::types::ConditionCheck::builder()
            .table_name(&*self.table)
            .set_key(Some(key_item(key)))
    }

    /// One strongly consistent `GetItem`, decoded.
    pub async fn get<T: DeserializeOwned>(&self, key: &Key) -> Result<Option<T>, ApiError> {
        self.get_item(key)
            .await?
            .map(|item| from_item(&item))
            .transpose()
    }

    /// One strongly consistent `GetItem`.
    pub async fn get_item(&self, key: &Key) -> Result<Option<Item>, ApiError> {
        let output = self
            .db
            .get_item()
            .table_name(&*self.table)
            .set_key(Some(key_item(key)))
            .consistent_read(true)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await?;
        log_capacity("GetItem", output.consumed_capacity());
        Ok(output.item)
    }
}

/// A client from the standard AWS configuration (environment, profile, instance role), on
/// `endpoint` when given, else on `AWS_ENDPOINT_URL_DYNAMODB` or DynamoDB itself.
pub async fn client_from_env(endpoint: Option<&str>) -> Client {
    let mut loader = aws_config::from_env().http_client(https_client());
    if let Some(endpoint) = endpoint {
        loader = loader.endpoint_url(endpoint);
    }
    Client::new(&loader.load().await)
}

/// An HTTPS client on rustls with `ring`: no aws-lc-rs jitter-entropy seeding on the first request.
pub fn https_client() -> aws_sdk_dynamodb::config::SharedHttpClient {
    use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

pub fn key_item(key: &Key) -> Item {
    HashMap::from([
        (PK.to_owned(), AttributeValue::S(key.pk.clone())),
        (SK.to_owned(), AttributeValue::S(key.sk.clone())),
    ])
}

/// An entity as a table item under `key`.
pub fn item<T: Serialize>(key: &Key, entity: &T) -> Item {
    let mut item: Item = serde_dynamo::to_item(entity).expect("entities serialise to items");
    item.extend(key_item(key));
    item
}

/// Adds one index's keys to an item.
pub fn with_index(mut item: Item, index: Index, key: &IndexKey) -> Item {
    item.insert(index.pk.to_owned(), AttributeValue::S(key.pk.clone()));
    item.insert(index.sk.to_owned(), AttributeValue::S(key.sk.clone()));
    item
}

pub fn from_item<T: DeserializeOwned>(item: &Item) -> Result<T, ApiError> {
    serde_dynamo::from_item(item.clone()).map_err(|e| {
        error!(error = %e, "an item in the table does not decode");
        ApiError::Internal
    })
}

pub fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub fn log_capacity(operation: &'static str, capacity: Option<&ConsumedCapacity>) {
    if let Some(units) = capacity.and_then(|c| c.capacity_units()) {
        info!(operation, capacity = units, "consumed capacity");
    }
}

pub fn total_capacity(capacities: &[ConsumedCapacity]) -> f64 {
    capacities.iter().filter_map(|c| c.capacity_units()).sum()
}

/// Error codes that mean "try again later": the SDK has already retried them.
const TRANSIENT: &[&str] = &[
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
    "TransactionInProgressException",
    "TransactionConflict",
    "ThrottlingError",
];

/// Every SDK failure becomes a `503` (the engine is unreachable or throttling) or a `500` (a
/// bug); the cause is logged here and never sent.
impl<E, R> From<SdkError<E, R>> for ApiError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    fn from(err: SdkError<E, R>) -> Self {
        let transient = match &err {
            SdkError::DispatchFailure(_)
            | SdkError::TimeoutError(_)
            | SdkError::ResponseError(_) => true,
            SdkError::ServiceError(service) => service
                .err()
                .code()
                .is_some_and(|code| TRANSIENT.contains(&code)),
            _ => false,
        };
        if transient {
            warn!(error = %DisplayErrorContext(&err), "the engine is unavailable");
            ApiError::Unavailable
        } else {
            error!(error = %DisplayErrorContext(&err), "an engine request failed");
            ApiError::Internal
        }
    }
}

/// A `TransactWriteItems` whose items are tagged with what they are (`P`, the pattern's own
/// enum), so a cancellation read by position says which part failed, not which index.
pub struct Transaction<P> {
    parts: Vec<(P, TransactWriteItem)>,
    idempotency: Option<(Idempotency, Item)>,
}

/// How a transaction ended.
pub enum Commit<P> {
    Done,
    /// Conditions failed: the parts whose condition failed, with the item as it stood.
    Cancelled(Cancelled<P>),
}

/// How a creating transaction ([`Transaction::commit_creating`]) ended.
pub enum Creation<P> {
    /// The response to send: this request's, or the one recorded for the first request with
    /// its `Idempotency-Key`, byte for byte.
    Created(Response<Body>),
    /// Conditions failed: the parts whose condition failed, with the item as it stood.
    Cancelled(Cancelled<P>),
}

/// What running a transaction found; only a transaction with an `Idempotency-Key` can replay.
enum Outcome<P> {
    Done,
    Replayed(Response<Body>),
    Cancelled(Cancelled<P>),
}

pub struct Cancelled<P> {
    pub failed: Vec<(P, Option<Item>)>,
}

impl<P: PartialEq> Cancelled<P> {
    pub fn failed(&self, part: P) -> bool {
        self.failed.iter().any(|(p, _)| *p == part)
    }

    /// The item as it stood when `part`'s condition failed (`ALL_OLD` on condition failure).
    pub fn old(&self, part: P) -> Option<&Item> {
        self.failed
            .iter()
            .find(|(p, _)| *p == part)
            .and_then(|(_, item)| item.as_ref())
    }
}

impl<P: Copy + PartialEq + std::fmt::Debug> Default for Transaction<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Copy + PartialEq + std::fmt::Debug> Transaction<P> {
    pub fn new() -> Self {
        Self {
            parts: Vec::new(),
            idempotency: None,
        }
    }

    pub fn put(self, part: P, put: PutBuilder) -> Self {
        self.push(
            part,
            put.build()
                .map(|p| TransactWriteItem::builder().put(p).build()),
        )
    }

    pub fn update(self, part: P, update: UpdateBuilder) -> Self {
        self.push(
            part,
            update
                .build()
                .map(|u| TransactWriteItem::builder().update(u).build()),
        )
    }

    pub fn delete(self, part: P, delete: DeleteBuilder) -> Self {
        self.push(
            part,
            delete
                .build()
                .map(|d| TransactWriteItem::builder().delete(d).build()),
        )
    }

    pub fn check(self, part: P, check: ConditionCheckBuilder) -> Self {
        self.push(
            part,
            check
                .build()
                .map(|c| TransactWriteItem::builder().condition_check(c).build()),
        )
    }

    fn push(
        mut self,
        part: P,
        item: Result<TransactWriteItem, aws_sdk_dynamodb::error::BuildError>,
    ) -> Self {
        // The builders only fail when a required member is missing: a bug in the pattern.
        let item = item.unwrap_or_else(|e| panic!("transaction part {part:?} is incomplete: {e}"));
        self.parts.push((part, item));
        self
    }

    pub async fn commit(self, ctx: &Ctx) -> Result<Commit<P>, ApiError> {
        match self.run(ctx).await? {
            Outcome::Done => Ok(Commit::Done),
            Outcome::Cancelled(cancelled) => Ok(Commit::Cancelled(cancelled)),
            // No record was put, so there is nothing to replay.
            Outcome::Replayed(_) => Err(ApiError::Internal),
        }
    }

    /// Commits a creating `POST`: with an `Idempotency-Key`, `response` is recorded under it in
    /// the same transaction and the key's token is the `ClientRequestToken`, so a retry gets the
    /// first request's response back instead of a conflict.
    pub async fn commit_creating(
        mut self,
        ctx: &Ctx,
        idempotency: Option<Idempotency>,
        response: Response<Body>,
    ) -> Result<Creation<P>, ApiError> {
        if let Some(idempotency) = idempotency {
            let record = idempotency.record(&response);
            self.idempotency = Some((idempotency, record));
        }
        Ok(match self.run(ctx).await? {
            Outcome::Done => Creation::Created(response),
            Outcome::Replayed(previous) => Creation::Created(previous),
            Outcome::Cancelled(cancelled) => Creation::Cancelled(cancelled),
        })
    }

    async fn run(self, ctx: &Ctx) -> Result<Outcome<P>, ApiError> {
        let mut items: Vec<TransactWriteItem> = self.parts.iter().map(|(_, i)| i.clone()).collect();
        let mut token = None;
        if let Some((idempotency, record)) = &self.idempotency {
            items.push(idempotency::record_put(ctx, record.clone()));
            token = Some(idempotency.token());
        }
        for attempt in 1..=5u64 {
            let result = ctx
                .db
                .transact_write_items()
                .set_transact_items(Some(items.clone()))
                .set_client_request_token(token.clone())
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await;
            let err = match result {
                Ok(output) => {
                    let capacity = total_capacity(output.consumed_capacity());
                    info!(
                        operation = "TransactWriteItems",
                        capacity, "consumed capacity"
                    );
                    return Ok(Outcome::Done);
                }
                Err(err) => err,
            };
            match err.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => {
                    return self.cancelled(ctx, cancelled.cancellation_reasons()).await;
                }
                Some(TransactWriteItemsError::IdempotentParameterMismatchException(_)) => {
                    // The token was used within DynamoDB's 10 minutes by another attempt: what
                    // that attempt did is in the record, or it wrote nothing and the record's
                    // own condition is guard enough to run again without the token.
                    let (idempotency, _) = self.idempotency.as_ref().ok_or(ApiError::Internal)?;
                    if let Some(record) = ctx.get_item(&idempotency.record_key()).await? {
                        return idempotency.replay(&record).map(Outcome::Replayed);
                    }
                    token = None;
                }
                Some(TransactWriteItemsError::TransactionInProgressException(_)) => {
                    // The same token is being committed by a concurrent retry; wait for it.
                    tokio::time::sleep(Duration::from_millis(25 * attempt)).await;
                }
                _ => return Err(err.into()),
            }
        }
        Err(ApiError::Unavailable)
    }

    async fn cancelled(
        self,
        ctx: &Ctx,
        reasons: &[aws_sdk_dynamodb::types::CancellationReason],
    ) -> Result<Outcome<P>, ApiError> {
        let code = |i: usize| reasons.get(i).and_then(|r| r.code()).unwrap_or("None");
        if let Some((idempotency, _)) = &self.idempotency {
            let position = self.parts.len();
            if code(position) == "ConditionalCheckFailed" {
                let record = match reasons[position].item() {
                    Some(item) => item.clone(),
                    None => ctx
                        .get_item(&idempotency.record_key())
                        .await?
                        .ok_or(ApiError::Unavailable)?,
                };
                return idempotency.replay(&record).map(Outcome::Replayed);
            }
        }
        let mut failed = Vec::new();
        for (i, (part, _)) in self.parts.iter().enumerate() {
            match code(i) {
                "None" => {}
                "ConditionalCheckFailed" => {
                    failed.push((*part, reasons[i].item().cloned()));
                }
                other => {
                    let transient = TRANSIENT.contains(&other);
                    warn!(part = ?part, reason = other, "transaction cancelled for a reason other than a condition");
                    return Err(if transient {
                        ApiError::Unavailable
                    } else {
                        ApiError::Internal
                    });
                }
            }
        }
        if failed.is_empty() {
            warn!(?reasons, "transaction cancelled without a reason");
            return Err(ApiError::Unavailable);
        }
        Ok(Outcome::Cancelled(Cancelled { failed }))
    }
}
