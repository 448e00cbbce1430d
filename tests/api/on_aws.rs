//! `export --s3` and `load --s3` (docs/API.md, "The tools on AWS"). (`load <dir>` of an export
//! DynamoDB wrote to S3, copied down: `s3_layout`.)
//!
//! No engine on this machine has DynamoDB's export to S3 or import from S3, so the tests put a
//! front door before the embedded engine that plays those calls as DynamoDB answers them
//! (`ExportTableToPointInTime`, `DescribeExport`, `ListExports`, `ImportTable`,
//! `DescribeImport`, `ListImports`: their JSON, their errors, their `ClientToken` idempotency,
//! a throttle or a `500` when told) and hands every other call to the engine, so that the
//! tools' own work around them (`DescribeTable`, the outbox deletes, the stream and TTL
//! switched on) runs on a real engine. The "bucket" is a directory: an export the front door
//! completes is written there as DynamoDB lays one out in S3, and an import reads what is there.
//! The SDK speaks to it over its real HTTP stack, with its real retries, from the library and
//! from the `singlet` binary alike.

use crate::harness::Api;
use crate::process::singlet;
use crate::s3_layout::{BUCKET, as_dynamodb_lays_it_out, key, table_arn};
use crate::transfer::{a_copy_of, dump, filled, is_outbox, scratch};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use singlet::serve::engine;
use singlet_tools::{on_aws, transfer};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The calls the front door answers itself; every other one reaches the engine.
const PLAYED: [&str; 6] = [
    "ExportTableToPointInTime",
    "DescribeExport",
    "ListExports",
    "ImportTable",
    "DescribeImport",
    "ListImports",
];

/// How one describe of a running export or import answers.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    Running,
    /// `400 ThrottlingException`: the SDK retries it.
    Throttled,
    /// `500 InternalServerError`: the SDK retries it.
    ServerError,
}

/// How an export or import ends once its steps are told.
#[derive(Debug, Clone, Copy, PartialEq)]
enum End {
    Completed,
    Failed(&'static str, &'static str),
    /// An import cancelled: `CANCELLING` once, then `CANCELLED`.
    Cancelled,
}

/// What the front door does with each export and import.
#[derive(Debug, Clone)]
struct Plan {
    describes: Vec<Step>,
    end: End,
    /// Starts applied but answered `500`, as a reply lost on its way back: the SDK sends the
    /// start again, with the same `ClientToken`.
    lost_starts: usize,
    /// Items of each import it fails to import (the last ones it reads).
    import_errors: i64,
    /// Every start refused with this error code.
    refuse_starts: Option<&'static str>,
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            describes: vec![Step::Running],
            end: End::Completed,
            lost_starts: 0,
            import_errors: 0,
            refuse_starts: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Export,
    Import,
}

struct Job {
    kind: Kind,
    token: String,
    steps: VecDeque<Step>,
    /// Its `ExportDescription` or `ImportTableDescription`.
    description: Value,
    ended: bool,
}

struct Played {
    /// Every call the front door answered itself: its operation and body.
    calls: Vec<(String, Value)>,
    jobs: Vec<Job>,
    plan: Plan,
    lost_starts: usize,
}

#[derive(Clone)]
struct Door {
    engine: String,
    http: reqwest::Client,
    /// A client of the engine itself, for the front door's own work.
    client: aws_sdk_dynamodb::Client,
    bucket_root: PathBuf,
    played: Arc<tokio::sync::Mutex<Played>>,
}

