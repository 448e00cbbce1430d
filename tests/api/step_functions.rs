//! The tools on AWS as a Step Functions distributed map (docs/guide/tools-on-step-functions.md):
//! the stack's tools function (`table-tools`) run through the runner's `invoke`, one segment an
//! invocation, against the embedded engine; template.yaml's state machine against the function
//! it names; `migrate --on-aws` against a Step Functions endpoint of the test's own.

use crate::fake_aws::{self, FakeAws, json_1_0};
use crate::harness::{Api, Mode};
use crate::migrate::{
    COLLIDING, migration, old_plate_count, old_plated_vehicle, plates_compact, vehicles,
    write_old_vehicles,
};
use serde_json::{Value, json};
use singlet_tools::migrate::{self, Options};

/// Vehicles in the old shape: fewer on an engine whose scans slow as its table grows, but 200 at
/// least, so that the segment killed after 30 writes holds more than 30 of them.
fn count() -> usize {
    crate::harness::sized(600).max(200)
}
const SEGMENTS: u32 = 4;

/// The event the state machine hands the tools function for `segment`.
fn segment_event(segment: u32, stop_after: Option<u64>) -> String {
    let mut event = json!({
        "tool": "migrate",
        "migration": "vehicles-by-depot",
        "segment": segment,
        "segments": SEGMENTS,
        "maxWcu": 1000,
        "maxKeyWcu": 100,
        "pageSize": 50,
    });
    if let Some(stop_after) = stop_after {
        event["stopAfter"] = json!(stop_after);
    }
    event.to_string()
}

async fn invoke_segment(api: &Api, segment: u32, stop_after: Option<u64>) -> Value {
    singlet::invoke::invoke(&api.ctx, "table-tools", &segment_event(segment, stop_after))
        .await
        .unwrap()
}

/// Every item but the migration's checkpoints, as text, in key order.
async fn migrated_items(api: &Api) -> Vec<String> {
    let mut items: Vec<String> = api
        .items()
        .await
        .iter()
        .filter(|item| !crate::harness::s(item, "PK").starts_with("MIGRATION#"))
        .map(|item| format!("{:?}", std::collections::BTreeMap::from_iter(item.iter())))
        .collect();
    items.sort();
    items
}

/// Each segment invoked on its own migrates the table as the laptop's run of the same segments
/// does; a segment killed part way and invoked again resumes from its checkpoint and writes no
/// vehicle twice; a segment invoked once it is done reads nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_segments_invoked_one_by_one_migrate_as_the_laptop_does_and_resume() {
    let laptop = Api::start(Mode::Direct).await;
    let aws = Api::start(Mode::Direct).await;
    write_old_vehicles(&laptop, count()).await;
    write_old_vehicles(&aws, count()).await;

    let ran = migrate::run(
        &laptop.ctx,
        migration(),
        &Options {
            segments: SEGMENTS,
            page_size: Some(50),
            ..Options::default()
        },
    )
    .await
    .unwrap();
    assert!(ran.complete, "{ran:?}");
    assert_eq!(ran.changed, count() as u64);

    // Segment 1 killed after 30 writes, before its page's checkpoint.
    let killed = invoke_segment(&aws, 1, Some(30)).await;
    assert_eq!(killed["complete"], false, "{killed}");
    assert_eq!(killed["changed"], 30, "{killed}");
    assert_eq!(killed["segment"], 1);
    let states = migrate::states(&aws.ctx).await.unwrap();
    let state = states
        .iter()
        .find(|s| s.migration == "vehicles-by-depot")
        .unwrap();
    assert_eq!(state.state, "in progress", "{state:?}");

    let mut changed = killed["changed"].as_u64().unwrap();
    let mut already = 0;
    for segment in 0..SEGMENTS {
        let report = invoke_segment(&aws, segment, None).await;
        assert_eq!(report["complete"], true, "{report}");
        assert_eq!(report["migration"], "vehicles-by-depot");
        assert_eq!(report["segment"], segment);
        assert_eq!(report["segments"], SEGMENTS);
        assert_eq!(report["conflictCount"], 0);
        assert!(report["peakWcuPerSecond"].as_f64().unwrap() <= 1000.0);
        changed += report["changed"].as_u64().unwrap();
        already += report["alreadyChanged"].as_u64().unwrap();
    }
    // Every vehicle written once: the killed segment's page read again found the 30 already
    // changed, whose conditions refused a second write.
    assert_eq!(changed, count() as u64);
    assert!(
        already <= 50,
        "at most the killed page read again: {already}"
    );
    assert_eq!(migrated_items(&aws).await, migrated_items(&laptop).await);
    assert_eq!(vehicles(&aws.items().await).len(), count());
    let states = migrate::states(&aws.ctx).await.unwrap();
    assert_eq!(states[0].state, "complete", "{:?}", states[0]);

    // A segment done and invoked again (a retried map item) reads nothing and is complete.
    let again = invoke_segment(&aws, 2, None).await;
    assert_eq!(again["complete"], true);
    assert_eq!(
        (again["scanned"].as_u64(), again["changed"].as_u64()),
        (Some(0), Some(0))
    );
}

