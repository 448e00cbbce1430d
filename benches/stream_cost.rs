//! What the embedded engine's stream costs as the stream grows: the engine's own time (dynoxide
//! called in process, no HTTP) for a `PutItem` (which appends one stream record), a
//! `GetShardIterator` after a sequence number, and a `GetRecords` with nothing new, from a fresh
//! iterator and from the one the last read handed back; and what writing the mapping's position
//! file costs. It explains the event-lag bench (docs/notebooks/event-lag.md): the load
//! bench's 3,200 registrations leave 12,800 stream records.
//!
//! It times dynoxide alone, then the runner's engine (`singlet::serve::engine::open`), which adds the
//! two indexes dynoxide's stream statements need (`engine::index_the_stream`).
//!
//! `cargo bench --bench stream_cost`.

use dynoxide::Database;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const TABLE: &str = "stream-cost";
const STEP: usize = 4_000;
const STEPS: usize = 8;
/// Reads timed at each length; the median is printed.
const SAMPLES: usize = 21;

fn request<T: serde::de::DeserializeOwned>(body: Value) -> T {
    serde_json::from_value(body).expect("a valid request")
}

fn main() {
    position_file();
    println!("\ndynoxide alone (`Database::memory`), the baseline:");
    measure(Database::memory().unwrap());
    println!("\nthe runner's engine (`singlet::serve::engine::open`: the stream's indexes added):");
    measure(singlet::serve::engine::open(None).unwrap());
}

fn measure(db: Database) {
    db.create_table(request(json!({
        "TableName": TABLE,
        "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        "AttributeDefinitions": [{"AttributeName": "PK", "AttributeType": "S"}, {"AttributeName": "SK", "AttributeType": "S"}],
        "BillingMode": "PAY_PER_REQUEST",
        "StreamSpecification": {"StreamEnabled": true, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    })))
    .unwrap();
    let stream_arn = db
        .list_streams(request(json!({"TableName": TABLE})))
        .unwrap()
        .streams[0]
        .stream_arn
        .clone();
    let shard_id = dynoxide::streams::shard_id(TABLE);
    // About a vehicle's size, as the event-lag bench writes them.
    let filler = "x".repeat(400);
    let put = |n: usize| {
        db.put_item(request(json!({"TableName": TABLE, "Item": {
            "PK": {"S": format!("VEHICLE#{n}")}, "SK": {"S": "VEHICLE"}, "data": {"S": filler}
        }})))
        .unwrap();
    };

    println!(
        "{:>8} {:>14} {:>18} {:>18} {:>18}",
        "records", "PutItem", "GetShardIterator", "GetRecords, seek", "GetRecords, kept"
    );
    let mut written = 0;
    let mut iterator = db
        .get_shard_iterator(request(json!({
            "StreamArn": stream_arn, "ShardId": shard_id, "ShardIteratorType": "TRIM_HORIZON"
        })))
        .unwrap()
        .shard_iterator
        .unwrap();
    for step in 1..=STEPS {
        let started = Instant::now();
        while written < step * STEP {
            put(written);
            written += 1;
        }
        let put_each = started.elapsed() / STEP as u32;
        // Read to the end, as the mapping does, keeping the last sequence number and iterator.
        let mut last = String::new();
        loop {
            let read = db
                .get_records(request(json!({"ShardIterator": iterator})))
                .unwrap();
            iterator = read.next_shard_iterator.unwrap();
            match read.records.last() {
                Some(record) => last = record.dynamodb.sequence_number.clone(),
                None => break,
            }
        }
        let seek = || {
            db.get_shard_iterator(request(json!({
                "StreamArn": stream_arn, "ShardId": shard_id,
                "ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": last
            })))
            .unwrap()
            .shard_iterator
            .unwrap()
        };
        let read_nothing = |at: &str| {
            let read = db
                .get_records(request(json!({"ShardIterator": at})))
                .unwrap();
            assert!(read.records.is_empty());
        };
        let seeking = median(|| {
            seek();
        });
        let reading_after_seek = median(|| read_nothing(&seek()));
        let reading_kept = median(|| read_nothing(&iterator));
        println!(
            "{written:>8} {:>11.0} µs {:>15.0} µs {:>15.0} µs {:>15.0} µs",
            micros(put_each),
            micros(seeking),
            micros(reading_after_seek),
            micros(reading_kept),
        );
    }
}

/// What `EventSource::keep_position` does after each read that moved: a small JSON written
/// aside, then renamed over the position file.
fn position_file() {
    let dir = std::env::temp_dir().join(format!("singlet-stream-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("stream-position.json");
    let mut sequence = 100_000_001_764_642_000_000_000u128;
    let each = median(|| {
        sequence += 1;
        let json = json!({
            "streamArn": "arn:aws:dynamodb:dynoxide:000000000000:table/singlet/stream/1764642000.000000000",
            "shardId": "shardId-00000001-singlet",
            "sequenceNumber": sequence.to_string(),
        });
        let aside = file.with_extension("json.partial");
        std::fs::write(&aside, json.to_string()).unwrap();
        std::fs::rename(&aside, &file).unwrap();
    });
    println!(
        "position file, written aside and renamed: {:.0} µs",
        micros(each)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn median(mut run: impl FnMut()) -> Duration {
    let mut took: Vec<Duration> = (0..SAMPLES)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed()
        })
        .collect();
    took.sort();
    took[SAMPLES / 2]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
