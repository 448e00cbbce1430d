//! The marks of a `seed` under way: one item per domain being seeded (`SEED#UNFINISHED` /
//! `SEED#<domain>`), written before the domain's first request and deleted after its last. A seed
//! that is killed leaves its domain's mark: which of the domain's requests were made is not
//! known, so the seed run again names the domain partial (the runner's `console::seed`), and
//! `fsck` refuses the table until it is made again, as it refuses a stopped `load`'s
//! ([`crate::load_marker`]).
//!
//! The items are no entity of the model: their `_et` (`seed-unfinished`) is no stream filter's
//! and no route's, so nothing publishes or serves them.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::AttributeValue;
use singlet_shared::schema::{ENTITY_TYPE, PK, SK};
use std::collections::HashMap;

/// The marks' partition: no entity's key starts so.
pub const PARTITION: &str = "SEED#UNFINISHED";
/// A mark's `_et`.
pub const ENTITY_TYPE_NAME: &str = "seed-unfinished";
const SORT_PREFIX: &str = "SEED#";

/// The key of `domain`'s mark.
pub fn key(domain: &str) -> HashMap<String, AttributeValue> {
    HashMap::from([
        (PK.to_owned(), AttributeValue::S(PARTITION.to_owned())),
        (
            SK.to_owned(),
            AttributeValue::S(format!("{SORT_PREFIX}{domain}")),
        ),
    ])
}

/// `domain`'s mark, as an item.
pub fn item(domain: &str) -> HashMap<String, AttributeValue> {
    let mut item = key(domain);
    item.insert(
        ENTITY_TYPE.to_owned(),
        AttributeValue::S(ENTITY_TYPE_NAME.to_owned()),
    );
    item
}

/// Whether `pk`/`sk` is `domain`'s mark.
pub fn is_mark_of(pk: &str, sk: &str, domain: &str) -> bool {
    pk == PARTITION && sk.strip_prefix(SORT_PREFIX) == Some(domain)
}

/// The domains whose seed is under way or was stopped in `table` (a strongly consistent read of
/// the marks' partition).
pub async fn read(client: &Client, table: &str) -> Result<Vec<String>, String> {
    let found = client
        .query()
        .table_name(table)
        .key_condition_expression("#pk = :pk")
        .expression_attribute_names("#pk", PK)
        .expression_attribute_values(":pk", AttributeValue::S(PARTITION.to_owned()))
        .consistent_read(true)
        .send()
        .await
        .map_err(|e| format!("cannot read {table}: {}", DisplayErrorContext(e)))?;
    Ok(found
        .items()
        .iter()
        .filter_map(|item| item.get(SK)?.as_s().ok()?.strip_prefix(SORT_PREFIX))
        .map(str::to_owned)
        .collect())
}

/// What a person is told about `table` holding the marks of `domains`.
pub fn describe(table: &str, domains: &[String]) -> String {
    format!(
        "{table} holds part of a seed: a seed of {} is under way, or was stopped before it \
         finished and left its mark ({PARTITION}); which of its requests were made is not known, \
         so the table is no whole one to check. Let the seed end, or delete the table (for the \
         embedded engine, its data file) and seed again",
        domains.join(", ")
    )
}
