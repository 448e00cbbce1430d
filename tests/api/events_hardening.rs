//! Domain events under the findings of issue 45: a resource's status flipped from `open` to
//! `overdue` is no loan's mark (the stream's filter and the publisher decide by `_et`), and every
//! committed change's event is published whoever made the table: the runner, `import`, `seed`,
//! `load --keep-outbox` into the embedded engine, or an older singlet that made tables with no
//! stream. Each event once, a runner restarted included.

use crate::harness::{Api, Mode};
use crate::process::{self, Running};
use serde_json::{Value, json};
use singlet::serve::engine::streams_client;
use singlet::serve::event_source::{EventSource, Faults};
use singlet::serve::local_bus::LocalBus;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "events-hardening-{name}-{:016x}",
        rand::random::<u64>()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn event_ids(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["detail"]["eventId"].as_str().unwrap().to_owned())
        .collect()
}

/// An `audit:write` caller creates a resource `open` and changes it to `overdue`, through the
/// front door: its two changes are its two events (`ResourceCreated`, `ResourceChanged`), its
/// own `MODIFY` record is no loan's mark, and nothing fails or reaches the on-failure file.
/// Before, the filter let the record through on `status` alone and the publisher failed to
/// decode it as a loan, four times, then sent it to the on-failure destination.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_flipped_from_open_to_overdue_is_its_own_change_and_nothing_fails() {
    let api = Api::start(Mode::Http).await;
    let dir = scratch("flip");
    let (events, failed) = (dir.join("events.jsonl"), dir.join("events-failed.jsonl"));
    let ctx = api
        .ctx
        .clone()
        .with_bus(Arc::new(LocalBus::open(&events).unwrap()));
    let streams = streams_client(&api.ctx.db, &api.engine).await;
    let mut source = EventSource::start(ctx, streams, failed.clone(), Faults::default())
        .await
        .unwrap();
    let writer = api.as_token(crate::harness::token("auditor", "audit:write", &[]));

    let created = writer
        .post(
            "/resources",
            json!({"resourceId": "flip-1", "status": "open"}),
        )
        .await;
    assert_eq!(created.status, 201, "{created:?}");
    let changed = writer
        .call("PATCH", "/resources/flip-1")
        .header("if-match", "\"1\"")
        .json(json!({"status": "overdue", "action": "escalate"}))
        .send()
        .await;
    assert_eq!(changed.status, 200, "{changed:?}");
    assert_eq!(changed.body["status"], "overdue");

    let report = source.drain().await.unwrap();
    assert_eq!(report.failed_invocations, 0, "{report:?}");
    assert_eq!(report.records_failed, 0, "{report:?}");
    assert!(lines(&failed).is_empty(), "nothing in the on-failure file");
    let published = lines(&events);
    let kinds: Vec<(&str, &str, &str)> = published
        .iter()
        .map(|e| {
            (
                e["detail-type"].as_str().unwrap(),
                e["detail"]["subject"]["id"].as_str().unwrap(),
                e["detail"]["data"]["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("ResourceCreated", "flip-1", "open"),
            ("ResourceChanged", "flip-1", "overdue"),
        ],
        "{published:#?}"
    );
    // Flipped again and again: still its own changes only.
    for (version, status) in [(2, "open"), (3, "overdue")] {
        let reply = writer
            .call("PATCH", "/resources/flip-1")
            .header("if-match", &format!("\"{version}\""))
            .json(json!({"status": status, "action": "flip"}))
            .send()
            .await;
        assert_eq!(reply.status, 200, "{reply:?}");
    }
    let report = source.drain().await.unwrap();
    assert_eq!(report.records_failed, 0, "{report:?}");
    assert_eq!(lines(&events).len(), 4);
    assert!(lines(&failed).is_empty());
}

/// Runs the `singlet` tool with `args` on the data file `data`; exit 0 expected.
fn tool(data: &Path, args: &[&str]) -> std::process::Output {
    let output = process::singlet()
        .arg("--data")
        .arg(data)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
    output
}

/// A runner serving `data`, publishing to `events` (its on-failure file beside it).
fn serve(data: &Path, events: &Path) -> Running {
    serve_with(data, events, &[])
}

/// [`serve`] with `extra` options.
fn serve_with(data: &Path, events: &Path, extra: &[&str]) -> Running {
    let mut command = process::singlet();
    command.args(extra);
    command
        .arg("--data")
        .arg(data)
        .arg("--events-out")
        .arg(events)
        .arg("--events-failed")
        .arg(events.with_file_name("events-failed.jsonl"))
        .args(["--mark-overdue-every", "0", "--no-console"]);
    process::serve(command)
}

/// Once the stream position kept beside `data` has stayed the same for a second (or after 30 s):
/// the runner has checkpointed every batch it delivered.
async fn checkpoint_settled(data: &Path) {
    let position = data.with_file_name("stream-position.json");
    let read = || std::fs::read(&position).ok();
    let (mut last, mut same_for) = (read(), 0);
    for _ in 0..300 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = read();
        same_for = if now == last && now.is_some() {
            same_for + 1
        } else {
            0
        };
        if same_for >= 10 {
            return;
        }
        last = now;
    }
}

