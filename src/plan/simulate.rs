//! `plan --simulate <seconds>`: the workload at its peak rates through the real front door (route
//! matching, the authorizer, the handlers) on a fresh in-memory engine with its partition limits,
//! on a virtual clock, and each key family's busiest key as the limiter measured it beside the
//! plan's figure (docs/guide/capacity.md, "The simulation").
//!
//! One clock, two drivers: the overdue marker's per-key pacer moves the engine's clock on when
//! its budget for a second is spent, and the traffic loop issues second t's calls when the clock
//! has entered second t. So that a second's calls all land in it, the marker starts no page of
//! loans in a second whose calls are not issued yet (its `may_start_page`); a page (100 loans,
//! under a second's 800) crosses at most one second, so the clock never passes a second whose
//! calls are still being issued. Once the marker is done the loop moves the clock itself.

mod population;
mod setup;

use super::{KEY_READ_LIMIT, KEY_WRITE_LIMIT, Report, TABLE};
use crate::console::api_client::{ApiClient, Sent};
use futures::StreamExt;
use population::Schedule;
use serde::Serialize;
use singlet_functions::clock::Clock;
use singlet_functions::store::pace::{HottestKey, PaceClock, Pacer};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};

/// The longest window: the engine's meter keeps 300 seconds of heat.
pub const MAX_SECONDS: u32 = crate::serve::partition_limits::heat::HEAT_SECONDS as u32;
/// How far the measured figure may be from the predicted one and still agree.
pub const MARGIN: f64 = 0.15;
/// A family whose busiest key the plan gives fewer units than this over the whole window is
/// not compared: a handful of calls cannot show a rate.
pub const RESOLUTION_UNITS: f64 = 20.0;
/// The routes the simulation knows how to call; any other route's calls are skipped (said).
pub const ISSUED: [&str; 3] = ["checkout-book", "return-book", "get-book"];
/// Calls in flight at once within a second.
const IN_FLIGHT: usize = 8;
/// The marker's page: under a second of its budget, so a page crosses one second at most.
const MARKER_PAGE: i32 = 100;

/// What the simulation measured, `plan --json`'s `simulation`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Simulation {
    pub seconds: u32,
    /// The scaled population the calls went to.
    pub scaled: Scaled,
    /// Routes with peak calls the simulation cannot issue, not run.
    pub skipped_routes: Vec<String>,
    /// Calls issued in the window, by route, and how many were not answered 2xx.
    pub calls: BTreeMap<String, u64>,
    pub failed_calls: BTreeMap<String, u64>,
    pub overdue_marked: u64,
    /// The marker's own report of the key it wrote most into in one second (`hottestKey`).
    pub marker_hottest_key: Option<HottestKey>,
    /// Requests the engine's limiter refused in the window (DynamoDB's throttling).
    pub throttled_requests: u64,
    pub families: Vec<Measured>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Scaled {
    pub branches: usize,
    pub books: usize,
    pub patrons: usize,
    pub copies: usize,
    pub due_loans: usize,
}

/// One family's busiest key, write or read units: predicted against measured.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Measured {
    pub family: String,
    pub index: Option<String>,
    /// `write` or `read`.
    pub units: &'static str,
    pub predicted: f64,
    /// The busiest key's units over the window ÷ its seconds.
    pub measured_mean: f64,
    /// The busiest key's busiest second.
    pub measured_peak_second: f64,
    pub throttled_requests: u64,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// Within [`MARGIN`]; or both the plan and the limiter find the family hot.
    Agrees,
    /// The plan's figure is higher: where it counts an upper bound (a call's units in full on
    /// every family holding what it touches). Safe, not exact.
    PlanIsHigher,
    /// Measured higher than planned, or throttled where the plan says ok: the plan misses heat.
    PlanIsLower,
    /// Too few units predicted over the window to measure a rate.
    BelowResolution,
}

