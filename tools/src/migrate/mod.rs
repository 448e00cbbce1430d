//! `cargo run -- migrate [<name>]`: runs one of [`singlet_functions::migrations`] over the whole
//! table, online (docs/API.md, "Migrations").
//!
//! - A parallel `Scan` of `--segments` segments, each read page by page; every item goes through
//!   the migration's pure `plan`, and its writes are applied conditioned, one item at a time.
//! - On AWS, one segment is one invocation of the stack's tools function
//!   ([`on_aws::run_one_segment`]), which keeps what outlives an invocation but not the table (a
//!   survey, its report so far, a dry run's place) in the run's results.
//! - Resumable: after each page's writes, the segment's place (`LastEvaluatedKey`) is saved in the
//!   table (`MIGRATION#<name>` / `SEGMENT#<i>`), so a run that is killed starts again at the page
//!   it was in, and reads at most that one page again; the page's items already changed fail
//!   their conditions and are written no second time. Every segment's checkpoint is saved once
//!   before the first write too, so a run killed before its first page's checkpoint is listed
//!   `in progress`, not `not started`.
//! - Throttled: with `--max-wcu`, every write first waits until the write units consumed in the
//!   last second (as `ReturnConsumedCapacity` reported them) leave room for the most one item's
//!   writes have consumed so far ([`crate::throttle`]).
//! - `--dry-run` plans every item and writes nothing, checkpoints included.
//! - A migration that makes values unique under a new rule (`plates-compact`) first reads what
//!   every item claims (one more parallel `Scan`, not checkpointed: a resumed run reads it again),
//!   so both items of a collision are reported and neither is changed.
//! - A migration that takes items from the version another one writes runs only once that one
//!   is complete.

pub mod on_aws;

use crate::progress::Progress;
use crate::throttle::Throttle;
use serde::{Deserialize, Serialize};
use singlet_functions::Ctx;
use singlet_functions::migrations::{Migration, Plan, Settings, Survey};
use singlet_functions::model::Entity;
use singlet_functions::model::migration::MigrationCheckpoint;
use singlet_functions::store::Item;
use singlet_functions::store::migration::Applied;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a checkpoint's put consumes: one small item.
const CHECKPOINT_UNITS: f64 = 1.0;

/// How a run goes.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub segments: u32,
    /// Write units per second, at most.
    pub max_wcu: Option<f64>,
    /// Write units per second into any one partition key value, at most (`None`: 800).
    pub max_key_wcu: Option<f64>,
    pub dry_run: bool,
    /// Items per `Scan` page, at most (DynamoDB's own limit is 1 MB a page): a smaller page is a
    /// checkpoint more often.
    pub page_size: Option<i32>,
    /// A test hook: stop as if killed after this many successful writes, before the page's
    /// checkpoint is saved.
    pub stop_after: Option<u64>,
    /// Stop between two pages, once the page's checkpoint is saved, when this time has come:
    /// the tools function's deadline, a little before Lambda's limit, so that the segment is
    /// invoked again from a saved place rather than killed mid-page.
    pub stop_at: Option<std::time::Instant>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Conflict {
    pub pk: String,
    pub detail: String,
}

/// What a run did (`--json` prints it).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub migration: &'static str,
    /// Items read in this run.
    pub scanned: u64,
    /// Items this run changed (with `--dry-run`: would change).
    pub changed: u64,
    /// Items whose writes found their condition failed and that, read again, needed nothing
    /// more: another writer migrated them (or removed them) first.
    pub already_changed: u64,
    /// Items still of the old version after [`REFUSED_ATTEMPTS`] refused writes, each read
    /// again before the next: listed with the conflicts, and the run is not `complete`.
    pub unsettled: u64,
    pub conflicts: Vec<Conflict>,
    /// Every segment has been read to its end (over this run and the runs it resumed).
    pub complete: bool,
    pub dry_run: bool,
    /// With `--dry-run`: the keys of a few items it would change.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sample: Vec<String>,
    /// The most write units consumed in any one-second window of this run.
    pub peak_wcu_per_second: f64,
    /// The partition key value written most in any one second: kept under `--max-key-wcu`.
    pub hottest_key: Option<singlet_functions::store::pace::HottestKey>,
}

/// A migration's state in the table, for `migrate` without a name.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    pub migration: &'static str,
    pub summary: &'static str,
    /// `not started`, `in progress`, `conflicts` (every segment read, and items left as they
    /// were: run it again once they are resolved) or `complete`.
    pub state: &'static str,
    pub segments_done: u32,
    pub segments: u32,
    /// The items its runs left as they were.
    pub conflicts: u64,
}

