//! Between deploying the compact plate rule and running `plates-compact` (docs/API.md, "Fleet
//! registry" and "Migrations"): the table holds locks the previous release keyed with separators
//! (`PLATE#ka19 xtr`). The spelling a vehicle was registered with stays taken (register, change
//! plate, import: `409`, nothing written); another spelling of it cannot be known by a point read
//! and gets through, and `plates-compact` and `fsck` then report the pair.

use crate::both;
use crate::harness::put_raw_all;
use crate::harness::{Api, Item, s};
use crate::migrate::old_vehicle_with;
use crate::process::singlet;
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};
use singlet_functions::migrations;
use singlet_shared::{Depot, Id, keys};
use singlet_tools::fsck;
use singlet_tools::import::{self, Kind};
use singlet_tools::migrate::{self, Options};
use std::collections::BTreeSet;

both!(
    the_spelling_registered_before_stays_taken_until_plates_compact,
    another_spelling_gets_through_and_plates_compact_and_fsck_report_the_pair,
    a_vehicle_registered_before_changes_plate_and_retires_before_plates_compact,
);

/// The vehicle `v00000<i>` with this plate and chassis number (as normalised), and its two locks,
/// as the release before the compact rule wrote them: the vehicle at version 2 with its depot
/// index keys, each lock keyed by the value as it is, separators and all.
fn previous_release_vehicle(i: usize, plate: &str, chassis: &str) -> Vec<Item> {
    let [mut vehicle, mut plate_lock, mut chassis_lock] = old_vehicle_with(i, plate, chassis);
    let id = Id::parse(s(&vehicle, "vehicleId")).unwrap();
    let depot = Depot::parse(s(&vehicle, "depot")).unwrap();
    let added_at: i64 = vehicle["addedAt"].as_n().unwrap().parse().unwrap();
    let index = keys::vehicle_by_depot(&depot, added_at, &id);
    let number = |n: u32| AttributeValue::N(n.to_string());
    vehicle.extend([
        ("_et".into(), AttributeValue::S("vehicle".into())),
        ("_v".into(), number(2)),
        ("GSI5PK".into(), AttributeValue::S(index.pk)),
        ("GSI5SK".into(), AttributeValue::S(index.sk)),
    ]);
    plate_lock.extend([
        ("_et".into(), AttributeValue::S("plate-lock".into())),
        ("_v".into(), number(1)),
    ]);
    chassis_lock.extend([
        ("_et".into(), AttributeValue::S("chassis-lock".into())),
        ("_v".into(), number(1)),
    ]);
    vec![vehicle, plate_lock, chassis_lock]
}

/// Every item's key, outbox items and idempotency records included: what "nothing written"
/// compares.
async fn keys_in_table(api: &Api) -> BTreeSet<(String, String)> {
    api.all_items()
        .await
        .iter()
        .map(|item| (s(item, "PK").to_owned(), s(item, "SK").to_owned()))
        .collect()
}

async fn register(api: &Api, plate: &str, chassis: &str) -> crate::harness::Reply {
    api.post(
        "/vehicles",
        json!({"plate": plate, "chassis": chassis, "depot": "north"}),
    )
    .await
}

