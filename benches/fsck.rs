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

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use singlet::engine;
use singlet::fsck::{self, Options};
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;
/// `BatchWriteItem` takes at most 25 puts; this many batches are in flight at once.
const BATCH: usize = 25;
const BATCHES_IN_FLIGHT: usize = 8;

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
    let puts: Vec<WriteRequest> = (0..vehicles)
        .flat_map(|n| common::registration(ctx, n))
        .map(|write| {
            let item = write.put.expect("a registration is puts").item;
            let put = PutRequest::builder().set_item(Some(item)).build().unwrap();
            WriteRequest::builder().put_request(put).build()
        })
        .collect();
    let mut in_flight = tokio::task::JoinSet::new();
    for batch in puts.chunks(BATCH) {
        if in_flight.len() >= BATCHES_IN_FLIGHT {
            in_flight.join_next().await;
        }
        let (ctx, batch) = (ctx.clone(), batch.to_vec());
        in_flight.spawn(async move {
            let mut pending = Some(batch);
            while let Some(batch) = pending.take().filter(|b| !b.is_empty()) {
                let output = ctx
                    .db
                    .batch_write_item()
                    .request_items(&*ctx.table, batch)
                    .send()
                    .await
                    .expect("the batch is written");
                pending = output
                    .unprocessed_items
                    .and_then(|mut left| left.remove(&*ctx.table));
            }
        });
    }
    while in_flight.join_next().await.is_some() {}
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}
