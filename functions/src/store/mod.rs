//! The data layer: every request singlet makes to DynamoDB goes through here.
//!
//! It takes the schema's constants (`singlet_shared::schema`) and the keys of
//! `singlet_shared::keys`, so no handler spells the table's name, an index's name or a key
//! attribute. Every request asks for its consumed capacity per index and logs it
//! ([`capacity`]); every SDK failure becomes a `503` or a `500` in one place (`failure`);
//! every item a handler reads is decoded in one place ([`item::decode`]).
//!
//! - reads: [`Ctx::get`] (one strongly consistent `GetItem`), [`Ctx::query`] (one page of one
//!   partition of the table or of an index, described by a [`Query`]), [`Ctx::scan`] (one page of
//!   the whole table or index, or of one segment, described by a [`Scan`]) and
//!   [`Ctx::snapshot`] (items read together in `TransactGetItems`);
//! - writes as typed values ([`write`](mod@write)): [`Put`], [`Update`], [`Delete`], [`Check`] of one
//!   entity type, guarded by a [`Condition`] on its fields; no other module writes an expression;
//! - single-item writes: [`Ctx::update_item`], [`Ctx::delete_item`];
//! - several items at once: [`Transaction`] of those writes;
//! - unique values: [`lock`], and the swap of one for another ([`lock::swap`]).

pub mod bulk;
pub mod capacity;
mod failure;
pub mod item;
pub mod lock;
pub mod migration;
pub mod pace;
mod transaction;
pub mod write;

pub use failure::{AccessDenied, access_denied, is_transient};
pub use item::{Item, decode, key_item, s};
pub use transaction::{CONFLICT_ATTEMPTS, Cancelled, Commit, MAX_PARTS, TokenCommit, Transaction};
pub use write::{AnyEntity, Check, Condition, Delete, Put, Update};

use crate::context::Ctx;
use crate::error::ApiError;
use crate::model::{Entity, KeyOf};
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, Get, ReturnConsumedCapacity, ReturnValue, TransactGetItem,
};
use capacity::Billing;
use singlet_shared::Key;
use singlet_shared::schema::{Index, PK, SK, TTL_ATTRIBUTE};

/// A read-then-write pattern (a plate change, a return, a removal, ...) whose write found the
/// item changed since its read tries again, reading afresh, up to this many times in all, then
/// gives up with `503`. (A transaction DynamoDB cancels for a conflict with another in flight is
/// sent again on its own: [`CONFLICT_ATTEMPTS`].)
pub const RACE_ATTEMPTS: usize = 3;

/// Whether `item` expired before `now` (epoch seconds): its `expiresAt` is below it, which is
/// DynamoDB's (and dynoxide's) own rule for what TTL may delete.
pub fn expired(item: &Item, now: i64) -> bool {
    item.get(TTL_ATTRIBUTE)
        .and_then(|value| value.as_n().ok())
        .and_then(|n| n.parse::<i64>().ok())
        .is_some_and(|expires_at| expires_at < now)
}

/// One page of one partition: of the table (strongly consistent) or of an index (eventually
/// consistent: DynamoDB cannot read a global index strongly).
#[derive(Debug, Clone)]
pub struct Query {
    index: Option<Index>,
    partition: String,
    sort: Option<SortKey>,
    descending: bool,
    limit: Option<i32>,
    start: Option<Item>,
    /// Leave out items that expired before this time (epoch seconds): [`Query::live_at`].
    live_at: Option<i64>,
}

#[derive(Debug, Clone)]
enum SortKey {
    Equals(String),
    BeginsWith(String),
    Before(String),
    AtOrAfter(String),
}

/// What a `Query` returned: its items, and the key to start the next page after, if any.
#[derive(Debug, Default)]
pub struct QueryPage {
    pub items: Vec<Item>,
    pub last_key: Option<Item>,
}

impl Query {
    /// The table's partition `partition`.
    pub fn table(partition: impl Into<String>) -> Self {
        Self {
            index: None,
            partition: partition.into(),
            sort: None,
            descending: false,
            limit: None,
            start: None,
            live_at: None,
        }
    }

