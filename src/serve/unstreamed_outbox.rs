//! The outbox items a table held before its stream was on: the events no stream ever carried.
//!
//! A stream switched on starts empty: DynamoDB (and dynoxide) record only the writes made after.
//! Every table singlet creates has its stream from the start (`table::ensure_table`), but a table
//! made by an older singlet's `import`, `seed` or `load`, or by hand, has none, and the runner
//! switches it on when it serves: the outbox items already in it were never published (0 of
//! 20,000 imported vehicles' events, in the review of issue 45).
//!
//! So before the runner switches a stream on, it lists every outbox item in the table (each was
//! written with no stream, so none reached a publisher), and once the stream is on, hands them
//! to the publisher first, before anything the stream carries, as the `INSERT` records they would
//! have had, through the same mapping rules (retries, bisection, on-failure). Each is published
//! once:
//!
//! - the list is made only while the stream is off: an item written once it is on is on the
//!   stream, and never listed too;
//! - the list and how many of it were delivered are kept beside the mapping's checkpoint
//!   ([`Kept`]), written aside and renamed, so a runner stopped midway goes on where it stopped,
//!   and a runner that stopped before switching the stream on lists again (nothing was delivered
//!   from a list made while the stream was off). Like the stream's checkpoint, a count is kept
//!   after each batch: a runner killed between a batch's delivery and its count publishes that
//!   batch again, with the same `eventId`s, as Lambda's at-least-once delivery does;
//! - the list names its table and the table's creation time: a list left by a table since
//!   deleted (a data file made again) is dropped, never published into another table's events.
//!
//! The list holds each item whole (its event's data, personal data included), so that an entity
//! deleted meanwhile, which takes its outbox items with it, still has its earlier events
//! published; the file is its user's alone and deleted once every item was delivered. Items are
//! listed in their events' `occurredAt` order, so a subject's events keep their order (the
//! table's order, `EVENT#<eventId>`, is not the order they happened in).

use crate::serve::published_outbox::Published;
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};
use singlet_functions::Ctx;
use singlet_functions::store::bulk;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The outbox items to publish before the stream's records, as Lambda records, and how many were
/// delivered.
pub struct Unstreamed {
    records: Vec<Value>,
    delivered: usize,
    kept: Option<Kept>,
}

/// Where a list is kept between runs: the list itself (a header line naming its table, then one
/// record a line) and the count delivered.
pub struct Kept {
    list: PathBuf,
    delivered: PathBuf,
}

impl Kept {
    /// The files beside `position_file`, the mapping's checkpoint.
    pub fn beside(position_file: &Path) -> Self {
        Self {
            list: position_file.with_file_name("unstreamed-outbox.jsonl"),
            delivered: position_file.with_file_name("unstreamed-outbox.delivered"),
        }
    }

    fn remove(&self) {
        for file in [&self.delivered, &self.list] {
            if let Err(error) = std::fs::remove_file(file)
                && error.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(file = %file.display(), %error, "cannot remove a finished list of unstreamed outbox items");
            }
        }
    }
}

/// The table's identity as a list names it: its name and its creation time.
#[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
#[serde(rename_all = "camelCase")]
struct Header {
    table: String,
    table_created: f64,
}

/// What the table's stream is, read once before the mapping starts.
struct Described {
    stream_on: bool,
    header: Header,
}

async fn describe(ctx: &Ctx) -> Result<Described, String> {
    let described = ctx
        .db
        .describe_table()
        .table_name(&*ctx.table)
        .send()
        .await
        .map_err(|e| {
            format!(
                "cannot describe the table: {}",
                crate::serve::engine::cause_chain(&e)
            )
        })?;
    let table = described.table();
    Ok(Described {
        stream_on: table
            .and_then(|t| t.stream_specification())
            .is_some_and(|s| s.stream_enabled()),
        header: Header {
            table: ctx.table.to_string(),
            table_created: table
                .and_then(|t| t.creation_date_time())
                .map_or(0.0, |at| at.as_secs_f64()),
        },
    })
}

/// Before the mapping starts (and switches the stream on): the outbox items published already
/// ([`Published`], kept beside `position_file` when there is one, for this table), and the
/// items to publish before the stream: with the stream off, every outbox item of `ctx`'s table
/// not published yet, listed (and kept beside `position_file`); with it on, the list a runner
/// stopped midway kept for this table, if any (`None`: nothing to publish before the stream).
pub async fn before_the_stream(
    ctx: &Ctx,
    position_file: Option<&Path>,
) -> Result<(Option<Unstreamed>, Published), String> {
    let described = describe(ctx).await?;
    let published = match position_file {
        // The table as the file names it: a table made again under the same name is another.
        Some(file) => Published::beside(
            file,
            &serde_json::to_string(&described.header).expect("a header is JSON"),
            ctx.clock.now().unix_timestamp(),
        )?,
        None => Published::none(),
    };
    let kept = position_file.map(Kept::beside);
    let unstreamed = if described.stream_on {
        kept.and_then(|kept| resume(kept, &described.header))
    } else {
        list_unstreamed(ctx, kept, &described.header, &published).await?
    };
    Ok((unstreamed, published))
}

