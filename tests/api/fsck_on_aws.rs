//! `fsck --on-aws` (docs/guide/tools-on-step-functions.md, "fsck on AWS"): the stack's tools
//! function run through the runner's `invoke`, one fsck segment an invocation, against the
//! embedded engine, its results in a directory laid out as the state machine lays them out in
//! S3; the judge over them finds, confirms and repairs what the laptop's `fsck` does; and the
//! command against a Step Functions and an S3 endpoint of the test's own.

use crate::fake_aws::{self, FakeAws, json_1_0};
use crate::harness::{Api, Mode, delete_raw};
use serde_json::{Value, json};
use singlet_tools::fsck::{self, Options};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const SEGMENTS: u32 = 4;
const VEHICLES: usize = 60;

/// A run's results directory of its own, empty.
fn results_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("fsck-on-aws-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn segment_event(results: &Path, segment: u32, stop_after_pages: Option<u64>) -> String {
    let mut event = json!({
        "tool": "fsck",
        "segment": segment,
        "segments": SEGMENTS,
        "pageSize": 10,
        "results": format!("file://{}", results.display()),
    });
    if let Some(pages) = stop_after_pages {
        event["stopAfter"] = json!(pages);
    }
    event.to_string()
}

fn judge_event(results: &Path, repair: bool) -> String {
    json!({
        "tool": "fsck-judge",
        "segment": 0,
        "segments": SEGMENTS,
        "results": format!("file://{}", results.display()),
        "repair": repair,
        "maxWcu": 100,
        "maxKeyWcu": 800,
    })
    .to_string()
}

async fn invoke(api: &Api, event: &str) -> Result<Value, String> {
    singlet::invoke::invoke(&api.ctx, "table-tools", event).await
}

/// `(rule, pk, sk)` of every finding of a `--json` report.
fn found(report: &Value) -> BTreeSet<(String, String, String)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let text = |field: &str| f[field].as_str().unwrap().to_owned();
            (text("rule"), text("pk"), text("sk"))
        })
        .collect()
}

/// Vehicles through the API, then two breakages across items: a plate lock deleted (its
/// vehicle holds a plate no lock names) and a chassis lock naming no vehicle.
async fn broken_fleet(api: &Api) {
    for n in 0..VEHICLES {
        let body = json!({"plate": format!("P{n}"), "chassis": format!("C{n}"), "depot": "north"});
        assert_eq!(api.post("/vehicles", body).await.status, 201);
    }
    delete_raw(&api.ctx, "PLATE#p7", "PLATE#p7").await;
    crate::fsck::put_ghost_chassis_lock(&api.ctx).await;
}