/// DynamoDB's export and import before an engine.
struct FakeAws {
    url: String,
    door: Door,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeAws {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeAws {
    async fn start(engine: &str, name: &str, plan: Plan) -> Self {
        let bucket_root = scratch(&format!("on-aws-{name}"));
        std::fs::create_dir_all(bucket_root.join(BUCKET)).unwrap();
        let door = Door {
            engine: engine.trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            client: engine::local_client(engine),
            bucket_root,
            played: Arc::new(tokio::sync::Mutex::new(Played {
                calls: Vec::new(),
                jobs: Vec::new(),
                lost_starts: plan.lost_starts,
                plan,
            })),
        };
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(door.clone());
        let (url, server) = crate::harness::serve_on_loopback(app).await;
        Self { url, door, server }
    }

    /// A client of DynamoDB as the tools get one: the SDK's HTTP stack, timeouts and retries.
    fn client(&self) -> aws_sdk_dynamodb::Client {
        engine::local_client(&self.url)
    }

    /// `export --s3` of `table` to the test bucket's `prefix`, followed with no wait.
    async fn export(&self, table: &str, prefix: &str) -> Result<on_aws::ExportReport, String> {
        on_aws::export_to_s3(&self.client(), table, &to(prefix), &fast()).await
    }

    /// `load --s3` into the new `table` of the export under `url_rest`, with the tests' settings.
    async fn import(&self, table: &str, url_rest: &str) -> Result<on_aws::ImportReport, String> {
        on_aws::import_from_s3(&self.client(), table, &from(url_rest), &settings()).await
    }

    /// The calls made of `operation`, their bodies.
    async fn calls(&self, operation: &str) -> Vec<Value> {
        self.door
            .played
            .lock()
            .await
            .calls
            .iter()
            .filter(|(op, _)| op == operation)
            .map(|(_, body)| body.clone())
            .collect()
    }

    async fn jobs(&self, kind: Kind) -> usize {
        self.door
            .played
            .lock()
            .await
            .jobs
            .iter()
            .filter(|j| j.kind == kind)
            .count()
    }

    async fn replan(&self, plan: Plan) {
        let mut played = self.door.played.lock().await;
        played.lost_starts = plan.lost_starts;
        played.plan = plan;
    }

    /// The bucket's directory.
    fn bucket(&self) -> PathBuf {
        self.door.bucket_root.join(BUCKET)
    }
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn reply(status: u16, body: Value) -> (StatusCode, HeaderMap, Bytes) {
    let mut headers = HeaderMap::new();
    headers.insert(
        "content-type",
        "application/x-amz-json-1.0".parse().unwrap(),
    );
    (
        StatusCode::from_u16(status).unwrap(),
        headers,
        Bytes::from(body.to_string()),
    )
}

/// DynamoDB's error answer: `__type` names it, as the SDK reads it.
fn error(status: u16, code: &str, message: &str) -> (StatusCode, HeaderMap, Bytes) {
    reply(
        status,
        json!({"__type": format!("com.amazonaws.dynamodb.v20120810#{code}"), "message": message}),
    )
}

fn table_of(arn: &str) -> &str {
    arn.split("table/")
        .nth(1)
        .unwrap_or_default()
        .split('/')
        .next()
        .unwrap_or_default()
}

async fn answer(
    State(door): State<Door>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, HeaderMap, Bytes) {
    let operation = headers
        .get("x-amz-target")
        .and_then(|t| t.to_str().ok())
        .and_then(|t| t.strip_prefix("DynamoDB_20120810."))
        .unwrap_or_default()
        .to_owned();
    if !PLAYED.contains(&operation.as_str()) {
        return forward(&door, headers, body).await;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or_default();
    let mut played = door.played.lock().await;
    played.calls.push((operation.clone(), request.clone()));
    match operation.as_str() {
        "ExportTableToPointInTime" | "ImportTable" => {
            if let Some(code) = played.plan.refuse_starts {
                return error(400, code, "refused, as told");
            }
            let kind = match operation.as_str() {
                "ImportTable" => Kind::Import,
                _ => Kind::Export,
            };
            let token = request["ClientToken"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let existing = played
                .jobs
                .iter()
                .position(|j| j.kind == kind && j.token == token && !token.is_empty());
            let at = match existing {
                Some(at) => at,
                None => {
                    if kind == Kind::Import {
                        let table = request["TableCreationParameters"]["TableName"]
                            .as_str()
                            .unwrap_or_default();
                        if singlet_functions::table::table_exists(&door.client, table)
                            .await
                            .unwrap()
                        {
                            return error(400, "ResourceInUseException", "Table already exists");
                        }
                    }
                    let n = played.jobs.len();
                    let description = match kind {
                        Kind::Export => {
                            let id = format!("0170000000{n:04}-{:08x}", 0xab00 + n);
                            json!({
                                "ExportArn": format!("{}/export/{id}", request["TableArn"].as_str().unwrap()),
                                "ExportStatus": "IN_PROGRESS",
                                "TableArn": request["TableArn"],
                                "S3Bucket": request["S3Bucket"],
                                "S3Prefix": request["S3Prefix"],
                                "ExportFormat": request["ExportFormat"],
                                "ExportType": request["ExportType"],
                                "ClientToken": token,
                                "StartTime": now(),
                                "ExportTime": now(),
                            })
                        }
                        Kind::Import => {
                            let table = request["TableCreationParameters"]["TableName"]
                                .as_str()
                                .unwrap();
                            let table_arn =
                                format!("arn:aws:dynamodb:us-east-1:000000000000:table/{table}");
                            json!({
                                "ImportArn": format!("{table_arn}/import/0170000000{n:04}-{:08x}", 0xcd00 + n),
                                "ImportStatus": "IN_PROGRESS",
                                "TableArn": table_arn,
                                "ClientToken": token,
                                "S3BucketSource": request["S3BucketSource"],
                                "InputFormat": request["InputFormat"],
                                "InputCompressionType": request["InputCompressionType"],
                                "TableCreationParameters": request["TableCreationParameters"],
                                "StartTime": now(),
                                "ProcessedItemCount": 0,
                                "ImportedItemCount": 0,
                                "ErrorCount": 0,
                                "CloudWatchLogGroupArn": "arn:aws:logs:us-east-1:000000000000:log-group:/aws-dynamodb/imports:*",
                            })
                        }
                    };
                    let steps = played.plan.describes.iter().copied().collect();
                    played.jobs.push(Job {
                        kind,
                        token,
                        steps,
                        description,
                        ended: false,
                    });
                    n
                }
            };
            if played.lost_starts > 0 {
                played.lost_starts -= 1;
                return error(500, "InternalServerError", "the reply was lost");
            }
            let field = match kind {
                Kind::Export => "ExportDescription",
                Kind::Import => "ImportTableDescription",
            };
            reply(200, json!({ field: played.jobs[at].description }))
        }
        "DescribeExport" | "DescribeImport" => {
            let (kind, arn_field, field, missing) = match operation.as_str() {
                "DescribeExport" => (
                    Kind::Export,
                    "ExportArn",
                    "ExportDescription",
                    "ExportNotFoundException",
                ),
                _ => (
                    Kind::Import,
                    "ImportArn",
                    "ImportTableDescription",
                    "ImportNotFoundException",
                ),
            };
            let arn = request[arn_field].as_str().unwrap_or_default();
            let Some(at) = played
                .jobs
                .iter()
                .position(|j| j.kind == kind && j.description[arn_field] == arn)
            else {
                return error(400, missing, "no such job");
            };
            let plan = played.plan.clone();
            let job = &mut played.jobs[at];
            if !job.ended {
                match job.steps.pop_front() {
                    Some(Step::Running) => {
                        if let Some(n) = job.description["ProcessedItemCount"].as_i64() {
                            job.description["ProcessedItemCount"] = json!(n + 1);
                        }
                    }
                    Some(Step::Throttled) => {
                        return error(
                            400,
                            "ThrottlingException",
                            "Rate of requests exceeds the allowed throughput.",
                        );
                    }
                    Some(Step::ServerError) => {
                        return error(500, "InternalServerError", "Internal server error");
                    }
                    None => end(&door, job, plan).await,
                }
            }
            reply(200, json!({ field: job.description }))
        }
        "ListExports" => {
            let summaries: Vec<Value> = played
                .jobs
                .iter()
                .filter(|j| j.kind == Kind::Export)
                .map(|j| {
                    json!({
                        "ExportArn": j.description["ExportArn"],
                        "ExportStatus": j.description["ExportStatus"],
                        "ExportType": j.description["ExportType"],
                    })
                })
                .collect();
            reply(200, json!({ "ExportSummaries": summaries }))
        }
        "ListImports" => {
            let table = table_of(request["TableArn"].as_str().unwrap_or_default()).to_owned();
            let summaries: Vec<Value> = played
                .jobs
                .iter()
                .filter(|j| {
                    j.kind == Kind::Import
                        && table_of(j.description["TableArn"].as_str().unwrap()) == table
                })
                .map(|j| {
                    json!({
                        "ImportArn": j.description["ImportArn"],
                        "ImportStatus": j.description["ImportStatus"],
                        "TableArn": j.description["TableArn"],
                    })
                })
                .collect();
            reply(200, json!({ "ImportSummaryList": summaries }))
        }
        _ => unreachable!(),
    }
}

/// Ends `job` as `plan` says: an export completed is written into the bucket as DynamoDB lays
/// one out; an import completed creates its table from its `TableCreationParameters` (with no
/// stream and no TTL, as `ImportTable` makes it) and writes every item under its key prefix.
async fn end(door: &Door, job: &mut Job, plan: Plan) {
    let status = match job.kind {
        Kind::Export => "ExportStatus",
        Kind::Import => "ImportStatus",
    };
    job.description["EndTime"] = json!(now());
    match plan.end {
        End::Failed(code, message) => {
            job.description[status] = json!("FAILED");
            job.description["FailureCode"] = json!(code);
            job.description["FailureMessage"] = json!(message);
            job.ended = true;
        }
        End::Cancelled => {
            if job.description[status] == "CANCELLING" {
                job.description[status] = json!("CANCELLED");
                job.ended = true;
            } else {
                job.description[status] = json!("CANCELLING");
            }
        }
        End::Completed => {
            match job.kind {
                Kind::Export => complete_export(door, &mut job.description).await,
                Kind::Import => {
                    complete_import(door, &mut job.description, plan.import_errors).await
                }
            }
            job.description[status] = json!("COMPLETED");
            job.ended = true;
        }
    }
}

async fn complete_export(door: &Door, description: &mut Value) {
    let table_arn = description["TableArn"].as_str().unwrap().to_owned();
    let arn = description["ExportArn"].as_str().unwrap().to_owned();
    let id = arn.rsplit('/').next().unwrap().to_owned();
    let local = door.bucket_root.join(format!("local-{id}"));
    transfer::export(&door.client, table_of(&table_arn), &local, 2, &|item| item)
        .await
        .unwrap();
    let prefix = description["S3Prefix"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let laid_out = as_dynamodb_lays_it_out(
        &local,
        &door
            .bucket_root
            .join(description["S3Bucket"].as_str().unwrap()),
        &prefix,
        &id,
        &table_arn,
    );
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(laid_out.join("manifest-summary.json")).unwrap(),
    )
    .unwrap();
    description["ItemCount"] = summary["itemCount"].clone();
    description["BilledSizeBytes"] = summary["billedSizeBytes"].clone();
    description["ExportManifest"] = json!(key(
        &prefix,
        &format!("AWSDynamoDB/{id}/manifest-summary.json")
    ));
}

async fn complete_import(door: &Door, description: &mut Value, errors: i64) {
    let parameters = description["TableCreationParameters"].clone();
    let table = parameters["TableName"].as_str().unwrap().to_owned();
    let created = engine_call(door, "CreateTable", &parameters).await;
    assert_eq!(
        created.0, 200,
        "the engine creates the table: {}",
        created.1
    );
    let source = &description["S3BucketSource"];
    let under = door
        .bucket_root
        .join(source["S3Bucket"].as_str().unwrap())
        .join(source["S3KeyPrefix"].as_str().unwrap_or_default());
    let mut files = Vec::new();
    every_file(&under, &mut files);
    files.sort();
    let mut items = Vec::new();
    let mut bytes = 0;
    for file in files {
        bytes += std::fs::metadata(&file).unwrap().len();
        items.extend(transfer::read_items(&file).unwrap().map(Result::unwrap));
    }
    let processed = items.len() as i64;
    items.truncate(items.len() - errors as usize);
    let imported = items.len() as i64;
    for chunk in items.chunks(25) {
        singlet_functions::store::bulk::put_batch(&door.client, &table, chunk.to_vec())
            .await
            .unwrap();
    }
    description["ProcessedItemCount"] = json!(processed);
    description["ImportedItemCount"] = json!(imported);
    description["ErrorCount"] = json!(errors);
    description["ProcessedSizeBytes"] = json!(bytes);
}

fn every_file(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            every_file(&path, files);
        } else {
            files.push(path);
        }
    }
}

/// One call straight to the engine, as JSON (any signature does: dynoxide checks that one is
/// there, not what it signs).
async fn engine_call(door: &Door, operation: &str, body: &Value) -> (u16, String) {
    let response = door
        .http
        .post(&door.engine)
        .header("content-type", "application/x-amz-json-1.0")
        .header("x-amz-target", format!("DynamoDB_20120810.{operation}"))
        .header("x-amz-date", "20250101T000000Z")
        .header(
            "authorization",
            "AWS4-HMAC-SHA256 Credential=local/20250101/us-east-1/dynamodb/aws4_request, \
             SignedHeaders=host;x-amz-date, Signature=00",
        )
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (
        response.status().as_u16(),
        response.text().await.unwrap_or_default(),
    )
}

async fn forward(door: &Door, headers: HeaderMap, body: Bytes) -> (StatusCode, HeaderMap, Bytes) {
    let mut request = door.http.post(&door.engine).body(body);
    for (name, value) in &headers {
        if name != "host" && name != "content-length" {
            request = request.header(name, value);
        }
    }
    let response = request.send().await.expect("the engine answers");
    let status = response.status();
    let mut answer_headers = HeaderMap::new();
    for (name, value) in response.headers() {
        if name != "content-length" && name != "transfer-encoding" && name != "connection" {
            answer_headers.insert(name, value.clone());
        }
    }
    (status, answer_headers, response.bytes().await.unwrap())
}

fn fast() -> on_aws::Follow {
    on_aws::Follow {
        poll: Duration::from_millis(10),
        shown: false,
        describe_failures: 3,
    }
}

fn settings() -> on_aws::ImportSettings {
    on_aws::ImportSettings {
        follow: fast(),
        segments: 3,
        ..on_aws::ImportSettings::default()
    }
}

fn to(prefix: &str) -> on_aws::S3Location {
    on_aws::S3Location::parse(&format!("s3://{BUCKET}/{prefix}")).unwrap()
}

fn from(url_rest: &str) -> on_aws::ExportSource {
    on_aws::ExportSource::parse(&format!("s3://{BUCKET}/{url_rest}")).unwrap()
}

// ---- export --s3 ------------------------------------------------------------------------------

/// The export is asked for the table's ARN, into the bucket and prefix, in DynamoDB JSON, whole,
/// with a `ClientToken`; followed through a throttled and a failing describe (the SDK retries
/// both) to its end; and its summary is what DynamoDB said, the manifest where DynamoDB puts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_is_asked_for_the_table_and_followed_to_its_end() {
    let api = filled().await;
    let original = dump(api.all_items().await);
    let plan = Plan {
        describes: vec![
            Step::Running,
            Step::Throttled,
            Step::ServerError,
            Step::Running,
        ],
        ..Plan::default()
    };
    let aws = FakeAws::start(&api.engine, "export", plan).await;
    let report = aws.export(&api.ctx.table, "nightly/prod").await.unwrap();

    let started = aws.calls("ExportTableToPointInTime").await;
    assert_eq!(started.len(), 1);
    let arn = table_arn(&api.ctx.db, &api.ctx.table).await;
    assert_eq!(started[0]["TableArn"], arn);
    assert_eq!(started[0]["S3Bucket"], BUCKET);
    assert_eq!(started[0]["S3Prefix"], "nightly/prod");
    assert_eq!(started[0]["ExportFormat"], "DYNAMODB_JSON");
    assert_eq!(started[0]["ExportType"], "FULL_EXPORT");
    let token = started[0]["ClientToken"].as_str().unwrap();
    assert_eq!(
        token,
        on_aws::client_token("export", &[&arn, BUCKET, "nightly/prod"])
    );
    // Four steps (two of them retried by the SDK within one describe) and the end.
    assert_eq!(aws.calls("DescribeExport").await.len(), 5);

    assert!(report.completed(), "{report:?}");
    assert_eq!(report.status, "COMPLETED");
    assert_eq!(report.items, Some(original.len() as i64));
    assert!(report.billed_bytes.unwrap() > 0);
    let id = &report.export_id;
    assert_eq!(
        report.export,
        format!("s3://{BUCKET}/nightly/prod/AWSDynamoDB/{id}")
    );
    assert_eq!(
        report.manifest,
        format!("s3://{BUCKET}/nightly/prod/AWSDynamoDB/{id}/manifest-summary.json")
    );
    assert_eq!(report.export_arn, format!("{arn}/export/{id}"));
    assert!(!report.started_earlier);
    assert!(report.failure_code.is_none());
}

/// A start whose reply was lost is sent again by the SDK with the same `ClientToken`, and
/// DynamoDB applies it once; the command run again (the operator's retry) asks with the same
/// token and follows the same export.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_sent_again_is_applied_once() {
    let api = filled().await;
    let plan = Plan {
        lost_starts: 1,
        ..Plan::default()
    };
    let aws = FakeAws::start(&api.engine, "retried", plan).await;
    let first = aws.export(&api.ctx.table, "x").await.unwrap();
    let again = aws.export(&api.ctx.table, "x").await.unwrap();
    let starts = aws.calls("ExportTableToPointInTime").await;
    assert_eq!(
        starts.len(),
        3,
        "one lost, sent again, and the command again"
    );
    let tokens: Vec<&Value> = starts.iter().map(|s| &s["ClientToken"]).collect();
    assert!(tokens.iter().all(|t| *t == tokens[0]), "{tokens:?}");
    assert_eq!(aws.jobs(Kind::Export).await, 1, "applied once");
    assert_eq!(first.export_arn, again.export_arn);
    assert!(!first.started_earlier && again.started_earlier);
    // Another prefix is another question: another token, another export.
    aws.export(&api.ctx.table, "y").await.unwrap();
    assert_eq!(aws.jobs(Kind::Export).await, 2);
}

/// An export that ends `FAILED` is a report with DynamoDB's code and message, not an error;
/// one that cannot start, or cannot be followed, is an error that says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_export_says_why_and_one_that_cannot_run_says_so() {
    let api = filled().await;
    let plan = Plan {
        end: End::Failed("S3AccessDenied", "Access Denied"),
        ..Plan::default()
    };
    let aws = FakeAws::start(&api.engine, "failed", plan).await;
    let report = aws.export(&api.ctx.table, "x").await.unwrap();
    assert!(!report.completed());
    assert_eq!(report.status, "FAILED");
    assert_eq!(report.failure_code.as_deref(), Some("S3AccessDenied"));
    assert_eq!(report.failure_message.as_deref(), Some("Access Denied"));
    assert!(
        !aws.bucket().join("x").exists(),
        "a failed export wrote nothing"
    );

