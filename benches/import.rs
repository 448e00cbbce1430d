//! `import` against the two ways to load the same file without it, in the same run: one
//! `TransactWriteItems` per row, one at a time (what a script calling the create route's logic
//! row by row does)
//! and a bare `BatchWriteItem` of the very same items, with no condition and no lock checked (the
//! fastest a table can be filled, and what keeps no rule).
//!
//! The file holds N patrons (default 100,000) at one branch, all valid and unique, as JSON Lines.
//! Each way loads it into an in-memory engine of its own, one after the other; prints each one's
//! rows per second and the import's ratio to each.
//!
//! `cargo bench --bench import [-- ROWS]`, or `IMPORT_ROWS=1000 cargo bench --profile dev --bench
//! import` for a quick run.

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use singlet::serve::engine;
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use singlet_functions::store::bulk;
use singlet_tools::import::{self, Kind, Options};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `BatchWriteItem` takes at most 25 puts.
const BATCH: usize = 25;

#[tokio::main]
async fn main() {
    let rows: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .or_else(|| std::env::var("IMPORT_ROWS").ok())
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let dir = std::env::temp_dir().join(format!("singlet-import-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = patrons_file(&dir, rows);
    let options = Options {
        progress: false,
        ..Options::default()
    };

    let batched = library(&dir).await;
    let started = Instant::now();
    let summary = import::run(&batched, Kind::Patrons, &file, &options)
        .await
        .expect("the import runs");
    let import_rate = rate(rows, started);
    assert_eq!(summary.created as usize, rows, "{summary:?}");

    let one_by_one = library(&dir).await;
    let started = Instant::now();
    let summary = import::run(
        &one_by_one,
        Kind::Patrons,
        &file,
        &Options {
            rows_per_transaction: 1,
            in_flight: 1,
            ..options.clone()
        },
    )
    .await
    .expect("the import runs");
    let one_rate = rate(rows, started);
    assert_eq!(summary.created as usize, rows, "{summary:?}");

    // The very items the import wrote (patrons, card locks, events; the branch and its event
    // again, over themselves), put without any condition.
    let items: Vec<WriteRequest> = bulk::scan_all(&batched.db, &batched.table, "")
        .await
        .expect("the scan runs")
        .into_iter()
        .map(|item| {
            let put = PutRequest::builder().set_item(Some(item)).build().unwrap();
            WriteRequest::builder().put_request(put).build()
        })
        .collect();
    let bare = library(&dir).await;
    let started = Instant::now();
    for batch in items.chunks(BATCH) {
        let mut pending = Some(batch.to_vec());
        while let Some(batch) = pending.take().filter(|b| !b.is_empty()) {
            let output = bare
                .db
                .batch_write_item()
                .request_items(&*bare.table, batch)
                .send()
                .await
                .expect("the batch is written");
            pending = output
                .unprocessed_items
                .and_then(|mut left| left.remove(&*bare.table));
        }
    }
    let bare_rate = rate(rows, started);

    println!(
        "{rows} patrons ({} items): import {import_rate:.0} rows/s; one transaction per row \
         {one_rate:.0} rows/s (import ×{:.1}); bare BatchWriteItem {bare_rate:.0} rows/s \
         (import ×{:.2})",
        items.len(),
        import_rate / one_rate,
        import_rate / bare_rate,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn rate(rows: usize, started: Instant) -> f64 {
    rows as f64 / started.elapsed().as_secs_f64()
}

/// An in-memory engine holding the branch `central`, imported.
async fn library(dir: &Path) -> Ctx {
    let (client, _) = engine::start_in_memory("singlet").await;
    let ctx = Ctx::new(client, "singlet", CursorKeys::random());
    let file = dir.join("branches.jsonl");
    std::fs::write(
        &file,
        r#"{"branchId": "central", "name": "Central", "address": "1 Library Square", "city": "Springfield", "phone": "+44 20 7946 0000", "openingHours": "Mon-Sat 09:00-20:00"}"#,
    )
    .unwrap();
    let options = Options {
        progress: false,
        ..Options::default()
    };
    import::run(&ctx, Kind::Branches, &file, &options)
        .await
        .expect("the branch is imported");
    ctx
}

fn patrons_file(dir: &Path, rows: usize) -> PathBuf {
    let text: String = (0..rows)
        .map(|i| {
            format!(
                "{{\"branchId\": \"central\", \"cardNumber\": \"L-{i:07}\", \"firstName\": \
                 \"Given{i}\", \"lastName\": \"Family{i}\", \"email\": \"reader{i}@example.org\", \
                 \"membershipTier\": \"standard\"}}\n"
            )
        })
        .collect();
    let path = dir.join("patrons.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}