/// The segments invoked one by one (one of them stopped part way, then the run abandoned and
/// started again: a kill between segments) and then the judge find what the laptop's `fsck`
/// finds; the judge's repairs are the laptop's too, and leave a table the laptop finds clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsck_segments_then_the_judge_find_and_repair_what_the_laptop_does_and_resume() {
    let api = Api::start(Mode::Direct).await;
    broken_fleet(&api).await;
    let laptop = fsck::fsck(
        &api.ctx,
        Options {
            segments: SEGMENTS,
            ..Options::default()
        },
    )
    .await
    .unwrap();
    let laptop = serde_json::to_value(&laptop).unwrap();
    let rules: Vec<(String, String)> = found(&laptop)
        .into_iter()
        .map(|(rule, pk, _)| (rule, pk.split('#').next().unwrap().to_owned()))
        .collect();
    assert_eq!(
        rules,
        [
            ("lock-missing".to_owned(), "VEHICLE".to_owned()),
            ("lock-orphan".to_owned(), "CHASSIS".to_owned())
        ],
        "{laptop}"
    );

    let results = results_dir("resume");
    // Segment 0 stopped after one page of 10 (as its deadline would stop it), its place saved;
    // segment 1 read whole; then the run abandoned: the judge refuses to judge half a table.
    let stopped = invoke(&api, &segment_event(&results, 0, Some(1)))
        .await
        .unwrap();
    assert_eq!(stopped["complete"], false, "{stopped}");
    assert_eq!(stopped["scanned"], 10, "{stopped}");
    assert_eq!(stopped["parts"], 1);
    let one = invoke(&api, &segment_event(&results, 1, None))
        .await
        .unwrap();
    assert_eq!(one["complete"], true, "{one}");
    let refused = invoke(&api, &judge_event(&results, false))
        .await
        .unwrap_err();
    assert!(
        refused.contains("segment 0 of 4 has not read its segment to its end"),
        "{refused}"
    );

    // Started again: every segment goes on from its checkpoint; segment 1, done, reads nothing.
    let mut scanned = 0;
    for segment in 0..SEGMENTS {
        let report = invoke(&api, &segment_event(&results, segment, None))
            .await
            .unwrap();
        assert_eq!(report["complete"], true, "{report}");
        assert_eq!(report["segment"], segment);
        if segment == 1 {
            assert_eq!(report, one, "a segment done reads nothing");
        }
        scanned += report["scanned"].as_u64().unwrap();
    }
    assert_eq!(
        scanned,
        laptop["scanned"].as_u64().unwrap(),
        "each item read once"
    );
    // Another segment count is another run's: refused, not mixed in.
    let mut other: Value = serde_json::from_str(&segment_event(&results, 1, None)).unwrap();
    other["segments"] = json!(8);
    let refused = invoke(&api, &other.to_string()).await.unwrap_err();
    assert!(refused.contains("another run's"), "{refused}");

    // The judge: the laptop's findings, its report whole in the results.
    let judged = invoke(&api, &judge_event(&results, false)).await.unwrap();
    assert_eq!(found(&judged), found(&laptop), "{judged}");
    assert_eq!(judged["scanned"], laptop["scanned"]);
    assert_eq!(
        (
            judged["findingCount"].as_u64(),
            judged["remaining"].as_u64()
        ),
        (Some(2), Some(2))
    );
    let object = judged["reportObject"].as_str().unwrap();
    assert_eq!(object, format!("file://{}/report.json", results.display()));
    let whole: Value =
        serde_json::from_slice(&std::fs::read(results.join("report.json")).unwrap()).unwrap();
    assert_eq!(whole, laptop, "report.json is the laptop's --json report");

    // The judge repairs as the laptop does: both findings repairable, both repaired, and the
    // laptop then finds the table clean.
    let repaired = invoke(&api, &judge_event(&results, true)).await.unwrap();
    assert_eq!(repaired["repaired"], 2, "{repaired}");
    assert_eq!(repaired["remaining"], 0, "{repaired}");
    assert!(api.item("PLATE#p7", "PLATE#p7").await.is_some());
    assert!(api.item("CHASSIS#ghost", "CHASSIS#ghost").await.is_none());
    let after = fsck::fsck(&api.ctx, Options::default()).await.unwrap();
    assert!(after.findings.is_empty(), "{after:?}");
    let _ = std::fs::remove_dir_all(&results);
}

/// What the fsck segment and judge refuse: no results, results neither S3 nor a directory, a
/// judge's `dryRun` without `repair`, a segment outside the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsck_segment_refusals_say_why() {
    let api = Api::start(Mode::Direct).await;
    let results = results_dir("refusals");
    let base: Value = serde_json::from_str(&segment_event(&results, 0, None)).unwrap();
    let refused = |change: &dyn Fn(&mut Value)| {
        let mut event = base.clone();
        change(&mut event);
        let api = &api;
        async move { invoke(api, &event.to_string()).await.unwrap_err() }
    };
    let no_results = refused(&|e| {
        e.as_object_mut().unwrap().remove("results");
    })
    .await;
    assert!(no_results.contains("names its results"), "{no_results}");
    let http = refused(&|e| e["results"] = json!("https://example.com/x")).await;
    assert!(http.contains("neither s3://"), "{http}");
    // The judge's `dryRun` is for `repair`; a segment, which only reads, is handed the run's.
    let dry = refused(&|e| {
        e["tool"] = json!("fsck-judge");
        e["dryRun"] = json!(true);
    })
    .await;
    assert!(dry.contains("dryRun is for repair"), "{dry}");
    let outside = refused(&|e| e["segment"] = json!(4)).await;
    assert!(outside.contains("not one of the run's 4"), "{outside}");
    let unknown = refused(&|e| e["tool"] = json!("defrag")).await;
    assert!(unknown.contains("no table tool named defrag"), "{unknown}");
}