/// The events file once `done` says it holds what it should (or after 60 s, whatever it holds
/// then).
async fn published(events: &Path, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    for _ in 0..600 {
        let now = lines(events);
        if done(&now) {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    lines(events)
}

/// Every outbox item's `eventId` in the table a runner serves (through its engine's endpoint).
async fn outbox_event_ids(runner: &Running) -> BTreeSet<String> {
    let db = singlet::serve::engine::local_client(runner.engine.as_deref().unwrap());
    crate::harness::outbox_items(&db, "singlet")
        .await
        .iter()
        .map(|item| {
            let detail: Value = serde_json::from_str(item["detail"].as_s().unwrap()).unwrap();
            detail["eventId"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// The runner serving `data` publishes the event of every outbox item the table holds, each
/// once (and, for `seed`, which retires vehicles, the events of outbox items their deletion
/// took, which the stream still carries), and, restarted, publishes none of them again: a
/// change made after the restart is the one event more (published after anything the restart
/// would have published again, since the mapping keeps stream order). The events published
/// before the restart.
async fn publishes_each_outbox_item_once(dir: &Path, data: &Path) -> Vec<String> {
    let events = dir.join("events.jsonl");
    let runner = serve(data, &events);
    let expected = outbox_event_ids(&runner).await;
    assert!(!expected.is_empty());
    let all_there = |now: &[Value]| {
        let ids: BTreeSet<String> = event_ids(now).into_iter().collect();
        expected.is_subset(&ids)
    };
    let first = event_ids(&published(&events, all_there).await);
    let unique: BTreeSet<String> = first.iter().cloned().collect();
    assert!(expected.is_subset(&unique), "each outbox item's event");
    assert_eq!(unique.len(), first.len(), "none twice");
    // The runner is killed next, as a crash would: a kill between a batch's delivery and its
    // checkpoint delivers that batch again (at least once, as Lambda's mapping does). What is
    // asserted here is that what was checkpointed is not published again, so the kill waits for
    // the checkpoint to settle.
    checkpoint_settled(data).await;
    drop(runner);

    let runner = serve(data, &events);
    register(&runner, "AFTER 1").await;
    let second = published(&events, |now| {
        now.last()
            .is_some_and(|last| last["detail"]["data"]["plate"] == "after 1")
    })
    .await;
    let last = second.last().unwrap();
    assert_eq!(last["detail-type"], "VehicleRegistered", "{last}");
    let ids = event_ids(&second);
    assert_eq!(
        ids.len(),
        first.len() + 1,
        "nothing published again across the restart: {second:#?}"
    );
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), ids.len());
    assert!(lines(&dir.join("events-failed.jsonl")).is_empty());
    first
}

fn vehicle_rows(dir: &Path, count: usize) -> PathBuf {
    let rows = dir.join("vehicles.jsonl");
    let text: Vec<String> = (0..count)
        .map(|n| {
            json!({"plate": format!("IMP {n}"), "chassis": format!("IMPC{n}"), "depot": "north"})
                .to_string()
        })
        .collect();
    std::fs::write(&rows, text.join("\n")).unwrap();
    rows
}

/// `import` creates the data file: its table is the runner's, stream included, so every
/// imported row's event is published when the runner serves it, once; importing the same file
/// again writes nothing and publishes nothing more. Before, the table had no stream and none
/// was published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_imported_rows_event_is_published_once() {
    let dir = scratch("import");
    let data = dir.join("table.db");
    let rows = vehicle_rows(&dir, 300);
    tool(&data, &["import", "vehicles", rows.to_str().unwrap()]);
    // Run again: every row is there already, so no outbox item is written twice.
    tool(&data, &["import", "vehicles", rows.to_str().unwrap()]);
    let published = publishes_each_outbox_item_once(&dir, &data).await;
    assert_eq!(published.len(), 300, "one event per row");
}

/// `seed` creates the data file: every seeded change's event is published when the runner
/// serves it, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_seeded_changes_event_is_published_once() {
    let dir = scratch("seed");
    let data = dir.join("table.db");
    tool(&data, &["seed"]);
    publishes_each_outbox_item_once(&dir, &data).await;
}

/// `load --keep-outbox` into the embedded engine (its bulk path, which records nothing on the
/// stream unless told): the kept outbox items' events are published when the runner serves the
/// copy, once each, with the `eventId`s they had.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_outbox_loaded_in_bulk_is_published_once() {
    let dir = scratch("load");
    let (original, copy) = (dir.join("original.db"), dir.join("copy.db"));
    let rows = vehicle_rows(&dir, 200);
    tool(&original, &["import", "vehicles", rows.to_str().unwrap()]);
    let export = dir.join("export");
    tool(&original, &["export", export.to_str().unwrap()]);
    tool(&copy, &["load", "--keep-outbox", export.to_str().unwrap()]);
    let published = publishes_each_outbox_item_once(&dir, &copy).await;
    assert_eq!(published.len(), 200, "one event per row");
}

/// A table made with no stream (by an older singlet's `import`, or by hand) holds outbox items
/// no stream carried: the runner lists them before it switches the stream on, publishes them
/// first, each once, and a restart publishes none again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_items_written_before_the_stream_was_on_are_published_once() {
    let dir = scratch("streamless");
    let data = dir.join("table.db");
    // The table with its stream off, as an older singlet's tools made it.
    {
        let (db, _, _engine) = singlet::serve::engine::start_with_clock(
            Some(&data),
            std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            &singlet_functions::clock::Clock::system(),
        )
        .await
        .unwrap();
        singlet_functions::table::ensure_table(&db, "singlet")
            .await
            .unwrap();
        switch_stream_off(&db).await;
        let described = db
            .describe_table()
            .table_name("singlet")
            .send()
            .await
            .unwrap();
        let on = described
            .table()
            .and_then(|t| t.stream_specification())
            .is_some_and(|s| s.stream_enabled());
        assert!(!on, "the stream is off");
    }
    let rows = vehicle_rows(&dir, 150);
    tool(&data, &["import", "vehicles", rows.to_str().unwrap()]);
    let published = publishes_each_outbox_item_once(&dir, &data).await;
    assert_eq!(published.len(), 150, "one event per row");
    // The list is gone once every item on it was delivered.
    assert!(!dir.join("unstreamed-outbox.jsonl").exists());
}

