//! `fsck` as the stack's state machine runs it (docs/guide/tools-on-step-functions.md, "fsck on
//! AWS"): a map and a reduce over the same code the laptop's `fsck` runs.
//!
//! - **Each segment** ([`segment`]) is one invocation of the tools function: it reads its
//!   segment of the parallel `Scan` ([`super::scan::segment`], the pages the laptop's workers
//!   read) and writes the items it read to the run's results, in parts of at most
//!   [`PART_ITEMS`] (gzipped JSON Lines, one item in DynamoDB JSON a line), each part followed by
//!   its checkpoint (`segment-<n>.json`: the parts written, the last key read, whether the
//!   segment is done). An invocation stopped (its deadline, a kill, a failure) and invoked again
//!   goes on from the last checkpoint; a segment done answers at once and reads nothing.
//! - **The judge** ([`judge`]) is one invocation of the tools check function once every
//!   segment is done: it reads every part back and hands the items to [`super::judge_scanned`],
//!   the same rules, the same strongly consistent confirmation and the same paced, conditioned
//!   repairs the laptop runs after its own scan. Rules span items in any segment (a plate's lock
//!   and its vehicle, a loan and its copy), so no segment can judge its own items alone.
//!   Its report is `report.json` beside the parts (the `--json` report, whole) and, with the
//!   findings listed at most [`FINDINGS_LISTED`], the execution's output.

use super::{Options, Report};
use crate::results::Results;
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde_json::{Value, json};
use singlet_functions::Ctx;
use singlet_functions::model::Item;
use std::io::{BufRead, BufReader, Write};
use std::time::Instant;

/// Items a part holds at most: a few megabytes gzipped, one `PutObject` well within its
/// timeout, and what a segment holds in memory at once.
pub const PART_ITEMS: usize = 100_000;

/// Findings the execution's output lists at most (Step Functions caps an output at 256 KiB);
/// `findingCount` counts them all, and `report.json` lists them all.
pub const FINDINGS_LISTED: usize = 50;

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

fn checkpoint_name(segment: u32) -> String {
    format!("segment-{segment}.json")
}

fn part_name(segment: u32, part: u64) -> String {
    format!("segment-{segment}-part-{part}.jsonl.gz")
}

/// Reads `segment`'s checkpoint, refusing one of a run with another segment count.
async fn checkpoint(results: &Results, segment: u32, segments: u32) -> Result<Value, String> {
    let Some(bytes) = results.get(&checkpoint_name(segment)).await? else {
        return Ok(json!({"parts": 0, "scanned": 0, "lastKey": null, "complete": false}));
    };
    let saved: Value = serde_json::from_slice(&bytes).map_err(|e| {
        format!(
            "{} is no segment's checkpoint: {e}",
            results.url(&checkpoint_name(segment))
        )
    })?;
    if saved["segments"] != segments {
        return Err(format!(
            "{} is segment {segment} of {} segments, not of {segments}: these results are \
             another run's",
            results.url(&checkpoint_name(segment)),
            saved["segments"]
        ));
    }
    Ok(saved)
}

