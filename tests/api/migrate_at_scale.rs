//! The migration issue's "done when" at full size: 100,000 vehicles of version 1 (raw engine
//! writes), `migrate vehicles-by-depot --segments 4 --max-wcu 400` killed at about half way and
//! run again, with a few thousand API writes on the same vehicles during both runs, then every
//! vehicle listed under its depot and `fsck` reporting nothing. Minutes long (100,000 updates at
//! 400 write units a second is 250 s at least), so `#[ignore]`d:
//!
//! ```sh
//! MIGRATE_AT_SCALE_VEHICLES=100000 nice cargo test --test api migrate_at_scale -- --ignored --nocapture
//! ```
//!
//! It prints the figures the notebook `docs/notebooks/migrate-at-scale.md` shows. `tests/api/migrate.rs` runs
//! the same steps on 2,000 vehicles in every test run.

use crate::harness::{Api, Mode, s};
use crate::import::patient;
use crate::migrate::{DEPOTS, api_writes, listed, migration, vehicles, write_old_vehicles};
use singlet_tools::fsck;
use singlet_tools::migrate::{self, Options, Report};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Vehicles, unless `MIGRATE_AT_SCALE_VEHICLES` says otherwise.
const VEHICLES: usize = 100_000;
/// API writes during each of the two runs (a third each retire, re-plate and register).
const WRITES_PER_RUN: usize = 1_500;
const MAX_WCU: f64 = 400.0;
const SEGMENTS: u32 = 4;

fn vehicle_count() -> usize {
    std::env::var("MIGRATE_AT_SCALE_VEHICLES")
        .ok()
        .map(|n| n.parse().expect("MIGRATE_AT_SCALE_VEHICLES is a number"))
        .unwrap_or(VEHICLES)
}

async fn timed<T>(work: impl std::future::Future<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let output = work.await;
    (output, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "minutes long: run with --ignored (see the module's comment)"]
async fn migrate_at_scale_killed_half_way_resumed_online_and_fsck_clean() {
    let count = vehicle_count();
    let writes = 2 * WRITES_PER_RUN.min(count / 20);
    let stride = count / writes;
    let api = Api::start(Mode::Direct).await;
    let (_, loaded) = timed(write_old_vehicles(&api, count)).await;
    eprintln!("{count} vehicles of version 1 written in {loaded:.1?}");

    let options = Options {
        segments: SEGMENTS,
        max_wcu: Some(MAX_WCU),
        ..Options::default()
    };
    let killed = Options {
        stop_after: Some(count as u64 / 2),
        ..options.clone()
    };
    // Each write on a vehicle of its own (vehicle `i × stride`).
    let writes_between = |range: std::ops::Range<usize>| {
        api_writes(
            &api,
            range,
            move |i| i * stride,
            |i| format!("NEW {i:05}"),
            |i| (format!("FRESH {i:05}"), format!("FR{i:05}")),
        )
    };
    let ((first_writes, first), first_took) = timed(async {
        tokio::join!(
            writes_between(0..writes / 2),
            migrate::run(&api.ctx, migration(), &killed)
        )
    })
    .await;
    let first = first.unwrap();
    assert!(!first.complete, "{first:?}");
    let ((second_writes, second), second_took) = timed(async {
        tokio::join!(
            writes_between(writes / 2..writes),
            migrate::run(&api.ctx, migration(), &options)
        )
    })
    .await;
    let second = second.unwrap();
    assert!(second.complete && second.conflicts.is_empty(), "{second:?}");

    for (i, status) in first_writes.into_iter().chain(second_writes) {
        assert_eq!(status, [204, 200, 201][i % 3], "write {i}");
    }
    // At most one conditional update applied per vehicle, and one for every vehicle but those the
    // API retired or re-plated first; the refusals are the page each segment was in when killed,
    // read again, and the vehicles the API wrote between the scan and the update.
    let applied = first.changed + second.changed;
    let attempted = applied + first.already_changed + second.already_changed;
    let touched_by_api = (writes - writes / 3) as u64;
    assert!(applied <= count as u64, "{first:?} {second:?}");
    assert!(
        applied + touched_by_api >= count as u64,
        "{first:?} {second:?}"
    );
    let peak = first.peak_wcu_per_second.max(second.peak_wcu_per_second);
    assert!(
        peak <= MAX_WCU * 1.1,
        "over --max-wcu: {first:?} {second:?}"
    );

    let report = |name: &str, report: &Report, took: Duration| {
        eprintln!(
            "{name}: {took:.1?}, changed {}, already changed {}, peak {} WCU in one second",
            report.changed, report.already_changed, report.peak_wcu_per_second
        );
    };
    report("killed at half way", &first, first_took);
    report("run again", &second, second_took);
    eprintln!(
        "{count} vehicles, {SEGMENTS} segments, --max-wcu {MAX_WCU}, {writes} API writes: \
         {:.1?} in all; {applied} conditional updates applied, {attempted} sent \
         ({:.3} per vehicle), peak {peak} WCU in one second",
        first_took + second_took,
        attempted as f64 / count as f64,
    );

    // Every vehicle left is listed under its depot; fsck finds nothing.
    let items = api.items().await;
    let live = vehicles(&items);
    let retired = writes.div_ceil(3);
    let registered = writes / 3;
    assert_eq!(live.len(), count - retired + registered);
    assert!(live.iter().all(|v| v.contains_key("GSI5PK")));
    let mut listed_ids = BTreeSet::new();
    for depot in DEPOTS {
        listed_ids.extend(listed(&api, &depot.replace(' ', "%20")).await);
    }
    let live_ids: BTreeSet<String> = live.iter().map(|v| s(v, "vehicleId").to_owned()).collect();
    assert_eq!(listed_ids, live_ids);
    // fsck as the CLI runs it, on a client that waits for a debug build's scan pages of a table
    // this size (the functions' own timeouts are for one request's items).
    let (checked, fsck_took) =
        timed(fsck::fsck(&patient(&api.ctx), fsck::Options::default())).await;
    let checked = checked.unwrap();
    assert!(checked.findings.is_empty(), "{:?}", checked.findings);
    eprintln!(
        "fsck: {} items, 0 findings, in {fsck_took:.1?}",
        checked.scanned
    );
}