    /// `index`'s partition `partition`.
    pub fn index(index: Index, partition: impl Into<String>) -> Self {
        Self {
            index: Some(index),
            ..Self::table(partition)
        }
    }

    pub fn sort_equals(mut self, sort_key: impl Into<String>) -> Self {
        self.sort = Some(SortKey::Equals(sort_key.into()));
        self
    }

    /// Sort keys that start with `prefix`. An empty prefix is every sort key, asked with no sort
    /// condition at all: DynamoDB refuses an empty string as a key attribute's value in a key
    /// condition too (`ValidationException`: "The AttributeValue for a key attribute cannot
    /// contain an empty string value"; a string "can be zero" long only where it is not a key,
    /// <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html>),
    /// as moto does; the embedded engine took it.
    pub fn sort_begins_with(mut self, prefix: impl Into<String>) -> Self {
        let prefix = prefix.into();
        self.sort = (!prefix.is_empty()).then_some(SortKey::BeginsWith(prefix));
        self
    }

    /// Sort keys strictly before `bound`.
    pub fn sort_before(mut self, bound: impl Into<String>) -> Self {
        self.sort = Some(SortKey::Before(bound.into()));
        self
    }

    /// Sort keys at or after `bound`.
    pub fn sort_at_or_after(mut self, bound: impl Into<String>) -> Self {
        self.sort = Some(SortKey::AtOrAfter(bound.into()));
        self
    }

    /// Only items that have not expired at `now` (epoch seconds): a filter,
    /// `attribute_not_exists(expiresAt) OR expiresAt >= now`. DynamoDB's TTL deletes an expired
    /// item days later, and until then a `Query` still reads it. A filter costs the read units
    /// of every item it reads, kept or not, and applies after `Limit`: a page can come back
    /// short, or empty with a cursor. So a route puts the bound in its key condition where the
    /// sort key can hold it (a history sorted by return date), and keeps this filter for what
    /// the key cannot say exactly.
    pub fn live_at(mut self, now: i64) -> Self {
        self.live_at = Some(now);
        self
    }

    /// Newest (highest sort key) first.
    pub fn descending(mut self, descending: bool) -> Self {
        self.descending = descending;
        self
    }

    pub fn limit(mut self, limit: i32) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Starts after `key` (a page's `last_key`, or a cursor's).
    pub fn start_after(mut self, key: Option<Item>) -> Self {
        self.start = key;
        self
    }
}

/// One page of a `Scan` of the table or of an index: the whole of it, or one segment of a
/// parallel scan. Eventually consistent unless [`Scan::consistent`] (the table only: DynamoDB
/// cannot read a global index strongly).
#[derive(Debug, Clone, Default)]
pub struct Scan {
    index: Option<Index>,
    segment: Option<(u32, u32)>,
    consistent: bool,
    limit: Option<i32>,
    start: Option<Item>,
}

impl Scan {
    /// The table.
    pub fn table() -> Self {
        Self::default()
    }

    /// The table or `index`, as `None` or `Some`.
    pub fn of(index: Option<Index>) -> Self {
        Self {
            index,
            ..Self::default()
        }
    }

    /// Segment `segment` of a parallel scan in `segments`.
    pub fn segment(mut self, segment: u32, segments: u32) -> Self {
        self.segment = Some((segment, segments));
        self
    }

    /// Strongly consistent: every item written before the page was read is in it (a table
    /// scan only; it costs twice the read units).
    pub fn consistent(mut self) -> Self {
        self.consistent = self.index.is_none();
        self
    }

    pub fn limit(mut self, limit: Option<i32>) -> Self {
        self.limit = limit;
        self
    }

    /// Starts after `key` (a page's `last_key`).
    pub fn start_after(mut self, key: Option<Item>) -> Self {
        self.start = key;
        self
    }
}