/// What the tools function refuses, and why: a bad event, a segment outside the run, another
/// segment count than a stopped run's, a migration that must survey the whole table first, and
/// an fsck segment with nowhere to leave what it reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_segment_refusals_say_why() {
    let api = Api::start(Mode::Direct).await;
    write_old_vehicles(&api, 20).await;
    let refused = |event: Value| {
        let ctx = api.ctx.clone();
        async move {
            singlet::invoke::invoke(&ctx, "table-tools", &event.to_string())
                .await
                .unwrap_err()
        }
    };
    let base =
        json!({"tool": "migrate", "migration": "vehicles-by-depot", "segment": 0, "segments": 2});
    let with = |field: &str, value: Value| {
        let mut event = base.clone();
        event[field] = value;
        event
    };
    assert!(
        refused(with("segment", json!(2)))
            .await
            .contains("not one of the run's 2")
    );
    assert!(
        refused(with("segments", json!(0)))
            .await
            .contains("at least 1")
    );
    assert!(refused(with("maxWcu", json!(0))).await.contains("maxWcu"));
    assert!(
        refused(with("migration", json!("nope")))
            .await
            .contains("no migration named nope")
    );
    assert!(
        refused(with("tool", json!("fsck")))
            .await
            .contains("names its results")
    );
    assert!(
        refused(with("bogus", json!(1)))
            .await
            .contains("unknown field")
    );
    // A dry run keeps what outlives an invocation in the run's results: without them, refused;
    // a migration that waits for another is refused before anything else.
    // (plates-compact's survey without results: `plates_compact_on_aws_surveys_first_...`.)
    let plates = refused(with("migration", json!("plates-compact"))).await;
    assert!(plates.contains("run vehicles-by-depot first"), "{plates}");
    let dry = refused(with("dryRun", json!(true))).await;
    assert!(dry.contains("dry run's place"), "{dry}");
    let mut survey = with("tool", json!("migrate-survey"));
    assert!(refused(survey.clone()).await.contains("names its results"));
    survey["results"] = json!("file:///nowhere");
    assert!(
        refused(survey).await.contains("claims no values"),
        "vehicles-by-depot has no survey"
    );

    // Segment 0 of 2 started (and stopped): segment 1 of 4 is another run's.
    let stopped = singlet::invoke::invoke(
        &api.ctx,
        "table-tools",
        &with("stopAfter", json!(1)).to_string(),
    )
    .await
    .unwrap();
    assert_eq!(stopped["complete"], false);
    let mut other = with("segments", json!(4));
    other["segment"] = json!(1);
    assert!(refused(other).await.contains("resume it with 2 segments"));
}