/// The second review's finding 2: a table whose stream published its changes' events, then was
/// switched off by hand and served again, had every outbox item listed and published again, and
/// on dynoxide the stream switched on again still held the old records, published a third time.
/// Now each event goes out once across both restarts, and a change made after is the one more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_switched_off_and_on_again_publishes_nothing_twice() {
    let dir = scratch("stream-off-on");
    let (data, events) = (dir.join("table.db"), dir.join("events.jsonl"));
    let runner = serve(&data, &events);
    for n in 1..=5 {
        register(&runner, &format!("ONOFF {n}")).await;
    }
    let first = published(&events, |now| now.len() >= 5).await;
    assert_eq!(first.len(), 5, "{first:#?}");
    checkpoint_settled(&data).await;
    let db = singlet::serve::engine::local_client(runner.engine.as_deref().unwrap());
    switch_stream_off(&db).await;
    drop(runner);

    let runner = serve(&data, &events);
    register(&runner, "ONOFF 6").await;
    let after = published(&events, |now| {
        now.iter()
            .any(|event| event["detail"]["data"]["plate"] == "onoff 6")
    })
    .await;
    // Anything published again would come before the new change, in the mapping's order; give
    // a straggler a moment all the same.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = if lines(&events).len() > after.len() {
        lines(&events)
    } else {
        after
    };
    let ids = event_ids(&after);
    assert_eq!(ids.len(), 6, "each change's event once: {after:#?}");
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 6);
    assert!(lines(&dir.join("events-failed.jsonl")).is_empty());
}

