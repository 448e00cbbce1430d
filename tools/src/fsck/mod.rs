//! `singlet fsck`: proves the table keeps every rule that spans items, and repairs what it can
//! (`docs/API.md`, "Consistency check: `fsck`").
//!
//! 1. [`scan`]: a parallel `Scan` reads every item; each is decoded by the model's registry
//!    ([`entity`] adds what the rules ask of an entity: its lock, the values it holds).
//! 2. [`rules`]: every rule is a pure function of the items involved, run over the whole table.
//! 3. `confirm`: each finding's items are read again in one strongly consistent snapshot and
//!    judged by the same function, twice, and must give the scan's verdict; where the items
//!    were found by other reads, those reads are repeated around the snapshot and must agree. A
//!    write in flight during the scan raises nothing.
//! 4. `repair`: with `--repair`, each repairable finding gets one conditional write (a
//!    transaction where it depends on a second item), conditioned on the items as confirmed.

mod confirm;
pub mod entity;
pub mod on_aws;
mod repair;
pub mod rules;
pub mod scan;

use crate::progress::Progress;
use crate::throttle::Throttle;
use repair::Repair;
use rules::{Finding, Rule, Table, check};
use serde::{Deserialize, Serialize};
use singlet_functions::Ctx;
use singlet_functions::store::pace::{DEFAULT_MAX_KEY_WCU, HottestKey};
use std::time::Duration;

/// What a run found and did: the contract's `--json` shape (read back from where a run on AWS
/// left it, too).
#[derive(Debug, Serialize, Deserialize)]
pub struct Report {
    pub scanned: u64,
    pub findings: Vec<Reported>,
    pub repaired: u64,
    /// The key the repairs wrote most into in any one second (`--repair` only).
    #[serde(
        rename = "hottestKey",
        skip_serializing_if = "Option::is_none",
        skip_deserializing
    )]
    pub hottest_key: Option<HottestKey>,
}

/// One confirmed finding.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reported {
    pub rule: Rule,
    pub pk: String,
    pub sk: String,
    pub detail: String,
    pub repairable: bool,
    /// What the repair writes (`--repair`, `--dry-run`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair: Option<String>,
    /// Whether the repair wrote (`--repair` without `--dry-run`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repaired: Option<bool>,
}

impl Report {
    /// Findings still in the table after this run.
    pub fn remaining(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.repaired != Some(true))
            .count()
    }
}

/// How a run goes.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub repair: bool,
    pub dry_run: bool,
    pub segments: u32,
    /// Progress lines on standard error.
    pub progress: bool,
    /// The repairs' write units a second, at most, table-wide (`None`: no limit).
    pub max_wcu: Option<f64>,
    /// The repairs' write units a second into any one partition key value, of the table or an
    /// index (DynamoDB serves one key 1,000).
    pub max_key_wcu: f64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            repair: false,
            dry_run: false,
            segments: 4,
            progress: false,
            max_wcu: None,
            max_key_wcu: DEFAULT_MAX_KEY_WCU,
        }
    }
}

/// Checks the whole table, and repairs with `options.repair`: every segment's scan side by side,
/// then [`judge_scanned`] over what they read, as the stack's tools functions do on AWS (one
/// invocation a segment, then one that judges: [`on_aws`]).
pub async fn fsck(ctx: &Ctx, options: Options) -> Result<Report, String> {
    // Part of an export is no table: refused before a scan reads it all.
    refuse_unfinished_load(ctx).await?;
    let scanned = scan_round(ctx, options).await?;
    judge_rounds(ctx, scanned, options).await
}

/// The judging half of a run, over `items` the segments' scans read (each item at its own
/// moment): every rule checked, each finding confirmed by re-reading the table strongly
/// consistent, repaired with `options.repair`, and, after repairs, the table checked again by
/// scans of its own until a round repairs nothing.
pub async fn judge_scanned(
    ctx: &Ctx,
    items: Vec<singlet_functions::model::Item>,
    options: Options,
) -> Result<Report, String> {
    let scanned = Table::of(ctx, items.into_iter().map(rules::Stored::new));
    judge_table(ctx, scanned, options).await
}

/// [`judge_scanned`] over items already in the table the rules read (the judge on AWS puts each
/// line in it as it reads it back, never holding a second copy of the items: see
/// [`Table::of`]).
pub async fn judge_table(ctx: &Ctx, scanned: Table, options: Options) -> Result<Report, String> {
    refuse_unfinished_load(ctx).await?;
    judge_rounds(ctx, scanned, options).await
}

/// Part of an export is no table: its missing halves are no finding to repair, and a repair
/// would make a table the export never was. Part of a seed is none either: its mark is no
/// entity, and which of its requests were made is not known.
async fn refuse_unfinished_load(ctx: &Ctx) -> Result<(), String> {
    if let Some(unfinished) = crate::load_marker::read(&ctx.db, &ctx.table).await? {
        return Err(unfinished.describe(&ctx.table));
    }
    let seeding = crate::seed_marker::read(&ctx.db, &ctx.table).await?;
    if !seeding.is_empty() {
        return Err(crate::seed_marker::describe(&ctx.table, &seeding));
    }
    Ok(())
}

