//! `migrate` as the stack's state machine runs it (docs/guide/tools-on-step-functions.md,
//! "Migrations on AWS"): what one segment run alone keeps beyond the table, in its run's
//! results ([`crate::results`]).
//!
//! - **The survey** of a migration that makes values unique (`plates-compact`): what every item
//!   claims, which no segment can read alone. The state machine's map runs twice: first each
//!   segment writes the claims of its items to the results ([`survey_segment`], in parts as
//!   [`crate::parts`] writes them), then each migrating segment reads them all back
//!   ([`survey`]) before its first write, as the laptop's run surveys before its segments
//!   start. Like the laptop's, the survey is the run's own: a run started again (another
//!   execution) surveys again.
//! - **The segment's report** (`report-<n>.json`), saved after each page: a segment the
//!   deadline stopped is invoked again, and its report goes on from the counts and the
//!   conflicts the invocations before it found, so the run's report is the whole run's.
//! - **A dry run's place**: a dry run writes nothing to the table, checkpoints included, so its
//!   report also holds its place (the last key read, whether the segment is done), and a dry
//!   run stopped by its deadline goes on from there.
//! - **The run's report** ([`gather_run`]): once every segment has ended, their reports gathered
//!   into the one the laptop's `migrate --json` prints ([`gather`]), `report.json` beside them
//!   and, its conflicts listed at most [`CONFLICTS_IN_OUTPUT`], the execution's output.

use super::{
    Checkpoint, Conflict, Earlier, Options, Report, Shared, check_after, checkpoints, mark_started,
    run_segment, throttle_of,
};
use crate::parts::{self, Segment};
use crate::progress::Progress;
use crate::results::Results;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use singlet_functions::Ctx;
use singlet_functions::migrations::{Migration, Settings, Survey};
use singlet_functions::store::Item;
use std::sync::atomic::Ordering;

/// The `tool` of a survey segment's event.
pub const SURVEY_TOOL: &str = "migrate-survey";

/// The `tool` of the event that gathers a run's report.
pub const GATHER_TOOL: &str = "migrate-gather";

/// Conflicts the execution's output lists at most (Step Functions caps an output at 256 KiB);
/// `conflictCount` counts them all, and `report.json` lists them all.
pub const CONFLICTS_IN_OUTPUT: usize = 50;

/// The name the survey's parts and checkpoints begin with (`survey-3.json`).
const SURVEY_STEM: &str = "survey";