/// `singlet invoke table-tools --event <file>`: an fsck segment's event and the judge's, through
/// the runner's command, on the runner's own table (empty: nothing found), the results in a
/// directory as the guide's local example gives them.
#[test]
fn invoke_runs_an_fsck_segment_and_the_judge_from_event_files() {
    let results = results_dir("invoke");
    let dir = results_dir("invoke-events");
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("file://{}", results.display());
    let events = [
        (
            "segment.json",
            json!({"tool": "fsck", "segment": 0, "segments": 1, "results": url}),
        ),
        (
            "judge.json",
            json!({"tool": "fsck-judge", "segment": 0, "segments": 1, "results": url}),
        ),
    ];
    let mut answers = Vec::new();
    for (name, event) in events {
        std::fs::write(dir.join(name), event.to_string()).unwrap();
        let output = crate::process::singlet()
            .args(["--in-memory", "invoke", "table-tools", "--event"])
            .arg(dir.join(name))
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        answers.push(serde_json::from_slice::<Value>(&output.stdout).unwrap());
    }
    assert_eq!(answers[0]["complete"], true, "{}", answers[0]);
    assert_eq!(answers[1]["findingCount"], 0, "{}", answers[1]);
    assert_eq!(answers[1]["scanned"], answers[0]["scanned"]);
    assert!(results.join("report.json").is_file());
    assert!(results.join("segment-0.json").is_file());
    let _ = std::fs::remove_dir_all(&results);
    let _ = std::fs::remove_dir_all(&dir);
}

const STACK: &str = "stack";
const MACHINE: &str = "arn:aws:states:us-east-1:123456789012:stateMachine:stack-table-tools";
const EXECUTION: &str = "arn:aws:states:us-east-1:123456789012:execution:stack-table-tools:run";
const REPORT_KEY: &str = "fsck/nightly/report.json";

