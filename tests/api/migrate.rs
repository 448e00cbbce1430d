//! Migrations (docs/API.md, "Migrations"), on a real engine: vehicles written in the shape they
//! had before the depot index (raw engine writes), then `vehicles-by-depot` killed part way and
//! resumed, throttled, dry-run, and run while the API writes the same vehicles.

use crate::harness::{Api, Item, Mode, s};
use crate::process::singlet;
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use serde_json::{Value, json};
use singlet::migrate::{self, Options};
use singlet_functions::migrations;
use std::collections::BTreeSet;

const DEPOTS: [&str; 4] = ["north", "South", "east yard", "WEST"];

/// A vehicle, its plate lock and its chassis lock as version 1 wrote them: no `_et`, no `_v`, no
/// depot index keys.
fn old_vehicle(i: usize) -> [Item; 3] {
    let id = format!("v{i:06}");
    // Plates without separators: their locks are keyed the same under the compact rule.
    let (plate, chassis) = (format!("old{i:06}"), format!("ch{i:06}"));
    let vehicle = Item::from([
        ("PK".into(), AttributeValue::S(format!("VEHICLE#{id}"))),
        ("SK".into(), AttributeValue::S(format!("VEHICLE#{id}"))),
        ("vehicleId".into(), AttributeValue::S(id.clone())),
        ("plate".into(), AttributeValue::S(plate.clone())),
        ("chassis".into(), AttributeValue::S(chassis.clone())),
        (
            "depot".into(),
            AttributeValue::S(DEPOTS[i % DEPOTS.len()].into()),
        ),
        (
            "addedAt".into(),
            AttributeValue::N((1_700_000_000_000i64 + i as i64).to_string()),
        ),
    ]);
    let lock = |prefix: &str, field: &str, value: &str| {
        Item::from([
            ("PK".into(), AttributeValue::S(format!("{prefix}#{value}"))),
            ("SK".into(), AttributeValue::S(format!("{prefix}#{value}"))),
            (field.into(), AttributeValue::S(value.into())),
            ("vehicleId".into(), AttributeValue::S(id.clone())),
        ])
    };
    [
        vehicle,
        lock("PLATE", "plate", &plate),
        lock("CHASSIS", "chassis", &chassis),
    ]
}

async fn write_old_vehicles(api: &Api, count: usize) {
    let items: Vec<Item> = (0..count).flat_map(old_vehicle).collect();
    for chunk in items.chunks(25) {
        let requests = chunk
            .iter()
            .map(|item| {
                WriteRequest::builder()
                    .put_request(
                        PutRequest::builder()
                            .set_item(Some(item.clone()))
                            .build()
                            .unwrap(),
                    )
                    .build()
            })
            .collect();
        let output = api
            .ctx
            .db
            .batch_write_item()
            .request_items(&*api.ctx.table, requests)
            .send()
            .await
            .unwrap();
        assert!(output.unprocessed_items.unwrap_or_default().is_empty());
    }
}

fn migration() -> &'static migrations::Migration {
    migrations::by_name("vehicles-by-depot").unwrap()
}

/// Every vehicle id the depot route lists, page by page, checking newest first.
async fn listed(api: &Api, depot: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut added = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            None => format!("/depots/{depot}/vehicles?limit=100"),
            Some(c) => format!("/depots/{depot}/vehicles?limit=100&cursor={c}"),
        };
        let reply = api.get(path).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        for vehicle in reply.body["items"].as_array().unwrap() {
            ids.push(vehicle["vehicleId"].as_str().unwrap().to_owned());
            added.push(vehicle["addedAt"].as_i64().unwrap());
        }
        match reply.body["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert!(added.windows(2).all(|w| w[0] >= w[1]), "newest first");
    ids
}