/// `KA19 XTR` registered by the previous release (lock `PLATE#ka19 xtr`, not yet re-keyed): the
/// same spelling, in any case or spacing that normalises to it, is `409 plate taken` on register,
/// with or without an `Idempotency-Key`, on a plate change, and in an import; the same for its
/// chassis number. Nothing is written: no vehicle, no lock, no outbox item, no key's record.
async fn the_spelling_registered_before_stays_taken_until_plates_compact(api: Api) {
    put_raw_all(&api.ctx, previous_release_vehicle(1, "ka19 xtr", "wvw 1")).await;
    let before = keys_in_table(&api).await;

    register(&api, "KA19 XTR", "NEW1")
        .await
        .assert_problem(409, &[("plate", "taken")]);
    register(&api, " ka19   XTR ", "NEW1")
        .await
        .assert_problem(409, &[("plate", "taken")]);
    register(&api, "NEW1", "WVW 1")
        .await
        .assert_problem(409, &[("chassis", "taken")]);
    register(&api, "KA19 XTR", "WVW 1")
        .await
        .assert_problem(409, &[("plate", "taken"), ("chassis", "taken")]);
    api.call("POST", "/vehicles")
        .header("idempotency-key", "old-rule-plate")
        .json(json!({"plate": "KA19 XTR", "chassis": "NEW1", "depot": "north"}))
        .send()
        .await
        .assert_problem(409, &[("plate", "taken")]);
    assert_eq!(
        keys_in_table(&api).await,
        before,
        "a refusal writes nothing"
    );

    // A plate change to that spelling, of a vehicle registered under the new rule.
    let other = register(&api, "MH 12 AB", "WVW 2").await;
    assert_eq!(other.status, 201, "{other:?}");
    let other_id = other.body["vehicleId"].as_str().unwrap().to_owned();
    let registered = keys_in_table(&api).await;
    api.put(
        format!("/vehicles/{other_id}/plate"),
        json!({"plate": "KA19 xtr"}),
    )
    .await
    .assert_problem(409, &[("plate", "taken")]);
    assert_eq!(keys_in_table(&api).await, registered, "nothing written");
    let unchanged = api.get(format!("/vehicles/{other_id}")).await;
    assert_eq!(unchanged.body["plate"], "mh 12 ab", "{unchanged:?}");

    // The vehicle registered before is still the one its spelling finds.
    let found = api.get("/plates/KA19%20XTR").await;
    assert_eq!(found.body["vehicleId"], "v000001", "{found:?}");

    // An import of that spelling is refused as the route refuses it, naming the holder.
    let file = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "plates-{:?}-{}.jsonl",
        api.mode,
        std::process::id()
    ));
    std::fs::write(
        &file,
        [
            json!({"plate": "ka19 XTR", "chassis": "NEW3", "depot": "north"}),
            json!({"plate": "NEW 4", "chassis": "WVW 1", "depot": "north"}),
        ]
        .map(|row| row.to_string())
        .join("\n"),
    )
    .unwrap();
    let options = import::Options {
        progress: false,
        ..import::Options::default()
    };
    let summary = import::run(&api.ctx, Kind::Vehicles, &file, &options)
        .await
        .unwrap();
    assert_eq!((summary.created, summary.rejected), (0, 2), "{summary:?}");
    let rejects: Vec<Value> = std::fs::read_to_string(import::rejects_path(&file))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(
        rejects,
        [
            json!({"line": 1, "errors": [{"field": "plate", "code": "taken"}], "holder": "v000001"}),
            json!({"line": 2, "errors": [{"field": "chassis", "code": "taken"}], "holder": "v000001"}),
        ]
    );
    assert_eq!(keys_in_table(&api).await, registered, "nothing imported");

    // Retired, the old locks go and the spelling is free again.
    let retired = api.delete("/vehicles/v000001").await;
    assert_eq!(retired.status, 204, "{retired:?}");
    let again = register(&api, "KA19 XTR", "WVW 1").await;
    assert_eq!(again.status, 201, "{again:?}");
    assert!(api.item("PLATE#ka19xtr", "PLATE#ka19xtr").await.is_some());
    assert!(api.item("PLATE#ka19 xtr", "PLATE#ka19 xtr").await.is_none());
}