async fn judge_rounds(ctx: &Ctx, scanned: Table, options: Options) -> Result<Report, String> {
    // One pace for every round's repairs: a later round's writes count in the same seconds.
    let throttle = Throttle::new(options.max_wcu).with_max_key_wcu(options.max_key_wcu);
    let mut report = judge(ctx, scanned, options, &throttle, Box::pin(async {})).await?;
    // A repair can leave what another rule checks wrong: a copy a lost loan left `checked_out`,
    // set `available`, makes its branch's count of copies on the shelf one short. So a run that
    // repaired checks again, and repairs again, until a round repairs nothing: a second
    // `--repair` then writes nothing, as the contract says. Rounds are few (each repair makes
    // at most one more rule's finding); the bound only keeps two repairs that undid each other
    // from running for ever.
    let mut last_round = report.repaired;
    let mut rounds = 1;
    while options.repair && !options.dry_run && last_round > 0 && rounds < MAX_REPAIR_ROUNDS {
        if options.progress {
            eprintln!("fsck: checking again after {last_round} repairs");
        }
        let again = scan_round(ctx, options).await?;
        let again = judge(ctx, again, options, &throttle, Box::pin(async {})).await?;
        last_round = again.repaired;
        rounds += 1;
        report.merge(again);
    }
    if options.repair && !options.dry_run {
        report.hottest_key = throttle.hottest_key();
    }
    Ok(report)
}

/// Check-and-repair rounds one `--repair` runs at most ([`fsck`]).
const MAX_REPAIR_ROUNDS: u32 = 4;

impl Report {
    /// This report with a later round's: a finding of both is as the later round left it, a
    /// finding only the later round made is added, and the repairs add up. `scanned` is the
    /// first round's.
    fn merge(&mut self, later: Report) {
        for finding in later.findings {
            let same = |f: &&mut Reported| {
                (f.rule, &f.pk, &f.sk) == (finding.rule, &finding.pk, &finding.sk)
            };
            match self.findings.iter_mut().find(same) {
                Some(earlier) => *earlier = finding,
                None => self.findings.push(finding),
            }
        }
        self.findings
            .sort_by(|a, b| (a.rule, &a.pk, &a.sk).cmp(&(b.rule, &b.pk, &b.sk)));
        self.repaired += later.repaired;
    }
}

/// One round's scan: the whole table read, every segment side by side.
async fn scan_round(ctx: &Ctx, options: Options) -> Result<Table, String> {
    let progress = std::sync::Arc::new(Progress::new(options.progress));
    let started = std::time::Instant::now();
    let counter = scan::Counter::default();
    let ticker = options.progress.then(|| {
        let (counter, progress) = (counter.clone(), progress.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                progress.count(|| format!("fsck: scanned {} items", counter.get()));
            }
        })
    });
    let scanned = scan::scan(
        ctx,
        options.segments,
        scan::Read::Eventually,
        &counter,
        rules::Stored::new,
    )
    .await;
    if let Some(ticker) = ticker {
        ticker.abort();
    }
    let scanned = scanned.inspect_err(|_| progress.interrupt())?;
    progress.finish(&format!(
        "fsck: read {} items in {:.2} s",
        scanned.len(),
        started.elapsed().as_secs_f64()
    ));
    Ok(Table::of(ctx, scanned))
}

/// Judges `items` as a scan read them (each item at its own moment, so possibly half of a
/// transaction), against the table as it is now: the findings the items show, each confirmed by
/// re-reading the table, and repaired with `options.repair`.
pub async fn judge_items(
    ctx: &Ctx,
    items: Vec<singlet_functions::model::Item>,
    options: Options,
) -> Result<Report, String> {
    judge_items_racing(ctx, items, options, async {}).await
}

/// [`judge_items`], with `race` run in the middle of the confirmation: after the scan that looks
/// for the loans of copies `checked_out` with none, before the snapshots that judge them. A test
/// commits there the writes a busy table would, to show they raise nothing.
pub async fn judge_items_racing(
    ctx: &Ctx,
    items: Vec<singlet_functions::model::Item>,
    options: Options,
    race: impl std::future::Future<Output = ()> + Send,
) -> Result<Report, String> {
    let scanned = Table::of(ctx, items.into_iter().map(rules::Stored::new));
    let throttle = Throttle::new(options.max_wcu).with_max_key_wcu(options.max_key_wcu);
    let mut report = judge(ctx, scanned, options, &throttle, Box::pin(race)).await?;
    if options.repair && !options.dry_run {
        report.hottest_key = throttle.hottest_key();
    }
    Ok(report)
}

