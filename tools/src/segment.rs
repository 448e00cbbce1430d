//! The stack's tools function (`table-tools`, binary `singlet-tools-lambda`): one item of a
//! Step Functions distributed map, one segment of a table tool's parallel scan, run through the
//! same library code the laptop's command runs for every segment side by side.
//!
//! Its event (docs/guide/tools-on-step-functions.md):
//!
//! ```json
//! {"tool": "migrate", "migration": "vehicles-by-depot", "segment": 3, "segments": 16,
//!  "maxWcu": 250, "maxKeyWcu": 100, "pageSize": 100}
//! ```
//!
//! `maxWcu`, `maxKeyWcu` and `pageSize` may be left out (no table-wide limit; DynamoDB's own
//! per-key limit, 800 here; DynamoDB's 1 MB pages). `stopAfter` stops the segment as if killed
//! after that many writes: a test's, never the state machine's. `results`
//! (`s3://<bucket>/<prefix>`, or `file:///<dir>` locally: [`crate::results`]) is where the
//! segment keeps what outlives an invocation but not the table ([`crate::migrate::on_aws`]): its
//! report so far, a dry run's place (`"dryRun": true`, which needs it), and the survey a
//! migration that claims values (`plates-compact`) reads, which `{"tool": "migrate-survey",
//! ...}` segments write first. The answer is the segment's report, the `--json` one of
//! `migrate` with `segment`, `segments` and `conflictCount` beside it, `complete` saying
//! whether the segment was read to its end; an error is the invocation's failure (`Error`,
//! `Cause`), which the state machine retries. Once every segment has ended,
//! `{"tool": "migrate-gather", "migration": ..., "segment": 0, "segments": 16, "results": ...}`
//! gathers their reports into the run's one report ([`crate::migrate::on_aws::gather_run`]).
//!
//! fsck runs as a map and a reduce ([`crate::fsck::on_aws`]): `{"tool": "fsck", "segment": 3,
//! "segments": 16, "results": "s3://<bucket>/fsck/<run>/"}` reads one segment into the results,
//! and `{"tool": "fsck-judge", "segment": 0, "segments": 16, "results": ..., "repair": true,
//! "maxWcu": 100, "maxKeyWcu": 800}` judges what every segment read.

use crate::migrate::on_aws::{GATHER_TOOL, SURVEY_TOOL};
use crate::migrate::{self, Options};
use serde::Deserialize;
use serde_json::{Value, json};
use singlet_functions::Ctx;
use singlet_functions::store::pace::DEFAULT_MAX_KEY_WCU;

/// The function's name in template.yaml (`${AWS::StackName}-table-tools`), as `invoke` takes it.
pub const FUNCTION: &str = "table-tools";

/// fsck's judge's function (`${AWS::StackName}-table-tools-check`), which the state machine
/// invokes with a [`JUDGE_TOOL`] event.
pub const CHECK_FUNCTION: &str = "table-tools-check";

/// The `tool` of fsck's judge's event.
pub const JUDGE_TOOL: &str = "fsck-judge";

/// Conflicts a segment's report lists at most (it says how many there were): the report is
/// the segment's child execution's output, which Step Functions caps at 256 KiB, and a
/// conflict is a key and a sentence, under 200 bytes. (The map's `ResultWriter` puts every
/// segment's report in S3, so the segments' count is not bounded by the parent's output.)
pub const CONFLICTS_LISTED: usize = 1000;

/// One segment's work, as the state machine hands it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SegmentEvent {
    pub tool: String,
    pub migration: Option<String>,
    pub segment: u32,
    pub segments: u32,
    pub max_wcu: Option<f64>,
    pub max_key_wcu: Option<f64>,
    pub page_size: Option<i32>,
    /// A test hook: stop as if killed after this many writes (migrate), or stop as the deadline
    /// would after this many pages (fsck, migrate-survey).
    pub stop_after: Option<u64>,
    /// The run's results: where fsck's segments leave what they read and its judge its report,
    /// and a migration's segments their survey, their reports and a dry run's place
    /// (`s3://<bucket>/<prefix>`, or `file:///<dir>` locally: [`crate::results`]).
    pub results: Option<String>,
    /// fsck's judge: repair what it finds ([`crate::fsck::Options`]).
    #[serde(default)]
    pub repair: bool,
    /// migrate: plan every item and write nothing. fsck's judge: with `repair`, say what each
    /// repair would write, and write nothing (its segments, which only read, are handed it too).
    #[serde(default)]
    pub dry_run: bool,
}

