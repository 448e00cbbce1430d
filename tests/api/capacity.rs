//! The table at scale (docs/API.md, "The table at scale"): the overdue marker paced per key over
//! many loans falling due at once, on a settable clock (not timed), and `plan` run as the
//! binary: its exit codes and its `--json` shape.

use crate::harness::{Api, Mode, put_raw_all, s};
use crate::process::singlet;
use serde_json::Value;
use singlet_functions::clock::Clock;
use singlet_functions::loans::mark_overdue::{FUNCTION, mark_overdue_paced};
use singlet_functions::model::Entity;
use singlet_functions::model::loans::{Checkout, LoanStatus};
use singlet_functions::store::pace::{PaceClock, Pacer};
use singlet_shared::{Id, Isbn13};

/// Loans due long ago, raw in the table as checkouts write them (open, in the open-loans index),
/// spread over `branches` branches and a patron each.
fn due_loans(count: usize, branches: usize) -> Vec<singlet_functions::store::Item> {
    loans(LoanStatus::Open, count, branches)
}

/// `count` loans in `status`, each item with the index keys that status gives it.
fn loans(status: LoanStatus, count: usize, branches: usize) -> Vec<singlet_functions::store::Item> {
    let id = |raw: String| Id::parse(&raw).unwrap();
    (0..count)
        .map(|i| {
            Checkout {
                checkout_id: id(format!("k{i:05}")),
                patron_id: id(format!("p{i:05}")),
                patron_branch_id: id(format!("b{}", i % branches)),
                branch_id: id(format!("b{}", i % branches)),
                copy_id: id(format!("c{i:05}")),
                isbn: Isbn13::parse(crate::fixtures::ISBN).unwrap(),
                title: "A title".into(),
                status,
                checked_out_at: "2026-01-01T00:00:00Z".into(),
                due_date: format!("2026-01-22T00:{:02}:00Z", i % 60),
                renewal_count: 0,
                loan_period_days: 21,
                returned_date: None,
                expires_at: None,
            }
            .to_item()
        })
        .collect()
}

/// 2,000 loans fall due at once: the marker marks every one, never more than its budget into
/// `OVERDUE` (or any key) in one second, and says so (`hottestKey`). The budget's clock is a
/// settable one that each wait moves on, so the run's two and a half seconds of pacing take
/// none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_marker_keeps_overdue_under_its_key_budget_however_many_fall_due() {
    if crate::harness::skip_on_external_engine(crate::harness::CAPACITY_NOT_DYNAMODBS) {
        return;
    }
    const LOANS: usize = 2_000;
    const BUDGET: f64 = 800.0;
    let api = Api::start(Mode::Direct).await;
    put_raw_all(&api.ctx, due_loans(LOANS, 7)).await;
    let clock = Clock::reading(time::macros::datetime!(2026-12-01 09:00 UTC));
    let pacer = Pacer::new(BUDGET, PaceClock::Settable(clock.clone()));
    let started = clock.now();
    let now = time::macros::datetime!(2026-12-01 09:00 UTC);
    let report = singlet::serve::iam::serving(
        FUNCTION,
        mark_overdue_paced(&api.ctx, now, 100, || true, &pacer),
    )
    .await
    .unwrap();
    assert_eq!(report.marked, LOANS as u64, "{report:?}");
    assert!(report.complete);
    let hottest = report.hottest_key.clone().expect("a hottest key");
    assert_eq!(hottest.index.as_deref(), Some("GSI4"), "{hottest:?}");
    assert_eq!(hottest.pk, "OVERDUE");
    assert!(
        hottest.peak_wcu_per_second <= BUDGET,
        "{hottest:?} over the budget"
    );
    // 2,000 entries into one key at 800 a second: the clock was moved past two seconds.
    let paced = (clock.now() - started).as_seconds_f64();
    assert!(paced >= 2.0, "paced {paced} s");
    // Its response says it as the contract writes it.
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["hottestKey"]["index"], "GSI4");
    assert_eq!(json["hottestKey"]["pk"], "OVERDUE");
    assert!(json["hottestKey"]["peakWcuPerSecond"].as_f64().unwrap() <= BUDGET);
    // Every loan is in the library's overdue list, none left in the open-loans index.
    let items = api.all_items().await;
    let overdue = items
        .iter()
        .filter(|item| {
            item.get("GSI4PK")
                .is_some_and(|pk| pk.as_s().is_ok_and(|pk| pk == "OVERDUE"))
        })
        .count();
    assert_eq!(overdue, LOANS);
    assert!(
        !items
            .iter()
            .any(|item| item.contains_key("GSI1PK") && s(item, "GSI1PK").starts_with("OPEN#")),
        "a loan left open"
    );
}