    let missing = aws.export("nowhere", "x").await.unwrap_err();
    assert!(missing.contains("there is no table nowhere"), "{missing}");

    aws.replan(Plan {
        refuse_starts: Some("PointInTimeRecoveryUnavailableException"),
        ..Plan::default()
    })
    .await;
    let refused = aws.export(&api.ctx.table, "z").await.unwrap_err();
    assert!(
        refused.contains("point-in-time recovery is off"),
        "{refused}"
    );
    aws.replan(Plan {
        refuse_starts: Some("AccessDeniedException"),
        ..Plan::default()
    })
    .await;
    let denied = aws.export(&api.ctx.table, "z").await.unwrap_err();
    assert!(denied.contains("IAM permissions"), "{denied}");

    // A describe failing every time (each after the SDK's own retries): after `describe_failures`
    // in a row the run stops following, and says the export goes on.
    aws.replan(Plan {
        describes: vec![Step::ServerError; 20],
        ..Plan::default()
    })
    .await;
    let lost = aws.export(&api.ctx.table, "w").await.unwrap_err();
    assert!(lost.contains("the export goes on in DynamoDB"), "{lost}");
}

// ---- load --s3 --------------------------------------------------------------------------------

/// The key schema, attribute definitions and indexes of `singlet_shared::schema`, as DynamoDB's
/// JSON spells them: what `ImportTable` must be asked to create.
fn schema_as_json() -> (Value, Value, Value) {
    use singlet_shared::schema::{INDEXES, PK, Projection, SK, key_attributes};
    let keys = |pk: &str, sk: &str| json!([{"AttributeName": pk, "KeyType": "HASH"}, {"AttributeName": sk, "KeyType": "RANGE"}]);
    let attributes: Vec<Value> = key_attributes()
        .into_iter()
        .map(|name| json!({"AttributeName": name, "AttributeType": "S"}))
        .collect();
    let indexes: Vec<Value> = INDEXES
        .iter()
        .map(|index| {
            json!({
                "IndexName": index.name,
                "KeySchema": keys(index.pk, index.sk),
                "Projection": {"ProjectionType": match index.projection {
                    Projection::All => "ALL",
                    Projection::KeysOnly => "KEYS_ONLY",
                }},
            })
        })
        .collect();
    (keys(PK, SK), json!(attributes), json!(indexes))
}

