//! `migrate vehicles-by-depot` against the floor any migration has: a bare parallel `Scan` of the
//! same table plus the same number of bare conditional updates, side by side in one run. The
//! contract asks that the migration take at most three times that floor.
//!
//! The table holds N vehicles (default 100,000) in the shape they had before the depot index
//! (version 1: no `_et`, no `_v`, no index keys), so every item needs one update. Loaded with
//! `BatchWriteItem` straight to an in-memory engine. Then:
//! - the floor: each of `SEGMENTS` segments scanned page by page, and each vehicle of a page given
//!   one conditional `UpdateItem` through the store (its plate set to itself, on condition that it
//!   has no depot keys: the migration's condition, so the item is still to migrate afterwards);
//! - the migration itself, the runner's `migrate::run` with the same segments, no throttle.
//!
//! Prints both times and their ratio, and asserts that the migration changed every vehicle.
//! `cargo bench --bench migrate [-- ITEMS [SEGMENTS]]`, or `MIGRATE_BENCH_ITEMS=n`; the notebook
//! docs/notebooks/migrate-at-scale.md shows a run at 100,000.

#[path = "common/mod.rs"]
mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use singlet::serve::engine;
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use singlet_functions::fleet::Vehicle;
use singlet_functions::migrations;
use singlet_functions::store::{Condition, Item, Update};
use singlet_shared::schema::GSI5;
use singlet_shared::{Id, keys};
use singlet_tools::migrate::{self, Options};
use std::time::{Duration, Instant};

/// Items a `Scan` page holds, at most: the runner checkpoints once a page.
const PAGE: i32 = 500;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with('-'));
    let items: usize = args
        .next()
        .or_else(|| std::env::var("MIGRATE_BENCH_ITEMS").ok())
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let segments: u32 = args.next().and_then(|n| n.parse().ok()).unwrap_or(4);
    let (client, _) = engine::start_in_memory("singlet").await;
    let ctx = Ctx::new(client, "singlet", CursorKeys::random());

    let started = Instant::now();
    load(&ctx, items).await;
    eprintln!(
        "loaded {items} vehicles in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let started = Instant::now();
    let updated = floor(&ctx, segments).await;
    let floor = started.elapsed();
    assert_eq!(updated, items, "the floor updated every vehicle");

    let started = Instant::now();
    let report = migrate::run(
        &ctx,
        migrations::by_name("vehicles-by-depot").expect("registered"),
        &Options {
            segments,
            page_size: Some(PAGE),
            ..Options::default()
        },
    )
    .await
    .expect("the migration runs");
    let migration = started.elapsed();
    assert_eq!(report.changed, items as u64, "{report:?}");
    assert!(report.complete);

    println!(
        "{items} vehicles, {segments} segments: bare Scan + {items} conditional updates {:.0} ms, \
         migrate vehicles-by-depot {:.0} ms: migration / floor = {:.2}",
        millis(floor),
        millis(migration),
        migration.as_secs_f64() / floor.as_secs_f64()
    );
}

fn millis(time: Duration) -> f64 {
    time.as_secs_f64() * 1e3
}

/// A parallel `Scan`, and one conditional update of each vehicle read, segment by segment as
/// the runner goes; answers how many updates applied.
async fn floor(ctx: &Ctx, segments: u32) -> usize {
    let per_segment = futures::future::join_all((0..segments).map(|segment| async move {
        let mut updated = 0;
        let mut start = None;
        loop {
            let (items, last_key) = ctx
                .scan_page(segment, segments, start, Some(PAGE))
                .await
                .expect("the scan runs");
            for item in &items {
                let (key, plate) = (text(item, "PK"), item["plate"].clone());
                let id = Id::parse(key.trim_start_matches(keys::VEHICLE_PREFIX)).expect("an id");
                let plate: singlet_shared::Plate =
                    serde_dynamo::from_attribute_value(plate).expect("a plate");
                let update = Update::<Vehicle>::at(Vehicle::key_of(&id))
                    .set(Vehicle::PLATE, &plate)
                    .when(Condition::exists().and_not_in_index(GSI5));
                if ctx
                    .update_item(update)
                    .await
                    .expect("the update runs")
                    .is_some()
                {
                    updated += 1;
                }
            }
            match last_key {
                Some(key) => start = Some(key),
                None => return updated,
            }
        }
    }))
    .await;
    per_segment.into_iter().sum()
}

fn text(item: &Item, name: &str) -> String {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default()
}

/// `count` vehicles as version 1 wrote them, in batches.
async fn load(ctx: &Ctx, count: usize) {
    let s = |value: String| AttributeValue::S(value);
    let puts: Vec<Item> = (0..count)
        .map(|n| {
            let id = format!("b{n:08}");
            Item::from([
                ("PK".into(), s(format!("VEHICLE#{id}"))),
                ("SK".into(), s(format!("VEHICLE#{id}"))),
                ("vehicleId".into(), s(id)),
                ("plate".into(), s(format!("b{n}"))),
                ("chassis".into(), s(format!("bc{n}"))),
                ("depot".into(), s(format!("depot {}", n % 20))),
                (
                    "addedAt".into(),
                    AttributeValue::N((1_700_000_000_000i64 + n as i64).to_string()),
                ),
            ])
        })
        .collect();
    common::load_items(ctx, puts).await;
}
