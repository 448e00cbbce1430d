//! Many invocations in one process (Lambda Managed Instances): the real Lambda binary, built as
//! `sam build` builds it, run as a child process under a mock Runtime API
//! (`tests/api/runtime_api.rs`) against the embedded engine, with `AWS_LAMBDA_MAX_CONCURRENCY`
//! set as Lambda sets it on a managed instance, and without it as on Lambda's default model.
//!
//! Between the binary and the engine stands a recording front door (`DynamoFront`) that keeps
//! every DynamoDB call's `x-amzn-trace-id` and body, and can hold every call until a number of
//! invocations have calls open at once: so the test proves, not hopes, that the invocations ran
//! at the same time, and then that nothing of one reached another: each answer is its own
//! event's, each log line and metric document carries its own invocation's ids, each AWS call
//! its own invocation's trace id, and one invocation alone is the cold start.
//!
//! The same process, with a Secrets Manager on a socket of the test's own, shows how a function
//! that holds the server's keys starts: the secret read once, before its first poll.

use crate::runtime_api::{
    Answer, Invocation, RuntimeApi, lambda_binary, lambda_env, registration_event, trace_id,
};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

const TABLE: &str = "singlet-concurrency";
/// Not a published key: a Lambda refuses one.
const CURSOR_KEY: &str = "singlet-concurrency-test-key-0123456789abcdef";
/// Invocations one process serves at once.
const WORKERS: usize = 8;
/// Invocations queued: three rounds of the workers.
const INVOCATIONS: usize = 3 * WORKERS;
const WAIT: Duration = Duration::from_secs(120);
/// What Lambda's default timeout leaves an invocation (the template's `Timeout: 10`).
const TIMEOUT: Duration = Duration::from_secs(10);

/// One DynamoDB call as the front door saw it.
#[derive(Debug, Clone)]
struct Call {
    trace_id: Option<String>,
    body: String,
}

#[derive(Clone)]
struct FrontState {
    engine: String,
    http: reqwest::Client,
    calls: Arc<Mutex<Vec<Call>>>,
    /// The trace ids seen so far (how many invocations have made a call).
    seen: Arc<Mutex<BTreeSet<String>>>,
    invocations_calling: watch::Sender<usize>,
    /// Calls are held until this many invocations have made one.
    gate: usize,
}

/// A front door to the engine that records every call and holds each until `gate` invocations
/// (told apart by their trace ids) have made one.
struct DynamoFront {
    url: String,
    state: FrontState,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for DynamoFront {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl DynamoFront {
    async fn start(engine: &str, gate: usize) -> Self {
        let state = FrontState {
            engine: engine.trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            calls: Arc::default(),
            seen: Arc::default(),
            invocations_calling: watch::channel(0).0,
            gate,
        };
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(state.clone());
        let (url, server) = crate::harness::serve_on_loopback(app).await;
        Self { url, state, server }
    }

    fn calls(&self) -> Vec<Call> {
        self.state.calls.lock().unwrap().clone()
    }
}

async fn forward(
    State(front): State<FrontState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, HeaderMap, Bytes) {
    let trace_id = headers
        .get("x-amzn-trace-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    front.calls.lock().unwrap().push(Call {
        trace_id: trace_id.clone(),
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    let calling = {
        let mut seen = front.seen.lock().unwrap();
        seen.insert(trace_id.unwrap_or_default());
        seen.len()
    };
    front
        .invocations_calling
        .send_modify(|n| *n = (*n).max(calling));
    let _ = front
        .invocations_calling
        .subscribe()
        .wait_for(|n| *n >= front.gate)
        .await;
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let request = front
        .http
        .request(method, format!("{}{path}", front.engine))
        .body(body);
    crate::relay::relay(request, &headers).await
}

/// The Lambda binary serving `function`, its stdout read line by line on a thread of its own;
/// killed when dropped.
struct Lambda {
    child: Child,
    stdout: Option<std::thread::JoinHandle<Vec<String>>>,
}

impl Lambda {
    fn start(env: Vec<(String, String)>) -> Self {
        let mut child = Command::new(lambda_binary("dev"))
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the Lambda binary starts");
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect()
        });
        Self {
            child,
            stdout: Some(reader),
        }
    }

    /// Everything it wrote on standard output, once it is stopped.
    fn stop(mut self) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stdout.take().unwrap().join().unwrap()
    }
}

