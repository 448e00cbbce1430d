//! `fsck` as the stack's state machine runs it (docs/guide/tools-on-step-functions.md, "fsck on
//! AWS"): a map and a reduce over the same code the laptop's `fsck` runs.
//!
//! - **Each segment** ([`segment`]) is one invocation of the tools function: it reads its
//!   segment of the parallel `Scan` and writes every item it read to the run's results
//!   ([`crate::parts`]: gzipped JSON Lines, one item in DynamoDB JSON a line, each part followed
//!   by the segment's checkpoint, `segment-<n>.json`). An invocation stopped (its deadline, a
//!   kill, a failure) and invoked again goes on from the last checkpoint; a segment done
//!   answers at once and reads nothing.
//! - **The judge** ([`judge`]) is one invocation of the tools check function once every
//!   segment is done: it reads every part back and hands the items to [`super::judge_scanned`],
//!   the same rules, the same strongly consistent confirmation and the same paced, conditioned
//!   repairs the laptop runs after its own scan. Rules span items in any segment (a plate's lock
//!   and its vehicle, a loan and its copy), so no segment can judge its own items alone.
//!   Its report is `report.json` beside the parts (the `--json` report, whole) and, with the
//!   findings listed at most [`FINDINGS_LISTED`], the execution's output.

use super::{Options, Report};
use crate::parts;
use crate::parts::Segment;
use crate::results::Results;
use serde_json::{Value, json};
use singlet_functions::Ctx;

/// Findings the execution's output lists at most (Step Functions caps an output at 256 KiB);
/// `findingCount` counts them all, and `report.json` lists them all.
pub const FINDINGS_LISTED: usize = 50;

/// The name fsck's segments' parts and checkpoints begin with (`segment-3.json`).
const STEM: &str = "segment";

/// Reads `run`'s segment from its checkpoint to its end (or its deadline), every item written
/// to `results` ([`crate::parts`]); answers `{tool, segment, segments, scanned, parts,
/// complete}`.
pub async fn segment(ctx: &Ctx, results: &Results, run: Segment) -> Result<Value, String> {
    let written = parts::write(ctx, results, STEM, run, |item| {
        Some(crate::transfer::item_to_json(&item))
    })
    .await?;
    Ok(json!({
        "tool": "fsck",
        "segment": run.segment,
        "segments": run.segments,
        "scanned": written.scanned,
        "parts": written.parts,
        "complete": written.complete,
    }))
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
    parts::read(results, STEM, options.segments, |line| {
        items.take(super::rules::Stored::new(crate::transfer::item_from_json(
            &line,
        )?));
        Ok(())
    })
    .await?;
    let report = super::judge_table(ctx, items, options).await?;
    let whole = serde_json::to_value(&report).expect("a report serialises");
    let mut answer = results
        .put_report("fsck", whole, "findings", FINDINGS_LISTED)
        .await?;
    answer["findingCount"] = json!(report.findings.len());
    answer["remaining"] = json!(report.remaining());
    answer["segments"] = json!(options.segments);
    Ok((report, answer))
}