/// A small run is not held back: its hottest key took what it wrote, far under the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_marker_run_reports_its_hottest_key_unpaced() {
    if crate::harness::skip_on_external_engine(crate::harness::CAPACITY_NOT_DYNAMODBS) {
        return;
    }
    let api = Api::start(Mode::Direct).await;
    put_raw_all(&api.ctx, due_loans(30, 3)).await;
    let clock = Clock::reading(time::macros::datetime!(2026-12-01 09:00 UTC));
    let pacer = Pacer::new(800.0, PaceClock::Settable(clock.clone()));
    let started = clock.now();
    let report = singlet::serve::iam::serving(
        FUNCTION,
        mark_overdue_paced(&api.ctx, started, 100, || true, &pacer),
    )
    .await
    .unwrap();
    assert_eq!(report.marked, 30);
    let hottest = report.hottest_key.unwrap();
    assert_eq!(
        (hottest.index.as_deref(), hottest.pk.as_str()),
        (Some("GSI4"), "OVERDUE")
    );
    assert_eq!(hottest.peak_wcu_per_second, 30.0);
    assert!((clock.now() - started).as_seconds_f64() < 1.0, "no wait");
}

fn plan(args: &[&str]) -> (i32, String, String) {
    let output = singlet().arg("plan").args(args).output().unwrap();
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// `plan` on the default workload: exit 0, every key family `ok`, the JSON the contract
/// shows, the marker's 50,000-loan run among the bulk work.
#[test]
fn plan_on_the_default_workload_finds_no_hot_family() {
    let (code, stdout, stderr) = plan(&["--json"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let planned: Value = serde_json::from_str(&stdout).unwrap();
    let object = planned.as_object().unwrap();
    let mut fields: Vec<&str> = object.keys().map(String::as_str).collect();
    fields.sort();
    assert_eq!(fields, ["bulk", "keys", "monthlyCostUsd", "table"]);
    let keys = planned["keys"].as_array().unwrap();
    for key in keys {
        let mut fields: Vec<&str> = key
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        fields.sort();
        assert_eq!(
            fields,
            [
                "family",
                "index",
                "peakRcuPerSecond",
                "peakWcuPerSecond",
                "verdict"
            ]
        );
        assert_eq!(key["verdict"], "ok", "{key}");
    }
    let family = |name: &str, index: Value| {
        keys.iter()
            .find(|key| key["family"] == name && key["index"] == index)
            .unwrap_or_else(|| panic!("no {name} on {index}"))
    };
    assert_eq!(family("OVERDUE", "GSI4".into())["peakWcuPerSecond"], 800.0);
    family("PLATE#", Value::Null);
    family("OPEN#", "GSI1".into());
    assert!(planned["table"]["peakWcuPerSecond"].as_f64().unwrap() < 4_000.0);
    assert!(planned["table"]["peakRcuPerSecond"].as_f64().is_some());
    let bulk = planned["bulk"].as_array().unwrap();
    assert!(bulk.iter().any(|job| {
        job["work"].as_str().unwrap().contains("mark-overdue") && job["seconds"] == 62.5
    }));
    assert!(bulk.iter().any(|job| {
        job["work"]
            .as_str()
            .unwrap()
            .contains("migrate plates-compact")
    }));
    assert!(planned["monthlyCostUsd"].as_f64().unwrap() > 0.0);

    let (code, text, _) = plan(&[]);
    assert_eq!(code, 0);
    assert!(
        text.contains("OVERDUE") && text.contains("Monthly cost"),
        "{text}"
    );
}

/// A workload with a hot family exits 1 and names it; a bad or missing workload exits 2 with
/// the reason.
#[test]
fn plan_exits_one_on_a_hot_family_and_two_on_a_bad_workload() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("plan-workloads");
    std::fs::create_dir_all(&dir).unwrap();
    let hot = dir.join("hot.json");
    // One plate looked up 4,000 times a second: past 3,000 read units on one key.
    std::fs::write(
        &hot,
        r#"{"callsPerSecond": {"find-by-plate": 4000}, "skew": 100000}"#,
    )
    .unwrap();
    let (code, stdout, _) = plan(&["--json", "--workload", hot.to_str().unwrap()]);
    assert_eq!(code, 1, "{stdout}");
    let plan_json: Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        plan_json["keys"]
            .as_array()
            .unwrap()
            .iter()
            .any(|key| { key["family"] == "PLATE#" && key["verdict"] == "hot" })
    );

    let (code, _, stderr) = plan(&["--workload", dir.join("absent.json").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("absent.json"), "{stderr}");

    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"patrons": -5}"#).unwrap();
    let (code, stdout, stderr) = plan(&["--json", "--workload", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(stdout.is_empty());
    assert!(stderr.contains("patrons"), "{stderr}");
}

/// The stack for that size: the table and every index carry `WarmThroughput` and Contributor
/// Insights from parameters (on by default), the table stays on demand, and key-range throttling
/// of the table or any index alarms.
#[test]
fn the_template_carries_warm_throughput_contributor_insights_and_key_range_alarms() {
    use serde_norway::Value as Yaml;
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/template.yaml")).unwrap();
    let template: Yaml = serde_norway::from_str(&text).unwrap();
    // A tagged value (`!Ref TableWarmWriteUnits`) as the tag and what it names.
    let tagged = |value: &Yaml| match value {
        Yaml::Tagged(tagged) => format!("{}={:?}", tagged.tag, tagged.value),
        other => format!("{other:?}"),
    };
    let table = &template["Resources"]["Table"]["Properties"];
    assert_eq!(table["BillingMode"], "PAY_PER_REQUEST");
    let parameters = &template["Parameters"];
    assert_eq!(
        parameters["ContributorInsightsMode"]["Default"],
        "THROTTLED_KEYS"
    );
    assert_eq!(parameters["TableWarmWriteUnits"]["Default"], 4000);
    assert_eq!(parameters["TableWarmReadUnits"]["Default"], 12000);
    assert_eq!(
        tagged(&table["WarmThroughput"]["WriteUnitsPerSecond"]),
        r#"!Ref=String("TableWarmWriteUnits")"#
    );
    assert!(
        tagged(&table["ContributorInsightsSpecification"]["Enabled"])
            .contains("ContributorInsightsOn")
    );
    let indexes = table["GlobalSecondaryIndexes"].as_sequence().unwrap();
    assert_eq!(indexes.len(), singlet_shared::schema::INDEXES.len());
    for index in indexes {
        assert_eq!(
            tagged(&index["WarmThroughput"]["WriteUnitsPerSecond"]),
            r#"!Ref=String("IndexWarmWriteUnits")"#,
            "{index:?}"
        );
        assert_eq!(
            tagged(&index["WarmThroughput"]["ReadUnitsPerSecond"]),
            r#"!Ref=String("IndexWarmReadUnits")"#
        );
        assert!(
            tagged(&index["ContributorInsightsSpecification"]["Enabled"])
                .contains("ContributorInsightsOn")
        );
    }
    for kind in ["Write", "Read"] {
        let alarm =
            &template["Resources"][format!("KeyRange{kind}ThrottleAlarm").as_str()]["Properties"];
        let metrics = alarm["Metrics"].as_sequence().unwrap();
        let watched: Vec<Option<&str>> = metrics
            .iter()
            .filter(|m| m["MetricStat"].is_mapping())
            .map(|m| {
                let metric = &m["MetricStat"]["Metric"];
                assert_eq!(
                    metric["MetricName"],
                    format!("{kind}KeyRangeThroughputThrottleEvents").as_str()
                );
                metric["Dimensions"]
                    .as_sequence()
                    .unwrap()
                    .iter()
                    .find(|d| d["Name"] == "GlobalSecondaryIndexName")
                    .map(|d| d["Value"].as_str().unwrap())
            })
            .collect();
        let mut expected = vec![None];
        expected.extend(singlet_shared::schema::INDEXES.iter().map(|i| Some(i.name)));
        assert_eq!(watched, expected, "{kind}: the table and every index");
        assert_eq!(alarm["Threshold"], 0);
    }
}

/// `fsck --repair` paces its writes per key as the other bulk paths do: twenty overdue loans
/// whose overdue-index entries are missing are each repaired by a write into GSI4's one
/// `OVERDUE` key, and at `--max-key-wcu 10` the repairs never put more than ten a second there;
/// the report names that key (`hottestKey`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsck_repairs_keep_each_key_under_its_budget_and_name_the_hottest() {
    use singlet_shared::schema::INDEXES;
    use singlet_tools::fsck;
    const LOANS: usize = 20;
    const BUDGET: f64 = 10.0;
    let api = Api::start(Mode::Direct).await;
    let unindexed = due_loans(LOANS, 7)
        .into_iter()
        .map(|mut item| {
            item.insert("status".into(), crate::harness::str_attr("overdue"));
            for index in INDEXES {
                item.remove(index.pk);
                item.remove(index.sk);
            }
            item
        })
        .collect();
    put_raw_all(&api.ctx, unindexed).await;
    let options = fsck::Options {
        repair: true,
        max_key_wcu: BUDGET,
        ..fsck::Options::default()
    };
    let report = fsck::fsck(&api.ctx, options).await.unwrap();
    let repaired: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.rule.name() == "loan-index" && f.repaired == Some(true))
        .collect();
    assert_eq!(repaired.len(), LOANS, "{:#?}", report.findings);
    let hottest = report.hottest_key.clone().expect("a hottest key");
    assert_eq!(
        (hottest.index.as_deref(), hottest.pk.as_str()),
        (Some("GSI4"), "OVERDUE")
    );
    assert!(hottest.peak_wcu_per_second <= BUDGET, "{hottest:?}");
    // Every loan is in the overdue index now: the library's list finds them all.
    let listed = api.get(format!("/overdue?limit={LOANS}")).await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    assert_eq!(
        listed.body["items"].as_array().map(Vec::len),
        Some(LOANS),
        "{}",
        listed.body
    );
    // And the JSON says it as the contract writes it.
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["hottestKey"]["pk"], "OVERDUE");
}

