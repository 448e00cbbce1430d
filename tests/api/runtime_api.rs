//! A Lambda Runtime API on a loopback port, for the real Lambda binary run as a child process
//! (`singlet-lambda`): it hands out the invocations queued on it (`GET
//! /2018-06-01/runtime/invocation/next`, with the request id, deadline and trace id headers Lambda
//! sends) and keeps what comes back (`POST .../{id}/response`, `.../{id}/error`,
//! `/runtime/init/error`). Any number of processes may poll it at once, each taking the next
//! invocation queued; it counts how many `/next` requests were ever open at the same time.
//!
//! The concurrency test (`tests/api/concurrency.rs`) and the concurrency bench
//! (`benches/concurrency.rs`, which includes this file) drive the binary through it.

// Each user compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::routing::{get, post};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{Mutex, mpsc, watch};

/// One invocation to hand out.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub request_id: String,
    pub trace_id: String,
    /// How long after it is handed out Lambda would stop waiting for it.
    pub timeout: Duration,
    pub event: String,
}

/// What came back for an invocation.
#[derive(Debug, Clone)]
pub struct Answer {
    pub request_id: String,
    pub body: String,
    /// Posted to `/error` (the function failed), not `/response`.
    pub failed: bool,
    /// From its handing out to its answer.
    pub latency: Duration,
}

struct Shared {
    queued: Mutex<mpsc::UnboundedReceiver<Invocation>>,
    answers: mpsc::UnboundedSender<Answer>,
    init_errors: mpsc::UnboundedSender<String>,
    handed: std::sync::Mutex<HashMap<String, Instant>>,
    /// `/next` requests open now, and the most ever open at once.
    polling: AtomicUsize,
    most_polling: watch::Sender<usize>,
    /// Nothing is handed out before this many `/next` requests were open at once.
    gate: usize,
}

/// The mock Runtime API, serving until dropped.
pub struct RuntimeApi {
    pub addr: SocketAddr,
    queue: mpsc::UnboundedSender<Invocation>,
    answers: mpsc::UnboundedReceiver<Answer>,
    init_errors: mpsc::UnboundedReceiver<String>,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl RuntimeApi {
    /// A Runtime API that hands out nothing until `gate` `/next` requests are open at once
    /// (1: hand out at once): a process that serves one invocation at a time never opens two.
    pub async fn start(gate: usize) -> Self {
        let (queue, queued) = mpsc::unbounded_channel();
        let (answer, answers) = mpsc::unbounded_channel();
        let (init_error, init_errors) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            queued: Mutex::new(queued),
            answers: answer,
            init_errors: init_error,
            handed: std::sync::Mutex::new(HashMap::new()),
            polling: AtomicUsize::new(0),
            most_polling: watch::channel(0).0,
            gate: gate.max(1),
        });
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(response),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .route("/2018-06-01/runtime/init/error", post(init_failed))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            addr,
            queue,
            answers,
            init_errors,
            shared,
            server,
        }
    }

    /// Queues `invocation` for the next `/next`.
    pub fn push(&self, invocation: Invocation) {
        self.queue.send(invocation).expect("the API is serving");
    }

    /// The next answer, or a panic naming what the function said instead (an init error) or that
    /// it said nothing within `wait`.
    pub async fn answer(&mut self, wait: Duration) -> Answer {
        tokio::select! {
            Some(answer) = self.answers.recv() => answer,
            Some(error) = self.init_errors.recv() => panic!("the function failed to start: {error}"),
            _ = tokio::time::sleep(wait) => panic!("no answer within {wait:?}"),
        }
    }

    /// The most `/next` requests that were ever open at the same time.
    pub fn most_polling(&self) -> usize {
        *self.shared.most_polling.borrow()
    }
}

async fn next(State(shared): State<Arc<Shared>>) -> (HeaderMap, String) {
    let open = shared.polling.fetch_add(1, Ordering::SeqCst) + 1;
    shared.most_polling.send_if_modified(|most| {
        let more = open > *most;
        *most = (*most).max(open);
        more
    });
    let mut most = shared.most_polling.subscribe();
    let _ = most.wait_for(|most| *most >= shared.gate).await;
    let invocation = shared.queued.lock().await.recv().await;
    shared.polling.fetch_sub(1, Ordering::SeqCst);
    let Some(invocation) = invocation else {
        // Nothing more will come: hold the poll until the process is killed.
        std::future::pending::<()>().await;
        unreachable!()
    };
    let deadline = SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + invocation.timeout;
    let mut headers = HeaderMap::new();
    let mut set = |name: &'static str, value: &str| {
        headers.insert(name, HeaderValue::from_str(value).unwrap());
    };
    set("content-type", "application/json");
    set("lambda-runtime-aws-request-id", &invocation.request_id);
    set(
        "lambda-runtime-deadline-ms",
        &deadline.as_millis().to_string(),
    );
    set(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:eu-west-1:123456789012:function:singlet-test",
    );
    set("lambda-runtime-trace-id", &invocation.trace_id);
    shared
        .handed
        .lock()
        .unwrap()
        .insert(invocation.request_id.clone(), Instant::now());
    (headers, invocation.event)
}

