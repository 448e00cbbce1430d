//! Event lag: how long after a `2xx` its domain event is a line in the events file, under the
//! load bench's 32 writers. The runner's front door (on a loopback port, the runner's own
//! authorizer) takes `register-vehicle` from 32 concurrent clients; the event-source mapping is
//! played as `cargo run` plays it (the table's stream polled every `POLL_EVERY`, each batch handed
//! to `publish-events` in process, the local bus appending to an events file, the checkpoint kept
//! in a position file). For each vehicle,
//! the lag is the time from its `201` reaching the client to its event's line being written.
//!
//! It prints p50, p99 and the maximum over the whole run and over each tenth of it in order (so a
//! lag that grows over the run shows as rising rows), beside the requests' own latency in the same
//! slice, and asserts nothing but that every `201` got exactly one event. On a quiet stream a
//! record waits for the next poll (at most `POLL_EVERY`, as on AWS, where Lambda polls a shard four
//! times a second); under load the mapping reads again as soon as a read returned records, and the
//! lag is mostly the engine's time.
//!
//! `cargo bench --bench event_lag [-- REQUESTS_PER_CLIENT]`.

mod common;

use serde_json::{Value, json};
use singlet::serve::engine;
use singlet::serve::event_source::{EventSource, Faults, POLL_EVERY};
use singlet::serve::local_bus::LocalBus;
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use singlet_functions::events::Entry;
use singlet_functions::events::bus::Bus;
use singlet_functions::routes::BoxFuture;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CLIENTS: usize = 32;
const REQUESTS_PER_CLIENT: usize = 100;
/// The run is reported in this many consecutive slices, by the time each `201` arrived.
const SLICES: usize = 10;
/// How long the last events may take to arrive once every request is answered.
const SETTLE: Duration = Duration::from_secs(30);

/// The local bus, noting when each event's line was written, by its subject's id.
struct Timed {
    bus: LocalBus,
    written: Mutex<HashMap<String, Vec<Instant>>>,
}

impl Bus for Timed {
    fn put_events<'a>(
        &'a self,
        entries: &'a [Entry],
    ) -> BoxFuture<'a, Result<Vec<Option<String>>, String>> {
        Box::pin(async move {
            let outcomes = self.bus.put_events(entries).await?;
            let now = Instant::now();
            let mut written = self.written.lock().unwrap();
            for (entry, outcome) in entries.iter().zip(&outcomes) {
                if outcome.is_none() {
                    let detail: Value = serde_json::from_str(&entry.detail).unwrap();
                    let subject = detail["subject"]["id"].as_str().unwrap().to_owned();
                    written.entry(subject).or_default().push(now);
                }
            }
            Ok(outcomes)
        })
    }
}

#[tokio::main]
async fn main() {
    let per_client = common::requests_per_client(REQUESTS_PER_CLIENT);
    let (client, endpoint) = engine::start_in_memory("singlet").await;
    let ctx = Ctx::new(client, "singlet", CursorKeys::random());

    let scratch = std::env::temp_dir().join(format!("singlet-event-lag-{}", std::process::id()));
    let timed = Arc::new(Timed {
        bus: LocalBus::open(&scratch.join("events.jsonl")).unwrap(),
        written: Mutex::default(),
    });
    let streams = engine::streams_client(&ctx.db, &endpoint).await;
    let source = EventSource::start(
        ctx.clone().with_bus(timed.clone()),
        streams,
        scratch.join("events-failed.jsonl"),
        Faults::default(),
    )
    .await
    .unwrap()
    .remember_in(scratch.join("stream-position.json"));
    let mapping = tokio::spawn(source.run());

    let (base, bearer) = common::front_door_on_loopback(&ctx).await;
    let http = reqwest::Client::new();

    let started = Instant::now();
    let writers: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (http, url, bearer) = (http.clone(), format!("{base}/vehicles"), bearer.clone());
            tokio::spawn(async move {
                let mut answered = Vec::with_capacity(per_client);
                for round in 0..per_client {
                    let n = round * CLIENTS + client;
                    let sent = Instant::now();
                    let reply = http
                        .post(&url)
                        .header("authorization", &bearer)
                        .json(&json!({"plate": format!("L-{n}"), "chassis": format!("LC-{n}"), "depot": "north"}))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(reply.status(), 201, "register-vehicle {n}");
                    let at = Instant::now();
                    let body: Value = reply.json().await.unwrap();
                    answered.push((body["vehicleId"].as_str().unwrap().to_owned(), sent, at));
                }
                answered
            })
        })
        .collect();
    let mut answered = Vec::new();
    for writer in writers {
        answered.extend(writer.await.unwrap());
    }
    let requests_took = started.elapsed();

    let deadline = Instant::now() + SETTLE;
    while timed.written.lock().unwrap().len() < answered.len() && Instant::now() < deadline {
        tokio::time::sleep(POLL_EVERY).await;
    }
    mapping.abort();
    let written = timed.written.lock().unwrap();
    let missing = answered
        .iter()
        .filter(|(id, _, _)| !written.contains_key(id))
        .count();
    let doubled = written.values().filter(|times| times.len() > 1).count();
    assert_eq!(missing, 0, "201s without an event after {SETTLE:?}");
    assert_eq!(doubled, 0, "vehicles with more than one event");

    answered.sort_by_key(|(_, _, at)| *at);
    let lags: Vec<Duration> = answered
        .iter()
        .map(|(id, _, at)| written[id][0].saturating_duration_since(*at))
        .collect();
    let requests: Vec<Duration> = answered.iter().map(|(_, sent, at)| *at - *sent).collect();
    println!(
        "{} register-vehicle requests from {CLIENTS} concurrent clients in {:.1} s ({:.0}/s); the stream polled every {} ms",
        answered.len(),
        requests_took.as_secs_f64(),
        answered.len() as f64 / requests_took.as_secs_f64(),
        POLL_EVERY.as_millis()
    );
    println!(
        "{:<22} {:>8} {:>8} {:>8}   {:>12} {:>8}",
        "lag, 201 → event (ms)", "p50", "p99", "max", "request p50", "p99"
    );
    row("whole run", &lags, &requests);
    let slice = lags.len().div_ceil(SLICES);
    for (i, (part, took)) in lags.chunks(slice).zip(requests.chunks(slice)).enumerate() {
        row(&format!("tenth {}", i + 1), part, took);
    }
    let _ = std::fs::remove_dir_all(&scratch);
}

/// One row: the lag's p50, p99 and maximum, then the same requests' own p50 and p99 (from
/// sending to the `201`), which show how busy the engine and the machine were in that slice.
fn row(name: &str, lags: &[Duration], requests: &[Duration]) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (lags, requests) = (sorted(lags), sorted(requests));
    println!(
        "{name:<22} {:>8.1} {:>8.1} {:>8.1}   {:>12.1} {:>8.1}",
        ms(percentile(&lags, 0.5)),
        ms(percentile(&lags, 0.99)),
        ms(*lags.last().unwrap()),
        ms(percentile(&requests, 0.5)),
        ms(percentile(&requests, 0.99)),
    );
}

fn sorted(durations: &[Duration]) -> Vec<Duration> {
    let mut sorted = durations.to_vec();
    sorted.sort();
    sorted
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}