/// `singlet invoke table-tools --event events/tools/migrate-segment.json`: the event file the
/// guide gives, through the runner's command, on a table with nothing to migrate.
#[test]
fn invoke_runs_the_tools_function_on_its_event_file() {
    let root = env!("CARGO_MANIFEST_DIR");
    let output = crate::process::singlet()
        .current_dir(root)
        .args(["--in-memory", "invoke", "table-tools"])
        .args(["--event", "events/tools/migrate-segment.json"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["migration"], "vehicles-by-depot", "{report}");
    assert_eq!(report["complete"], true, "{report}");
    assert_eq!(
        (report["segment"].as_u64(), report["segments"].as_u64()),
        (Some(0), Some(4))
    );
    let listed = crate::process::singlet()
        .args(["invoke", "--list"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains("table-tools"));
}

const MACHINE: &str = "arn:aws:states:us-east-1:123456789012:stateMachine:stack-table-tools";

/// A Step Functions endpoint of the test's own: `StartExecution` answered as told, and each
/// `DescribeExecution` with the next of `describes`.
async fn step_functions(start: (u16, Value), describes: Vec<Value>) -> FakeAws {
    let describes = std::sync::Mutex::new(std::collections::VecDeque::from(describes));
    FakeAws::start(move |request| match request.target.as_str() {
        "AWSStepFunctions.StartExecution" => json_1_0(start.0, start.1.clone()),
        "AWSStepFunctions.DescribeExecution" => {
            let next = describes.lock().unwrap().pop_front();
            json_1_0(200, next.expect("no more DescribeExecution answers"))
        }
        other => json_1_0(
            400,
            json!({"__type": "UnknownOperationException", "message": other}),
        ),
    })
    .await
}

/// Every request's operation and body.
fn requests_to(fake: &FakeAws) -> Vec<(String, Value)> {
    fake.requests()
        .iter()
        .map(|r| (r.target.clone(), r.json()))
        .collect()
}

const EXECUTION: &str = "arn:aws:states:us-east-1:123456789012:execution:stack-table-tools:run";

/// A Step Functions that starts the execution and describes it `SUCCEEDED` with `output`.
async fn succeeding_with(output: &Value) -> FakeAws {
    step_functions(
        started(),
        vec![described(
            "SUCCEEDED",
            json!({"output": output.to_string()}),
        )],
    )
    .await
}

fn started() -> (u16, Value) {
    (200, json!({"executionArn": EXECUTION, "startDate": 1.7e9}))
}

fn described(status: &str, extra: Value) -> Value {
    let mut answer = json!({
        "executionArn": EXECUTION,
        "stateMachineArn": MACHINE,
        "status": status,
        "startDate": 1.7e9,
    });
    for (k, v) in extra.as_object().unwrap() {
        answer[k] = v.clone();
    }
    answer
}

/// A succeeded execution's output: the input and two segments' reports.
fn succeeded_output(conflicts: u64) -> Value {
    let report = |segment: u32, conflicts: u64| {
        json!({
            "migration": "vehicles-by-depot", "scanned": 10, "changed": 4, "alreadyChanged": 1,
            "conflicts": (0..conflicts).map(|i| json!({"pk": format!("VEHICLE#v{i}"), "detail": "x"})).collect::<Vec<_>>(),
            "conflictCount": conflicts, "complete": true, "dryRun": false,
            "peakWcuPerSecond": 3.0, "hottestKey": null, "segment": segment, "segments": 2,
        })
    };
    json!({
        "output": json!({"segmentCount": 2, "reports": [report(0, 0), report(1, conflicts)]}).to_string()
    })
}

/// `singlet migrate vehicles-by-depot --on-aws` against `fake`: its exit code, standard
/// output and standard error.
async fn on_aws(fake: &FakeAws, extra: &[&str]) -> (Option<i32>, String, String) {
    on_aws_reading(fake, None, extra).await
}

/// [`on_aws`], the results bucket at `s3` when there is one.
async fn on_aws_reading(
    fake: &FakeAws,
    s3: Option<&FakeAws>,
    extra: &[&str],
) -> (Option<i32>, String, String) {
    let mut args = vec![
        "migrate",
        "vehicles-by-depot",
        "--on-aws",
        "--state-machine",
        MACHINE,
        "--segments",
        "2",
        "--max-wcu",
        "400",
        "--poll-ms",
        "5",
    ];
    args.extend_from_slice(extra);
    let mut endpoints = vec![("AWS_ENDPOINT_URL_SFN", fake.url.as_str())];
    endpoints.extend(s3.map(|s3| ("AWS_ENDPOINT_URL_S3", s3.url.as_str())));
    fake_aws::singlet(&args, &endpoints).await
}

/// `migrate --on-aws`: the `StartExecution` it sends (the state machine, a name from the input,
/// the segment list, each segment's share of the limits), then `DescribeExecution` until the
/// execution ends; each end's exit code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_on_aws_starts_the_state_machine_and_follows_each_end() {
    // RUNNING, then SUCCEEDED: exit 0, the segments' reports gathered.
    let fake = step_functions(
        started(),
        vec![
            described("RUNNING", json!({})),
            described("SUCCEEDED", succeeded_output(0)),
        ],
    )
    .await;
    let (code, stdout, stderr) = on_aws(&fake, &["--json", "--max-concurrency", "2"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["status"], "SUCCEEDED");
    assert_eq!(
        (report["scanned"].as_u64(), report["changed"].as_u64()),
        (Some(20), Some(8))
    );
    assert_eq!(report["alreadyChanged"], 2);
    assert_eq!(report["complete"], true);
    assert!(stderr.contains("RUNNING"), "progress on stderr: {stderr}");
    let requests = requests_to(&fake);
    let targets: Vec<&str> = requests.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        targets,
        [
            "AWSStepFunctions.StartExecution",
            "AWSStepFunctions.DescribeExecution",
            "AWSStepFunctions.DescribeExecution"
        ]
    );
    let start = &requests[0].1;
    assert_eq!(start["stateMachineArn"], MACHINE);
    let name = start["name"].as_str().unwrap();
    assert!(
        name.starts_with("migrate-vehicles-by-depot-") && name.ends_with("-1"),
        "{name}"
    );
    let input: Value = serde_json::from_str(start["input"].as_str().unwrap()).unwrap();
    assert_eq!(input["segments"], json!([0, 1]));
    assert_eq!(input["segmentCount"], 2);
    assert_eq!(input["maxConcurrency"], 2);
    assert_eq!(input["tool"], "migrate");
    assert_eq!(input["migration"], "vehicles-by-depot");
    // Two segments at once share --max-wcu 400 and the default --max-key-wcu 800.
    assert_eq!(input["maxWcu"], 200.0);
    assert_eq!(input["maxKeyWcu"], 400.0);
    assert_eq!(requests[1].1["executionArn"], EXECUTION);
    drop(fake);

    // The same command again names the same execution: the start is not applied twice.
    let fake = step_functions(started(), vec![described("SUCCEEDED", succeeded_output(0))]).await;
    let _ = on_aws(&fake, &["--json", "--max-concurrency", "2"]).await;
    assert_eq!(requests_to(&fake)[0].1["name"], name);
    drop(fake);

    // Succeeded with conflicts left as they were: exit 1.
    let fake = step_functions(started(), vec![described("SUCCEEDED", succeeded_output(3))]).await;
    let (code, stdout, _) = on_aws(&fake, &["--json"]).await;
    assert_eq!(code, Some(1));
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["conflictCount"], 3);
    assert_eq!(report["conflicts"].as_array().unwrap().len(), 3);
    drop(fake);

    // FAILED, TIMED_OUT, ABORTED: exit 1, the error told, the next attempt named.
    for status in ["FAILED", "TIMED_OUT", "ABORTED"] {
        let fake = step_functions(
            started(),
            vec![
                described("RUNNING", json!({})),
                described(status, json!({"error": "States.ExceedToleratedFailureThreshold", "cause": "a segment failed"})),
            ],
        )
        .await;
        let (code, stdout, stderr) = on_aws(&fake, &[]).await;
        assert_eq!(code, Some(1), "{status}: {stderr}");
        let report: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(report["status"], status);
        assert_eq!(report["complete"], false);
        assert!(stderr.contains("--attempt 2"), "{stderr}");
    }

    // Started before under the same name (a retried start): followed, not started twice.
    let fake = step_functions(
        (
            400,
            json!({"__type": "ExecutionAlreadyExists", "message": "Execution Already Exists"}),
        ),
        vec![described("SUCCEEDED", succeeded_output(0))],
    )
    .await;
    let (code, _, stderr) = on_aws(&fake, &["--json"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("started before"), "{stderr}");
    let requests = requests_to(&fake);
    let execution = requests[1].1["executionArn"].as_str().unwrap();
    assert_eq!(
        execution,
        format!(
            "arn:aws:states:us-east-1:123456789012:execution:stack-table-tools:{}",
            requests[0].1["name"].as_str().unwrap()
        )
    );
    drop(fake);

    // Could not start (no permission): exit 2, said.
    let fake = step_functions(
        (
            400,
            json!({"__type": "AccessDeniedException", "message": "not authorized"}),
        ),
        vec![],
    )
    .await;
    let (code, _, stderr) = on_aws(&fake, &[]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("cannot start"), "{stderr}");
}

/// Past the 256 KiB an execution's output holds: 600 segments, whose reports the map's
/// `ResultWriter` put in the results bucket; the command reads its manifest and every file it
/// lists, and gathers all 600 (exit 1: conflicts were left as they were).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_on_aws_gathers_the_reports_the_result_writer_put_in_s3() {
    const SEGMENTS: u64 = 600;
    let report = |segment: u64| {
        let conflicts = u64::from(segment.is_multiple_of(100));
        json!({
            "migration": "vehicles-by-depot", "scanned": 10, "changed": 4, "alreadyChanged": 1,
            "conflicts": (0..conflicts).map(|_| json!({"pk": format!("VEHICLE#v{segment}"), "detail": "x"})).collect::<Vec<_>>(),
            "conflictCount": conflicts, "complete": true, "dryRun": false,
            "peakWcuPerSecond": 1.0, "hottestKey": null, "segment": segment, "segments": SEGMENTS,
        })
    };
    // As the ResultWriter writes them: each child execution's Output a string of JSON.
    let file = |segments: std::ops::Range<u64>| -> Value {
        segments
            .map(|segment| json!({"Status": "SUCCEEDED", "Output": report(segment).to_string()}))
            .collect()
    };
    let run = "map-runs/0b5c7d9e";
    let s3 = fake_aws::s3_holding(vec![
        (
            format!("/results/{run}/manifest.json"),
            json!({"DestinationBucket": "results", "ResultFiles": {"FAILED": [], "PENDING": [],
                   "SUCCEEDED": [{"Key": format!("{run}/SUCCEEDED_0.json"), "Size": 1},
                                 {"Key": format!("{run}/SUCCEEDED_1.json"), "Size": 1}]}}),
        ),
        (format!("/results/{run}/SUCCEEDED_0.json"), file(0..300)),
        (
            format!("/results/{run}/SUCCEEDED_1.json"),
            file(300..SEGMENTS),
        ),
    ])
    .await;
    let output = json!({"segmentCount": SEGMENTS, "reports": {
        "MapRunArn": "arn:aws:states:us-east-1:123456789012:mapRun:stack-table-tools/Segments:0b5c7d9e",
        "ResultWriterDetails": {"Bucket": "results", "Key": format!("{run}/manifest.json")}}});
    let sfn = succeeding_with(&output).await;
    let (code, stdout, stderr) = fake_aws::singlet(
        &[
            "migrate",
            "vehicles-by-depot",
            "--on-aws",
            "--state-machine",
            MACHINE,
            "--segments",
            "600",
            "--max-concurrency",
            "100",
            "--poll-ms",
            "5",
            "--json",
        ],
        &[
            ("AWS_ENDPOINT_URL_SFN", &sfn.url),
            ("AWS_ENDPOINT_URL_S3", &s3.url),
        ],
    )
    .await;
    assert_eq!(code, Some(1), "{stderr}");
    let gathered: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(gathered["segments"], SEGMENTS);
    assert_eq!(gathered["scanned"], SEGMENTS * 10);
    assert_eq!(gathered["complete"], true);
    assert_eq!(gathered["conflictCount"], 6);
    assert_eq!(gathered["conflicts"].as_array().unwrap().len(), 6);
    let input: Value =
        serde_json::from_str(requests_to(&sfn)[0].1["input"].as_str().unwrap()).unwrap();
    assert_eq!(input["segments"].as_array().unwrap().len(), 600);
    let reads: Vec<String> = s3.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        reads,
        [
            format!("/results/{run}/manifest.json"),
            format!("/results/{run}/SUCCEEDED_0.json"),
            format!("/results/{run}/SUCCEEDED_1.json")
        ]
    );

    // A manifest gone (expired from the bucket): exit 2, said.
    let sfn = succeeding_with(&output).await;
    let empty = fake_aws::s3_holding(vec![]).await;
    let (code, _, stderr) = fake_aws::singlet(
        &[
            "migrate",
            "vehicles-by-depot",
            "--on-aws",
            "--state-machine",
            MACHINE,
            "--poll-ms",
            "5",
        ],
        &[
            ("AWS_ENDPOINT_URL_SFN", &sfn.url),
            ("AWS_ENDPOINT_URL_S3", &empty.url),
        ],
    )
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot read s3://results/map-runs/0b5c7d9e/manifest.json"),
        "{stderr}"
    );
}