/// Runs segment `segment` of `options.segments` alone, from its checkpoint to its end: what the
/// stack's tools function runs for one item of the state machine's distributed map
/// ([`crate::segment`]), through the same per-segment function (`run_segment`) the laptop's
/// [`super::run`] runs for every segment side by side. Run again after a kill, it resumes from the
/// segment's checkpoint; run after the segment is done, it reads nothing. Answers the report
/// and whether the segment has been read to its end (a dry run's report is never `complete`,
/// as the laptop's is not: it changed nothing).
///
/// With the run's `results`, the report is the segment's over every
/// invocation of this run, and a dry run goes on from the place the one before it reached; a
/// migration that surveys what every item claims (`plates-compact`) reads the survey its
/// run's survey segments wrote there.
///
/// Refused, with the reason: a segment outside the run, a run of another segment count stopped
/// part way, a migration that must wait for another, a survey or a dry run without results.
pub async fn run_one_segment(
    ctx: &Ctx,
    migration: &'static Migration,
    segment: u32,
    options: &Options,
    results: Option<&Results>,
) -> Result<(Report, bool), String> {
    let segments = options.segments.max(1);
    if segment >= segments {
        return Err(format!(
            "segment {segment} is not one of the run's {segments} (0 to {})",
            segments - 1
        ));
    }
    crate::load_marker::refuse_unfinished(&ctx.db, &ctx.table).await?;
    let needs_results = |why: &str| {
        format!(
            "{} {why}, which a segment alone keeps in its run's results: name them \
             (s3://<bucket>/<prefix> or file:///<dir>)",
            migration.name
        )
    };
    let throttle = throttle_of(options);
    let previous = match results {
        Some(results) => saved(results, segment, segments).await?,
        None => None,
    };
    let checkpoint = if options.dry_run {
        match &previous {
            Some(previous) => Some(previous.place()?),
            None if results.is_none() => {
                return Err(needs_results("keeps a dry run's place"));
            }
            None => None,
        }
    } else {
        let saved = checkpoints(ctx, migration).await?;
        if let Some((_, first)) = saved.first() {
            let unfinished = saved.iter().any(|(_, c)| !c.done);
            if first.segments != segments {
                return Err(match unfinished {
                    true => format!(
                        "a run of {} with {} segments was stopped part way: resume it with {} segments",
                        migration.name, first.segments, first.segments
                    ),
                    false => format!(
                        "{} was run to its end with {} segments: run it with {} segments, or start a new \
                         pass from a machine (`migrate {}`), which clears the finished run's checkpoints",
                        migration.name, first.segments, first.segments, migration.name
                    ),
                });
            }
        }
        check_after(ctx, migration).await?;
        saved
            .into_iter()
            .find(|(s, _)| *s == segment)
            .map(|(_, c)| c)
    };
    // The survey before the first write (a segment refused for want of it has written
    // nothing, its mark included), and not at all for a segment with nothing left to plan.
    let survey = match (migration.claims, results) {
        (None, _) => Survey::default(),
        _ if checkpoint.as_ref().is_some_and(|c| c.done) => Survey::default(),
        (Some(_), Some(results)) => survey(results, migration.name, segments).await?,
        (Some(_), None) => {
            return Err(needs_results(
                "first reads what every item of the table claims (its survey)",
            ));
        }
    };
    if checkpoint.is_none() && !options.dry_run {
        mark_started(ctx, migration, segment, segments, &throttle).await?;
    }
    let settings = Settings {
        loan_history_days: ctx.loan_history_days,
    };
    let mut shared = Shared::new(throttle, options, survey, settings);
    // A segment's function logs its report when it ends; a count a second on standard error
    // would be hundreds of unstructured lines in its log group per invocation.
    shared.progress = Progress::new(false);
    if let Some(previous) = previous {
        previous.restore(&shared);
    }
    // A segment a run that writes finished before: the conflicts it left are still the table's
    // (its checkpoint counts them), and this run's report says so, as a new pass would.
    if let (Some(done), false) = (checkpoint.as_ref().filter(|c| c.done), options.dry_run) {
        let listed = shared.conflicts.lock().unwrap().len() as u64;
        shared.earlier.lock().unwrap().conflicts_before = done.conflicts.saturating_sub(listed);
    }
    // Done before this invocation (by an earlier execution, or a retried map item): it reads
    // no page, so saves no report unless told to below.
    let done_before = checkpoint.as_ref().is_some_and(|c| c.done);
    let ended = {
        let shared = &shared;
        let after_page = move |last_key: Option<Item>| -> BoxFuture<'_, Result<(), String>> {
            Box::pin(async move {
                match results {
                    Some(results) => {
                        save(results, segment, segments, last_key.as_ref(), shared).await
                    }
                    None => Ok(()),
                }
            })
        };
        run_segment(
            ctx,
            migration,
            segment,
            segments,
            checkpoint.unwrap_or_default(),
            shared,
            &after_page,
        )
        .await?
    };
    // This run's gathering reads a report for every segment.
    if let (Some(results), true) = (results, done_before) {
        save(results, segment, segments, None, &shared).await?;
    }
    Ok((shared.report(migration, ended), ended))
}

/// Writes the claims of `run`'s segment's items to `results`, from its checkpoint to its end
/// (or its deadline); answers `{tool, migration, segment, segments, scanned, claimed, parts,
/// complete}`.
pub async fn survey_segment(
    ctx: &Ctx,
    results: &Results,
    migration: &Migration,
    run: Segment,
) -> Result<Value, String> {
    let claims = migration.claims.ok_or_else(|| {
        format!(
            "{} claims no values: it has no survey (run its segments)",
            migration.name
        )
    })?;
    let written = parts::write(ctx, results, SURVEY_STEM, run, |item| {
        let claimed = claims(&item);
        (!claimed.is_empty()).then(|| json!({"pk": super::pk_of(&item), "claims": claimed}))
    })
    .await?;
    Ok(json!({
        "tool": SURVEY_TOOL,
        "migration": migration.name,
        "segment": run.segment,
        "segments": run.segments,
        "scanned": written.scanned,
        "claimed": written.kept,
        "parts": written.parts,
        "complete": written.complete,
    }))
}