impl Simulation {
    /// Whether the plan held: no family measured hotter than planned.
    pub fn holds(&self) -> bool {
        !self
            .families
            .iter()
            .any(|f| f.outcome == Outcome::PlanIsLower)
    }
}

/// Runs `report`'s workload for `seconds` (its keys kept under `key_dir`).
pub async fn simulate(
    report: &Report,
    seconds: u32,
    key_dir: &std::path::Path,
) -> Result<Simulation, String> {
    if !(1..=MAX_SECONDS).contains(&seconds) {
        return Err(format!(
            "--simulate takes 1 to {MAX_SECONDS} seconds, not {seconds}"
        ));
    }
    if !crate::serve::partition_limits::enabled() {
        return Err("--simulate measures the partition limits: run it without \
                    --partition-limits off"
            .into());
    }
    let workload = &report.workload;
    let peak = workload.peak_calls();
    let rate = |route: &str| peak.get(route).copied().unwrap_or(0.0);
    let skipped_routes = peak
        .keys()
        .filter(|route| !ISSUED.contains(route))
        .map(|route| (*route).to_owned())
        .collect();
    let schedule = Schedule::new(
        workload,
        [rate(ISSUED[0]), rate(ISSUED[1]), rate(ISSUED[2])],
        seconds,
    );

    // A fresh engine and the front door over it, on a clock only the simulation moves.
    let clock = Clock::frozen(time::macros::datetime!(2030-01-07 08:00 UTC));
    let table = "singlet-simulation";
    let (client, endpoint, _db) =
        crate::serve::engine::start_in_memory_with_clock(table, &clock).await;
    let limiter = crate::serve::partition_limits::at(&endpoint)
        .ok_or("the simulation's engine has no partition limiter")?;
    // The API's real-time budgets (a few seconds a call, 8 s a request) stand for a deployed
    // function's; here time is the virtual clock's, and a call that a loaded host makes slow
    // would otherwise be timed out, retried and charged twice to its key: the simulation would
    // measure the host, not the design. So the engine calls get the tools' budget for bulk work.
    let mut ctx = singlet_functions::Ctx::new(
        crate::serve::engine::for_bulk_work(&client),
        table,
        singlet_functions::cursor::CursorKeys::random(),
    );
    ctx.clock = clock.clone();
    ctx.deadline = crate::serve::engine::BULK_ATTEMPT_BUDGET;
    let (authorizer, issuer) = crate::serve::auth::Authorizer::local(key_dir)?;
    let api = ApiClient::new(crate::serve::front_door::Gateway {
        ctx: ctx.clone(),
        authorizer: Arc::new(authorizer),
        issuer: Some(Arc::new(issuer)),
    });
    let mut made = setup::make(&api, &clock, &schedule).await?;

    // The window starts on a whole second after setup's.
    let start = clock.now().unix_timestamp() + 2;
    clock.set(time::OffsetDateTime::from_unix_timestamp(start).expect("a time"));
    limiter.meter.start_totals(start);
    let throttled_before = limiter.meter.throttled_requests();

    let issued = Arc::new((Mutex::new(start - 1), Condvar::new()));
    let marker = tokio::spawn(run_marker(
        ctx.clone(),
        clock.clone(),
        issued.clone(),
        workload.max_key_wcu,
    ));
    let mut calls: BTreeMap<String, u64> = BTreeMap::new();
    let mut failed: BTreeMap<String, u64> = BTreeMap::new();
    let mut returned = made.lent.clone().into_iter();
    for t in 0..seconds as usize {
        let second = start + t as i64;
        while clock.now().unix_timestamp() < second {
            if marker.is_finished() {
                clock.set(time::OffsetDateTime::from_unix_timestamp(second).expect("a time"));
            } else {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }
        let mut sent: Vec<(&str, Sent)> = Vec::new();
        for lend in &schedule.checkouts[t] {
            let body = setup::checkout_body(&mut made, *lend);
            sent.push((ISSUED[0], Sent::new("POST", "/checkouts").json(body)));
        }
        for (patron, checkout) in returned.by_ref().take(schedule.returns[t]) {
            let path = format!("/patrons/{patron}/checkouts/{checkout}/return");
            sent.push((ISSUED[1], Sent::new("POST", path)));
        }
        for book in &schedule.book_reads[t] {
            let path = format!("/books/{}", made.isbns[*book]);
            sent.push((ISSUED[2], Sent::new("GET", path)));
        }
        let answers: Vec<(&str, bool)> = futures::stream::iter(sent)
            .map(|(route, sent)| {
                let api = &api;
                async move {
                    let ok = api
                        .call(setup::PERSON, sent)
                        .await
                        .is_ok_and(|answer| answer.status < 300);
                    (route, ok)
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        for (route, ok) in answers {
            *calls.entry(route.to_owned()).or_default() += 1;
            if !ok {
                *failed.entry(route.to_owned()).or_default() += 1;
            }
        }
        let (done, turn) = &*issued;
        *done.lock().expect("never poisoned") = second;
        turn.notify_all();
    }
    {
        let (done, turn) = &*issued;
        *done.lock().expect("never poisoned") = i64::MAX;
        turn.notify_all();
    }
    let (overdue_marked, marker_hottest_key) = marker
        .await
        .map_err(|e| format!("the marker stopped: {e}"))??;

    let totals = limiter.meter.totals(clock.now().unix_timestamp());
    let throttled_requests = limiter.meter.throttled_requests() - throttled_before;
    Ok(Simulation {
        seconds,
        scaled: Scaled {
            branches: schedule.branches,
            books: schedule.books,
            patrons: made.patrons.iter().map(Vec::len).sum(),
            copies: schedule.all_lent().count(),
            due_loans: schedule.due.len(),
        },
        skipped_routes,
        calls,
        failed_calls: failed,
        overdue_marked,
        marker_hottest_key,
        throttled_requests,
        families: compare(report, &totals, seconds),
    })
}

/// The overdue marker as the product runs it, paced per key on the engine's clock, starting no
/// page before the traffic of the clock's second is issued.
async fn run_marker(
    ctx: singlet_functions::Ctx,
    clock: Clock,
    issued: Arc<(Mutex<i64>, Condvar)>,
    max_key_wcu: f64,
) -> Result<(u64, Option<HottestKey>), String> {
    use singlet_functions::loans::mark_overdue::{FUNCTION, mark_overdue_paced};
    let pacer = Pacer::new(max_key_wcu, PaceClock::Settable(clock.clone()));
    let now = clock.now();
    let wait_for_traffic = || {
        let second = clock.now().unix_timestamp();
        let (done, turn) = &*issued;
        // A page waits (its thread given up to the runtime's others) for the traffic loop.
        tokio::task::block_in_place(|| {
            let done = done.lock().expect("never poisoned");
            let _done = turn
                .wait_while(done, |done| *done < second)
                .expect("never poisoned");
        });
        true
    };
    let report = crate::serve::iam::serving(
        FUNCTION,
        mark_overdue_paced(&ctx, now, MARKER_PAGE, wait_for_traffic, &pacer),
    )
    .await
    .map_err(|e| format!("the marker failed: {e:?}"))?;
    Ok((report.marked, report.hottest_key))
}

/// Each family's predicted figure against its busiest key's measured one.
fn compare(
    report: &Report,
    totals: &[crate::serve::partition_limits::heat::KeyTotal],
    seconds: u32,
) -> Vec<Measured> {
    let window = f64::from(seconds);
    let mut rows = Vec::new();
    for key in &report.plan.keys {
        let place = key.index.as_deref().unwrap_or(TABLE);
        let keys: Vec<_> = totals
            .iter()
            .filter(|t| t.family == key.family && t.index.as_deref().unwrap_or(TABLE) == place)
            .collect();
        let throttled: u64 = keys.iter().map(|k| k.throttled_requests).sum();
        for (units, predicted, limit) in [
            ("write", key.peak_wcu_per_second, KEY_WRITE_LIMIT),
            ("read", key.peak_rcu_per_second, KEY_READ_LIMIT),
        ] {
            let of = |k: &crate::serve::partition_limits::heat::KeyTotal| match units {
                "write" => (k.write_units, k.peak_wcu_per_second),
                _ => (k.read_units, k.peak_rcu_per_second),
            };
            let (sum, peak) = keys
                .iter()
                .map(|k| of(k))
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .unwrap_or((0.0, 0.0));
            if predicted == 0.0 && sum == 0.0 {
                continue;
            }
            let mean = sum / window;
            let outcome = if predicted > limit {
                if throttled > 0 {
                    Outcome::Agrees
                } else {
                    Outcome::PlanIsHigher
                }
            } else if throttled > 0 {
                Outcome::PlanIsLower
            } else if predicted * window < RESOLUTION_UNITS {
                Outcome::BelowResolution
            } else if (mean - predicted).abs() <= MARGIN * predicted {
                Outcome::Agrees
            } else if mean < predicted {
                Outcome::PlanIsHigher
            } else {
                Outcome::PlanIsLower
            };
            rows.push(Measured {
                family: key.family.clone(),
                index: key.index.clone(),
                units,
                predicted,
                measured_mean: super::round(mean),
                measured_peak_second: peak,
                throttled_requests: throttled,
                outcome,
            });
        }
    }
    rows
}

/// The simulation as a person reads it.
pub fn text(simulation: &Simulation) -> String {
    use std::fmt::Write;
    let s = simulation;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nSimulation: {} s at the peak's rates through the API on the engine's partition limits \
         (virtual clock), scaled down to {} branches, {} books, {} patrons, {} copies; the \
         marker over {} due loans.",
        s.seconds,
        s.scaled.branches,
        s.scaled.books,
        s.scaled.patrons,
        s.scaled.copies,
        s.scaled.due_loans
    );
    let calls: Vec<String> = s.calls.iter().map(|(r, n)| format!("{r} {n}")).collect();
    let _ = writeln!(
        out,
        "  calls: {}; not 2xx: {}; marked overdue: {} (the marker's hottest key: {}); throttled requests: {}",
        if calls.is_empty() {
            "none".into()
        } else {
            calls.join(", ")
        },
        s.failed_calls.values().sum::<u64>(),
        s.overdue_marked,
        s.marker_hottest_key
            .as_ref()
            .map_or("none".to_owned(), |key| format!(
                "{} on {} at {} WCU in a second",
                key.pk,
                key.index.as_deref().unwrap_or("the table"),
                key.peak_wcu_per_second
            )),
        s.throttled_requests
    );
    if !s.skipped_routes.is_empty() {
        let _ = writeln!(
            out,
            "  not simulated (no way to issue them yet): {}",
            s.skipped_routes.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "  {:<14} {:<6} {:<5} {:>10} {:>10} {:>10} {:>9}  outcome",
        "family", "index", "units", "predicted", "mean", "peak sec", "throttled"
    );
    for f in &s.families {
        let _ = writeln!(
            out,
            "  {:<14} {:<6} {:<5} {:>10.2} {:>10.2} {:>10.2} {:>9}  {}",
            f.family,
            f.index.as_deref().unwrap_or(TABLE),
            f.units,
            f.predicted,
            f.measured_mean,
            f.measured_peak_second,
            f.throttled_requests,
            match f.outcome {
                Outcome::Agrees => "agrees",
                Outcome::PlanIsHigher => "plan higher (an upper bound)",
                Outcome::PlanIsLower => "PLAN LOWER",
                Outcome::BelowResolution => "below resolution",
            }
        );
    }
    let _ = writeln!(
        out,
        "  (agrees: within {:.0} %; below resolution: under {RESOLUTION_UNITS} units predicted \
         over the window; plan higher: the plan counts a call's units on every family holding \
         what it touches, docs/guide/capacity.md)",
        MARGIN * 100.0
    );
    out
}