/// With the stream off: every outbox item of `ctx`'s table that `published` does not hold,
/// listed (and kept, when `kept` says where).
async fn list_unstreamed(
    ctx: &Ctx,
    kept: Option<Kept>,
    header: &Header,
    published: &Published,
) -> Result<Option<Unstreamed>, String> {
    // An item an earlier stream delivered is not listed: it was published once already.
    let mut records = list(ctx).await?;
    let earlier = records.len();
    records.retain(|record| !published.holds(record));
    if records.len() < earlier {
        tracing::info!(
            items = earlier - records.len(),
            "outbox items an earlier stream published are not listed again"
        );
    }
    if let Some(kept) = &kept {
        // A count left by an earlier list is not this one's.
        kept.remove();
    }
    if records.is_empty() {
        return Ok(None);
    }
    tracing::info!(
        items = records.len(),
        "the table's stream is off: the outbox items no stream published are listed and \
         published first"
    );
    if let Some(kept) = &kept {
        let mut text = serde_json::to_string(header).expect("a header is JSON");
        text.push('\n');
        for record in &records {
            text.push_str(&record.to_string());
            text.push('\n');
        }
        write_replacing(&kept.list, text)?;
    }
    Ok(Some(Unstreamed {
        records,
        delivered: 0,
        kept,
    }))
}

/// The list kept in `kept` for the table `header` names, from the count delivered; `None` (the
/// files removed) when there is none, or it is another table's, or it cannot be read.
fn resume(kept: Kept, header: &Header) -> Option<Unstreamed> {
    let text = match std::fs::read_to_string(&kept.list) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            kept.remove();
            return None;
        }
        Err(error) => {
            tracing::warn!(file = %kept.list.display(), %error, "cannot read the kept list of unstreamed outbox items");
            return None;
        }
    };
    let mut lines = text.lines();
    let named: Option<Header> = lines.next().and_then(|l| serde_json::from_str(l).ok());
    if named.as_ref() != Some(header) {
        tracing::info!(file = %kept.list.display(), "the kept list of unstreamed outbox items is another table's: dropped");
        kept.remove();
        return None;
    }
    let records: Result<Vec<Value>, _> = lines.map(serde_json::from_str).collect();
    let Ok(records) = records else {
        tracing::warn!(file = %kept.list.display(), "the kept list of unstreamed outbox items is damaged: dropped");
        kept.remove();
        return None;
    };
    let delivered = std::fs::read_to_string(&kept.delivered)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0usize)
        .min(records.len());
    tracing::info!(
        items = records.len() - delivered,
        "publishing the rest of the outbox items the table held before its stream was on"
    );
    Some(Unstreamed {
        records,
        delivered,
        kept: Some(kept),
    })
}

impl Unstreamed {
    /// The next batch of at most `size` records to deliver, empty when all were.
    pub fn next_batch(&self, size: usize) -> Vec<Value> {
        let end = (self.delivered + size).min(self.records.len());
        self.records[self.delivered..end].to_vec()
    }

    /// `count` more records were delivered: counted, and kept.
    pub fn delivered(&mut self, count: usize) -> Result<(), String> {
        self.delivered += count;
        let Some(kept) = &self.kept else {
            return Ok(());
        };
        if self.delivered >= self.records.len() {
            kept.remove();
            return Ok(());
        }
        write_replacing(&kept.delivered, self.delivered.to_string())
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

/// `path` replaced whole by `text` (written aside, then renamed), its user's alone.
fn write_replacing(path: &Path, text: String) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        singlet_tools::files::create_private_dir(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let aside = path.with_extension("partial");
    singlet_tools::files::write_private_file(&aside, text)
        .and_then(|()| std::fs::rename(&aside, path))
        .map_err(|e| format!("cannot keep {}: {e}", path.display()))
}

/// Every outbox item of the table (a consistent scan), as the `INSERT` record each would have
/// had, in its event's `occurredAt` order.
async fn list(ctx: &Ctx) -> Result<Vec<Value>, String> {
    let mut items = bulk::scan_all(&ctx.db, &ctx.table, singlet_shared::keys::OUTBOX_PREFIX)
        .await
        .map_err(|e| format!("cannot list the outbox items written before the stream: {e}"))?;
    let occurred = |item: &HashMap<String, AttributeValue>| {
        item.get("detail")
            .and_then(|d| d.as_s().ok())
            .and_then(|d| serde_json::from_str::<Value>(d).ok())
            .and_then(|d| d["occurredAt"].as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    let key = |item: &HashMap<String, AttributeValue>, name: &str| {
        item.get(name)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default()
    };
    let (pk, sk) = (singlet_shared::schema::PK, singlet_shared::schema::SK);
    items.sort_by_cached_key(|item| (occurred(item), key(item, pk), key(item, sk)));
    let listed_at = ctx.clock.now().unix_timestamp();
    Ok(items
        .iter()
        .enumerate()
        .map(|(n, item)| {
            let keys: HashMap<String, AttributeValue> = item
                .iter()
                .filter(|(name, _)| *name == pk || *name == sk)
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect();
            json!({
                "eventID": format!("unstreamed-{n}"),
                "eventName": "INSERT",
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": crate::serve::local_bus::REGION,
                "dynamodb": {
                    // When the stream would have carried it: now, as it is listed.
                    "ApproximateCreationDateTime": listed_at,
                    "Keys": image(keys),
                    "NewImage": image(item.clone()),
                    // No stream gave it one: named so in the on-failure file.
                    "SequenceNumber": format!("unstreamed-{n}"),
                    "SizeBytes": 0,
                    "StreamViewType": singlet_functions::events::mapping::STREAM_VIEW_TYPE,
                },
            })
        })
        .collect())
}

/// An item as a stream record's image holds it (DynamoDB's JSON, as the Lambda event carries it).
fn image(item: HashMap<String, AttributeValue>) -> Value {
    serde_json::to_value(serde_dynamo::Item::from(item)).expect("an item is JSON")
}