/// Runs the segment `event` names; answers its report. With a `deadline` (the tools function's:
/// a minute before Lambda's limit), the segment stops between two pages once it has come and
/// answers `complete: false`, and the state machine invokes it again from its checkpoint.
pub async fn handle(
    ctx: &Ctx,
    event: Value,
    deadline: Option<std::time::Instant>,
) -> Result<Value, String> {
    let event: SegmentEvent = serde_json::from_value(event)
        .map_err(|e| format!("the event is not a table tool's segment: {e}"))?;
    if event.segments == 0 {
        return Err("segments is at least 1".into());
    }
    for (name, limit) in [("maxWcu", event.max_wcu), ("maxKeyWcu", event.max_key_wcu)] {
        if limit.is_some_and(|limit| !(limit.is_finite() && limit > 0.0)) {
            return Err(format!("{name} is a number of write units above 0"));
        }
    }
    match event.tool.as_str() {
        "migrate" | SURVEY_TOOL | GATHER_TOOL => {
            let name = event
                .migration
                .as_deref()
                .ok_or_else(|| format!("a {} event names its migration", event.tool))?;
            let migration = singlet_functions::migrations::by_name(name)
                .ok_or_else(|| format!("no migration named {name}"))?;
            let results = match &event.results {
                Some(url) => Some(crate::results::Results::parse(url)?),
                None => None,
            };
            if event.tool != "migrate" {
                let results = results.ok_or_else(|| {
                    format!(
                        "a {} event names its results (s3://<bucket>/<prefix> or file:///<dir>)",
                        event.tool
                    )
                })?;
                if event.tool == GATHER_TOOL {
                    return migrate::on_aws::gather_run(
                        &results,
                        migration,
                        event.segments,
                        event.dry_run,
                    )
                    .await;
                }
                let run = crate::parts::Segment {
                    segment: event.segment,
                    segments: event.segments,
                    page_size: event.page_size,
                    stop_at: deadline,
                    stop_after_pages: event.stop_after,
                };
                return migrate::on_aws::survey_segment(ctx, &results, migration, run).await;
            }
            let options = Options {
                segments: event.segments,
                max_wcu: event.max_wcu,
                max_key_wcu: event.max_key_wcu,
                dry_run: event.dry_run,
                page_size: event.page_size,
                stop_after: event.stop_after,
                stop_at: deadline,
            };
            let (report, ended) = migrate::on_aws::run_one_segment(
                ctx,
                migration,
                event.segment,
                &options,
                results.as_ref(),
            )
            .await?;
            let conflict_count = report.conflicts.len();
            let mut answer = serde_json::to_value(&report).expect("a report is JSON");
            if let Some(listed) = answer["conflicts"].as_array_mut() {
                listed.truncate(CONFLICTS_LISTED);
            }
            answer["conflictCount"] = json!(conflict_count);
            answer["segment"] = json!(event.segment);
            answer["segments"] = json!(event.segments);
            // The segment's `complete` is whether it was read to its end: what the state
            // machine invokes it again on. Whether the migration is complete is the run's
            // report's (`gather`): every segment ended, nothing unsettled, not a dry run.
            answer["complete"] = json!(ended);
            Ok(answer)
        }
        "fsck" => {
            let results = fsck_results(&event)?;
            // A run's `dryRun` reaches its segments too: only the judge repairs, or says what
            // it would.
            crate::fsck::on_aws::segment(
                ctx,
                &results,
                crate::parts::Segment {
                    segment: event.segment,
                    segments: event.segments,
                    page_size: event.page_size,
                    stop_at: deadline,
                    stop_after_pages: event.stop_after,
                },
            )
            .await
        }
        // The reduce after every fsck segment is done (`segment` is unused: 0).
        JUDGE_TOOL => {
            if event.dry_run && !event.repair {
                return Err("dryRun is for repair: true".into());
            }
            let results = fsck_results(&event)?;
            let options = crate::fsck::Options {
                repair: event.repair,
                dry_run: event.dry_run,
                segments: event.segments,
                progress: false,
                max_wcu: event.max_wcu,
                max_key_wcu: event.max_key_wcu.unwrap_or(DEFAULT_MAX_KEY_WCU),
            };
            let (_, answer) = crate::fsck::on_aws::judge(ctx, &results, options).await?;
            Ok(answer)
        }
        other => Err(format!(
            "no table tool named {other} (migrate, {SURVEY_TOOL}, {GATHER_TOOL}, fsck, {JUDGE_TOOL})"
        )),
    }
}

/// Where an fsck segment or judge keeps its results: the event's `results`.
fn fsck_results(event: &SegmentEvent) -> Result<crate::results::Results, String> {
    let url = event
        .results
        .as_deref()
        .ok_or("an fsck segment names its results (s3://<bucket>/<prefix> or file:///<dir>)")?;
    crate::results::Results::parse(url)
}