/// Reads `run`'s segment from its checkpoint to its end (or its deadline), its items written
/// to `results`; answers `{tool, segment, segments, scanned, parts, complete}`.
pub async fn segment(ctx: &Ctx, results: &Results, run: Segment) -> Result<Value, String> {
    if run.segment >= run.segments {
        return Err(format!(
            "segment {} is not one of the run's {}",
            run.segment, run.segments
        ));
    }
    let saved = checkpoint(results, run.segment, run.segments).await?;
    let mut parts = saved["parts"].as_u64().unwrap_or(0);
    let mut scanned = saved["scanned"].as_u64().unwrap_or(0);
    let mut complete = saved["complete"] == true;
    let mut start = match &saved["lastKey"] {
        Value::Null => None,
        key => Some(crate::transfer::item_from_json(key)?),
    };
    let mut pages_read = 0u64;
    let counter = super::scan::Counter::default();
    let pages = super::scan::Pages {
        segment: run.segment,
        segments: run.segments,
        read: super::scan::Read::Eventually,
        page_size: run.page_size,
    };
    let mut stopped = false;
    while !complete && !stopped {
        let (items, last) = super::scan::segment(
            ctx,
            pages,
            start.clone(),
            &counter,
            |item| item,
            |read| {
                pages_read += 1;
                stopped = run.stop_at.is_some_and(|at| Instant::now() >= at)
                    || run.stop_after_pages.is_some_and(|most| pages_read >= most);
                stopped || read >= PART_ITEMS
            },
        )
        .await?;
        // The part first, then the checkpoint naming it: stopped between the two, the part is
        // written again under the same name.
        results
            .put(&part_name(run.segment, parts), gzip_lines(&items)?)
            .await?;
        parts += 1;
        scanned += items.len() as u64;
        complete = last.is_none();
        start = last;
        let saved = json!({
            "segment": run.segment,
            "segments": run.segments,
            "parts": parts,
            "scanned": scanned,
            "lastKey": start.as_ref().map(crate::transfer::item_to_json),
            "complete": complete,
        });
        results
            .put(
                &checkpoint_name(run.segment),
                serde_json::to_vec(&saved).expect("JSON"),
            )
            .await?;
    }
    Ok(json!({
        "tool": "fsck",
        "segment": run.segment,
        "segments": run.segments,
        "scanned": scanned,
        "parts": parts,
        "complete": complete,
    }))
}

fn gzip_lines(items: &[Item]) -> Result<Vec<u8>, String> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    for item in items {
        serde_json::to_writer(&mut gz, &crate::transfer::item_to_json(item))
            .map_err(|e| e.to_string())?;
        gz.write_all(b"\n").map_err(|e| e.to_string())?;
    }
    gz.finish().map_err(|e| e.to_string())
}

fn gunzip_lines(bytes: &[u8], into: &mut super::rules::Table) -> Result<(), String> {
    for line in BufReader::new(GzDecoder::new(bytes)).lines() {
        let line = line.map_err(|e| e.to_string())?;
        if line.is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(&line).map_err(|e| e.to_string())?;
        into.take(super::rules::Stored::new(crate::transfer::item_from_json(
            &value,
        )?));
    }
    Ok(())
}

/// Every segment's items read back (each segment must be done), judged as the laptop judges its
/// own scan's ([`super::judge_scanned`]); the whole report written to `report.json`; answers
/// it with its findings listed at most [`FINDINGS_LISTED`], `findingCount`, `remaining` and
/// where the whole report is (`reportObject`).
pub async fn judge(
    ctx: &Ctx,
    results: &Results,
    options: Options,
) -> Result<(Report, Value), String> {
    let mut items = super::rules::Table::of(ctx, []);
    for segment in 0..options.segments {
        let saved = checkpoint(results, segment, options.segments).await?;
        if saved["complete"] != true {
            return Err(format!(
                "segment {segment} of {} has not read its segment to its end ({}): the segments \
                 run first",
                options.segments,
                results.url(&checkpoint_name(segment))
            ));
        }
        for part in 0..saved["parts"].as_u64().unwrap_or(0) {
            let name = part_name(segment, part);
            let bytes = results
                .get(&name)
                .await?
                .ok_or_else(|| format!("{} is missing", results.url(&name)))?;
            gunzip_lines(&bytes, &mut items)
                .map_err(|e| format!("{} is unreadable: {e}", results.url(&name)))?;
        }
    }
    let report = super::judge_table(ctx, items, options).await?;
    let whole = serde_json::to_value(&report).expect("a report serialises");
    results
        .put("report.json", serde_json::to_vec(&whole).expect("JSON"))
        .await?;
    let mut answer = whole;
    if let Some(listed) = answer["findings"].as_array_mut() {
        listed.truncate(FINDINGS_LISTED);
    }
    answer["tool"] = json!("fsck");
    answer["findingCount"] = json!(report.findings.len());
    answer["remaining"] = json!(report.remaining());
    answer["segments"] = json!(options.segments);
    answer["reportObject"] = json!(results.url("report.json"));
    Ok((report, answer))
}
