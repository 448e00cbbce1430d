//! Migrations (docs/API.md, "Migrations"), on a real engine: vehicles written in the shape they
//! had before the depot index (raw engine writes), then `vehicles-by-depot` killed part way and
//! resumed, throttled, dry-run, and run while the API writes the same vehicles; vehicles whose
//! locks the old plate rule keyed (separators and all), served by the API before `plates-compact`
//! and re-keyed by it, collisions reported; items without `_et`/`_v` stamped.
//!
//! The sizes are modest (the 100,000-item figures are the bench's, `benches/migrate.rs`).

use crate::harness::{Api, Item, Mode, put_raw_all, s};
use crate::process::singlet;
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};
use singlet_functions::migrations;
use singlet_tools::fsck;
use singlet_tools::migrate::{self, Options};
use std::collections::BTreeSet;

pub(crate) const DEPOTS: [&str; 4] = ["north", "South", "east yard", "WEST"];

/// Vehicles in the old shape for `vehicles-by-depot` (fewer on an engine whose scans slow as
/// its table grows: `harness::sized`).
fn vehicle_count() -> usize {
    crate::harness::sized(2000)
}
/// Vehicles whose plate lock the old rule keyed with separators, for `plates-compact`.
pub(crate) fn old_plate_count() -> usize {
    crate::harness::sized(1000)
}
/// Of those, how many collide (in pairs) under the new rule.
pub(crate) const COLLIDING: usize = 10;

/// A vehicle, its plate lock and its chassis lock as version 1 wrote them: no `_et`, no `_v`, no
/// depot index keys. Plates without separators: their locks are keyed the same under the compact
/// rule.
fn old_vehicle(i: usize) -> [Item; 3] {
    old_vehicle_with(i, &format!("old{i:06}"), &format!("ch{i:06}"))
}

/// [`old_vehicle`] with this plate and chassis number (as normalised): the old rule keyed their
/// locks by them as they are, separators and all.
pub(crate) fn old_vehicle_with(i: usize, plate: &str, chassis: &str) -> [Item; 3] {
    let id = format!("v{i:06}");
    let (plate, chassis) = (plate.to_owned(), chassis.to_owned());
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

pub(crate) async fn write_old_vehicles(api: &Api, count: usize) {
    put_raw_all(&api.ctx, (0..count).flat_map(old_vehicle).collect()).await;
}

/// A dry run of `migration` over four segments: what it would change, nothing written.
async fn dry_run(api: &Api, migration: &'static migrations::Migration) -> migrate::Report {
    let options = Options {
        segments: 4,
        dry_run: true,
        ..Options::default()
    };
    migrate::run(&api.ctx, migration, &options).await.unwrap()
}

pub(crate) fn migration() -> &'static migrations::Migration {
    migrations::by_name("vehicles-by-depot").unwrap()
}

pub(crate) fn plates_compact() -> &'static migrations::Migration {
    migrations::by_name("plates-compact").unwrap()
}