/// Every record on `table`'s stream, from its start.
async fn stream_records(api: &Api, table: &str) -> usize {
    let streams = engine::streams_client(&api.ctx.db, &api.engine).await;
    let listed = streams
        .list_streams()
        .table_name(table)
        .send()
        .await
        .unwrap();
    let mut records = 0;
    for stream in listed.streams() {
        let arn = stream.stream_arn().unwrap();
        let described = streams
            .describe_stream()
            .stream_arn(arn)
            .send()
            .await
            .unwrap();
        for shard in described.stream_description().unwrap().shards() {
            let mut iterator = streams
                .get_shard_iterator()
                .stream_arn(arn)
                .shard_id(shard.shard_id().unwrap())
                .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
                .send()
                .await
                .unwrap()
                .shard_iterator;
            while let Some(at) = iterator {
                let page = streams
                    .get_records()
                    .shard_iterator(at)
                    .send()
                    .await
                    .unwrap();
                records += page.records().len();
                if page.records().is_empty() {
                    break;
                }
                iterator = page.next_shard_iterator;
            }
        }
    }
    records
}

/// `load --s3` end to end: the export found among the account's exports, `ImportTable` asked
/// for the model's table (keys, attributes, indexes) from the export's data files, gzipped
/// DynamoDB JSON, with a `ClientToken`; followed through a throttle to its end; then the outbox
/// items deleted while no stream records them, and only then the stream and TTL switched on.
/// The copy holds what `load <dir>` writes, answers as the original, and its stream is empty:
/// it publishes nothing again. Run again, the command follows the same import and finds
/// nothing left to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_makes_the_models_table_then_deletes_the_outbox_before_the_stream_is_on() {
    let api = filled().await;
    let original = dump(api.all_items().await);
    let outbox = original.iter().filter(|i| is_outbox(i)).count();
    assert!(outbox > 0, "the table holds outbox items");
    let plan = Plan {
        describes: vec![Step::Running, Step::Throttled, Step::Running],
        ..Plan::default()
    };
    let aws = FakeAws::start(&api.engine, "import", plan).await;
    let copy = api.table_beside("copy");
    let exported = aws.export(&api.ctx.table, "restore").await.unwrap();

    let report = aws.import(&copy, "restore").await.unwrap();

    let imports = aws.calls("ImportTable").await;
    assert_eq!(imports.len(), 1);
    let asked = &imports[0];
    let data = format!("restore/AWSDynamoDB/{}/data/", exported.export_id);
    assert_eq!(
        asked["S3BucketSource"],
        json!({"S3Bucket": BUCKET, "S3KeyPrefix": data})
    );
    assert_eq!(asked["InputFormat"], "DYNAMODB_JSON");
    assert_eq!(asked["InputCompressionType"], "GZIP");
    assert_eq!(asked["ClientToken"].as_str().unwrap().len(), 32);
    let parameters = &asked["TableCreationParameters"];
    let (keys, attributes, indexes) = schema_as_json();
    assert_eq!(parameters["TableName"], copy.as_str());
    assert_eq!(parameters["KeySchema"], keys);
    assert_eq!(parameters["AttributeDefinitions"], attributes);
    assert_eq!(parameters["GlobalSecondaryIndexes"], indexes);
    assert_eq!(parameters["BillingMode"], "PAY_PER_REQUEST");
    assert!(parameters.get("StreamSpecification").is_none());

    assert_eq!(report.status, "COMPLETED");
    assert!(report.whole(), "{report:?}");
    assert_eq!(report.export_id, exported.export_id);
    assert_eq!(report.export_items, Some(original.len() as i64));
    assert_eq!(report.imported_items, original.len() as i64);
    assert_eq!(report.source, format!("s3://{BUCKET}/{data}"));
    let finished = report.finished.clone().unwrap();
    assert_eq!(finished.outbox_deleted, outbox as u64);
    assert!(finished.stream_switched_on && finished.ttl_switched_on);
    // Paced per key as every bulk tool is: an outbox item is in no index.
    let hottest = finished.hottest_key.clone().unwrap();
    assert_eq!(hottest.index, None);
    assert!(hottest.peak_wcu_per_second <= singlet_functions::store::pace::DEFAULT_MAX_KEY_WCU);

    // The copy: every item but the outbox's, its indexes answering as the original's.
    let client = api.ctx.db.clone();
    a_copy_of(&api, &original, client.clone(), &copy).await;
    let described = client
        .describe_table()
        .table_name(&copy)
        .send()
        .await
        .unwrap()
        .table
        .unwrap();
    let stream = described.stream_specification().unwrap();
    assert!(stream.stream_enabled());
    assert_eq!(
        stream.stream_view_type().map(|v| v.as_str()),
        Some("NEW_AND_OLD_IMAGES")
    );
    let ttl = client
        .describe_time_to_live()
        .table_name(&copy)
        .send()
        .await
        .unwrap();
    let ttl = ttl.time_to_live_description().unwrap();
    assert_eq!(
        ttl.time_to_live_status().map(|s| s.as_str()),
        Some("ENABLED")
    );
    assert_eq!(ttl.attribute_name(), Some("expiresAt"));
    assert_eq!(
        stream_records(&api, &copy).await,
        0,
        "the outbox went before the stream was on: nothing to publish"
    );

    // The same command again: the import it started is followed, nothing is started or done twice.
    let again = aws.import(&copy, "restore").await.unwrap();
    assert_eq!(aws.calls("ImportTable").await.len(), 1);
    assert!(again.started_earlier);
    assert_eq!(again.import_arn, report.import_arn);
    assert_eq!(
        again.finished,
        Some(on_aws::Finished {
            outbox_deleted: 0,
            hottest_key: None,
            stream_switched_on: false,
            ttl_switched_on: false,
        })
    );
}