/// `migrate --on-aws --stack`: the state machine the stack's name makes, found by
/// `ListStateMachines`, is the one started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_on_aws_finds_the_state_machine_by_the_stacks_name() {
    let listed = json!({"stateMachines": [
        {"name": "stack-table-tools-old", "stateMachineArn": format!("{MACHINE}-old"), "type": "STANDARD", "creationDate": 1.7e9},
        {"name": "stack-table-tools", "stateMachineArn": MACHINE, "type": "STANDARD", "creationDate": 1.7e9}]});
    let output = succeeded_output(0);
    let sfn = FakeAws::start(move |request| match request.target.as_str() {
        "AWSStepFunctions.ListStateMachines" => json_1_0(200, listed.clone()),
        "AWSStepFunctions.StartExecution" => json_1_0(started().0, started().1),
        _ => json_1_0(200, described("SUCCEEDED", output.clone())),
    })
    .await;
    let (code, _, stderr) = fake_aws::singlet(
        &[
            "migrate",
            "vehicles-by-depot",
            "--on-aws",
            "--stack",
            "stack",
            "--segments",
            "2",
            "--poll-ms",
            "5",
        ],
        &[("AWS_ENDPOINT_URL_SFN", &sfn.url)],
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");
    let sent = requests_to(&sfn);
    assert_eq!(sent[0].0, "AWSStepFunctions.ListStateMachines");
    assert_eq!(sent[1].1["stateMachineArn"], MACHINE);
}

