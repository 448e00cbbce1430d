//! The free query and scan: what NoSQL Workbench's operation builder does, on the local table
//! and each of its indexes. A `Query` goes through the store's own `Query` (one partition, a sort
//! key condition, a limit, either direction); a `Scan` through the store's `Scan` (one page of the
//! table or of an index).
//! Each answer carries the call as the console shows every call: its key condition, its count
//! and the capacity it consumed.
//!
//! The filter is applied to the page read, as a `FilterExpression` is: after the read, so it
//! saves no capacity, and `count` is what it kept of `scanned`.

use super::capture;
use super::ops::{self, Operation};
use super::table::{self, Item, ItemView, plain};
use serde::Deserialize;
use singlet_functions::Ctx;
use singlet_functions::store::{Query, Scan};
use singlet_shared::schema::{INDEXES, Index};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Asked {
    /// `query` or `scan`.
    pub mode: String,
    /// An index's name; none for the table.
    pub index: Option<String>,
    /// A query's partition key value.
    #[serde(default)]
    pub partition: String,
    /// A query's sort key condition: `=`, `begins_with`, `<`, or none.
    #[serde(default)]
    pub sort_op: String,
    #[serde(default)]
    pub sort: String,
    pub limit: Option<i32>,
    #[serde(default)]
    pub descending: bool,
    /// The filter: an attribute, `=` or `contains`, and a value (kept when it is empty).
    #[serde(default)]
    pub filter_attribute: String,
    #[serde(default)]
    pub filter_op: String,
    #[serde(default)]
    pub filter_value: String,
}

#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explored {
    pub items: Vec<ItemView>,
    /// Items kept by the filter, and items read.
    pub count: usize,
    pub scanned: usize,
    /// Whether another page follows.
    pub more: bool,
    pub operations: Vec<Operation>,
}

/// The largest page the explorer reads.
const MAX_LIMIT: i32 = 500;

fn index(name: Option<&str>) -> Result<Option<Index>, String> {
    match name.filter(|n| !n.is_empty()) {
        None => Ok(None),
        Some(name) => INDEXES
            .iter()
            .find(|i| i.name == name)
            .copied()
            .map(Some)
            .ok_or_else(|| format!("the table has no index {name:?}")),
    }
}

/// Whether `item` passes the filter.
fn kept(item: &Item, asked: &Asked) -> bool {
    if asked.filter_attribute.trim().is_empty() {
        return true;
    }
    let Some(value) = item.get(asked.filter_attribute.trim()) else {
        return false;
    };
    let text = match plain(value) {
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    };
    match asked.filter_op.as_str() {
        "contains" => text.contains(&asked.filter_value),
        _ => text == asked.filter_value,
    }
}

/// Runs one page of the query or scan `asked` describes.
pub async fn explore(ctx: &Ctx, asked: &Asked) -> Result<Explored, String> {
    let index = index(asked.index.as_deref())?;
    let limit = asked.limit.filter(|l| *l > 0).map(|l| l.min(MAX_LIMIT));
    let (page, calls) = match asked.mode.as_str() {
        "query" => {
            if asked.partition.is_empty() {
                return Err("a query needs its partition key value".into());
            }
            let mut query = match index {
                Some(index) => Query::index(index, asked.partition.clone()),
                None => Query::table(asked.partition.clone()),
            };
            query = match asked.sort_op.as_str() {
                "" => query,
                "=" => query.sort_equals(asked.sort.clone()),
                "begins_with" => query.sort_begins_with(asked.sort.clone()),
                "<" => query.sort_before(asked.sort.clone()),
                other => return Err(format!("no sort key condition {other:?}")),
            };
            if let Some(limit) = limit {
                query = query.limit(limit);
            }
            let (page, calls) =
                capture::recording(ctx.query(query.descending(asked.descending))).await;
            let page = page.map_err(|e| format!("the query failed: {e:?}"))?;
            ((page.items, page.last_key.is_some()), calls)
        }
        "scan" => {
            let (page, calls) = capture::recording(ctx.scan(Scan::of(index).limit(limit))).await;
            let page = page.map_err(|e| format!("the scan failed: {e:?}"))?;
            ((page.items, page.last_key.is_some()), calls)
        }
        other => return Err(format!("no mode {other:?}: query or scan")),
    };
    let (items, more) = page;
    let scanned = items.len();
    let items: Vec<ItemView> = items
        .iter()
        .filter(|item| kept(item, asked))
        .map(table::item_view)
        .collect();
    Ok(Explored {
        count: items.len(),
        scanned,
        items,
        more,
        operations: calls.iter().map(|c| ops::read(c, false)).collect(),
    })
}