fn answered(shared: &Shared, request_id: String, body: String, failed: bool) {
    let handed = shared.handed.lock().unwrap().remove(&request_id);
    let latency = handed.map(|at| at.elapsed()).unwrap_or_default();
    let _ = shared.answers.send(Answer {
        request_id,
        body,
        failed,
        latency,
    });
}

async fn response(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: String,
) -> &'static str {
    answered(&shared, id, body, false);
    "{}"
}

async fn error(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: String,
) -> &'static str {
    answered(&shared, id, body, true);
    "{}"
}

async fn init_failed(State(shared): State<Arc<Shared>>, body: String) -> &'static str {
    let _ = shared.init_errors.send(body);
    "{}"
}

/// The API's Lambda binary `singlet-lambda`, built as `sam build` builds it (at the workspace
/// root, so with the workspace's features) with `profile`, once per process.
pub fn lambda_binary(profile: &str) -> PathBuf {
    binary_built("singlet-lambda", profile)
}

/// The workspace's binary `name`, built with `profile` as [`lambda_binary`] builds the API's,
/// once per process.
pub fn binary_built(name: &str, profile: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<(String, String, PathBuf)>> =
        std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap();
    if let Some((_, _, exe)) = built.iter().find(|(n, p, _)| n == name && p == profile) {
        return exe.clone();
    }
    let mut command = cargo_at_the_root();
    let output = command
        .args(["build", "--profile", profile, "--bin", name])
        .args(["--message-format", "json-render-diagnostics"])
        .stderr(Stdio::inherit())
        .output()
        .expect("cargo runs");
    assert!(output.status.success(), "building {name} failed");
    let exe = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find_map(|message| {
            (message["target"]["name"] == name)
                .then(|| message["executable"].as_str().map(PathBuf::from))
                .flatten()
        })
        .unwrap_or_else(|| panic!("cargo built {name}"));
    built.push((name.to_owned(), profile.to_owned(), exe.clone()));
    exe
}

/// `cargo` at the workspace root, as `sam build` runs it (so with the workspace's features), and
/// without the variables cargo gives a test or a bench (`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`,
/// `OUT_DIR`, ...): ring's and cc's build scripts rerun when one of them changes, so a nested
/// build that saw them would leave the next `cargo build` from a shell rebuilding ring and
/// everything above it (.ci/run's one-build check caught it).
pub fn cargo_at_the_root() -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name == "OUT_DIR"
            || (name.starts_with("CARGO_")
                && !matches!(
                    &*name,
                    "CARGO_HOME" | "CARGO_TARGET_DIR" | "CARGO_BUILD_JOBS"
                ))
        {
            command.env_remove(&*name);
        }
    }
    command.current_dir(env!("CARGO_MANIFEST_DIR"));
    command
}

/// The environment Lambda gives a `provided.al2023` function serving `function` (nothing else:
/// the child starts with a cleared environment), its Runtime API at `api`, its table `table` on
/// the engine at `engine`, its keys in `CURSOR_KEY`.
pub fn lambda_env(
    function: &str,
    api: SocketAddr,
    engine: &str,
    table: &str,
    cursor_key: &str,
) -> Vec<(String, String)> {
    [
        ("AWS_LAMBDA_RUNTIME_API", api.to_string().as_str()),
        ("AWS_LAMBDA_FUNCTION_NAME", function),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "2048"),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
        (
            "AWS_LAMBDA_LOG_GROUP_NAME",
            &format!("/aws/lambda/{function}"),
        ),
        (
            "AWS_LAMBDA_LOG_STREAM_NAME",
            "2026/12/03/[$LATEST]0123456789abcdef",
        ),
        ("AWS_REGION", "eu-west-1"),
        ("AWS_ACCESS_KEY_ID", "ASIAEXAMPLEEXAMPLE00"),
        (
            "AWS_SECRET_ACCESS_KEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ),
        ("AWS_SESSION_TOKEN", "IQoJb3JpZ2luX2VjEXAMPLESESSIONTOKEN"),
        ("TZ", ":UTC"),
        ("TABLE_NAME", table),
        ("CURSOR_KEY", cursor_key),
        ("RUST_LOG", "info"),
        ("AWS_ENDPOINT_URL_DYNAMODB", engine),
        ("SINGLET_FUNCTION", function),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// `register-vehicle`'s event (`events/register-vehicle.json`) for the `n`th vehicle: its own
/// plate `MI-<n>`, chassis `MIC-<n>`, `Idempotency-Key` and API Gateway request id.
pub fn registration_event(n: usize) -> String {
    let sample = include_str!("../../events/register-vehicle.json");
    let mut event: serde_json::Value = serde_json::from_str(sample).unwrap();
    event["headers"]["idempotency-key"] = format!("concurrency-{n}").into();
    event["requestContext"]["requestId"] = format!("apigw-{n}").into();
    event["body"] = serde_json::json!({
        "plate": format!("MI-{n}"),
        "chassis": format!("MIC-{n}"),
        "depot": "north",
    })
    .to_string()
    .into();
    event.to_string()
}

/// An X-Ray trace header of its own for the `n`th invocation.
pub fn trace_id(n: usize) -> String {
    format!("Root=1-6750a1b2-{n:024x};Parent=53995c3f42cd8ad8;Sampled=1")
}

/// The peak resident set of process `pid` (`VmHWM`), in bytes.
pub fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}