/// One segment's saved place.
#[derive(Debug, Clone, Default)]
struct Checkpoint {
    segments: u32,
    last_key: Option<Item>,
    done: bool,
    /// Items of the segment left as they were, up to `last_key`.
    conflicts: u64,
}

fn read_checkpoint(item: &Item) -> Option<(u32, Checkpoint)> {
    let saved = MigrationCheckpoint::from_item(item).ok()?;
    let last_key = match &saved.last_key {
        Some(json) => {
            let value: serde_json::Value = serde_json::from_str(json).ok()?;
            Some(crate::transfer::item_from_json(&value).ok()?)
        }
        None => None,
    };
    Some((
        saved.segment,
        Checkpoint {
            segments: saved.segments,
            last_key,
            done: saved.done,
            conflicts: saved.conflicts,
        },
    ))
}

async fn checkpoints(ctx: &Ctx, migration: &Migration) -> Result<Vec<(u32, Checkpoint)>, String> {
    let items = ctx
        .partition(&MigrationCheckpoint::partition(migration.name))
        .await
        .map_err(|e| format!("cannot read the checkpoints: {e:?}"))?;
    Ok(items.iter().filter_map(read_checkpoint).collect())
}

/// Where each migration stands.
pub async fn states(ctx: &Ctx) -> Result<Vec<State>, String> {
    let mut states = Vec::new();
    for migration in singlet_functions::migrations::MIGRATIONS {
        let saved = checkpoints(ctx, migration).await?;
        let segments = saved.first().map_or(0, |(_, c)| c.segments);
        let done = saved.iter().filter(|(_, c)| c.done).count() as u32;
        let conflicts = saved.iter().map(|(_, c)| c.conflicts).sum();
        let state = match (segments, done) {
            (0, _) => "not started",
            // Items left as they were are still of the old version: an entity cannot yet move
            // its current version past the next (readers read the current and the one before).
            (n, d) if d >= n && conflicts > 0 => "conflicts",
            (n, d) if d >= n => "complete",
            _ => "in progress",
        };
        states.push(State {
            migration: migration.name,
            summary: migration.summary,
            state,
            segments_done: done,
            segments,
            conflicts,
        });
    }
    Ok(states)
}

/// Counters shared by the segments.
#[derive(Default)]
struct Counters {
    scanned: AtomicU64,
    changed: AtomicU64,
    already: AtomicU64,
    unsettled: AtomicU64,
    written_total: AtomicU64,
}

impl Counters {
    /// The running count, as progress tells it.
    fn line(&self, migration: &str) -> String {
        format!(
            "migrate {migration}: scanned {}, changed {}",
            self.scanned.load(Ordering::Relaxed),
            self.changed.load(Ordering::Relaxed)
        )
    }
}

/// Runs `migration` over the table.
pub async fn run(
    ctx: &Ctx,
    migration: &'static Migration,
    options: &Options,
) -> Result<Report, String> {
    crate::load_marker::refuse_unfinished(&ctx.db, &ctx.table).await?;
    let segments = options.segments.max(1);
    let mut saved = checkpoints(ctx, migration).await?;
    let previous = saved.first().map(|(_, c)| c.segments);
    let unfinished = saved.iter().any(|(_, c)| !c.done);
    if let Some(previous) = previous {
        if unfinished && previous != segments && !options.dry_run {
            return Err(format!(
                "a run of {} with --segments {previous} was stopped part way: resume it with --segments {previous}",
                migration.name
            ));
        }
        if !unfinished && !options.dry_run {
            // A finished migration run again is a new pass: it finds nothing left to change
            // unless items of the old shape were written since.
            ctx.delete_partition(&MigrationCheckpoint::partition(migration.name))
                .await
                .map_err(|e| format!("cannot clear the finished run's checkpoints: {e:?}"))?;
            saved.clear();
        }
    }
    if options.dry_run {
        saved.clear();
    }
    if !options.dry_run {
        check_after(ctx, migration).await?;
    }
    let survey = match migration.claims {
        None => Survey::default(),
        Some(claims) => survey(ctx, migration.name, claims, segments, options.page_size).await?,
    };

    let settings = Settings {
        loan_history_days: ctx.loan_history_days,
    };
    let throttle = throttle_of(options);

    if !options.dry_run {
        // Every segment is marked started before the first write: a run killed before its first
        // page's checkpoint has changed items already, and must be listed `in progress` (and
        // resumed with its `--segments`), never `not started`.
        futures::future::try_join_all(
            (0..segments)
                .filter(|segment| !saved.iter().any(|(s, _)| s == segment))
                .map(|segment| mark_started(ctx, migration, segment, segments, &throttle)),
        )
        .await?;
    }
    let shared = Shared::new(throttle, options, survey, settings);
    let nothing_after =
        |_| -> futures::future::BoxFuture<'_, Result<(), String>> { Box::pin(async { Ok(()) }) };
    let results = futures::future::join_all((0..segments).map(|segment| {
        let checkpoint = saved
            .iter()
            .find(|(s, _)| *s == segment)
            .map(|(_, c)| c.clone())
            .unwrap_or_default();
        run_segment(
            ctx,
            migration,
            segment,
            segments,
            checkpoint,
            &shared,
            &nothing_after,
        )
    }))
    .await;
    let mut complete = true;
    for result in results {
        complete &= result?;
    }
    Ok(shared.report(migration, complete))
}