/// An import that fails or is cancelled is reported with DynamoDB's reason, and nothing is
/// switched on; one that completed but could not import every line is not whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_cancelled_or_partial_import_is_reported_as_such() {
    let api = filled().await;
    let aws = FakeAws::start(&api.engine, "import-ends", Plan::default()).await;
    aws.export(&api.ctx.table, "e").await.unwrap();

    aws.replan(Plan {
        end: End::Failed("InvalidS3Object", "The S3 object could not be read"),
        ..Plan::default()
    })
    .await;
    let failed = aws.import(&api.table_beside("failed"), "e").await.unwrap();
    assert_eq!(failed.status, "FAILED");
    assert_eq!(failed.failure_code.as_deref(), Some("InvalidS3Object"));
    assert!(failed.finished.is_none() && !failed.whole());

    aws.replan(Plan {
        end: End::Cancelled,
        ..Plan::default()
    })
    .await;
    let cancelled = aws
        .import(&api.table_beside("cancelled"), "e")
        .await
        .unwrap();
    assert_eq!(cancelled.status, "CANCELLED");
    assert!(cancelled.finished.is_none() && !cancelled.whole());

    aws.replan(Plan {
        import_errors: 2,
        ..Plan::default()
    })
    .await;
    let partial = aws.import(&api.table_beside("partial"), "e").await.unwrap();
    assert_eq!(partial.status, "COMPLETED");
    assert_eq!(partial.errors, 2);
    assert_eq!(partial.imported_items + 2, partial.export_items.unwrap());
    assert!(partial.finished.is_some() && !partial.whole());
    assert!(partial.log_group.is_some());
}