impl Drop for Lambda {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn request_id(n: usize) -> String {
    format!("invocation-{n:02}")
}

/// The invocation number a request id names.
fn number(request_id: &str) -> usize {
    request_id
        .strip_prefix("invocation-")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{request_id:?} is none of the test's invocations"))
}

/// Queues the `count` registrations on `api` and collects their answers, by invocation.
async fn register_through(api: &mut RuntimeApi, count: usize) -> BTreeMap<usize, Answer> {
    for n in 0..count {
        api.push(Invocation {
            request_id: request_id(n),
            trace_id: trace_id(n),
            timeout: TIMEOUT,
            event: registration_event(n),
        });
    }
    let mut answers = BTreeMap::new();
    for _ in 0..count {
        let answer = api.answer(WAIT).await;
        answers.insert(number(&answer.request_id), answer);
    }
    answers
}

/// Each answer is the `201` of its own event's vehicle, and that vehicle is in the table.
async fn each_answer_is_its_own_events(
    answers: &BTreeMap<usize, Answer>,
    client: &aws_sdk_dynamodb::Client,
) {
    for (n, answer) in answers {
        assert!(!answer.failed, "invocation {n} failed: {}", answer.body);
        let response: Value = serde_json::from_str(&answer.body).unwrap();
        assert_eq!(response["statusCode"], 201, "invocation {n}: {response}");
        let vehicle: Value = serde_json::from_str(response["body"].as_str().unwrap()).unwrap();
        // The API answers the chassis case-folded, as it stores and compares it.
        assert_eq!(vehicle["chassis"], format!("mic-{n}"), "invocation {n}");
        let id = vehicle["vehicleId"].as_str().unwrap();
        let key = format!("VEHICLE#{id}");
        let stored = client
            .get_item()
            .table_name(TABLE)
            .key(
                "PK",
                aws_sdk_dynamodb::types::AttributeValue::S(key.clone()),
            )
            .key("SK", aws_sdk_dynamodb::types::AttributeValue::S(key))
            .consistent_read(true)
            .send()
            .await
            .unwrap();
        let item = stored.item.unwrap_or_else(|| panic!("vehicle {n} stored"));
        assert_eq!(
            item["chassis"].as_s().unwrap(),
            &format!("mic-{n}"),
            "invocation {n}'s item"
        );
    }
}

/// What the process wrote: every line is one JSON document (no two interleaved); each log line
/// of an invocation carries that invocation's request id, trace id and API Gateway request id;
/// each metric document is one invocation's; one invocation alone is the cold start.
fn each_line_is_its_own_invocations(lines: &[String], count: usize) {
    let mut logged: BTreeMap<usize, usize> = BTreeMap::new();
    let mut metric_documents: BTreeMap<usize, Vec<Value>> = BTreeMap::new();
    let mut cold: BTreeSet<usize> = BTreeSet::new();
    for line in lines {
        let document: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a line that is not one JSON document ({e}): {line}"));
        let Some(request_id) = document["function_request_id"].as_str() else {
            // The process's own lines (its start), outside every invocation.
            assert!(document.get("xray_trace_id").is_none(), "{line}");
            continue;
        };
        let n = number(request_id);
        assert_eq!(document["xray_trace_id"], trace_id(n), "{line}");
        if document.get("_aws").is_some() {
            assert_eq!(document["Function"], "register-vehicle", "{line}");
            assert_eq!(document["2xx"], 1, "{line}");
            if document.get("ColdStart").is_some() {
                cold.insert(n);
            }
            metric_documents.entry(n).or_default().push(document);
            continue;
        }
        *logged.entry(n).or_default() += 1;
        if let Some(api_request) = document.get("request_id") {
            assert_eq!(api_request, &format!("apigw-{n}"), "{line}");
            assert_eq!(document["route"], "POST /vehicles", "{line}");
        }
        if document["cold_start"] == true {
            cold.insert(n);
        }
        if document["message"] == "request handled" {
            assert_eq!(document["status"], 201, "{line}");
        }
    }
    assert_eq!(logged.len(), count, "every invocation logged: {logged:?}");
    assert_eq!(metric_documents.len(), count, "a metric document each");
    for (n, documents) in &metric_documents {
        assert_eq!(documents.len(), 1, "invocation {n}: one metric document");
    }
    assert_eq!(
        cold.len(),
        1,
        "one invocation, in its lines and its metrics alike, paid the cold start: {cold:?}"
    );
}

/// Every DynamoDB call carried the trace id of the invocation that made it: a call that names a
/// vehicle's chassis carries that vehicle's invocation's trace id.
fn each_call_carries_its_invocations_trace_id(calls: &[Call], count: usize) {
    let mut attributed = BTreeSet::new();
    for call in calls {
        let trace = call
            .trace_id
            .as_deref()
            .unwrap_or_else(|| panic!("a call without a trace id: {}", call.body));
        let body = call.body.to_lowercase();
        let owners: Vec<usize> = (0..count)
            .filter(|n| body.contains(&format!("\"mic-{n}\"")))
            .collect();
        if let [n] = owners[..] {
            assert_eq!(trace, trace_id(n), "a call for vehicle {n}: {}", call.body);
            attributed.insert(n);
        }
        assert!(
            (0..count).any(|n| trace == trace_id(n)),
            "a trace id no invocation has: {trace}"
        );
    }
    assert_eq!(
        attributed.len(),
        count,
        "every invocation's write was seen with its trace id"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_serves_many_invocations_at_once_each_as_its_own() {
    let (client, engine) = singlet::serve::engine::start_in_memory(TABLE).await;
    // No call goes on to the engine before WORKERS invocations have each made one: the answers
    // below come only if the process ran that many at once.
    let front = DynamoFront::start(&engine, WORKERS).await;
    // Nothing is handed out before WORKERS polls are open at once.
    let mut api = RuntimeApi::start(WORKERS).await;
    let mut env = lambda_env("register-vehicle", api.addr, &front.url, TABLE, CURSOR_KEY);
    env.push(("AWS_LAMBDA_MAX_CONCURRENCY".into(), WORKERS.to_string()));
    let lambda = Lambda::start(env);

    let answers = register_through(&mut api, INVOCATIONS).await;
    let lines = lambda.stop();

    assert_eq!(api.most_polling(), WORKERS, "polls open at once");
    each_answer_is_its_own_events(&answers, &client).await;
    each_line_is_its_own_invocations(&lines, INVOCATIONS);
    each_call_carries_its_invocations_trace_id(&front.calls(), INVOCATIONS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_variable_one_process_serves_one_invocation_at_a_time() {
    let (client, engine) = singlet::serve::engine::start_in_memory(TABLE).await;
    let front = DynamoFront::start(&engine, 1).await;
    let mut api = RuntimeApi::start(1).await;
    let lambda = Lambda::start(lambda_env(
        "register-vehicle",
        api.addr,
        &front.url,
        TABLE,
        CURSOR_KEY,
    ));

    let answers = register_through(&mut api, WORKERS).await;
    let lines = lambda.stop();

    assert_eq!(api.most_polling(), 1, "one poll at a time");
    each_answer_is_its_own_events(&answers, &client).await;
    each_line_is_its_own_invocations(&lines, WORKERS);
    each_call_carries_its_invocations_trace_id(&front.calls(), WORKERS);
}

/// The overdue marker never runs twice at once in a process, even told it may: Lambda hands it
/// a run only when it asks for one, and it asks once its run is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_marker_runs_one_at_a_time_whatever_the_variable_says() {
    let (_, engine) = singlet::serve::engine::start_in_memory(TABLE).await;
    let mut api = RuntimeApi::start(1).await;
    let mut env = lambda_env("mark-overdue", api.addr, &engine, TABLE, CURSOR_KEY);
    env.push(("AWS_LAMBDA_MAX_CONCURRENCY".into(), "4".into()));
    let lambda = Lambda::start(env);
    let event = include_str!("../../events/mark-overdue.json");
    for n in 0..3 {
        api.push(Invocation {
            request_id: request_id(n),
            trace_id: trace_id(n),
            timeout: Duration::from_secs(120),
            event: event.to_owned(),
        });
    }
    for _ in 0..3 {
        let answer = api.answer(WAIT).await;
        assert!(!answer.failed, "{}", answer.body);
        let report: Value = serde_json::from_str(&answer.body).unwrap();
        assert_eq!(report["marked"], 0, "{report}");
    }
    let lines = lambda.stop();
    assert_eq!(api.most_polling(), 1, "one run asked for at a time");
    let said_so = lines
        .iter()
        .any(|line| line.contains("serving one event at a time"));
    assert!(said_so, "the marker says why it ignores the variable");
}

/// What a mock Secrets Manager does with the next `GetSecretValue`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum SecretAnswer {
    /// Holds it until told otherwise, then does that.
    Hold,
    /// Refuses it as Secrets Manager refuses a secret it cannot find (not tried again).
    Refuse,
    /// Answers the secret.
    Answer,
}

/// A Secrets Manager on a real socket, answering `GetSecretValue` as `answer` says, counting the
/// requests it was sent.
struct SecretsManagerMock {
    url: String,
    answer: watch::Sender<SecretAnswer>,
    requests: watch::Sender<usize>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for SecretsManagerMock {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The secret's id in the function's `SERVER_SECRET_ARN`, and its keys: the function has no
/// `CURSOR_KEY` variable, so any id it derives is derived under these.
const SECRET_ID: &str = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:singlet-server";
const SECRET_KEY: &str = "singlet-concurrency-secret-key-0123456789abcdef";

impl SecretsManagerMock {
    async fn start(first: SecretAnswer) -> Self {
        let answer = watch::channel(first).0;
        let requests = watch::channel(0).0;
        let (told, counted) = (answer.clone(), requests.clone());
        let app = axum::Router::new().route(
            "/",
            axum::routing::post(move |body: String| {
                let (told, counted) = (told.clone(), counted.clone());
                async move {
                    let request: Value = serde_json::from_str(&body).unwrap();
                    assert_eq!(request["SecretId"], SECRET_ID);
                    counted.send_modify(|n| *n += 1);
                    let mut told = told.subscribe();
                    let said = *told
                        .wait_for(|answer| *answer != SecretAnswer::Hold)
                        .await
                        .unwrap();
                    let (status, body) = if said == SecretAnswer::Answer {
                        let keys = serde_json::json!({ "CURSOR_KEY": SECRET_KEY }).to_string();
                        (StatusCode::OK, serde_json::json!({ "SecretString": keys }))
                    } else {
                        (
                            StatusCode::BAD_REQUEST,
                            serde_json::json!({"__type": "ResourceNotFoundException",
                                "message": "Secrets Manager can't find the specified secret."}),
                        )
                    };
                    (
                        status,
                        [("content-type", "application/x-amz-json-1.1")],
                        body.to_string(),
                    )
                }
            }),
        );
        let (url, server) = crate::harness::serve_on_loopback(app).await;
        Self {
            url,
            answer,
            requests,
            server,
        }
    }

    /// Waits until it has been sent `n` requests in all.
    async fn sent(&self, n: usize) {
        let mut requests = self.requests.subscribe();
        tokio::time::timeout(WAIT, requests.wait_for(|sent| *sent >= n))
            .await
            .expect("the function reads the secret")
            .unwrap();
    }

    fn requests(&self) -> usize {
        *self.requests.borrow()
    }
}

/// `lambda_env` for `function` as on AWS: its keys in the secret `SECRET_ID` at `secrets`, no
/// `CURSOR_KEY` variable.
fn keyed_env(
    function: &str,
    api: &RuntimeApi,
    engine: &str,
    secrets: &str,
) -> Vec<(String, String)> {
    let mut env = lambda_env(function, api.addr, engine, TABLE, "");
    env.retain(|(name, _)| name != "CURSOR_KEY");
    env.push(("SERVER_SECRET_ARN".into(), SECRET_ID.into()));
    env.push(("AWS_ENDPOINT_URL_SECRETS_MANAGER".into(), secrets.into()));
    env
}

/// On AWS a function that holds the server's keys reads them from the secret
/// `SERVER_SECRET_ARN` names before it asks for its first invocation (the read is part of its
/// init: docs/guide/cold-starts.md), once for the process's life, and serves under them: this
/// process has no `CURSOR_KEY` variable, so its ids are the secret's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_function_reads_its_secret_once_before_its_first_poll() {
    let (client, engine) = singlet::serve::engine::start_in_memory(TABLE).await;
    let secrets = SecretsManagerMock::start(SecretAnswer::Hold).await;
    let mut api = RuntimeApi::start(1).await;
    let lambda = Lambda::start(keyed_env("register-vehicle", &api, &engine, &secrets.url));

    // The read is out and held: no poll until it is answered.
    secrets.sent(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(api.most_polling(), 0, "polled before its keys were read");
    secrets.answer.send_replace(SecretAnswer::Answer);

    let answers = register_through(&mut api, 3).await;
    let lines = lambda.stop();
    assert_eq!(secrets.requests(), 1, "read once for the process's life");
    each_answer_is_its_own_events(&answers, &client).await;
    let mine = singlet_functions::Ctx::new(
        client.clone(),
        TABLE,
        singlet_functions::cursor::CursorKeys::new(SECRET_KEY),
    );
    let expected = singlet::invoke::invoke(&mine, "register-vehicle", &registration_event(0))
        .await
        .unwrap();
    let served: Value = serde_json::from_str(&answers[&0].body).unwrap();
    let id = |response: &Value| {
        let body: Value = serde_json::from_str(response["body"].as_str().unwrap()).unwrap();
        body["vehicleId"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        id(&served),
        id(&expected),
        "the id is derived under the secret's key (the same request again under it replays it)"
    );
    assert!(
        lines.iter().all(|line| !line.contains(SECRET_KEY)),
        "no line shows the keys"
    );
}

/// A secret that cannot be read stops the cold start: the process asks for no invocation and
/// exits, its one line naming the secret and Secrets Manager's error, and none of a key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_that_cannot_be_read_stops_the_cold_start() {
    let (_, engine) = singlet::serve::engine::start_in_memory(TABLE).await;
    let secrets = SecretsManagerMock::start(SecretAnswer::Refuse).await;
    let api = RuntimeApi::start(1).await;
    let mut lambda = Lambda::start(keyed_env("register-vehicle", &api, &engine, &secrets.url));
    let exited = tokio::time::timeout(WAIT, async {
        loop {
            if let Some(status) = lambda.child.try_wait().unwrap() {
                break status;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the process stops");
    assert!(!exited.success(), "{exited}");
    assert_eq!(api.most_polling(), 0, "asked for no invocation");
    assert_eq!(secrets.requests(), 1, "a refusal is not tried again");
    let lines = lambda.stop();
    let said_why = lines
        .iter()
        .find(|line| line.contains("cannot start"))
        .unwrap_or_else(|| panic!("no line says why: {lines:?}"));
    assert!(
        said_why.contains(SECRET_ID) && said_why.contains("ResourceNotFoundException"),
        "{said_why}"
    );
    assert!(!said_why.contains(SECRET_KEY), "{said_why}");
}