/// `load` into an engine through its API paces per key too: thirty overdue loans share GSI4's
/// one `OVERDUE` key, and at `--max-key-wcu 10` no second puts more than ten there; the report
/// names the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_through_an_endpoint_keeps_each_key_under_its_budget() {
    use singlet_tools::throttle::Throttle;
    use singlet_tools::transfer;
    const LOANS: usize = 30;
    const BUDGET: f64 = 10.0;
    let api = Api::start(Mode::Direct).await;
    put_raw_all(&api.ctx, loans(LoanStatus::Overdue, LOANS, 3)).await;
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("capacity-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    transfer::export(&api.ctx.db, &api.ctx.table, &dir, 1, &|item| item)
        .await
        .unwrap();
    let (copy, _) = singlet::serve::engine::start_in_memory("copy").await;
    let throttle = Throttle::new(None).with_max_key_wcu(BUDGET);
    let loaded = transfer::load(
        &copy,
        "copy",
        &transfer::check(&dir).unwrap(),
        transfer::Target::Api(&throttle),
        transfer::Outbox::LeaveOut,
        transfer::OwnerLockKeys::AsExported,
    )
    .await
    .unwrap();
    assert!(loaded.items >= LOANS as u64, "{loaded:?}");
    let hottest = loaded.hottest_key.expect("a hottest key");
    assert_eq!(
        (hottest.index.as_deref(), hottest.pk.as_str()),
        (Some("GSI4"), "OVERDUE")
    );
    assert!(hottest.peak_wcu_per_second <= BUDGET, "{hottest:?}");
    let overdue = copy
        .query()
        .table_name("copy")
        .index_name("GSI4")
        .key_condition_expression("#pk = :pk")
        .expression_attribute_names("#pk", singlet_shared::schema::GSI4.pk)
        .expression_attribute_values(":pk", crate::harness::str_attr("OVERDUE"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        overdue.count(),
        LOANS as i32,
        "every loan is in the copy's overdue index"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn simulated(
    workload: singlet::plan::Workload,
    seconds: u32,
) -> (singlet::plan::Report, singlet::plan::simulate::Simulation) {
    let report = singlet::plan::plan(&workload).unwrap();
    let keys = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-keys");
    let simulation = tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current()
            .block_on(singlet::plan::simulate::simulate(&report, seconds, &keys))
    })
    .unwrap();
    (report, simulation)
}

fn row<'s>(
    simulation: &'s singlet::plan::simulate::Simulation,
    family: &str,
    index: Option<&str>,
    units: &str,
) -> &'s singlet::plan::simulate::Measured {
    simulation
        .families
        .iter()
        .find(|f| f.family == family && f.index.as_deref() == index && f.units == units)
        .unwrap_or_else(|| panic!("no {family} {index:?} {units}: {simulation:#?}"))
}