/// A table that exists, and that no import of this command made, is refused before
/// `ImportTable`; an export that cannot be told (none under the prefix, several, not completed)
/// is refused with what to name; one named by an id this account does not list is taken as named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_is_refused_an_existing_table_and_an_export_it_cannot_tell() {
    let api = filled().await;
    let aws = FakeAws::start(&api.engine, "import-refusals", Plan::default()).await;
    let (copy, other) = (api.table_beside("copy"), api.table_beside("other"));
    let first = aws.export(&api.ctx.table, "two").await.unwrap();

    let exists = aws.import(&api.ctx.table, "two").await.unwrap_err();
    assert!(
        exists.contains(&format!("the table {} exists", api.ctx.table)),
        "{exists}"
    );
    assert!(aws.calls("ImportTable").await.is_empty());

    let none = aws.import(&copy, "nothing-here").await.unwrap_err();
    assert!(none.contains("no completed export"), "{none}");
    assert!(none.contains("AWSDynamoDB/<exportId>"), "{none}");

    // A second export under the same prefix: of another table here, another question, so
    // another token and another export (the same table exported again later is the usual case).
    singlet_functions::table::ensure_table(&api.ctx.db, &other)
        .await
        .unwrap();
    let second = aws.export(&other, "two").await.unwrap();
    let several = aws.import(&copy, "two").await.unwrap_err();
    assert!(several.contains("2 completed exports"), "{several}");
    assert!(
        several.contains(&first.export_id) && several.contains(&second.export_id),
        "{several}"
    );
    assert!(aws.calls("ImportTable").await.is_empty());
    // Named, it loads.
    let named = on_aws::import_from_s3(
        &aws.client(),
        &copy,
        &from(&format!("two/AWSDynamoDB/{}", first.export_id)),
        &settings(),
    )
    .await
    .unwrap();
    assert!(named.whole(), "{named:?}");

    // An export the account does not list (another account's, or older than 90 days): taken by
    // its id, its count unknown.
    let unlisted = on_aws::find_export(
        &aws.client(),
        &from("elsewhere/AWSDynamoDB/01600000000000-00000000"),
    )
    .await
    .unwrap();
    assert_eq!(unlisted.items, None);
    assert_eq!(
        unlisted.data_prefix,
        "elsewhere/AWSDynamoDB/01600000000000-00000000/data/"
    );
}