fn vehicles(items: &[Item]) -> Vec<&Item> {
    items
        .iter()
        .filter(|i| s(i, "PK").starts_with("VEHICLE#"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vehicles_by_depot_killed_half_way_resumes_and_writes_each_vehicle_once() {
    let api = Api::start(Mode::Direct).await;
    const COUNT: usize = 2000;
    write_old_vehicles(&api, COUNT).await;
    let before = api.items().await;

    // A dry run plans every vehicle and writes nothing, not even a checkpoint.
    let dry = migrate::run(
        &api.ctx,
        migration(),
        &Options {
            segments: 4,
            dry_run: true,
            ..Options::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(dry.changed, COUNT as u64);
    assert_eq!(dry.scanned, before.len() as u64);
    assert_eq!(dry.sample.len(), 5);
    assert!(!dry.complete);
    assert_eq!(api.items().await.len(), before.len());
    assert!(api.items().await.iter().all(|i| !i.contains_key("GSI5PK")));

    // Killed at about half way.
    let max_wcu = 2000.0;
    let options = Options {
        segments: 4,
        max_wcu: Some(max_wcu),
        page_size: Some(100),
        ..Options::default()
    };
    let first = migrate::run(
        &api.ctx,
        migration(),
        &Options {
            stop_after: Some(COUNT as u64 / 2),
            ..options.clone()
        },
    )
    .await
    .unwrap();
    assert!(!first.complete);
    assert!(first.changed >= COUNT as u64 / 2, "{first:?}");
    let states = migrate::states(&api.ctx).await.unwrap();
    let state = states
        .iter()
        .find(|s| s.migration == "vehicles-by-depot")
        .unwrap();
    assert_eq!(state.state, "in progress", "{state:?}");
    // Resuming with another segment count would read other pages: refused.
    let refused = migrate::run(
        &api.ctx,
        migration(),
        &Options {
            segments: 2,
            ..options.clone()
        },
    )
    .await
    .unwrap_err();
    assert!(refused.contains("--segments 4"), "{refused}");

    let second = migrate::run(&api.ctx, migration(), &options).await.unwrap();
    assert!(second.complete, "{second:?}");
    assert!(second.conflicts.is_empty());
    // Every vehicle written exactly once: a second write of one would need its condition (no
    // depot keys, version below 2) to hold again, and the two runs' writes add up to the count.
    assert_eq!(
        first.changed + second.changed,
        COUNT as u64,
        "{first:?} {second:?}"
    );
    // The page each segment was in when killed is read again (at most 100 items a segment), and
    // the vehicles of it already changed refuse their condition.
    assert!(second.already_changed <= 4 * 100, "{second:?}");
    for report in [&first, &second] {
        assert!(
            report.peak_wcu_per_second <= max_wcu * 1.1,
            "over --max-wcu: {report:?}"
        );
        assert!(report.peak_wcu_per_second > 0.0);
    }

    let after = api.items().await;
    for vehicle in vehicles(&after) {
        assert!(vehicle.contains_key("GSI5PK"), "{vehicle:?}");
        assert_eq!(s(vehicle, "_et"), "vehicle");
        assert_eq!(vehicle["_v"], AttributeValue::N("2".into()));
    }
    let mut all = BTreeSet::new();
    for depot in ["NORTH", " south ", "East   Yard", "west"] {
        let ids = listed(&api, &depot.replace(' ', "%20")).await;
        assert_eq!(ids.len(), COUNT / DEPOTS.len(), "{depot}");
        all.extend(ids);
    }
    assert_eq!(all.len(), COUNT);

    // Run again: a new pass that finds nothing to change.
    let third = migrate::run(&api.ctx, migration(), &options).await.unwrap();
    assert_eq!((third.changed, third.already_changed), (0, 0));
    assert!(third.complete);
    let state = migrate::states(&api.ctx).await.unwrap();
    assert_eq!(state[0].state, "complete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vehicles_by_depot_runs_while_the_api_writes_the_same_vehicles() {
    let api = Api::start(Mode::Direct).await;
    const COUNT: usize = 600;
    write_old_vehicles(&api, COUNT).await;

    let writes = async {
        let mut statuses = Vec::new();
        for i in 0..60 {
            let reply = match i % 3 {
                0 => api.delete(format!("/vehicles/v{:06}", i * 7)).await,
                1 => {
                    api.put(
                        format!("/vehicles/v{:06}/plate", i * 7),
                        json!({"plate": format!("NEW {i:04}")}),
                    )
                    .await
                }
                _ => {
                    api.post(
                        "/vehicles",
                        json!({"plate": format!("FRESH {i:04}"), "chassis": format!("FR{i:04}"), "depot": "North"}),
                    )
                    .await
                }
            };
            statuses.push((i, reply.status));
        }
        statuses
    };
    let options = Options {
        segments: 3,
        ..Options::default()
    };
    let run = migrate::run(&api.ctx, migration(), &options);
    let (statuses, report) = tokio::join!(writes, run);
    let report = report.unwrap();
    assert!(report.complete && report.conflicts.is_empty(), "{report:?}");
    for (i, status) in statuses {
        let expected = match i % 3 {
            0 => 204,
            1 => 200,
            _ => 201,
        };
        assert_eq!(status, expected, "write {i}");
    }

    // Every vehicle left is indexed under its depot, with the API's changes kept; a retired
    // vehicle was never brought back as half an item.
    let items = api.items().await;
    let live: Vec<&Item> = vehicles(&items);
    assert_eq!(live.len(), COUNT - 20 + 20);
    for vehicle in &live {
        assert!(vehicle.contains_key("GSI5PK"), "{vehicle:?}");
        assert!(vehicle.contains_key("plate") && vehicle.contains_key("depot"));
    }
    let north = listed(&api, "north").await;
    let expected_north = live
        .iter()
        .filter(|v| s(v, "GSI5PK") == "DEPOT#north")
        .count();
    assert_eq!(north.len(), expected_north);
    assert_eq!(
        s(
            &api.item("VEHICLE#v000007", "VEHICLE#v000007")
                .await
                .unwrap(),
            "plate"
        ),
        "new 0001"
    );
}

#[test]
fn the_cli_lists_runs_and_refuses_with_its_exit_codes() {
    let listed = singlet()
        .args(["--in-memory", "migrate", "--json"])
        .output()
        .unwrap();
    assert_eq!(listed.status.code(), Some(0), "{listed:?}");
    let list: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(list["migrations"][0]["migration"], "vehicles-by-depot");
    assert_eq!(list["migrations"][0]["state"], "not started");

    let ran = singlet()
        .args(["--in-memory", "migrate", "vehicles-by-depot", "--json"])
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(0), "{ran:?}");
    let report: Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(report["migration"], "vehicles-by-depot");
    assert_eq!(report["complete"], true);
    assert_eq!(report["changed"], 0);
    assert_eq!(report["conflicts"], json!([]));

    for args in [
        &["migrate", "no-such-migration"][..],
        &["migrate", "vehicles-by-depot", "--max-wcu", "0"][..],
    ] {
        let refused = singlet().arg("--in-memory").args(args).output().unwrap();
        assert_eq!(refused.status.code(), Some(2), "{args:?}: {refused:?}");
        assert!(refused.stdout.is_empty());
        assert!(!refused.stderr.is_empty());
    }
}