/// A segment whose deadline has come stops between two pages, its place saved, and answers
/// `complete: false` (what the state machine's Choice invokes it again on); invoked again and
/// again it goes on page by page, rereading nothing: every vehicle written once, none refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_segment_past_its_deadline_stops_between_pages_and_goes_on() {
    let api = Api::start(Mode::Direct).await;
    write_old_vehicles(&api, 200).await;
    let options = Options {
        segments: 1,
        page_size: Some(100),
        stop_at: Some(std::time::Instant::now()),
        ..Options::default()
    };
    let (mut invocations, mut changed, mut already) = (0, 0, 0);
    loop {
        invocations += 1;
        let (report, ended) =
            migrate::on_aws::run_one_segment(&api.ctx, migration(), 0, &options, None)
                .await
                .unwrap();
        assert!(report.scanned <= 100, "one page an invocation: {report:?}");
        changed += report.changed;
        already += report.already_changed;
        assert_eq!(report.complete, ended);
        if ended {
            break;
        }
        assert!(invocations < 20, "no progress");
    }
    assert!(invocations >= 6, "600 items at 100 a page: {invocations}");
    assert_eq!((changed, already), (200, 0));
    assert_eq!(
        migrate::states(&api.ctx).await.unwrap()[0].state,
        "complete"
    );
}