/// What the segments of one run share: the pacing, the counters, the conflicts found, the plan's
/// inputs. The laptop's run shares one between all its segments; a segment run alone (a function
/// of the stack, [`on_aws::run_one_segment`]) has one of its own.
struct Shared<'o> {
    throttle: Throttle,
    options: &'o Options,
    survey: Survey,
    settings: Settings,
    /// Learned from the writes themselves, across the segments: the most one item's writes have
    /// consumed. The most, not the last: a refused write (a page read again after a stop) costs
    /// less than an applied one, and admitting the next on that would let a window pass the limit.
    estimate: Mutex<f64>,
    counters: Counters,
    conflicts: Mutex<Vec<Conflict>>,
    sample: Mutex<Vec<String>>,
    stopped: std::sync::atomic::AtomicBool,
    progress: Progress,
    /// A segment run alone: what its earlier invocations (and runs) left that this one's
    /// saved report goes on from ([`on_aws`]).
    earlier: Mutex<Earlier>,
}

/// What a segment's earlier invocations, and a run that finished it before, left for a segment
/// run alone to go on from in the report it saves ([`on_aws`]).
#[derive(Debug, Default, Clone)]
struct Earlier {
    peak_wcu_per_second: f64,
    hottest_key: Option<serde_json::Value>,
    conflicts_before: u64,
}

impl<'o> Shared<'o> {
    fn new(throttle: Throttle, options: &'o Options, survey: Survey, settings: Settings) -> Self {
        Self {
            throttle,
            options,
            survey,
            settings,
            estimate: Mutex::new(1.0),
            counters: Counters::default(),
            conflicts: Mutex::new(Vec::new()),
            sample: Mutex::new(Vec::new()),
            stopped: std::sync::atomic::AtomicBool::new(false),
            progress: Progress::new(true),
            earlier: Mutex::default(),
        }
    }

    /// The run's report, once its segments have ended (`complete`: each read to its end).
    fn report(self, migration: &'static Migration, complete: bool) -> Report {
        self.progress.finish(&self.counters.line(migration.name));
        let unsettled = self.counters.unsettled.into_inner();
        let mut conflicts = self.conflicts.into_inner().unwrap();
        conflicts.sort_by(|a, b| a.pk.cmp(&b.pk));
        Report {
            migration: migration.name,
            scanned: self.counters.scanned.into_inner(),
            changed: self.counters.changed.into_inner(),
            already_changed: self.counters.already.into_inner(),
            unsettled,
            conflicts,
            complete: complete && unsettled == 0 && !self.options.dry_run,
            dry_run: self.options.dry_run,
            sample: self.sample.into_inner().unwrap(),
            peak_wcu_per_second: self.throttle.peak(),
            hottest_key: self.throttle.hottest_key(),
        }
    }
}

/// What a segment's run does after each page, its place saved: given the page's last key
/// (`None` at the segment's end). The laptop's run does nothing more; a segment run alone on
/// AWS saves its report so far ([`on_aws`]).
type AfterPage<'s> =
    dyn Fn(Option<Item>) -> futures::future::BoxFuture<'s, Result<(), String>> + Sync + 's;