/// What every item claims, as the survey's segments wrote it to `results` (each of them done).
pub async fn survey(results: &Results, name: &str, segments: u32) -> Result<Survey, String> {
    let mut claimed = Vec::new();
    parts::read(results, SURVEY_STEM, segments, |line| {
        let pk = line["pk"].as_str().ok_or("a line without its pk")?;
        let claims = line["claims"]
            .as_array()
            .ok_or("a line without its claims")?
            .iter()
            .map(|claim| claim.as_str().map(str::to_owned))
            .collect::<Option<Vec<String>>>()
            .ok_or("a claim that is not text")?;
        claimed.push((pk.to_owned(), claims));
        Ok(())
    })
    .await
    .map_err(|e| format!("{name}'s survey: {e}"))?;
    let survey = Survey::new(claimed);
    eprintln!(
        "migrate {name}: surveyed, {} values claimed more than once",
        survey.collisions()
    );
    Ok(survey)
}

/// A segment's report as its invocations have left it, and a dry run's place.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Saved {
    segments: u32,
    scanned: u64,
    changed: u64,
    already_changed: u64,
    unsettled: u64,
    conflicts: Vec<Conflict>,
    sample: Vec<String>,
    /// A dry run's place (a run that writes keeps it in the table's checkpoints).
    last_key: Option<Value>,
    /// Read to its end.
    done: bool,
    /// The most write units in a second over the segment's invocations, and the key written
    /// most (as the report shows it: a personal value by its prefix alone).
    #[serde(default)]
    peak_wcu_per_second: f64,
    #[serde(default)]
    hottest_key: Option<Value>,
    /// Conflicts an earlier run left in a segment that was done before this run: counted (the
    /// table's checkpoint counts them), not listed (the run that found them listed them).
    #[serde(default)]
    conflicts_before: u64,
}

fn report_name(segment: u32) -> String {
    format!("report-{segment}.json")
}

/// Segment `segment`'s report as the invocations before this one left it, if any, refused if it
/// is of another segment count.
pub(super) async fn saved(
    results: &Results,
    segment: u32,
    segments: u32,
) -> Result<Option<Saved>, String> {
    let name = report_name(segment);
    let Some(bytes) = results.get(&name).await? else {
        return Ok(None);
    };
    let saved: Saved = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} is no segment's report: {e}", results.url(&name)))?;
    if saved.segments != segments {
        return Err(format!(
            "{} is segment {segment}'s of {} segments, not of {segments}: these results are \
             another run's",
            results.url(&name),
            saved.segments
        ));
    }
    Ok(Some(saved))
}

impl Saved {
    /// A dry run's place.
    pub(super) fn place(&self) -> Result<Checkpoint, String> {
        Ok(Checkpoint {
            segments: self.segments,
            last_key: match &self.last_key {
                Some(key) => Some(crate::transfer::item_from_json(key)?),
                None => None,
            },
            done: self.done,
            // Unsettled items are listed with the conflicts.
            conflicts: self.conflicts.len() as u64,
        })
    }

    /// The counts and the conflicts into `shared`, for this invocation to add to.
    pub(super) fn restore(self, shared: &Shared<'_>) {
        let counters = &shared.counters;
        counters.scanned.store(self.scanned, Ordering::Relaxed);
        counters.changed.store(self.changed, Ordering::Relaxed);
        counters
            .already
            .store(self.already_changed, Ordering::Relaxed);
        counters.unsettled.store(self.unsettled, Ordering::Relaxed);
        *shared.conflicts.lock().unwrap() = self.conflicts;
        *shared.sample.lock().unwrap() = self.sample;
        *shared.earlier.lock().unwrap() = Earlier {
            peak_wcu_per_second: self.peak_wcu_per_second,
            hottest_key: self.hottest_key,
            conflicts_before: self.conflicts_before,
        };
    }

    /// The segment's report as the state machine's map would have it (`complete`: read to its
    /// end), for [`gather`].
    fn as_report(&self) -> Value {
        json!({
            "scanned": self.scanned,
            "changed": self.changed,
            "alreadyChanged": self.already_changed,
            "unsettled": self.unsettled,
            "conflicts": self.conflicts,
            "conflictCount": self.conflicts.len() as u64 + self.conflicts_before,
            "complete": self.done,
            "sample": self.sample,
            "peakWcuPerSecond": self.peak_wcu_per_second,
            "hottestKey": self.hottest_key,
        })
    }
}