/// `plates-compact` on AWS: the map run twice. Each survey segment writes what its items claim
/// to the run's results (one killed after a page goes on from its checkpoint); each segment
/// then reads the whole survey and migrates its items, leaving the table as the laptop's run
/// leaves it, with the same colliding pairs reported and left as they were. A segment that
/// would migrate before the survey is done is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plates_compact_on_aws_surveys_first_then_migrates_as_the_laptop_does() {
    let laptop = Api::start(Mode::Direct).await;
    let aws = Api::start(Mode::Direct).await;
    for api in [&laptop, &aws] {
        let items = (0..old_plate_count())
            .flat_map(old_plated_vehicle)
            .collect();
        crate::harness::put_raw_all(&api.ctx, items).await;
        let indexed = migrate::run(&api.ctx, migration(), &Options::default())
            .await
            .unwrap();
        assert!(indexed.complete, "{indexed:?}");
    }
    let ran = migrate::run(
        &laptop.ctx,
        plates_compact(),
        &Options {
            segments: SEGMENTS,
            ..Options::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(ran.conflicts.len(), COLLIDING);

    let dir = tempfile::tempdir().unwrap();
    let results = format!("file://{}", dir.path().display());
    let event = |tool: &str, segment: u32, extra: Value| {
        let mut event = json!({
            "tool": tool, "migration": "plates-compact", "segment": segment,
            "segments": SEGMENTS, "pageSize": 100, "results": results,
        });
        for (k, v) in extra.as_object().unwrap() {
            event[k] = v.clone();
        }
        event.to_string()
    };
    let invoke = |event: String| {
        let ctx = aws.ctx.clone();
        async move { singlet::invoke::invoke(&ctx, "table-tools", &event).await }
    };

    // Survey segment 2 stopped after one page, as its deadline would stop it.
    let stopped = invoke(event("migrate-survey", 2, json!({"stopAfter": 1})))
        .await
        .unwrap();
    assert_eq!(stopped["complete"], false, "{stopped}");
    // No segment migrates on a survey not read to its end, or without its results, nor marks
    // the migration started.
    let early = invoke(event("migrate", 0, json!({}))).await.unwrap_err();
    assert!(
        early.contains("has not read its segment to its end"),
        "{early}"
    );
    let mut no_results: Value = serde_json::from_str(&event("migrate", 0, json!({}))).unwrap();
    no_results.as_object_mut().unwrap().remove("results");
    let refused = invoke(no_results.to_string()).await.unwrap_err();
    assert!(
        refused.contains("survey") && refused.contains("name them"),
        "{refused}"
    );
    let states = migrate::states(&aws.ctx).await.unwrap();
    let state = states.iter().find(|s| s.migration == "plates-compact");
    assert_eq!(state.unwrap().state, "not started");
    let (mut scanned, mut claimed) = (0, 0);
    for segment in 0..SEGMENTS {
        let surveyed = invoke(event("migrate-survey", segment, json!({})))
            .await
            .unwrap();
        assert_eq!(surveyed["complete"], true, "{surveyed}");
        assert_eq!(surveyed["tool"], "migrate-survey");
        scanned += surveyed["scanned"].as_u64().unwrap();
        claimed += surveyed["claimed"].as_u64().unwrap();
    }
    // Every item read once (the stopped segment's page not twice), every vehicle's claim kept.
    let items = aws.items().await.len() as u64;
    assert_eq!(scanned, items);
    assert_eq!(claimed, old_plate_count() as u64);

    let mut conflicts = Vec::new();
    let mut changed = 0;
    for segment in 0..SEGMENTS {
        let report = invoke(event("migrate", segment, json!({}))).await.unwrap();
        assert_eq!(report["complete"], true, "{report}");
        changed += report["changed"].as_u64().unwrap();
        for conflict in report["conflicts"].as_array().unwrap() {
            conflicts.push(conflict["pk"].as_str().unwrap().to_owned());
        }
    }
    conflicts.sort();
    let expected: Vec<String> = ran.conflicts.iter().map(|c| c.pk.clone()).collect();
    assert_eq!(conflicts, expected);
    assert_eq!(changed, ran.changed);
    // The run's gathering: the laptop's report, in the execution's output and whole beside
    // the segments' reports.
    let gathered = invoke(event("migrate-gather", 0, json!({}))).await.unwrap();
    // (Not `scanned`: each run reads its own checkpoints, marked as its segments start.)
    for field in ["changed", "alreadyChanged", "unsettled", "complete"] {
        let laptop = serde_json::to_value(&ran).unwrap();
        assert_eq!(gathered[field], laptop[field], "{field}: {gathered}");
    }
    assert_eq!(gathered["conflictCount"], COLLIDING);
    assert_eq!(gathered["ended"], true);
    let whole: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(whole["conflicts"].as_array().unwrap().len(), COLLIDING);
    assert_eq!(
        gathered["reportObject"],
        format!("file://{}", dir.path().join("report.json").display())
    );
    assert_eq!(migrated_items(&aws).await, migrated_items(&laptop).await);
    let states = migrate::states(&aws.ctx).await.unwrap();
    let state = states
        .iter()
        .find(|s| s.migration == "plates-compact")
        .unwrap();
    assert_eq!(
        (state.state, state.conflicts),
        ("conflicts", COLLIDING as u64)
    );

    // Another execution (its own results) over the segments this one finished: each reads
    // nothing and needs no survey, and the run's report still counts the conflicts the table's
    // checkpoints hold, listing none (the run that found them listed them).
    let later = tempfile::tempdir().unwrap();
    let later = json!({"results": format!("file://{}", later.path().display())});
    for segment in 0..SEGMENTS {
        let report = invoke(event("migrate", segment, later.clone()))
            .await
            .unwrap();
        assert_eq!(
            (&report["complete"], &report["scanned"]),
            (&json!(true), &json!(0)),
            "{report}"
        );
    }
    let again = invoke(event("migrate-gather", 0, later)).await.unwrap();
    assert_eq!(again["conflictCount"], COLLIDING, "{again}");
    assert_eq!(again["conflicts"], json!([]));
    assert_eq!(again["changed"], 0);
}

/// `migrate --dry-run` on AWS: a segment writes nothing to the table, checkpoints included, and
/// keeps its place and its counts in the run's results instead; stopped by its deadline after
/// every page, it goes on from there, and its last report is the whole segment's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_segment_keeps_its_place_in_the_results_and_writes_nothing() {
    let api = Api::start(Mode::Direct).await;
    write_old_vehicles(&api, 200).await;
    let before = migrated_items(&api).await;
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        segments: 1,
        page_size: Some(100),
        dry_run: true,
        stop_at: Some(std::time::Instant::now()),
        ..Options::default()
    };
    let results = singlet_tools::results::Results::Dir(dir.path().to_owned());
    let (mut invocations, mut last_scanned) = (0, 0);
    let report = loop {
        invocations += 1;
        let (report, ended) =
            migrate::on_aws::run_one_segment(&api.ctx, migration(), 0, &options, Some(&results))
                .await
                .unwrap();
        assert!(!report.complete, "a dry run completes nothing");
        assert!(report.dry_run);
        // Each invocation adds one page to the counts of those before it (the last page,
        // past the 600th item, is empty).
        assert!(
            report.scanned >= last_scanned && report.scanned <= last_scanned + 100,
            "{report:?}"
        );
        last_scanned = report.scanned;
        if ended {
            break report;
        }
        assert!(invocations < 20, "no progress");
    };
    assert!(invocations >= 6, "600 items at 100 a page: {invocations}");
    assert_eq!(report.scanned, 600);
    assert_eq!(report.changed, 200);
    assert_eq!(report.sample.len(), 5);
    // Nothing written: the items as they were, no checkpoint, the migration not started.
    assert_eq!(api.items().await.len(), 600);
    assert_eq!(migrated_items(&api).await, before);
    assert_eq!(
        migrate::states(&api.ctx).await.unwrap()[0].state,
        "not started"
    );

    // The same through the function's event: read to its end, it says so and reads no more.
    let again = singlet::invoke::invoke(
        &api.ctx,
        "table-tools",
        &json!({
            "tool": "migrate", "migration": "vehicles-by-depot", "segment": 0, "segments": 1,
            "dryRun": true, "results": format!("file://{}", dir.path().display()),
        })
        .to_string(),
    )
    .await
    .unwrap();
    assert_eq!(again["complete"], true, "{again}");
    assert_eq!(
        (again["scanned"].as_u64(), again["changed"].as_u64()),
        (Some(600), Some(200))
    );
    assert_eq!(again["dryRun"], true);
    // Gathered: the laptop's dry run's report, every segment ended, never complete.
    let gathered = singlet::invoke::invoke(
        &api.ctx,
        "table-tools",
        &json!({
            "tool": "migrate-gather", "migration": "vehicles-by-depot", "segment": 0,
            "segments": 1, "dryRun": true,
            "results": format!("file://{}", dir.path().display()),
        })
        .to_string(),
    )
    .await
    .unwrap();
    assert_eq!(
        (
            &gathered["ended"],
            &gathered["complete"],
            &gathered["dryRun"]
        ),
        (&json!(true), &json!(false), &json!(true)),
        "{gathered}"
    );
    assert_eq!(gathered["changed"], 200);
    assert_eq!(gathered["sample"].as_array().unwrap().len(), 5);
    // A run of two segments has no report for the second: not gathered, said.
    let refused = singlet::invoke::invoke(
        &api.ctx,
        "table-tools",
        &json!({
            "tool": "migrate-gather", "migration": "vehicles-by-depot", "segment": 0,
            "segments": 2, "results": format!("file://{}", dir.path().display()),
        })
        .to_string(),
    )
    .await
    .unwrap_err();
    assert!(refused.contains("another run's"), "{refused}");
}