/// Another spelling (`KA-19-XTR`, chassis `WVW-1`) meets neither the compact key (no lock there
/// yet) nor the old one (`PLATE#ka-19-xtr` is not `PLATE#ka19 xtr`): it is registered. Then
/// `fsck` reports the two vehicles holding one plate and one chassis number, and `plates-compact`
/// reports the old vehicle as a conflict naming the new one, changes nothing of either, and
/// exits 1.
async fn another_spelling_gets_through_and_plates_compact_and_fsck_report_the_pair(api: Api) {
    put_raw_all(&api.ctx, previous_release_vehicle(1, "ka19 xtr", "wvw 1")).await;
    let second = register(&api, "KA-19-XTR", "WVW-1").await;
    assert_eq!(second.status, 201, "{second:?}");
    let second_id = second.body["vehicleId"].as_str().unwrap().to_owned();
    let second_key = format!("VEHICLE#{second_id}");

    let checked = fsck::fsck(&api.ctx, fsck::Options::default())
        .await
        .unwrap();
    // The vehicle registered before: each of its values locked (compact) by the new one, which
    // holds the same value. A person chooses between them: no repair.
    let found: Vec<(&str, &str, bool)> = checked
        .findings
        .iter()
        .map(|f| (f.rule.name(), f.pk.as_str(), f.repairable))
        .collect();
    let lock_missing = ("lock-missing", "VEHICLE#v000001", false);
    assert_eq!(
        found,
        [lock_missing, lock_missing],
        "{:?}",
        checked.findings
    );
    for (finding, value) in checked.findings.iter().zip(["plate", "chassis"]) {
        assert!(
            finding.detail.contains(value) && finding.detail.contains(&second_id),
            "{finding:?}"
        );
    }

    // plates-compact takes vehicles once vehicles-by-depot is complete (nothing for it here).
    let by_depot = migrations::by_name("vehicles-by-depot").unwrap();
    let indexed = migrate::run(&api.ctx, by_depot, &Options::default())
        .await
        .unwrap();
    assert_eq!(indexed.changed, 0);
    let before = api.items().await;
    let ran = singlet()
        .args([
            "--endpoint",
            &api.engine,
            "--table",
            &api.ctx.table,
            "migrate",
            "plates-compact",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(1), "{ran:?}");
    let report: Value = serde_json::from_slice(&ran.stdout).unwrap();
    assert_eq!(report["changed"], 0, "{report}");
    assert_eq!(report["complete"], true, "{report}");
    let conflicts = report["conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), 1, "{report}");
    assert_eq!(conflicts[0]["pk"], "VEHICLE#v000001");
    let detail = conflicts[0]["detail"].as_str().unwrap();
    assert!(detail.contains(&second_key), "{detail}");
    // Both left as they were: the old vehicle at version 2 with its old locks, the new one with
    // its compact locks.
    let by_key = |items: Vec<Item>| -> Vec<Item> {
        let mut items: Vec<Item> = items
            .into_iter()
            .filter(|item| !s(item, "PK").starts_with("MIGRATION#"))
            .collect();
        items.sort_by(|a, b| (s(a, "PK"), s(a, "SK")).cmp(&(s(b, "PK"), s(b, "SK"))));
        items
    };
    assert!(
        by_key(api.items().await) == by_key(before),
        "nothing changed"
    );
    for pk in [
        "PLATE#ka19 xtr",
        "CHASSIS#wvw 1",
        "PLATE#ka19xtr",
        "CHASSIS#wvw1",
    ] {
        assert!(api.item(pk, pk).await.is_some(), "{pk}");
    }
}

/// A vehicle the previous release registered (version 2, its locks keyed with separators) is
/// served before `plates-compact` runs: its plate changes, freeing the old-spelled lock (its
/// chassis lock, looked up at its old spelling too, stays where it is), and it retires, freeing
/// both. Each route's policy allows the old-spelled lookups: the runner refuses what IAM would.
async fn a_vehicle_registered_before_changes_plate_and_retires_before_plates_compact(api: Api) {
    put_raw_all(&api.ctx, previous_release_vehicle(1, "ka19 xtr", "wvw 1")).await;

    let changed = api
        .put("/vehicles/v000001/plate", json!({"plate": "NEW 9"}))
        .await;
    assert_eq!(changed.status, 200, "{changed:?}");
    assert_eq!(changed.body["plate"], "new 9", "{changed:?}");
    assert!(api.item("PLATE#ka19 xtr", "PLATE#ka19 xtr").await.is_none());
    let new_lock = api
        .item("PLATE#new9", "PLATE#new9")
        .await
        .expect("the new lock");
    assert_eq!(s(&new_lock, "vehicleId"), "v000001");
    assert!(api.item("CHASSIS#wvw 1", "CHASSIS#wvw 1").await.is_some());

    let retired = api.delete("/vehicles/v000001").await;
    assert_eq!(retired.status, 204, "{retired:?}");
    for pk in ["VEHICLE#v000001", "PLATE#new9", "CHASSIS#wvw 1"] {
        assert!(api.item(pk, pk).await.is_none(), "{pk} is gone");
    }
}