async fn judge(
    ctx: &Ctx,
    table: Table,
    options: Options,
    throttle: &Throttle,
    race: futures::future::BoxFuture<'_, ()>,
) -> Result<Report, String> {
    let progress = |line: String| {
        if options.progress {
            eprintln!("fsck: {line}");
        }
    };
    let started = std::time::Instant::now();
    let scanned = table.scanned();
    if rules::owner_locks_under_another_key(&table) {
        return Err(
            "no owner lock is where this run's server secret puts it: the table's were \
                    keyed under another (run fsck with the API's CURSOR_KEY, and its OWNER_KEY if it has one), and repairing \
                    would release them all"
                .into(),
        );
    }
    let mut candidates = check_all(&table);
    progress(format!(
        "checked them in {:.2} s; {} findings to confirm",
        started.elapsed().as_secs_f64(),
        candidates.len()
    ));
    candidates.sort_by(|a, b| (a.rule, &a.key.pk, &a.key.sk).cmp(&(b.rule, &b.key.pk, &b.key.sk)));
    let mut confirmed = confirm::confirm(ctx, &table, candidates, options.segments, race).await?;
    confirmed.sort_by_key(|f| f.repair.as_ref().map_or(u8::MAX, |r| r.order()));

    let mut findings = Vec::with_capacity(confirmed.len());
    let mut repaired = 0;
    let repairing = options.repair && !options.dry_run;
    if repairing && confirmed.iter().any(|f| f.repair.is_some()) {
        progress("repairing".into());
    }
    for finding in &confirmed {
        let written = match (&finding.repair, repairing) {
            (Some(repair), true) => Some(apply_paced(ctx, repair, throttle).await?),
            (_, true) => Some(false),
            (_, false) => None,
        };
        repaired += u64::from(written == Some(true));
        findings.push(Reported {
            rule: finding.rule,
            pk: finding.key.pk.clone(),
            sk: finding.key.sk.clone(),
            detail: finding.detail.clone(),
            repairable: finding.repair.is_some(),
            repair: finding
                .repair
                .as_ref()
                .filter(|_| options.repair)
                .map(|r| r.describe()),
            repaired: written,
        });
    }
    findings.sort_by(|a, b| (a.rule, &a.pk, &a.sk).cmp(&(b.rule, &b.pk, &b.sk)));
    Ok(Report {
        scanned,
        findings,
        repaired,
        hottest_key: None,
    })
}

/// How many times a throttled repair is tried before the run stops (about a minute of waits).
const THROTTLED_TRIES: u32 = 10;

/// Writes `repair` once its keys have room under `--max-key-wcu` and the table under
/// `--max-wcu`; a throttle met anyway (the API writing the same keys meanwhile) is back-pressure:
/// the repair waits, longer each time, and is tried again. Its condition keeps a second try from
/// writing twice.
async fn apply_paced(ctx: &Ctx, repair: &Repair, throttle: &Throttle) -> Result<bool, String> {
    let keys = repair.keys_written();
    let units: f64 = keys.iter().map(|(_, units)| units).sum();
    let mut wait = Duration::from_millis(100);
    for tried in 1.. {
        let admission = throttle.admit_keys(units, &keys).await;
        let applied = repair.apply(ctx).await;
        throttle.settle(admission, units);
        match applied {
            Err(repair::Refused::Throttled) if tried < THROTTLED_TRIES => {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(10));
            }
            Err(refused) => return Err(refused.to_string()),
            Ok(written) => return Ok(written),
        }
    }
    unreachable!("the loop returns")
}

/// Every rule over every item, on every core (the rules only read the table), and what the
/// items judged as they came broke.
fn check_all(table: &Table) -> Vec<Finding> {
    let keys: Vec<&singlet_shared::Key> = table.items().map(|stored| &stored.key).collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = keys.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = keys
            .chunks(chunk)
            .map(|keys| {
                scope.spawn(move || {
                    keys.iter()
                        .flat_map(|key| check(table, key))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().expect("a check does not panic"))
            .chain(table.findings_alone().iter().cloned())
            .collect()
    })
}

/// The report for a person.
pub fn text(report: &Report, options: Options) -> String {
    let mut out = String::new();
    for f in &report.findings {
        let repairable = if f.repairable {
            "repairable"
        } else {
            "report only"
        };
        out.push_str(&format!(
            "{:<13} {} / {}: {} ({repairable})\n",
            f.rule.name(),
            f.pk,
            f.sk,
            f.detail
        ));
        if let Some(repair) = &f.repair {
            let verb = match f.repaired {
                None => "would",
                Some(true) => "repaired:",
                Some(false) => "not repaired (the item changed since it was read):",
            };
            out.push_str(&format!("    {verb} {repair}\n"));
        }
    }
    let remaining = report.remaining();
    out.push_str(&format!(
        "scanned {} items: {} findings",
        report.scanned,
        report.findings.len()
    ));
    if options.repair && !options.dry_run {
        out.push_str(&format!(
            ", {} repaired, {remaining} remaining",
            report.repaired
        ));
    }
    out.push('\n');
    out
}
