//! One segment of a table tool's parallel `Scan` written to its run's results
//! ([`crate::results`]) in parts, for a step after the segments to read back: what fsck's
//! segments read for its judge, what a migration's survey reads for its segments
//! (docs/guide/tools-on-step-functions.md).
//!
//! - Each part is gzipped JSON Lines (`<stem>-<segment>-part-<n>.jsonl.gz`), one line for each
//!   item the tool keeps, written once [`PART_ITEMS`] items have been read since the last (a
//!   few megabytes, one `PutObject` well within its timeout, and what a segment holds at once).
//! - Each part is followed by the segment's checkpoint (`<stem>-<segment>.json`: the parts
//!   written, the items read, the last key read, whether the segment is done). An invocation
//!   stopped (its deadline, a kill, a failure) and invoked again goes on from the last
//!   checkpoint; a segment done answers at once and reads nothing.

use crate::results::Results;
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde_json::{Value, json};
use singlet_functions::Ctx;
use singlet_functions::model::Item;
use std::io::{BufRead, BufReader, Write};
use std::time::Instant;

/// Items read between two parts at most.
pub const PART_ITEMS: usize = 100_000;

/// One segment's work.
#[derive(Debug, Clone, Copy)]
pub struct Segment {
    pub segment: u32,
    pub segments: u32,
    pub page_size: Option<i32>,
    /// Stop between two pages once this has come (the function's: a minute before Lambda's
    /// limit), the place saved: `complete: false`, and the state machine invokes it again.
    pub stop_at: Option<Instant>,
    /// A test's: stop after this many pages, as the deadline would.
    pub stop_after_pages: Option<u64>,
}

/// Where a segment stands once an invocation ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Written {
    /// Items read, over this invocation and those before it.
    pub scanned: u64,
    /// Lines written (items kept), likewise.
    pub kept: u64,
    pub parts: u64,
    /// Read to its end.
    pub complete: bool,
}

fn checkpoint_name(stem: &str, segment: u32) -> String {
    format!("{stem}-{segment}.json")
}

fn part_name(stem: &str, segment: u32, part: u64) -> String {
    format!("{stem}-{segment}-part-{part}.jsonl.gz")
}

/// Reads `segment`'s checkpoint under `stem`, refusing one of a run with another segment count.
async fn checkpoint(
    results: &Results,
    stem: &str,
    segment: u32,
    segments: u32,
) -> Result<Value, String> {
    let name = checkpoint_name(stem, segment);
    let Some(bytes) = results.get(&name).await? else {
        return Ok(
            json!({"parts": 0, "scanned": 0, "kept": 0, "lastKey": null, "complete": false}),
        );
    };
    let saved: Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} is no segment's checkpoint: {e}", results.url(&name)))?;
    if saved["segments"] != segments {
        return Err(format!(
            "{} is segment {segment} of {} segments, not of {segments}: these results are \
             another run's",
            results.url(&name),
            saved["segments"]
        ));
    }
    Ok(saved)
}

/// Reads `run`'s segment from its checkpoint under `stem` to its end (or its stop), each item
/// `keep` answers a line for written to the results.
pub async fn write(
    ctx: &Ctx,
    results: &Results,
    stem: &str,
    run: Segment,
    keep: impl Fn(Item) -> Option<Value>,
) -> Result<Written, String> {
    if run.segment >= run.segments {
        return Err(format!(
            "segment {} is not one of the run's {}",
            run.segment, run.segments
        ));
    }
    let saved = checkpoint(results, stem, run.segment, run.segments).await?;
    let count = |field: &str| saved[field].as_u64().unwrap_or(0);
    let mut written = Written {
        scanned: count("scanned"),
        kept: count("kept"),
        parts: count("parts"),
        complete: saved["complete"] == true,
    };
    let mut start = match &saved["lastKey"] {
        Value::Null => None,
        key => Some(crate::transfer::item_from_json(key)?),
    };
    let mut pages_read = 0u64;
    let mut stopped = false;
    while !written.complete && !stopped {
        let mut lines = Vec::new();
        let mut read = 0usize;
        loop {
            let (items, last) = ctx
                .scan_page(run.segment, run.segments, start.take(), run.page_size)
                .await
                .map_err(|e| format!("cannot scan segment {}: {e:?}", run.segment))?;
            read += items.len();
            lines.extend(items.into_iter().filter_map(&keep));
            start = last;
            pages_read += 1;
            stopped = run.stop_at.is_some_and(|at| Instant::now() >= at)
                || run.stop_after_pages.is_some_and(|most| pages_read >= most);
            if start.is_none() || stopped || read >= PART_ITEMS {
                break;
            }
        }
        // The part first, then the checkpoint naming it: stopped between the two, the part is
        // written again under the same name.
        results
            .put(&part_name(stem, run.segment, written.parts), gzip(&lines)?)
            .await?;
        written.parts += 1;
        written.scanned += read as u64;
        written.kept += lines.len() as u64;
        written.complete = start.is_none();
        let saved = json!({
            "segment": run.segment,
            "segments": run.segments,
            "parts": written.parts,
            "scanned": written.scanned,
            "kept": written.kept,
            "lastKey": start.as_ref().map(crate::transfer::item_to_json),
            "complete": written.complete,
        });
        results
            .put(
                &checkpoint_name(stem, run.segment),
                serde_json::to_vec(&saved).expect("JSON"),
            )
            .await?;
    }
    Ok(written)
}

fn gzip(lines: &[Value]) -> Result<Vec<u8>, String> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    for line in lines {
        serde_json::to_writer(&mut gz, line).map_err(|e| e.to_string())?;
        gz.write_all(b"\n").map_err(|e| e.to_string())?;
    }
    gz.finish().map_err(|e| e.to_string())
}

/// Every line every segment of `segments` wrote under `stem`, each handed to `each` as it is
/// read (no part is held whole); refused unless every segment is done.
pub async fn read(
    results: &Results,
    stem: &str,
    segments: u32,
    mut each: impl FnMut(Value) -> Result<(), String>,
) -> Result<(), String> {
    for segment in 0..segments {
        let saved = checkpoint(results, stem, segment, segments).await?;
        if saved["complete"] != true {
            return Err(format!(
                "segment {segment} of {segments} has not read its segment to its end ({}): the \
                 segments run first",
                results.url(&checkpoint_name(stem, segment))
            ));
        }
        for part in 0..saved["parts"].as_u64().unwrap_or(0) {
            let name = part_name(stem, segment, part);
            let bytes = results
                .get(&name)
                .await?
                .ok_or_else(|| format!("{} is missing", results.url(&name)))?;
            let unreadable = |e: String| format!("{} is unreadable: {e}", results.url(&name));
            for line in BufReader::new(GzDecoder::new(&bytes[..])).lines() {
                let line = line.map_err(|e| unreadable(e.to_string()))?;
                if line.is_empty() {
                    continue;
                }
                let value = serde_json::from_str(&line).map_err(|e| unreadable(e.to_string()))?;
                each(value).map_err(unreadable)?;
            }
        }
    }
    Ok(())
}