/// Reads one segment from its `checkpoint` to its end (or to a stop), planning and applying each
/// item's change and saving the segment's place after each page: the one code path of both the
/// laptop's run (every segment side by side) and a segment's function on AWS. Answers whether
/// the segment was read to its end.
async fn run_segment<'s>(
    ctx: &Ctx,
    migration: &Migration,
    segment: u32,
    segments: u32,
    checkpoint: Checkpoint,
    shared: &'s Shared<'_>,
    after_page: &AfterPage<'s>,
) -> Result<bool, String> {
    let Shared {
        throttle,
        options,
        survey,
        settings,
        counters,
        conflicts,
        sample,
        stopped,
        progress,
        ..
    } = shared;
    if checkpoint.done {
        return Ok(true);
    }
    let mut start = checkpoint.last_key;
    let mut segment_conflicts = checkpoint.conflicts;
    loop {
        if stopped.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let (items, last_key) = ctx
            .scan_page(segment, segments, start.clone(), options.page_size)
            .await
            .map_err(|e| format!("cannot scan segment {segment}: {e:?}"))?;
        for item in &items {
            counters.scanned.fetch_add(1, Ordering::Relaxed);
            match (migration.plan)(item, survey, settings) {
                Plan::Skip => {}
                Plan::Conflict(detail) => {
                    segment_conflicts += 1;
                    conflicts.lock().unwrap().push(Conflict {
                        pk: pk_of(item),
                        detail,
                    });
                }
                Plan::Change(_) if options.dry_run => {
                    counters.changed.fetch_add(1, Ordering::Relaxed);
                    let mut sample = sample.lock().unwrap();
                    if sample.len() < 5 {
                        sample.push(pk_of(item));
                    }
                }
                Plan::Change(change) => match settle(ctx, migration, item, change, shared).await? {
                    Settled::Written => {
                        counters.changed.fetch_add(1, Ordering::Relaxed);
                        let total = counters.written_total.fetch_add(1, Ordering::Relaxed) + 1;
                        if options.stop_after.is_some_and(|limit| total >= limit) {
                            stopped.store(true, Ordering::Relaxed);
                            return Ok(false);
                        }
                    }
                    Settled::Already => {
                        counters.already.fetch_add(1, Ordering::Relaxed);
                    }
                    Settled::Conflict(detail) => {
                        segment_conflicts += 1;
                        conflicts.lock().unwrap().push(Conflict {
                            pk: pk_of(item),
                            detail,
                        });
                    }
                    Settled::Unsettled => {
                        // Left at the old version: counted with the conflicts, so that neither
                        // this run's report nor the segment's checkpoint can say `complete`.
                        segment_conflicts += 1;
                        counters.unsettled.fetch_add(1, Ordering::Relaxed);
                        conflicts.lock().unwrap().push(Conflict {
                            pk: pk_of(item),
                            detail: format!(
                                "its writes were refused {REFUSED_ATTEMPTS} times, the item read \
                                 again before each: another writer keeps changing it, or a value \
                                 it claims is held by another item; run the migration again"
                            ),
                        });
                    }
                },
            }
        }
        let done = last_key.is_none();
        if !options.dry_run {
            let admission = throttle.admit(CHECKPOINT_UNITS).await;
            let place = Place {
                segment,
                segments,
                last_key: last_key.as_ref(),
                done,
                conflicts: segment_conflicts,
            };
            let units = save(ctx, migration, place).await?;
            throttle.settle(admission, units);
        }
        // After the table's checkpoint: a segment killed between the two reports the page it
        // was in no more, and never twice.
        after_page(last_key.clone()).await?;
        progress.count(|| counters.line(migration.name));
        if done {
            return Ok(true);
        }
        if options
            .stop_at
            .is_some_and(|at| std::time::Instant::now() >= at)
        {
            return Ok(false);
        }
        start = last_key;
    }
}

/// How many times one item's change is applied, each refusal followed by a strongly consistent
/// read of the item and a new plan: a refused conditional write says only that the item (or a
/// lock it claims) is not as the scan page showed it, not that another writer migrated it.
pub const REFUSED_ATTEMPTS: u32 = 5;

/// Where one item's change ended.
enum Settled {
    /// This run's write changed it.
    Written,
    /// Read again, it needs nothing: another writer migrated it, or it is gone.
    Already,
    /// Read again, it is a conflict for an operator.
    Conflict(String),
    /// Still of the old version after [`REFUSED_ATTEMPTS`] refusals.
    Unsettled,
}

/// Applies `change`, planned from `item` as a scan page read it, until it is written or the item,
/// read again strongly consistent after each refusal, needs nothing more (or is a conflict).
async fn settle(
    ctx: &Ctx,
    migration: &Migration,
    item: &Item,
    mut change: singlet_functions::store::migration::Change,
    shared: &Shared<'_>,
) -> Result<Settled, String> {
    let key = singlet_functions::model::key_of(item)
        .ok_or_else(|| format!("an item without PK and SK: {}", pk_of(item)))?;
    for _ in 0..REFUSED_ATTEMPTS {
        let expected = *shared.estimate.lock().unwrap();
        let admission = shared
            .throttle
            .admit_keys(expected, &change.keys_written())
            .await;
        let applied = ctx
            .apply_change(&change)
            .await
            .map_err(|e| format!("a write failed: {e:?}"))?;
        shared.throttle.settle(admission, applied.units());
        {
            let mut estimate = shared.estimate.lock().unwrap();
            *estimate = estimate.max(applied.units());
        }
        if let Applied::Written { .. } = applied {
            return Ok(Settled::Written);
        }
        let now = ctx
            .get_item(&key)
            .await
            .map_err(|e| format!("cannot read {} again: {e:?}", key.pk))?;
        let Some(now) = now else {
            return Ok(Settled::Already);
        };
        match (migration.plan)(&now, &shared.survey, &shared.settings) {
            Plan::Skip => return Ok(Settled::Already),
            Plan::Conflict(detail) => return Ok(Settled::Conflict(detail)),
            Plan::Change(next) => change = next,
        }
    }
    Ok(Settled::Unsettled)
}