/// `migrate <name> --on-aws --dry-run`: the execution's input asks for a dry run, and an
/// execution whose segments all planned to their end without a conflict is exit 0, reported
/// as a dry run (never `complete`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_on_aws_dry_run_asks_for_one_and_reports_it() {
    let mut output: Value =
        serde_json::from_str(succeeded_output(0)["output"].as_str().unwrap()).unwrap();
    for report in output["reports"].as_array_mut().unwrap() {
        report["dryRun"] = json!(true);
        report["sample"] = json!(["VEHICLE#v1"]);
    }
    let fake = succeeding_with(&output).await;
    let (code, stdout, stderr) = on_aws(&fake, &["--json", "--dry-run"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["dryRun"], true);
    assert_eq!(report["complete"], false);
    assert_eq!(report["ended"], true);
    assert_eq!(report["sample"], json!(["VEHICLE#v1", "VEHICLE#v1"]));
    let input: Value =
        serde_json::from_str(requests_to(&fake)[0].1["input"].as_str().unwrap()).unwrap();
    assert_eq!(input["dryRun"], true);
    assert_eq!(input["survey"], false);
    assert!(
        input["run"]
            .as_str()
            .unwrap()
            .starts_with("migrate-vehicles-by-depot-"),
        "{input}"
    );
}

