//! `fsck` against a bare parallel `Scan` of the same table, in the same run: the contract asks
//! that checking a table cost at most twice reading it.
//!
//! The table holds N items (default 100,000), each written as the API writes it: vehicles with
//! their plate and chassis locks (`common::registration`, the three items `register-vehicle`
//! commits), so every item is decoded and every lock is checked against its owner and every
//! owner against its locks, the heaviest of the rules. Loaded with `BatchWriteItem`, straight to
//! an in-memory engine. Then, alternately, five bare scans and five `fsck` runs (both with the
//! same segments); prints each median and their ratio, and asserts that `fsck` found nothing.
//!
//! `cargo bench --bench fsck [-- ITEMS [SEGMENTS]]`.

#[path = "common/mod.rs"]
mod common;

use singlet::serve::engine;
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use singlet_functions::store::Item;
use singlet_tools::fsck::{self, Options};
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with('-'));
    let items: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let segments: u32 = args.next().and_then(|n| n.parse().ok()).unwrap_or(4);
    let (client, _) = engine::start_in_memory("singlet").await;
    let ctx = Ctx::new(client, "singlet", CursorKeys::random());

    let started = Instant::now();
    load(&ctx, items.div_ceil(3)).await;
    eprintln!(
        "loaded {} items in {:.1} s",
        items.div_ceil(3) * 3,
        started.elapsed().as_secs_f64()
    );

    let (mut bare, mut checked) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let read = fsck::scan::bare(&ctx, segments)
            .await
            .expect("the scan runs");
        bare.push(started.elapsed());
        let started = Instant::now();
        let report = fsck::fsck(
            &ctx,
            Options {
                segments,
                progress: std::env::var_os("FSCK_PROGRESS").is_some(),
                ..Options::default()
            },
        )
        .await
        .expect("fsck runs");
        checked.push(started.elapsed());
        assert_eq!(report.scanned, read, "fsck read every item");
        assert!(report.findings.is_empty(), "{:?}", report.findings);
    }
    let (bare, checked) = (median(bare), median(checked));
    println!(
        "{} items, {segments} segments: bare Scan {:.0} ms, fsck {:.0} ms (median of {ROUNDS}): \
         fsck / Scan = {:.2}",
        items.div_ceil(3) * 3,
        bare.as_secs_f64() * 1e3,
        checked.as_secs_f64() * 1e3,
        checked.as_secs_f64() / bare.as_secs_f64()
    );
}

/// `vehicles` registrations, each vehicle with its two locks, written in batches.
async fn load(ctx: &Ctx, vehicles: usize) {
    let puts: Vec<Item> = (0..vehicles)
        .flat_map(|n| common::registration(ctx, n))
        .map(|write| write.put.expect("a registration is puts").item)
        .collect();
    common::load_items(ctx, puts).await;
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}