// ---- The CLI ----------------------------------------------------------------------------------

/// `singlet <args>` run beside the test's runtime (which serves the front door), its output.
async fn run(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || singlet().args(args).output().unwrap())
        .await
        .unwrap()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// A URL that is not an export's place, or what DynamoDB's engines cannot do, is refused with
/// exit 2 before any call: the endpoint named here has nothing listening, and the message is the
/// URL's, not a connection's.
#[test]
fn the_cli_refuses_a_bad_s3_url_and_what_aws_cannot_do_with_exit_2() {
    let nowhere = "http://127.0.0.1:9";
    for (command, url, says) in [
        ("export", "my-bucket/x", "does not start with s3://"),
        ("export", "s3://", "names no bucket"),
        ("export", "s3://My Bucket/x", "not a bucket name"),
        ("export", "s3://b-1/a//b", "empty, '.' or '..' part"),
        (
            "load",
            "https://b-1.s3.amazonaws.com/x",
            "does not start with s3://",
        ),
        ("load", "s3://b-1/x/AWSDynamoDB", "no export id"),
        (
            "load",
            "s3://b-1/x/AWSDynamoDB/0170-ab/data/f.json.gz",
            "only data/",
        ),
    ] {
        let output = singlet()
            .args(["--endpoint", nowhere, command, "--s3", url])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{command} {url}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{command} {url}: {stderr}");
    }
    for (list, says) in [
        (
            vec!["export", "--s3", "s3://b-1/x", "--anonymise"],
            "--anonymise is not done on AWS",
        ),
        (
            vec!["load", "--s3", "s3://b-1/x", "--keep-outbox"],
            "--keep-outbox is not done on AWS",
        ),
        (
            vec!["load", "--s3", "s3://b-1/x", "--owner-locks", "rekeyed"],
            "--owner-locks rekeyed is not done on AWS",
        ),
        (
            vec!["export", "--s3", "s3://b-1/x", "./dir"],
            "cannot be used with",
        ),
        (
            vec!["load", "--s3", "s3://b-1/x", "--poll", "0"],
            "not a poll interval",
        ),
    ] {
        let output = singlet()
            .args(["--endpoint", nowhere])
            .args(&list)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{list:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{list:?}: {stderr}");
    }
}

/// The binary end to end against the front door: `export --s3` exits 0 with its summary as one
/// JSON object, `load --s3` 0 with its own; a failed export exits 1 saying DynamoDB's reason;
/// a table that is not there exits 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_exports_and_loads_on_aws_with_exit_codes_and_json() {
    let api = filled().await;
    let original = dump(api.all_items().await);
    let aws = FakeAws::start(&api.engine, "cli", Plan::default()).await;
    let on = |rest: &[&str]| {
        let mut all = args(&["--endpoint", &aws.url, "--table"]);
        all.extend(args(rest));
        all
    };
    // `--table <table> <command> --s3 <url> --poll 0.01 <more>`.
    let on_s3 = |table: &str, command: &str, url: &str, more: &[&str]| {
        let mut rest = vec![table, command, "--s3", url, "--poll", "0.01"];
        rest.extend_from_slice(more);
        on(&rest)
    };

    let exported = run(on_s3(
        &api.ctx.table,
        "export",
        "s3://singlet-exports/cli",
        &["--json"],
    ))
    .await;
    assert_eq!(exported.status.code(), Some(0), "{exported:?}");
    let summary: Value = serde_json::from_slice(&exported.stdout).unwrap();
    assert_eq!(summary["status"], "COMPLETED");
    assert_eq!(summary["items"], original.len());
    let export = summary["export"].as_str().unwrap().to_owned();
    assert!(
        export.starts_with("s3://singlet-exports/cli/AWSDynamoDB/"),
        "{export}"
    );
    assert!(
        summary["manifest"]
            .as_str()
            .unwrap()
            .ends_with("/manifest-summary.json")
    );

    let loaded = run(on_s3(
        &api.table_beside("copy"),
        "load",
        &export,
        &["--json"],
    ))
    .await;
    assert_eq!(loaded.status.code(), Some(0), "{loaded:?}");
    let summary: Value = serde_json::from_slice(&loaded.stdout).unwrap();
    assert_eq!(summary["status"], "COMPLETED");
    assert_eq!(summary["importedItems"], original.len());
    assert_eq!(
        summary["finished"]["outboxDeleted"],
        original.iter().filter(|i| is_outbox(i)).count()
    );
    assert_eq!(summary["finished"]["streamSwitchedOn"], true);

    let human = run(on_s3(&api.table_beside("copy2"), "load", &export, &[])).await;
    assert_eq!(human.status.code(), Some(0), "{human:?}");
    let said = String::from_utf8_lossy(&human.stderr);
    assert!(
        said.contains("COMPLETED") && said.contains("outbox items deleted"),
        "{said}"
    );

    let missing = run(on_s3("nowhere", "export", "s3://singlet-exports/cli", &[])).await;
    assert_eq!(missing.status.code(), Some(2), "{missing:?}");
    assert!(String::from_utf8_lossy(&missing.stderr).contains("there is no table nowhere"));

    aws.replan(Plan {
        end: End::Failed("S3AccessDenied", "Access Denied"),
        ..Plan::default()
    })
    .await;
    let failed = run(on_s3(
        &api.ctx.table,
        "export",
        "s3://singlet-exports/failing",
        &[],
    ))
    .await;
    assert_eq!(failed.status.code(), Some(1), "{failed:?}");
    let said = String::from_utf8_lossy(&failed.stderr);
    assert!(
        said.contains("FAILED") && said.contains("S3AccessDenied: Access Denied"),
        "{said}"
    );
    assert!(!said.contains("earlier run"), "{said}");
    // The same command again: DynamoDB answers its token with the failed export, and the
    // command says how to start another.
    let again = run(on_s3(
        &api.ctx.table,
        "export",
        "s3://singlet-exports/failing",
        &[],
    ))
    .await;
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(said.contains("give another prefix"), "{said}");
    assert_eq!(
        aws.jobs(Kind::Export).await,
        2,
        "the failed one was not started again"
    );
}