/// `migrate --on-aws` against a state machine that gathers: the execution's output names the
/// whole report the gathering wrote, which the command reads and prints (exit 1: conflicts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_on_aws_prints_the_report_the_state_machine_gathered() {
    let whole = json!({
        "migration": "vehicles-by-depot", "scanned": 40, "changed": 30, "alreadyChanged": 0,
        "unsettled": 0, "conflicts": (0..60).map(|i| json!({"pk": format!("VEHICLE#v{i}"), "detail": "x"})).collect::<Vec<_>>(),
        "conflictCount": 60, "complete": true, "ended": true, "dryRun": false, "sample": [],
        "peakWcuPerSecond": 12.0, "hottestKey": null, "segments": 2,
    });
    let s3 = fake_aws::s3_holding(vec![(
        "/results/migrate/run/report.json".into(),
        whole.clone(),
    )])
    .await;
    let mut listed = whole.clone();
    listed["conflicts"].as_array_mut().unwrap().truncate(50);
    listed["reportObject"] = json!("s3://results/migrate/run/report.json");
    let output = json!({"segmentCount": 2, "migrate": {"report": listed}});
    let sfn = succeeding_with(&output).await;
    let (code, stdout, stderr) = on_aws_reading(&sfn, Some(&s3), &["--json"]).await;
    assert_eq!(code, Some(1), "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report["conflicts"].as_array().unwrap().len(),
        60,
        "the whole report"
    );
    assert_eq!(report["status"], "SUCCEEDED");
    let reads: Vec<String> = s3.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(reads, ["/results/migrate/run/report.json"]);
}