/// Switches the table `singlet`'s stream off, as an operator's `UpdateTable` would.
async fn switch_stream_off(db: &aws_sdk_dynamodb::Client) {
    db.update_table()
        .table_name("singlet")
        .stream_specification(
            aws_sdk_dynamodb::types::StreamSpecification::builder()
                .stream_enabled(false)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
}

async fn register(runner: &Running, plate: &str) {
    let reply = reqwest::Client::new()
        .post(format!("{}/vehicles", runner.api))
        .bearer_auth(crate::harness::token(
            "tester",
            &crate::harness::all_scopes(),
            &[],
        ))
        .json(&json!({"plate": plate, "chassis": format!("{plate}-C"), "depot": "north"}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 201);
}

/// `--no-events` (for an engine whose streams are slow): the runner reads no stream and opens
/// no events file; the change's record stays on the stream, and the next runner that publishes
/// publishes it, once. `--stream-poll-ms` reads the stream less often, and still publishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_events_leaves_each_change_to_the_next_runner_that_publishes() {
    let dir = scratch("no-events");
    let (data, events) = (dir.join("table.db"), dir.join("events.jsonl"));
    let runner = serve_with(&data, &events, &["--no-events"]);
    register(&runner, "QUIET 1").await;
    drop(runner);
    assert!(!events.exists(), "no events file was opened");

    let runner = serve_with(&data, &events, &["--stream-poll-ms", "2000"]);
    register(&runner, "SLOW 1").await;
    let got = published(&events, |now| now.len() >= 2).await;
    let plates: Vec<&str> = got
        .iter()
        .map(|e| e["detail"]["data"]["plate"].as_str().unwrap())
        .collect();
    assert_eq!(plates, ["quiet 1", "slow 1"]);
}

/// A poll interval out of 10 ms to 10 minutes, or not a number, is a usage error naming the
/// option.
#[test]
fn a_stream_poll_interval_out_of_range_is_a_usage_error() {
    for bad in ["0", "9", "600001", "soon"] {
        let output = process::singlet()
            .args(["--in-memory", "--stream-poll-ms", bad])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{bad}: {output:?}");
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(said.contains("--stream-poll-ms"), "{bad}: {said}");
    }
}

/// The events files hold whole entities (emails, names, card numbers). A symbolic link planted
/// at `--events-out` or `--events-failed` (in a shared drop folder, say) is refused before
/// anything is served, with exit 2 and words naming the file, and its target is left untouched;
/// an existing events file with a wider mode is made its user's alone (`0600`), its lines kept.
/// Before, the runner appended each event to the link's target and kept an existing file's mode.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_events_file_is_never_written_through_a_link_and_is_its_users_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("private");
    let target = dir.join("someone-elses.jsonl");
    std::fs::write(&target, "kept\n").unwrap();
    let refuse = |events: &Path, failed: &Path, what: &str| {
        let output = process::singlet()
            .args([
                "--in-memory",
                "--port",
                "0",
                "--engine-port",
                "0",
                "--no-console",
            ])
            .arg("--events-out")
            .arg(events)
            .arg("--events-failed")
            .arg(failed)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // A runner that does not refuse serves until killed: given 30 s to exit.
        let mut child = output;
        let exited = (0..300).any(|_| {
            std::thread::sleep(Duration::from_millis(100));
            child.try_wait().unwrap().is_some()
        });
        if !exited {
            let _ = child.kill();
        }
        let output = child.wait_with_output().unwrap();
        assert!(exited, "{what}: the runner served instead of refusing");
        assert_eq!(output.status.code(), Some(2), "{what}: {output:?}");
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(said.contains("symbolic link"), "{what}: {said}");
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "kept\n",
            "{what}"
        );
    };
    let link = dir.join("events.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    refuse(&link, &dir.join("failed.jsonl"), "--events-out a link");
    let failed_link = dir.join("failed-link.jsonl");
    std::os::unix::fs::symlink(&target, &failed_link).unwrap();
    refuse(
        &dir.join("own.jsonl"),
        &failed_link,
        "--events-failed a link",
    );

    // An existing events file, left 0644 by an earlier run or another tool.
    let events = dir.join("wide.jsonl");
    std::fs::write(&events, "{\"earlier\":1}\n").unwrap();
    std::fs::set_permissions(&events, std::fs::Permissions::from_mode(0o644)).unwrap();
    let failed = events.with_file_name("events-failed.jsonl");
    std::fs::write(&failed, "").unwrap();
    std::fs::set_permissions(&failed, std::fs::Permissions::from_mode(0o644)).unwrap();
    let runner = serve_with(&dir.join("table.db"), &events, &[]);
    for file in [&events, &failed] {
        let mode = std::fs::metadata(file).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o600, "{}", file.display());
    }
    register(&runner, "PRIV 1").await;
    let got = published(&events, |now| now.len() >= 2).await;
    assert_eq!(got[0], json!({"earlier": 1}), "appended to, not emptied");
    assert_eq!(got[1]["detail"]["data"]["plate"], "priv 1");
}