/// The default workload's peak for ten virtual seconds through the API on the engine's limits:
/// nobody throttled, every call answered, and the families the plan counts exactly (the
/// marker's `OVERDUE`, the busiest branch's `OVERDUE#`, the open-loans shards) measured within
/// 15 % of the plan (`BOOK#` on GSI2 too, since the limiter charges a transaction's index
/// entries once, as DynamoDB writes them after the commit); where the plan counts an upper bound
/// it is higher, never lower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulation_agrees_with_the_plan_at_the_default_workload() {
    use singlet::plan::simulate::Outcome;
    let (_, simulation) = simulated(singlet::plan::Workload::default(), 10);
    assert_eq!(simulation.throttled_requests, 0, "{simulation:#?}");
    assert!(simulation.failed_calls.is_empty(), "{simulation:#?}");
    assert_eq!(simulation.calls["checkout-book"], 278);
    assert_eq!(simulation.calls["return-book"], 278);
    assert_eq!(simulation.overdue_marked, 8_000);
    assert_eq!(simulation.scaled.branches, 100);
    for (family, index) in [
        ("OVERDUE", Some("GSI4")),
        ("OVERDUE#", Some("GSI3")),
        ("OPEN#", Some("GSI1")),
    ] {
        let measured = row(&simulation, family, index, "write");
        assert_eq!(measured.outcome, Outcome::Agrees, "{measured:?}");
    }
    assert_eq!(
        row(&simulation, "OVERDUE", Some("GSI4"), "write").measured_mean,
        800.0
    );
    let book_copies = row(&simulation, "BOOK#", Some("GSI2"), "write");
    assert_eq!(book_copies.outcome, Outcome::Agrees, "{book_copies:?}");
    for measured in &simulation.families {
        assert_ne!(measured.outcome, Outcome::PlanIsLower, "{measured:?}");
    }
    let json = serde_json::to_value(&simulation).unwrap();
    assert_eq!(json["seconds"], 10);
    assert_eq!(json["families"][0]["outcome"], "planIsHigher");
    assert!(json["families"][0]["measuredMean"].is_number());
}

/// A marker allowed 3,200 writes a second into one key: the plan finds `OVERDUE` hot and the
/// engine's limiter throttles it in the simulation too: the marker stops at the throttle, its
/// back-pressure, having written at most a key's 1,000 in the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulation_measures_a_hot_family_hot() {
    use singlet::plan::simulate::Outcome;
    let unpaced = singlet::plan::Workload {
        max_key_wcu: 3_200.0,
        ..singlet::plan::Workload::default()
    };
    let (report, simulation) = simulated(unpaced, 1);
    assert!(report.any_hot());
    assert!(simulation.throttled_requests > 0, "{simulation:#?}");
    let overdue = row(&simulation, "OVERDUE", Some("GSI4"), "write");
    assert_eq!(overdue.outcome, Outcome::Agrees, "{overdue:?}");
    assert!(overdue.throttled_requests > 0);
    assert!(overdue.measured_peak_second <= 1_000.0, "{overdue:?}");
    assert!(simulation.overdue_marked < 3_200, "{simulation:#?}");
}