impl Ctx {
    /// One strongly consistent `GetItem`, decoded through the registry: an item of another type
    /// at `key`, or of a later version, is a `500`, never a `T` read from look-alike attributes.
    pub async fn get<T: Entity>(&self, key: &KeyOf<T>) -> Result<Option<T>, ApiError> {
        self.get_item(key)
            .await?
            .map(|item| decode(&item))
            .transpose()
    }

    /// One strongly consistent `GetItem`, decoded, unless the item expired before `now` (epoch
    /// seconds): an expired item is not there, to every reader, though TTL has not deleted it yet
    /// (that takes up to a few days). `GetItem` takes no filter, so the check is made here, on
    /// the item read: it costs what the read costs.
    pub async fn get_live<T: Entity>(
        &self,
        key: &KeyOf<T>,
        now: i64,
    ) -> Result<Option<T>, ApiError> {
        self.get_live_item(key, now)
            .await?
            .map(|item| decode(&item))
            .transpose()
    }

    /// [`Ctx::get_live`], undecoded.
    pub async fn get_live_item(&self, key: &Key, now: i64) -> Result<Option<Item>, ApiError> {
        Ok(self.get_item(key).await?.filter(|item| !expired(item, now)))
    }

    /// One strongly consistent `GetItem`.
    pub async fn get_item(&self, key: &Key) -> Result<Option<Item>, ApiError> {
        let output = self
            .db
            .get_item()
            .table_name(&*self.table)
            .set_key(Some(key_item(key)))
            .consistent_read(true)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await?;
        capacity::record("GetItem", Billing::Read, output.consumed_capacity());
        Ok(output.item)
    }

