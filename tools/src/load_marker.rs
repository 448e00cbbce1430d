//! The mark of a `load` under way: one item written into the empty table before the export's
//! first item, and deleted after its last. A `load` that is killed (or whose machine stops)
//! leaves part of an export in the table, which no rule of `fsck` can tell from a whole table
//! (each item it wrote is as the export had it); the mark it leaves says so, to the `load` run
//! again (which refuses the table, naming it) and to `fsck` (which refuses to check or repair it:
//! repairs would make a table the export never was).
//!
//! The item is no entity of the model: its `_et` (`load-unfinished`) is no stream filter's and no
//! route's, so nothing publishes or serves it.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::AttributeValue;
use singlet_shared::schema::{ENTITY_TYPE, PK, SK};

/// The mark's partition and sort key: no entity's key starts so.
pub const KEY: &str = "LOAD#UNFINISHED";
/// The mark's `_et`.
pub const ENTITY_TYPE_NAME: &str = "load-unfinished";
const STARTED_AT: &str = "startedAt";
const EXPORT_ITEMS: &str = "exportItems";

/// A load's mark, as read from the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    /// When the load started (RFC 3339, UTC).
    pub started_at: String,
    /// How many items the export it was loading holds.
    pub export_items: u64,
}

impl Unfinished {
    /// What a person is told about `table` holding this mark.
    pub fn describe(&self, table: &str) -> String {
        format!(
            "{table} holds part of an export: a load started at {} (of an export of {} items) \
             was stopped before it finished, and left its mark ({KEY}); delete the table (for \
             the embedded engine, its data file) and load again",
            self.started_at, self.export_items
        )
    }
}

fn key() -> [(String, AttributeValue); 2] {
    [
        (PK.to_owned(), AttributeValue::S(KEY.to_owned())),
        (SK.to_owned(), AttributeValue::S(KEY.to_owned())),
    ]
}

/// Whether `item` is a load's mark.
pub fn is_mark(item: &singlet_functions::model::Item) -> bool {
    item.get(PK)
        .and_then(|pk| pk.as_s().ok())
        .map(String::as_str)
        == Some(KEY)
        && item
            .get(SK)
            .and_then(|sk| sk.as_s().ok())
            .map(String::as_str)
            == Some(KEY)
}

/// Writes the mark of a load of `export_items` items into `table`, where no mark is.
pub async fn mark(client: &Client, table: &str, export_items: u64) -> Result<(), String> {
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .expect("UTC times format");
    client
        .put_item()
        .table_name(table)
        .set_item(Some(
            key()
                .into_iter()
                .chain([
                    (
                        ENTITY_TYPE.to_owned(),
                        AttributeValue::S(ENTITY_TYPE_NAME.to_owned()),
                    ),
                    (STARTED_AT.to_owned(), AttributeValue::S(now)),
                    (
                        EXPORT_ITEMS.to_owned(),
                        AttributeValue::N(export_items.to_string()),
                    ),
                ])
                .collect(),
        ))
        .condition_expression("attribute_not_exists(#pk)")
        .expression_attribute_names("#pk", PK)
        .send()
        .await
        .map_err(|e| {
            format!(
                "cannot mark {table} as being loaded: {}",
                DisplayErrorContext(e)
            )
        })?;
    Ok(())
}

/// Deletes the mark: the load wrote every item.
pub async fn unmark(client: &Client, table: &str) -> Result<(), String> {
    client
        .delete_item()
        .table_name(table)
        .set_key(Some(key().into_iter().collect()))
        .send()
        .await
        .map_err(|e| {
            format!(
                "every item was loaded, but the mark {KEY} could not be deleted: {}; delete it \
                 by hand",
                DisplayErrorContext(e)
            )
        })?;
    Ok(())
}

/// The mark a stopped load left in `table`, if there is one (a strongly consistent read).
pub async fn read(client: &Client, table: &str) -> Result<Option<Unfinished>, String> {
    let found = client
        .get_item()
        .table_name(table)
        .set_key(Some(key().into_iter().collect()))
        .consistent_read(true)
        .send()
        .await
        .map_err(|e| format!("cannot read {table}: {}", DisplayErrorContext(e)))?;
    Ok(found.item.map(|item| Unfinished {
        started_at: item
            .get(STARTED_AT)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_else(|| "an unknown time".to_owned()),
        export_items: item
            .get(EXPORT_ITEMS)
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
    }))
}

/// Refuses `table` when a stopped load left its mark: every tool that reads or writes a table
/// as a whole (`migrate`, `export`, `import`, and the runner's `serve`) would otherwise take part
/// of an export for a table, and migrate, copy, add to or serve it.
pub async fn refuse_unfinished(client: &Client, table: &str) -> Result<(), String> {
    match read(client, table).await? {
        Some(unfinished) => Err(unfinished.describe(table)),
        None => Ok(()),
    }
}
