//! Whole-table reads and unconditional writes for the tools that copy a table (`export`,
//! `load`): no rule is checked here, so nothing a route does goes through this module.

use super::Item;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use singlet_shared::schema::PK;
use std::time::Duration;

/// `BatchWriteItem` takes at most this many puts.
pub const BATCH_LIMIT: usize = 25;

/// How many times a batch is sent in all before what stays unprocessed is an error.
const ATTEMPTS: usize = 10;

/// One page of segment `segment` of `segments` of a parallel, strongly consistent `Scan` of
/// `table`, from `start`: its items and where the next page starts (`None` at the end).
pub async fn scan_page(
    client: &Client,
    table: &str,
    segment: u32,
    segments: u32,
    start: Option<Item>,
) -> Result<(Vec<Item>, Option<Item>), String> {
    let page = client
        .scan()
        .table_name(table)
        .segment(segment as i32)
        .total_segments(segments as i32)
        .consistent_read(true)
        .set_exclusive_start_key(start)
        .send()
        .await
        .map_err(|e| format!("cannot scan {table}: {}", DisplayErrorContext(e)))?;
    Ok((
        page.items.unwrap_or_default(),
        page.last_evaluated_key.filter(|key| !key.is_empty()),
    ))
}

/// Every item of `table` whose partition key begins with `pk_prefix` (every item, for `""`),
/// read by a strongly consistent `Scan` to its end: for a table, or a part of one, small enough
/// to hold in memory (the outbox items the runner delivers at start, the tests' and benches'
/// look at a whole table).
pub async fn scan_all(client: &Client, table: &str, pk_prefix: &str) -> Result<Vec<Item>, String> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let mut scan = client
            .scan()
            .table_name(table)
            .consistent_read(true)
            .set_exclusive_start_key(start);
        if !pk_prefix.is_empty() {
            scan = scan
                .filter_expression("begins_with(#pk, :prefix)")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_values(":prefix", AttributeValue::S(pk_prefix.to_owned()));
        }
        let page = scan
            .send()
            .await
            .map_err(|e| format!("cannot scan {table}: {}", DisplayErrorContext(e)))?;
        items.extend(page.items.unwrap_or_default());
        start = page.last_evaluated_key.filter(|key| !key.is_empty());
        if start.is_none() {
            return Ok(items);
        }
    }
}

/// Whether `table` holds any item (one item read).
pub async fn holds_items(client: &Client, table: &str) -> Result<bool, String> {
    let page = client
        .scan()
        .table_name(table)
        .limit(1)
        .send()
        .await
        .map_err(|e| format!("cannot read {table}: {}", DisplayErrorContext(e)))?;
    Ok(page.count() > 0)
}

/// Puts `items` (at most [`BATCH_LIMIT`]) into `table` with one `BatchWriteItem`, sent again
/// with a growing pause for whatever comes back unprocessed (the SDK does not: a throttled
/// table answers `200` with `UnprocessedItems`). Returns how many were written.
pub async fn put_batch(client: &Client, table: &str, items: Vec<Item>) -> Result<u64, String> {
    let count = items.len() as u64;
    let mut requests: Vec<WriteRequest> = items
        .into_iter()
        .map(|item| {
            WriteRequest::builder()
                .put_request(
                    PutRequest::builder()
                        .set_item(Some(item))
                        .build()
                        .expect("a put names its item"),
                )
                .build()
        })
        .collect();
    let mut backoff = Duration::from_millis(50);
    for _ in 0..ATTEMPTS {
        let output = client
            .batch_write_item()
            .request_items(table, requests)
            .send()
            .await
            .map_err(|e| format!("cannot write to {table}: {}", DisplayErrorContext(e)))?;
        requests = output
            .unprocessed_items
            .and_then(|mut left| left.remove(table))
            .unwrap_or_default();
        if requests.is_empty() {
            return Ok(count);
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
    Err(format!(
        "{table} kept {} items unprocessed after {ATTEMPTS} attempts: the table is throttled",
        requests.len()
    ))
}