/// Step Functions as a run of `fsck --on-aws` meets it: the stack's state machine among
/// another's, the start, then `ends` answered to each `DescribeExecution` in turn.
async fn step_functions(ends: Vec<(&'static str, Value)>) -> FakeAws {
    let ends = std::sync::Mutex::new(std::collections::VecDeque::from(ends));
    FakeAws::start(move |request| match request.target.as_str() {
        "AWSStepFunctions.ListStateMachines" => json_1_0(
            200,
            json!({"stateMachines": [
                {"name": "other-table-tools", "stateMachineArn": MACHINE.replace("stack-", "other-"),
                 "type": "STANDARD", "creationDate": 1.7e9},
                {"name": "stack-table-tools", "stateMachineArn": MACHINE, "type": "STANDARD",
                 "creationDate": 1.7e9},
            ]}),
        ),
        "AWSStepFunctions.StartExecution" => {
            json_1_0(200, json!({"executionArn": EXECUTION, "startDate": 1.7e9}))
        }
        "AWSStepFunctions.DescribeExecution" => {
            let (status, extra) = ends.lock().unwrap().pop_front().expect("a describe too many");
            let mut answer = json!({"executionArn": EXECUTION, "stateMachineArn": MACHINE,
                                    "status": status, "startDate": 1.7e9});
            for (k, v) in extra.as_object().unwrap() {
                answer[k] = v.clone();
            }
            json_1_0(200, answer)
        }
        other => json_1_0(400, json!({"__type": "UnknownOperationException", "message": other})),
    })
    .await
}

/// S3 holding one object, `bucket`/`key`.
async fn s3_with(bucket: &str, key: &str, object: Value) -> FakeAws {
    fake_aws::s3_holding(vec![(format!("/{bucket}/{key}"), object)]).await
}

fn succeeded() -> (&'static str, Value) {
    let answer = json!({"tool": "fsck", "findingCount": 1, "remaining": 1,
                        "reportObject": format!("s3://results/{REPORT_KEY}")});
    (
        "SUCCEEDED",
        json!({"output": json!({"fsck": {"report": answer}}).to_string()}),
    )
}

fn whole_report() -> Value {
    json!({"scanned": 120, "repaired": 0, "findings": [
        {"rule": "lock-orphan", "pk": "CHASSIS#ghost", "sk": "CHASSIS#ghost",
         "detail": "the lock names no vehicle", "repairable": true}]})
}

async fn fsck_on_aws(sfn: &FakeAws, s3: &FakeAws, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec![
        "fsck",
        "--on-aws",
        "--stack",
        STACK,
        "--run",
        "nightly",
        "--poll-ms",
        "5",
    ];
    args.extend_from_slice(extra);
    fake_aws::singlet(
        &args,
        &[
            ("AWS_ENDPOINT_URL_SFN", &sfn.url),
            ("AWS_ENDPOINT_URL_S3", &s3.url),
        ],
    )
    .await
}

/// `fsck --on-aws --stack`: the state machine found by the stack's name, the execution started
/// with fsck's input and followed, its report read back from the results bucket and printed as
/// the laptop prints its own (exit 1: a finding remains); each other end exit 2, naming how to
/// start the run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsck_on_aws_finds_the_state_machine_follows_it_and_reads_the_report_back() {
    let sfn = step_functions(vec![("RUNNING", json!({})), succeeded()]).await;
    let s3 = s3_with("results", REPORT_KEY, whole_report()).await;
    let (code, stdout, stderr) =
        fsck_on_aws(&sfn, &s3, &["--json", "--repair", "--max-wcu", "300"]).await;
    assert_eq!(code, Some(1), "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["findings"], whole_report()["findings"]);
    assert_eq!(report["executionArn"], EXECUTION);
    assert_eq!(report["report"], format!("s3://results/{REPORT_KEY}"));
    assert!(stderr.contains("RUNNING"), "progress on stderr: {stderr}");
    let targets: Vec<String> = sfn.requests().iter().map(|r| r.target.clone()).collect();
    assert_eq!(
        targets,
        [
            "AWSStepFunctions.ListStateMachines",
            "AWSStepFunctions.StartExecution",
            "AWSStepFunctions.DescribeExecution",
            "AWSStepFunctions.DescribeExecution"
        ]
    );
    let start = sfn.requests()[1].json();
    assert_eq!(
        start["stateMachineArn"], MACHINE,
        "the stack's, not the other"
    );
    let name = start["name"].as_str().unwrap();
    assert!(
        name.starts_with("fsck-nightly-") && name.ends_with("-1"),
        "{name}"
    );
    let input: Value = serde_json::from_str(start["input"].as_str().unwrap()).unwrap();
    assert_eq!(input["tool"], "fsck");
    assert_eq!(input["run"], "nightly");
    assert_eq!(input["repair"], true);
    assert_eq!(input["dryRun"], false);
    assert_eq!(input["migration"], Value::Null);
    assert_eq!(input["segments"], json!([0, 1, 2, 3]));
    // The segments only read: the judge has the limits whole.
    assert_eq!(input["maxWcu"], 300.0);
    assert_eq!(input["maxKeyWcu"], 800.0);
    let reads: Vec<(String, String)> = s3
        .requests()
        .iter()
        .map(|r| (r.method.clone(), r.path.clone()))
        .collect();
    assert_eq!(
        reads,
        [("GET".to_owned(), format!("/results/{REPORT_KEY}"))]
    );

    // The text report, as the laptop's.
    let sfn = step_functions(vec![succeeded()]).await;
    let (code, stdout, _) = fsck_on_aws(&sfn, &s3, &[]).await;
    assert_eq!(code, Some(1));
    assert!(
        stdout.contains(
            "lock-orphan   CHASSIS#ghost / CHASSIS#ghost: the lock names no vehicle (repairable)"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("scanned 120 items: 1 findings"), "{stdout}");

    // A clean report: exit 0.
    let clean = s3_with(
        "results",
        REPORT_KEY,
        json!({"scanned": 120, "repaired": 0, "findings": []}),
    )
    .await;
    let sfn = step_functions(vec![succeeded()]).await;
    let (code, _, stderr) = fsck_on_aws(&sfn, &clean, &["--json"]).await;
    assert_eq!(code, Some(0), "{stderr}");

    // FAILED, TIMED_OUT, ABORTED: fsck could not run, exit 2, the restart named.
    for status in ["FAILED", "TIMED_OUT", "ABORTED"] {
        let sfn = step_functions(vec![(
            status,
            json!({"error": "States.ExceedToleratedFailureThreshold", "cause": "a segment failed"}),
        )])
        .await;
        let (code, stdout, stderr) = fsck_on_aws(&sfn, &s3, &[]).await;
        assert_eq!(code, Some(2), "{status}: {stderr}");
        let ended: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(ended["status"], status);
        assert!(stderr.contains("--run nightly --attempt 2"), "{stderr}");
    }

    // The report gone from the bucket (expired): exit 2, said.
    let empty = s3_with("results", "fsck/other/report.json", json!({})).await;
    let sfn = step_functions(vec![succeeded()]).await;
    let (code, _, stderr) = fsck_on_aws(&sfn, &empty, &[]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot read s3://results/fsck/nightly/report.json"),
        "{stderr}"
    );

    // No such stack: exit 2, before any start.
    let sfn = step_functions(vec![]).await;
    let (code, _, stderr) = fake_aws::singlet(
        &["fsck", "--on-aws", "--stack", "nope"],
        &[("AWS_ENDPOINT_URL_SFN", &sfn.url)],
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("no state machine is named nope-table-tools"),
        "{stderr}"
    );
    assert_eq!(sfn.requests().len(), 1);

    // Neither --stack nor --state-machine, or both: exit 2, no call.
    let (code, _, stderr) = fake_aws::singlet(&["fsck", "--on-aws"], &[]).await;
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--on-aws needs --stack"), "{stderr}");
    let (code, _, stderr) = fake_aws::singlet(
        &[
            "fsck",
            "--on-aws",
            "--stack",
            "s",
            "--state-machine",
            MACHINE,
        ],
        &[],
    )
    .await;
    assert_eq!(code, Some(2));
    assert!(stderr.contains("not both"), "{stderr}");
}

/// What the judge holds an item in, with the capacity plan's mix of items: 163,000 items, 100,000
/// of them loans (a fifth of those open, as 2.1 million of the plan's 10 million are) and the
/// rest vehicles with their two locks, each decoded as it is read back and taken straight into
/// the judge's table (its map of items and the lookups the rules need; a returned loan judged as
/// it comes and not held), as `fsck::on_aws::judge` does; the peak resident memory over the
/// count. A measurement for the guide, run alone
/// (`--ignored --nocapture`): the process's memory is the test's only while nothing else runs in
/// it.
#[test]
#[ignore]
fn the_judges_memory_per_item() {
    use singlet_functions::model::Entity;
    use singlet_functions::model::loans::{Checkout, LoanStatus};
    use singlet_shared::{Id, Isbn13};
    fn status(field: &str) -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with(field)).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 1024
    }
    const LOANS: usize = 100_000;
    const OPEN: usize = 21_000;
    const VEHICLES: usize = 21_000;
    let id = |raw: String| Id::parse(&raw).unwrap();
    let loan = |i: usize| {
        let open = i < OPEN;
        Checkout {
            checkout_id: id(format!("k{i:06}")),
            patron_id: id(format!("p{:06}", i % 10_000)),
            patron_branch_id: id(format!("b{}", i % 1_000)),
            branch_id: id(format!("b{}", i % 1_000)),
            copy_id: id(format!("c{i:06}")),
            isbn: Isbn13::parse(crate::fixtures::ISBN).unwrap(),
            title: "A title of a usual length".into(),
            status: if open {
                LoanStatus::Open
            } else {
                LoanStatus::Returned
            },
            checked_out_at: "2026-01-01T00:00:00Z".into(),
            due_date: "2026-01-22T00:00:00Z".into(),
            renewal_count: 0,
            loan_period_days: 21,
            returned_date: (!open).then(|| "2026-01-20T00:00:00Z".into()),
            // As the return writes it: `LoanHistoryDays` (400 by default) after the return.
            expires_at: (!open).then(|| {
                Checkout::history_ends(
                    singlet_functions::clock::parse_iso("2026-01-20T00:00:00Z").unwrap(),
                    400,
                )
            }),
        }
        .to_item()
    };
    let vehicle =
        |i: usize| crate::migrate::old_vehicle_with(i, &format!("old{i:06}"), &format!("ch{i:06}"));
    let items = (0..LOANS).map(loan).chain((0..VEHICLES).flat_map(vehicle));

    let before = status("VmRSS:");
    let mut raw_bytes = 0;
    // Each item decoded as it is read, and moved into the table, as the judge reads its parts
    // back line by line.
    let mut table = singlet_tools::fsck::rules::Table::new(std::sync::Arc::new(
        singlet_functions::ids::IdKey::new(b"the judge's memory"),
    ));
    for item in items {
        raw_bytes += singlet_tools::transfer::item_size(&item);
        table.take(singlet_tools::fsck::rules::Stored::new(item));
    }
    let peak = status("VmHWM:");
    let read = table.scanned();
    assert_eq!(read, (LOANS + 3 * VEHICLES) as u64);
    assert_eq!(
        table.items().count(),
        OPEN + 3 * VEHICLES,
        "the returned loans judged, not held"
    );
    eprintln!(
        "{read} items ({LOANS} loans, {OPEN} open; {VEHICLES} vehicles and their locks), \
         {} bytes each as DynamoDB sizes them; the judge's table, at its peak, {} bytes/item",
        raw_bytes as u64 / read,
        peak.saturating_sub(before) / read,
    );
}