    /// The items at `keys` that exist, read together in `TransactGetItems`: up to 100 keys (one
    /// request's limit) are a snapshot that no transaction's writes can be half in; more are
    /// read 100 at a time. The consistency checker confirms its findings with it.
    pub async fn snapshot(&self, keys: &[Key]) -> Result<Vec<Item>, ApiError> {
        let gets: Vec<TransactGetItem> = keys
            .iter()
            .map(|key| {
                let get = Get::builder()
                    .table_name(&*self.table)
                    .set_key(Some(key_item(key)))
                    .build()
                    .expect("a get names its table and key");
                TransactGetItem::builder().get(get).build()
            })
            .collect();
        let mut items = Vec::new();
        for chunk in gets.chunks(100) {
            let output = self
                .db
                .transact_get_items()
                .set_transact_items(Some(chunk.to_vec()))
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                .send()
                .await?;
            capacity::record(
                "TransactGetItems",
                Billing::Read,
                output.consumed_capacity(),
            );
            items.extend(
                output
                    .responses
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|response| response.item),
            );
        }
        Ok(items)
    }

    /// One `Query` of one page.
    pub async fn query(&self, query: Query) -> Result<QueryPage, ApiError> {
        let (pk, sk) = match query.index {
            Some(index) => (index.pk, index.sk),
            None => (PK, SK),
        };
        let condition = match &query.sort {
            None => "#pk = :pk",
            Some(SortKey::Equals(_)) => "#pk = :pk AND #sk = :sk",
            Some(SortKey::BeginsWith(_)) => "#pk = :pk AND begins_with(#sk, :sk)",
            Some(SortKey::Before(_)) => "#pk = :pk AND #sk < :sk",
            Some(SortKey::AtOrAfter(_)) => "#pk = :pk AND #sk >= :sk",
        };
        let mut request = self
            .db
            .query()
            .table_name(&*self.table)
            .set_index_name(query.index.map(|i| i.name.to_owned()))
            .key_condition_expression(condition)
            .expression_attribute_names("#pk", pk)
            .expression_attribute_values(":pk", s(query.partition))
            .consistent_read(query.index.is_none())
            .scan_index_forward(!query.descending)
            .set_limit(query.limit)
            .set_exclusive_start_key(query.start)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
        if let Some(
            SortKey::Equals(value)
            | SortKey::BeginsWith(value)
            | SortKey::Before(value)
            | SortKey::AtOrAfter(value),
        ) = query.sort
        {
            request = request
                .expression_attribute_names("#sk", sk)
                .expression_attribute_values(":sk", s(value));
        }
        if let Some(now) = query.live_at {
            request = request
                .filter_expression("attribute_not_exists(#ttl) OR #ttl >= :now")
                .expression_attribute_names("#ttl", TTL_ATTRIBUTE)
                .expression_attribute_values(":now", AttributeValue::N(now.to_string()));
        }
        let output = request.send().await?;
        capacity::record("Query", Billing::Read, output.consumed_capacity());
        Ok(QueryPage {
            items: output.items.unwrap_or_default(),
            last_key: output.last_evaluated_key,
        })
    }

    /// One page of a `Scan`: its items, and the key to start the next page after (`None` at the
    /// end).
    pub async fn scan(&self, scan: Scan) -> Result<QueryPage, ApiError> {
        let (segment, segments) = scan.segment.unzip();
        let output = self
            .db
            .scan()
            .table_name(&*self.table)
            .set_index_name(scan.index.map(|i| i.name.to_owned()))
            .set_segment(segment.map(|s| s as i32))
            .set_total_segments(segments.map(|s| s as i32))
            .consistent_read(scan.consistent)
            .set_limit(scan.limit)
            .set_exclusive_start_key(scan.start)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await?;
        capacity::record("Scan", Billing::Read, output.consumed_capacity());
        Ok(QueryPage {
            items: output.items.unwrap_or_default(),
            last_key: output.last_evaluated_key.filter(|key| !key.is_empty()),
        })
    }

    /// One conditional `UpdateItem` described as a transaction's update is: the item as it is
    /// after the update, or `None` when its condition failed.
    pub async fn update_item<E>(&self, update: Update<E>) -> Result<Option<Item>, ApiError> {
        self.update_raw(&update.raw()).await
    }

    async fn update_raw(&self, update: &write::RawUpdate) -> Result<Option<Item>, ApiError> {
        let (expression, condition, placeholders) = update.render();
        let result = self
            .db
            .update_item()
            .table_name(&*self.table)
            .set_key(Some(update.key()))
            .update_expression(expression)
            .set_condition_expression(condition)
            .set_expression_attribute_names(Some(placeholders.names))
            .set_expression_attribute_values(Some(placeholders.values))
            .return_values(ReturnValue::AllNew)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await;
        match result {
            Ok(output) => {
                capacity::record("UpdateItem", Billing::Write, output.consumed_capacity());
                Ok(Some(output.attributes.unwrap_or_default()))
            }
            Err(err)
                if matches!(
                    err.as_service_error(),
                    Some(UpdateItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                Ok(None)
            }
            Err(err) => Err(err.into()),
        }
    }

    /// One conditional `DeleteItem`: whether it deleted (`false` when its condition failed).
    pub async fn delete_item<E>(&self, delete: Delete<E>) -> Result<bool, ApiError> {
        self.delete_raw(&delete.raw()).await
    }

    async fn delete_raw(&self, delete: &write::RawDelete) -> Result<bool, ApiError> {
        let (condition, placeholders) = delete.render();
        let names = (!placeholders.names.is_empty()).then_some(placeholders.names);
        let values = (!placeholders.values.is_empty()).then_some(placeholders.values);
        let result = self
            .db
            .delete_item()
            .table_name(&*self.table)
            .set_key(Some(delete.key()))
            .set_condition_expression(condition)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await;
        match result {
            Ok(output) => {
                capacity::record("DeleteItem", Billing::Write, output.consumed_capacity());
                Ok(true)
            }
            Err(err)
                if matches!(
                    err.as_service_error(),
                    Some(DeleteItemError::ConditionalCheckFailedException(_))
                ) =>
            {
                Ok(false)
            }
            Err(err) => Err(err.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_prefix_asks_for_the_whole_partition() {
        assert!(Query::table("P").sort_begins_with("").sort.is_none());
        assert!(matches!(
            Query::table("P").sort_begins_with("A#").sort,
            Some(SortKey::BeginsWith(prefix)) if prefix == "A#"
        ));
    }
}