/// Saves the segment's report so far (and, for a dry run, its place: the last key read, and
/// whether it is done).
pub(super) async fn save(
    results: &Results,
    segment: u32,
    segments: u32,
    last_key: Option<&Item>,
    shared: &Shared<'_>,
) -> Result<(), String> {
    let counters = &shared.counters;
    // This invocation's peak against the ones before it.
    let Earlier {
        peak_wcu_per_second: earlier,
        hottest_key: earlier_hottest,
        conflicts_before,
    } = shared.earlier.lock().unwrap().clone();
    let hottest = shared
        .throttle
        .hottest_key()
        .map(|key| serde_json::to_value(key).expect("JSON"));
    let units = |key: &Option<Value>| {
        key.as_ref()
            .and_then(|key| key["peakWcuPerSecond"].as_f64())
            .unwrap_or(0.0)
    };
    let hottest = match units(&hottest) >= units(&earlier_hottest) {
        true => hottest.or(earlier_hottest),
        false => earlier_hottest,
    };
    let saved = Saved {
        segments,
        scanned: counters.scanned.load(Ordering::Relaxed),
        changed: counters.changed.load(Ordering::Relaxed),
        already_changed: counters.already.load(Ordering::Relaxed),
        unsettled: counters.unsettled.load(Ordering::Relaxed),
        conflicts: shared.conflicts.lock().unwrap().clone(),
        sample: shared.sample.lock().unwrap().clone(),
        last_key: last_key.map(crate::transfer::item_to_json),
        done: last_key.is_none(),
        peak_wcu_per_second: earlier.max(shared.throttle.peak()),
        hottest_key: hottest,
        conflicts_before,
    };
    results
        .put(
            &report_name(segment),
            serde_json::to_vec(&saved).expect("JSON"),
        )
        .await
}

/// Every segment's report of a run of `segments` (each segment ended), gathered into the run's
/// one report ([`gather`]); written whole to `report.json` in `results` and answered with its
/// conflicts listed at most [`CONFLICTS_IN_OUTPUT`], `conflictCount`, and where the whole is
/// (`reportObject`).
pub async fn gather_run(
    results: &Results,
    migration: &Migration,
    segments: u32,
    dry_run: bool,
) -> Result<Value, String> {
    let mut reports = Vec::new();
    for segment in 0..segments {
        let saved = saved(results, segment, segments).await?.ok_or_else(|| {
            format!(
                "segment {segment} of {segments} left no report ({}): the segments run first",
                results.url(&report_name(segment))
            )
        })?;
        reports.push(saved.as_report());
    }
    let whole = gather(migration.name, &reports, u64::from(segments), dry_run);
    results
        .put_report("migrate", whole, "conflicts", CONFLICTS_IN_OUTPUT)
        .await
}

/// The segments' `reports` of a run of `segments`, gathered into one report as the laptop's
/// `migrate --json` prints it: counts added, conflicts listed (each segment's report lists at
/// most [`crate::segment::CONFLICTS_LISTED`]; `conflictCount` is all of them), `complete` when
/// every segment was read to its end and no item was left unsettled (never for a dry run, as
/// the laptop's). `ended` says whether every segment was read to its end; `sample`, a dry run's,
/// lists the first few keys its segments would change. `peakWcuPerSecond` is the segments'
/// peaks added: an upper bound, their peaks need not have been in the same second.
pub fn gather(migration: &str, reports: &[Value], segments: u64, dry_run: bool) -> Value {
    let sum = |field: &str| -> u64 { reports.iter().filter_map(|r| r[field].as_u64()).sum() };
    let peak: f64 = reports
        .iter()
        .filter_map(|r| r["peakWcuPerSecond"].as_f64())
        .sum();
    let conflicts: Vec<Value> = reports
        .iter()
        .flat_map(|r| r["conflicts"].as_array().cloned().unwrap_or_default())
        .collect();
    let hottest = reports
        .iter()
        .filter(|r| r["hottestKey"].is_object())
        .max_by(|a, b| {
            let units = |r: &Value| r["hottestKey"]["peakWcuPerSecond"].as_f64().unwrap_or(0.0);
            units(a).total_cmp(&units(b))
        })
        .map(|r| r["hottestKey"].clone());
    let ended = !reports.is_empty()
        && reports.len() as u64 == segments
        && reports.iter().all(|r| r["complete"] == true);
    let sample: Vec<Value> = reports
        .iter()
        .flat_map(|r| r["sample"].as_array().cloned().unwrap_or_default())
        .take(5)
        .collect();
    json!({
        "migration": migration,
        "scanned": sum("scanned"),
        "changed": sum("changed"),
        "alreadyChanged": sum("alreadyChanged"),
        "unsettled": sum("unsettled"),
        "conflicts": conflicts,
        "conflictCount": sum("conflictCount"),
        "complete": ended && sum("unsettled") == 0 && !dry_run,
        "ended": ended,
        "dryRun": dry_run,
        "sample": sample,
        "peakWcuPerSecond": peak,
        "hottestKey": hottest,
        "segments": reports.len(),
    })
}