/// Every vehicle id the depot route lists, page by page, checking newest first.
pub(crate) async fn listed(api: &Api, depot: &str) -> Vec<String> {
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

/// The API's writes while a migration runs, write `i` for each `i` of `writes` on vehicle
/// `v<vehicle(i)>`: a third retire it, a third move it to the plate `new_plate(i)`, a third
/// register a vehicle of their own (`fresh(i)`: its plate and chassis). Answers each write's
/// number and status.
pub(crate) async fn api_writes(
    api: &Api,
    writes: std::ops::Range<usize>,
    vehicle: impl Fn(usize) -> usize,
    new_plate: impl Fn(usize) -> String,
    fresh: impl Fn(usize) -> (String, String),
) -> Vec<(usize, u16)> {
    let mut statuses = Vec::new();
    for i in writes {
        let vehicle = format!("/vehicles/v{:06}", vehicle(i));
        let reply = match i % 3 {
            0 => api.delete(vehicle).await,
            1 => {
                api.put(format!("{vehicle}/plate"), json!({"plate": new_plate(i)}))
                    .await
            }
            _ => {
                let (plate, chassis) = fresh(i);
                api.post(
                    "/vehicles",
                    json!({"plate": plate, "chassis": chassis, "depot": "North"}),
                )
                .await
            }
        };
        statuses.push((i, reply.status));
    }
    statuses
}

pub(crate) fn vehicles(items: &[Item]) -> Vec<&Item> {
    items
        .iter()
        .filter(|i| s(i, "PK").starts_with("VEHICLE#"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vehicles_by_depot_killed_half_way_resumes_and_writes_each_vehicle_once() {
    let api = Api::start(Mode::Direct).await;
    let count = vehicle_count();
    write_old_vehicles(&api, count).await;
    let before = api.items().await;

    // A dry run plans every vehicle and writes nothing, not even a checkpoint.
    let dry = dry_run(&api, migration()).await;
    assert_eq!(dry.changed, count as u64);
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
            stop_after: Some(count as u64 / 2),
            ..options.clone()
        },
    )
    .await
    .unwrap();
    assert!(!first.complete);
    assert!(first.changed >= count as u64 / 2, "{first:?}");
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
        count as u64,
        "{first:?} {second:?}"
    );
    assert_eq!(
        dry.changed,
        first.changed + second.changed,
        "what --dry-run said"
    );
    // The page each segment was in when killed is read again (at most 100 items a segment), and
    // the vehicles of it already changed refuse their condition.
    assert!(second.already_changed <= 4 * 100, "{second:?}");
    for report in [&first, &second] {
        assert!(
            report.peak_wcu_per_second <= max_wcu,
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
        assert_eq!(ids.len(), count / DEPOTS.len(), "{depot}");
        all.extend(ids);
    }
    assert_eq!(all.len(), count);

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
    let count = vehicle_count();
    // A tenth of the vehicles written by the API during the run, a third of those retired.
    let write_count = count / 10;
    write_old_vehicles(&api, count).await;

    let writes = api_writes(
        &api,
        0..write_count,
        |i| i * 7,
        |i| format!("NEW {i:04}"),
        |i| (format!("FRESH {i:04}"), format!("FR{i:04}")),
    );
    let options = Options {
        segments: 3,
        page_size: Some(50),
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
    let retired = write_count.div_ceil(3);
    let registered = write_count / 3;
    assert_eq!(live.len(), count - retired + registered);
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
    let checked = fsck::fsck(&api.ctx, fsck::Options::default())
        .await
        .unwrap();
    assert!(checked.findings.is_empty(), "{:?}", checked.findings);
}

#[test]
fn the_cli_lists_runs_and_refuses_with_its_exit_codes() {
    let data = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("migrate-cli-{:016x}", rand::random::<u64>()))
        .join("data.db");
    crate::process::an_empty_table(&data);
    let on_the_table = || {
        let mut command = singlet();
        command.arg("--data").arg(&data);
        command
    };

    let listed = on_the_table().args(["migrate", "--json"]).output().unwrap();
    assert_eq!(listed.status.code(), Some(0), "{listed:?}");
    let list: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let names: Vec<&str> = list["migrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["migration"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "vehicles-by-depot",
            "plates-compact",
            "stamp-entity-types",
            "returned-loans-expire"
        ]
    );
    assert_eq!(list["migrations"][0]["state"], "not started");

    for args in [
        &["migrate", "no-such-migration"][..],
        &["migrate", "vehicles-by-depot", "--max-wcu", "0"][..],
        // vehicles-by-depot has not run on this table yet.
        &["migrate", "plates-compact"][..],
        &["migrate", "vehicles-by-depot", "--segments", "0"][..],
        &["migrate", "vehicles-by-depot", "--segments", "2000"][..],
        &["migrate", "vehicles-by-depot", "--page-size", "0"][..],
        &["export", "--segments", "0", "never-written"][..],
    ] {
        let refused = on_the_table().args(args).output().unwrap();
        assert_eq!(refused.status.code(), Some(2), "{args:?}: {refused:?}");
        assert!(refused.stdout.is_empty());
        assert!(!refused.stderr.is_empty());
    }
    // An in-memory engine is empty and gone when the command ends: nothing to migrate.
    let refused = singlet()
        .args(["--in-memory", "migrate", "--json"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--in-memory is an empty table"));

    let ran = on_the_table()
        .args(["migrate", "vehicles-by-depot", "--json"])
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(0), "{ran:?}");
    let report: Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(report["migration"], "vehicles-by-depot");
    assert_eq!(report["complete"], true);
    assert_eq!(report["changed"], 0);
    assert_eq!(report["conflicts"], json!([]));
    let listed = on_the_table().args(["migrate", "--json"]).output().unwrap();
    let list: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(list["migrations"][0]["state"], "complete", "{list}");
}

/// The plate of old vehicle `i` as normalised: the first [`COLLIDING`] in pairs that are one plate
/// under the new rule (`dup 000` and `dup-000`), the others with separators of their own.
fn old_plate(i: usize) -> String {
    if i < COLLIDING {
        let separator = if i.is_multiple_of(2) { ' ' } else { '-' };
        format!("dup{separator}{:03}", i / 2)
    } else {
        format!("ka {i:04}-x")
    }
}

pub(crate) fn old_plated_vehicle(i: usize) -> [Item; 3] {
    old_vehicle_with(i, &old_plate(i), &format!("ch{i:06}"))
}

/// `GET /plates/{spelling}`: the vehicle it finds, if any.
async fn found_by_plate(api: &Api, spelling: &str) -> Option<String> {
    let reply = api
        .get(format!("/plates/{}", spelling.replace(' ', "%20")))
        .await;
    match reply.status {
        200 => Some(reply.body["vehicleId"].as_str().unwrap().to_owned()),
        404 => None,
        other => panic!("{other}: {reply:?}"),
    }
}

/// Before `plates-compact`: the API finds a vehicle by the spelling its old lock was keyed with,
/// and retires and re-plates it, releasing the old locks (main's API, which keys every lock
/// compact, found neither and could do neither: the release named a lock that is not there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_the_old_rule_keyed_are_found_and_released_before_plates_compact() {
    let api = Api::start(Mode::Direct).await;
    put_raw_all(
        &api.ctx,
        [
            old_vehicle_with(1, "ka 19 xtr", "wvw-1 a"),
            old_vehicle_with(2, "mh-12 ab", "wvw2"),
        ]
        .concat(),
    )
    .await;

    assert_eq!(
        found_by_plate(&api, "KA 19 XTR").await.as_deref(),
        Some("v000001")
    );
    let chassis = api.get("/chassis/WVW-1%20A").await;
    assert_eq!(chassis.status, 200, "{chassis:?}");
    assert_eq!(chassis.body["vehicleId"], "v000001");
    // Another spelling meets the compact key, which no lock has yet.
    assert_eq!(found_by_plate(&api, "KA19XTR").await, None);

    // Retired: the vehicle and both old locks gone, the plate free for any spelling.
    let retired = api.delete("/vehicles/v000001").await;
    assert_eq!(retired.status, 204, "{retired:?}");
    for pk in ["VEHICLE#v000001", "PLATE#ka 19 xtr", "CHASSIS#wvw-1 a"] {
        assert!(api.item(pk, pk).await.is_none(), "{pk} is gone");
    }
    let again = api
        .post(
            "/vehicles",
            json!({"plate": "KA-19-XTR", "chassis": "WVW-1 A", "depot": "north"}),
        )
        .await;
    assert_eq!(again.status, 201, "{again:?}");
    assert!(api.item("PLATE#ka19xtr", "PLATE#ka19xtr").await.is_some());

    // Re-plated: the old lock released, the new one keyed compact.
    let replated = api
        .put("/vehicles/v000002/plate", json!({"plate": "MH 12 AC"}))
        .await;
    assert_eq!(replated.status, 200, "{replated:?}");
    assert!(api.item("PLATE#mh-12 ab", "PLATE#mh-12 ab").await.is_none());
    assert_eq!(
        found_by_plate(&api, "mh12ac").await.as_deref(),
        Some("v000002")
    );
    let free = api
        .post(
            "/vehicles",
            json!({"plate": "MH12AB", "chassis": "WVW3", "depot": "north"}),
        )
        .await;
    assert_eq!(free.status, 201, "{free:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plates_compact_rekeys_old_locks_and_reports_collisions_with_exit_1() {
    let api = Api::start(Mode::Direct).await;
    put_raw_all(
        &api.ctx,
        (0..old_plate_count())
            .flat_map(old_plated_vehicle)
            .collect(),
    )
    .await;

    // It takes vehicles from the version vehicles-by-depot writes.
    let refused = migrate::run(&api.ctx, plates_compact(), &Options::default())
        .await
        .unwrap_err();
    assert!(refused.contains("run vehicles-by-depot first"), "{refused}");
    let indexed = migrate::run(&api.ctx, migration(), &Options::default())
        .await
        .unwrap();
    assert_eq!(indexed.changed, old_plate_count() as u64);
    // fsck reads the locks the old rule keyed as the vehicles' own, before the run and after.
    let checked = fsck::fsck(&api.ctx, fsck::Options::default())
        .await
        .unwrap();
    assert!(checked.findings.is_empty(), "{:?}", checked.findings);

    let expected_conflicts: Vec<String> =
        (0..COLLIDING).map(|i| format!("VEHICLE#v{i:06}")).collect();
    let dry = dry_run(&api, plates_compact()).await;
    assert_eq!(dry.changed, (old_plate_count() - COLLIDING) as u64);
    let pks: Vec<&str> = dry.conflicts.iter().map(|c| c.pk.as_str()).collect();
    assert_eq!(pks, expected_conflicts);

    // The command, on the same engine: conflicts are exit 1.
    let ran = singlet()
        .args(["--endpoint", &api.engine, "--table", &api.ctx.table])
        .args(["migrate", "plates-compact"])
        .args(["--segments", "4", "--max-wcu", "2000", "--json"])
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(1), "{ran:?}");
    let report: Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(
        report["changed"],
        (old_plate_count() - COLLIDING) as u64,
        "{report}"
    );
    assert_eq!(report["complete"], true);
    let conflicts = report["conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), COLLIDING, "{report}");
    for (conflict, pk) in conflicts.iter().zip(&expected_conflicts) {
        assert_eq!(conflict["pk"], pk.as_str());
        let detail = conflict["detail"].as_str().unwrap();
        assert!(
            detail.contains("VEHICLE#v") && !detail.contains("dup"),
            "{detail}"
        );
    }

    // In the table: each re-keyed vehicle at version 3 with compact locks only; each conflict
    // as it was, version 2, its old lock in place.
    let items = api.items().await;
    for i in 0..old_plate_count() {
        let (id, plate) = (format!("VEHICLE#v{i:06}"), old_plate(i));
        let vehicle = items.iter().find(|item| s(item, "PK") == id).unwrap();
        let compact: String = plate.chars().filter(|c| *c != ' ' && *c != '-').collect();
        let old_lock = format!("PLATE#{plate}");
        let has = |pk: &str| items.iter().any(|item| s(item, "PK") == pk);
        if i < COLLIDING {
            assert_eq!(vehicle["_v"], AttributeValue::N("2".into()), "{id}");
            assert!(has(&old_lock), "{old_lock}");
            assert!(!has(&format!("PLATE#{compact}")), "{compact}");
        } else {
            assert_eq!(vehicle["_v"], AttributeValue::N("3".into()), "{id}");
            assert!(!has(&old_lock), "{old_lock}");
            assert!(has(&format!("PLATE#{compact}")), "{compact}");
        }
    }

    let checked = fsck::fsck(&api.ctx, fsck::Options::default())
        .await
        .unwrap();
    assert!(checked.findings.is_empty(), "{:?}", checked.findings);

    // Found by any spelling; a conflict by the one it was registered with.
    for i in COLLIDING..old_plate_count() {
        let plate = old_plate(i);
        let id = format!("v{i:06}");
        for spelling in [
            plate.to_uppercase(),
            plate.replace([' ', '-'], ""),
            plate.replace(' ', "-"),
        ] {
            assert_eq!(
                found_by_plate(&api, &spelling).await.as_deref(),
                Some(id.as_str())
            );
        }
    }
    for i in 0..COLLIDING {
        let id = format!("v{i:06}");
        assert_eq!(found_by_plate(&api, &old_plate(i)).await, Some(id));
    }

    // The new rule holds for new registrations.
    let first = api
        .post(
            "/vehicles",
            json!({"plate": "KA19XTR", "chassis": "NEW1", "depot": "north"}),
        )
        .await;
    assert_eq!(first.status, 201, "{first:?}");
    api.post(
        "/vehicles",
        json!({"plate": "KA-19-XTR", "chassis": "NEW2", "depot": "north"}),
    )
    .await
    .assert_problem(409, &[("plate", "taken")]);

    // Run again: nothing to change, the conflicts still reported until an operator acts.
    let again = migrate::run(&api.ctx, plates_compact(), &Options::default())
        .await
        .unwrap();
    assert_eq!((again.changed, again.already_changed), (0, 0), "{again:?}");
    assert_eq!(again.conflicts.len(), COLLIDING);
    // The list does not call it complete while items are left of the old shape.
    let listed = |states: Vec<migrate::State>| {
        let state = states
            .into_iter()
            .find(|s| s.migration == "plates-compact")
            .unwrap();
        (state.state, state.conflicts)
    };
    assert_eq!(
        listed(migrate::states(&api.ctx).await.unwrap()),
        ("conflicts", COLLIDING as u64)
    );
    // Once one of a pair is retired, the other is re-keyed.
    let retired = api.delete("/vehicles/v000000").await;
    assert_eq!(retired.status, 204, "{retired:?}");
    let after = migrate::run(&api.ctx, plates_compact(), &Options::default())
        .await
        .unwrap();
    assert_eq!(after.changed, 1, "{after:?}");
    assert_eq!(after.conflicts.len(), COLLIDING - 2);
    assert_eq!(
        listed(migrate::states(&api.ctx).await.unwrap()),
        ("conflicts", COLLIDING as u64 - 2)
    );
    assert_eq!(
        found_by_plate(&api, "DUP000").await.as_deref(),
        Some("v000001")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stamp_entity_types_stamps_items_written_before_et_and_v() {
    let api = Api::start(Mode::Direct).await;
    write_old_vehicles(&api, 10).await;
    let stamp = migrations::by_name("stamp-entity-types").unwrap();
    let report = migrate::run(&api.ctx, stamp, &Options::default())
        .await
        .unwrap();
    assert_eq!(report.changed, 30, "{report:?}");
    assert!(report.conflicts.is_empty());
    for item in api.items().await {
        let pk = s(&item, "PK");
        if pk.starts_with("MIGRATION#") {
            continue;
        }
        let expected = match pk.split('#').next().unwrap() {
            "VEHICLE" => "vehicle",
            "PLATE" => "plate-lock",
            _ => "chassis-lock",
        };
        assert_eq!(s(&item, "_et"), expected, "{pk}");
        assert_eq!(item["_v"], AttributeValue::N("1".into()), "{pk}");
    }
    // The stamped vehicles are version 1: vehicles-by-depot takes them on.
    let indexed = migrate::run(&api.ctx, migration(), &Options::default())
        .await
        .unwrap();
    assert_eq!(indexed.changed, 10);
    let again = migrate::run(&api.ctx, stamp, &Options::default())
        .await
        .unwrap();
    assert_eq!((again.changed, again.already_changed), (0, 0));
}

/// `plates-compact` while the API retires, re-plates and registers the same vehicles: every
/// answer is what it would be without the run, no vehicle is left without its locks, and a second
/// pass finishes what the API's writes made the first refuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plates_compact_runs_while_the_api_writes_the_same_vehicles() {
    // The API's writes racing the run's: on moto, whose transactions each copy the whole table,
    // they queue the run's writes past the 4 s budget in a whole suite's run (not alone).
    if crate::harness::skip_on_external_engine(crate::harness::SLOWER_AS_THE_TABLE_GROWS) {
        return;
    }
    let api = Api::start(Mode::Direct).await;
    let writes = old_plate_count() / 10;
    put_raw_all(
        &api.ctx,
        (0..old_plate_count())
            .flat_map(old_plated_vehicle)
            .collect(),
    )
    .await;
    migrate::run(&api.ctx, migration(), &Options::default())
        .await
        .unwrap();

    let writes = api_writes(
        &api,
        0..writes,
        |i| COLLIDING + i * 9,
        |i| format!("NEW-{i:04} Q"),
        |i| (format!("FRESH {i:04}"), format!("FR-{i:04}")),
    );
    let options = Options {
        segments: 3,
        page_size: Some(50),
        ..Options::default()
    };
    let run = migrate::run(&api.ctx, plates_compact(), &options);
    let (statuses, first) = tokio::join!(writes, run);
    let first = first.unwrap();
    assert!(first.complete, "{first:?}");
    for (i, status) in statuses {
        let expected = [204, 200, 201][i % 3];
        assert_eq!(status, expected, "write {i}");
    }
    let second = migrate::run(&api.ctx, plates_compact(), &options)
        .await
        .unwrap();
    assert_eq!(second.already_changed, 0, "{second:?}");
    assert_eq!(second.conflicts.len(), COLLIDING);

    // Every vehicle but the conflicts is of version 3, and holds compact locks only.
    let items = api.items().await;
    let has = |pk: &str| items.iter().any(|item| s(item, "PK") == pk);
    for vehicle in vehicles(&items) {
        let id = s(vehicle, "vehicleId");
        let plate = s(vehicle, "plate");
        let compact: String = plate.chars().filter(|c| *c != ' ' && *c != '-').collect();
        if (0..COLLIDING).any(|i| id == format!("v{i:06}")) {
            continue;
        }
        assert_eq!(vehicle["_v"], AttributeValue::N("3".into()), "{id}");
        assert!(has(&format!("PLATE#{compact}")), "{id}");
        assert!(!has(&format!("PLATE#{plate}")) || plate == compact, "{id}");
    }
    let checked = fsck::fsck(&api.ctx, fsck::Options::default())
        .await
        .unwrap();
    assert!(checked.findings.is_empty(), "{:?}", checked.findings);
}

/// A run killed before its first page's checkpoint has changed items already: `migrate` lists it
/// `in progress` (its segments marked started before the first write), never `not started`, and
/// it resumes with its own `--segments`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_before_its_first_checkpoint_is_listed_in_progress() {
    const COUNT: usize = 50;
    let api = Api::start(Mode::Direct).await;
    write_old_vehicles(&api, COUNT).await;
    let (endpoint, table) = (api.engine.clone(), api.ctx.table.to_string());
    let cli = move |args: &'static [&'static str]| {
        let (endpoint, table) = (endpoint.clone(), table.clone());
        tokio::task::spawn_blocking(move || {
            singlet()
                .args(["--endpoint", &endpoint, "--table", &table])
                .args(args)
                .output()
                .unwrap()
        })
    };

    // One segment read in one page: stopped after three writes, before that page's checkpoint.
    let killed = cli(&[
        "migrate",
        "vehicles-by-depot",
        "--segments",
        "1",
        "--stop-after",
        "3",
        "--json",
    ])
    .await
    .unwrap();
    assert_eq!(killed.status.code(), Some(0), "{killed:?}");
    let report: Value = serde_json::from_slice(&killed.stdout).unwrap();
    assert_eq!(
        (report["changed"].as_u64(), report["complete"].as_bool()),
        (Some(3), Some(false)),
        "{report}"
    );
    let changed = api
        .items()
        .await
        .iter()
        .filter(|item| item.contains_key("GSI5PK"))
        .count();
    assert_eq!(changed, 3);

    let listed = cli(&["migrate", "--json"]).await.unwrap();
    assert_eq!(listed.status.code(), Some(0), "{listed:?}");
    let list: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let state = list["migrations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["migration"] == "vehicles-by-depot")
        .unwrap()
        .clone();
    assert_eq!(state["state"], "in progress", "{state}");
    assert_eq!(
        (state["segmentsDone"].as_u64(), state["segments"].as_u64()),
        (Some(0), Some(1)),
        "{state}"
    );

    // Resumed with another segment count: refused; with its own, it finishes.
    let refused = cli(&["migrate", "vehicles-by-depot", "--segments", "4"])
        .await
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--segments 1"),
        "{refused:?}"
    );
    let resumed = cli(&["migrate", "vehicles-by-depot", "--segments", "1", "--json"])
        .await
        .unwrap();
    assert_eq!(resumed.status.code(), Some(0), "{resumed:?}");
    let report: Value = serde_json::from_slice(&resumed.stdout).unwrap();
    assert_eq!(report["complete"], true, "{report}");
    assert_eq!(
        report["changed"],
        COUNT as u64 - 3,
        "no vehicle changed twice: {report}"
    );
}