/// A migration that takes items from the version another one writes runs only once that one is
/// complete (or has ended with conflicts).
async fn check_after(ctx: &Ctx, migration: &Migration) -> Result<(), String> {
    if let Some(after) = migration.after {
        let state = states(ctx)
            .await?
            .into_iter()
            .find(|state| state.migration == after)
            .map_or("unknown", |state| state.state);
        // Items the earlier one left as they were are this one's conflicts in turn (they are
        // not of the version it takes): they hold back only themselves.
        if state != "complete" && state != "conflicts" {
            return Err(format!(
                "{} takes items from the version {after} writes: run {after} first (it is {state})",
                migration.name
            ));
        }
    }
    Ok(())
}

/// Saves a segment's place before its first write: a run killed before its first page's
/// checkpoint has changed items already, and must be listed `in progress` (and resumed with its
/// segment count), never `not started`.
async fn mark_started(
    ctx: &Ctx,
    migration: &Migration,
    segment: u32,
    segments: u32,
    throttle: &Throttle,
) -> Result<(), String> {
    let admission = throttle.admit(CHECKPOINT_UNITS).await;
    let place = Place {
        segment,
        segments,
        last_key: None,
        done: false,
        conflicts: 0,
    };
    let units = save(ctx, migration, place).await?;
    throttle.settle(admission, units);
    Ok(())
}

/// The throttle of a run with `options`.
fn throttle_of(options: &Options) -> Throttle {
    Throttle::new(options.max_wcu).with_max_key_wcu(
        options
            .max_key_wcu
            .unwrap_or(singlet_functions::store::pace::DEFAULT_MAX_KEY_WCU),
    )
}

/// What every item of the table claims, read by a parallel `Scan` of its own.
async fn survey(
    ctx: &Ctx,
    name: &str,
    claims: fn(&Item) -> Vec<String>,
    segments: u32,
    page_size: Option<i32>,
) -> Result<Survey, String> {
    let read = futures::future::join_all((0..segments).map(|segment| async move {
        let mut claimed = Vec::new();
        let mut start = None;
        loop {
            let (items, last_key) = ctx
                .scan_page(segment, segments, start, page_size)
                .await
                .map_err(|e| format!("cannot scan segment {segment}: {e:?}"))?;
            claimed.extend(
                items
                    .iter()
                    .map(|item| (pk_of(item), claims(item)))
                    .filter(|(_, claims)| !claims.is_empty()),
            );
            match last_key {
                Some(key) => start = Some(key),
                None => return Ok::<_, String>(claimed),
            }
        }
    }))
    .await;
    let mut all = Vec::new();
    for segment in read {
        all.extend(segment?);
    }
    let survey = Survey::new(all);
    eprintln!(
        "migrate {name}: surveyed, {} values claimed more than once",
        survey.collisions()
    );
    Ok(survey)
}

/// Saves one segment's place; answers the write units it consumed.
/// Where one segment stands, to save.
struct Place<'k> {
    segment: u32,
    segments: u32,
    last_key: Option<&'k Item>,
    done: bool,
    conflicts: u64,
}

async fn save(ctx: &Ctx, migration: &Migration, place: Place<'_>) -> Result<f64, String> {
    let segment = place.segment;
    let checkpoint = MigrationCheckpoint {
        migration: migration.name.to_owned(),
        segment,
        segments: place.segments,
        done: place.done,
        last_key: place
            .last_key
            .map(|key| crate::transfer::item_to_json(key).to_string()),
        conflicts: place.conflicts,
    };
    ctx.put_record(&checkpoint)
        .await
        .map_err(|e| format!("cannot save the checkpoint of segment {segment}: {e:?}"))
}

fn pk_of(item: &Item) -> String {
    singlet_functions::model::key_of(item)
        .map(|key| key.pk)
        .unwrap_or_default()
}
