//! Cold starts: the release `bootstrap` serving each function started several times under a mock Lambda
//! Runtime API, next to a bare `lambda_http` hello (`functions/examples/hello.rs`: the same
//! `lambda_http` features, the same profile, linked the same way by `functions/build.rs`)
//! measured in the same run, so the ratios say what a function's own start-up work costs on
//! whatever machine runs this. It prints figures and asserts nothing:
//!
//! ```sh
//! cargo bench --bench cold_start                      # hello, get-vehicle, register-vehicle, mark-overdue
//! cargo bench --bench cold_start -- get-book --spawns 9 --warm 100 --profile release
//! cargo bench --bench cold_start -- --keys-in-env     # the keys in CURSOR_KEY, no secret to read
//! cargo bench --bench cold_start -- register-vehicle --spawns 9 --warm 10 --runs 10   # 10 tables, then each init ratio
//! cargo bench --bench cold_start -- --against /tmp/singlet-lambda-before   # each function on a second build too
//! cargo bench --bench cold_start -- get-vehicle table-tools   # the tools' own bootstrap beside the API's
//! ```
//!
//! `table-tools` is the stack's tools function, its own bootstrap (`singlet-tools-lambda`), run
//! as `TableToolsFunction` is: no server secret, 512 MB, invoked with
//! `events/tools/migrate-segment.json` (segment 0 of `vehicles-by-depot` over the seeded table:
//! its first invoke reads and checkpoints the segment, the warm ones find it done).
//!
//! It builds the binaries itself (`cargo build --release --bin singlet-lambda --example hello` at
//! the workspace root, as `sam build` does; each function is the one binary with its
//! `SINGLET_FUNCTION`), starts an
//! embedded engine with the table (seeded with `events/register-vehicle.json`, so that every
//! event in `events/` used here succeeds), then for each spawn:
//! - **init**: spawn → the first `GET /runtime/invocation/next`;
//! - **first invoke**: the first event handed out → its response posted;
//! - **warm**: the same for the next `--warm` events, back to back (p50/p99 over all spawns);
//! - **cold**: init and first invoke of the same spawn together, what a caller of an on-demand
//!   function waits for past its own request's work;
//! - **peak RSS**: `VmHWM` from `/proc/<pid>/status`, read before the process is killed.
//!
//! `--against <binary>` runs each function on that build of `singlet-lambda` too (a row
//! `<function>@against`), in the same rounds: a change's before and after, measured alike.
//!
//! Init, first invoke and RSS are medians over the spawns, which go round-robin over the hello
//! and the functions, each round in an order of its own, so that a noisy neighbour and what ran
//! just before a spawn hurt them all alike. The environment is the one Lambda sets (and no
//! other: no `HOME`, so no profile files), with `AWS_ENDPOINT_URL_DYNAMODB` on the engine. Sizes
//! are the stripped x86_64 binary and its zip (`zip -9`, when `zip` is installed); an arm64
//! `bootstrap.zip` under `<target>/lambda/singlet-lambda/` (from `cargo lambda build --release
//! --arm64 --output-format zip --bin singlet-lambda`) is reported too when present.

#[path = "../tests/api/runtime_api.rs"]
mod runtime_api;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::routing::{get, post};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde_json::Value;
use singlet::invoke::invoke;
use singlet::serve::engine;
use singlet_functions::{Ctx, cursor::CursorKeys};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path as FsPath, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{Mutex, mpsc};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const HELLO: &str = "hello";
/// The one Lambda binary, which every function of the API runs.
const LAMBDA: &str = "singlet-lambda";
/// The tools function (`table-tools`) and the binary it runs.
const TOOLS_FUNCTION: &str = "table-tools";
const TOOLS: &str = "singlet-tools-lambda";
const DEFAULT_FUNCTIONS: &[&str] = &["get-vehicle", "register-vehicle", "mark-overdue"];
const TABLE: &str = "singlet-bench";
/// The server secret the sample events' ids are derived under: not a published one, which a
/// Lambda refuses. The functions read it at start from a mocked Secrets Manager
/// (`SERVER_SECRET_ARN`), as they do on AWS; the hello reads nothing.
const CURSOR_KEY: &str = "singlet-cold-start-bench-key-0123456789abcdef";
const SERVER_SECRET: &str = "singlet/bench";
const WAIT: Duration = Duration::from_secs(30);
/// Issue 44's bound on a function's init over the hello's, in nine runs of ten.
const INIT_TARGET: f64 = 1.25;

struct Args {
    functions: Vec<String>,
    spawns: usize,
    warm: usize,
    profile: String,
    /// The keys in `CURSOR_KEY`, as a stack before the server secret had them: what the secret's
    /// round trip costs, by difference.
    keys_in_env: bool,
    /// Another build of the Lambda binary, each function run on it too.
    against: Option<PathBuf>,
    /// Whole measurements in a row, each printed, then each function's init ratios together.
    runs: usize,
}

/// The suffix of a row run on the `--against` build.
const AGAINST: &str = "@against";

fn args() -> Args {
    let mut args = Args {
        functions: Vec::new(),
        spawns: 7,
        warm: 50,
        profile: "release".into(),
        keys_in_env: false,
        against: None,
        runs: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut number = |name: &str| -> usize {
            it.next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{name} takes a number"))
        };
        match arg.as_str() {
            "--bench" => {} // what `cargo bench` passes
            "--spawns" => args.spawns = number("--spawns").max(1),
            "--warm" => args.warm = number("--warm").max(1),
            "--runs" => args.runs = number("--runs").max(1),
            "--profile" => args.profile = it.next().expect("--profile takes a profile's name"),
            "--keys-in-env" => args.keys_in_env = true,
            "--against" => {
                let binary = PathBuf::from(it.next().expect("--against takes a binary's path"));
                assert!(
                    binary.is_file(),
                    "--against {}: no such binary",
                    binary.display()
                );
                args.against = Some(binary);
            }
            function => args.functions.push(function.to_owned()),
        }
    }
    if args.functions.is_empty() {
        args.functions = DEFAULT_FUNCTIONS.iter().map(|f| f.to_string()).collect();
    }
    args
}

/// Builds the hello and the Lambda binary with `profile` as `sam build` does (at the workspace
/// root, so with the workspace's features); the executable of the hello and of each function.
fn build(functions: &[String], profile: &str, against: Option<&FsPath>) -> Vec<(String, PathBuf)> {
    let mut command = runtime_api::cargo_at_the_root();
    command
        .args(["build", "--profile", profile])
        .args(["--message-format", "json-render-diagnostics"])
        .args(["--example", HELLO, "--bin", LAMBDA])
        .args(
            functions
                .iter()
                .any(|f| f == TOOLS_FUNCTION)
                .then_some(["--bin", TOOLS])
                .into_iter()
                .flatten(),
        )
        .stderr(Stdio::inherit());
    let output = command.output().expect("cargo runs");
    assert!(output.status.success(), "the release build failed");
    let mut built = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let (Some(name), Some(exe)) = (
            message["target"]["name"].as_str(),
            message["executable"].as_str(),
        ) {
            built.push((name.to_owned(), PathBuf::from(exe)));
        }
    }
    let exe = |name: &str| {
        let (_, exe) = built
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("cargo built no {name}"));
        exe.clone()
    };
    std::iter::once((HELLO.to_owned(), exe(HELLO)))
        .chain(functions.iter().flat_map(|f| {
            let binary = if f == TOOLS_FUNCTION { TOOLS } else { LAMBDA };
            // `--against` is another build of the API's binary: the tools' is not run on it.
            let against = against
                .filter(|_| binary == LAMBDA)
                .map(|other| (format!("{f}{AGAINST}"), other.to_owned()));
            std::iter::once((f.clone(), exe(binary))).chain(against)
        }))
        .collect()
}

/// The event a function is invoked with: its file in `events/` (the hello takes get-vehicle's).
fn event(function: &str) -> String {
    let function = function.trim_end_matches(AGAINST);
    let file = match function {
        HELLO => "get-vehicle",
        TOOLS_FUNCTION => "tools/migrate-segment",
        function => function,
    };
    std::fs::read_to_string(format!("{ROOT}/events/{file}.json"))
        .unwrap_or_else(|e| panic!("events/{file}.json: {e}"))
}

/// What the mock Runtime API saw, in order.
enum Mark {
    Next(Instant),
    Handed(String, Instant),
    Done {
        id: String,
        at: Instant,
        error: Option<String>,
    },
    InitError(String),
}

struct Invocation {
    id: String,
    event: String,
}

#[derive(Clone)]
struct Mock {
    invocations: Arc<Mutex<mpsc::Receiver<Invocation>>>,
    marks: mpsc::UnboundedSender<Mark>,
}

async fn next(State(mock): State<Mock>) -> (HeaderMap, String) {
    let _ = mock.marks.send(Mark::Next(Instant::now()));
    let Some(invocation) = mock.invocations.lock().await.recv().await else {
        // The spawn is over: hang until the process is killed.
        std::future::pending::<()>().await;
        unreachable!()
    };
    let deadline = SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + Duration::from_secs(10);
    let mut headers = HeaderMap::new();
    let mut set = |name: &'static str, value: String| {
        headers.insert(name, HeaderValue::from_str(&value).unwrap());
    };
    set("content-type", "application/json".into());
    set("lambda-runtime-aws-request-id", invocation.id.clone());
    set(
        "lambda-runtime-deadline-ms",
        deadline.as_millis().to_string(),
    );
    set(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:eu-west-1:123456789012:function:bench".into(),
    );
    set(
        "lambda-runtime-trace-id",
        "Root=1-6749f3a0-3c5e1f0a2b7d4e6f8a9b0c1d;Parent=53995c3f42cd8ad8;Sampled=0".into(),
    );
    let _ = mock.marks.send(Mark::Handed(invocation.id, Instant::now()));
    (headers, invocation.event)
}

async fn response(State(mock): State<Mock>, Path(id): Path<String>, body: String) -> &'static str {
    let at = Instant::now();
    // An HTTP function answers API Gateway's response; only a 5xx is a failure of the function.
    let error = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["statusCode"].as_u64())
        .filter(|status| *status >= 500)
        .map(|_| body);
    let _ = mock.marks.send(Mark::Done { id, at, error });
    "{}"
}

async fn error(State(mock): State<Mock>, Path(id): Path<String>, body: String) -> &'static str {
    let at = Instant::now();
    let _ = mock.marks.send(Mark::Done {
        id,
        at,
        error: Some(body),
    });
    "{}"
}

async fn init_error(State(mock): State<Mock>, body: String) -> &'static str {
    let _ = mock.marks.send(Mark::InitError(body));
    "{}"
}

/// One spawn's figures.
struct Spawn {
    init: Duration,
    first: Duration,
    warm: Vec<Duration>,
    rss_kb: u64,
}

async fn spawn_once(row: &str, exe: &FsPath, event: &str, engine: &str, args: &Args) -> Spawn {
    let function = row.trim_end_matches(AGAINST);
    let warm = args.warm;
    let (give, invocations) = mpsc::channel(1);
    let (marks, mut seen) = mpsc::unbounded_channel();
    let mock = Mock {
        invocations: Arc::new(Mutex::new(invocations)),
        marks,
    };
    let app = Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route(
            "/2018-06-01/runtime/invocation/{id}/response",
            post(response),
        )
        .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
        .route("/2018-06-01/runtime/init/error", post(init_error))
        // Secrets Manager's `GetSecretValue` (its JSON protocol posts to `/`), on the same mock.
        .route("/", post(secret_value))
        .with_state(mock);
    let listener = tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .unwrap();
    let api = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let started = Instant::now();
    let mut child = Command::new(exe)
        .env_clear()
        .envs(lambda_env(
            function,
            &api.to_string(),
            engine,
            args.keys_in_env,
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", exe.display()));
    let pid = child.id();

    let mut wait = async || match tokio::time::timeout(WAIT, seen.recv()).await {
        Ok(Some(Mark::InitError(error))) => panic!("{function} failed to start: {error}"),
        Ok(Some(mark)) => mark,
        Ok(None) => unreachable!("the mock holds a sender"),
        Err(_) => panic!("{function} said nothing for {WAIT:?}"),
    };
    let init = loop {
        if let Mark::Next(at) = wait().await {
            break at - started;
        }
    };
    let mut latencies = Vec::with_capacity(warm + 1);
    for i in 0..=warm {
        let id = format!("{function}-{pid}-{i}");
        give.send(Invocation {
            id: id.clone(),
            event: event.to_owned(),
        })
        .await
        .unwrap();
        let mut handed = None;
        let latency = loop {
            match wait().await {
                Mark::Handed(h, at) if h == id => handed = Some(at),
                Mark::Done { id: d, at, error } if d == id => {
                    if let Some(error) = error {
                        panic!("{function} failed invocation {i}: {error}");
                    }
                    break at - handed.expect("handed out before answered");
                }
                _ => {}
            }
        };
        latencies.push(latency);
    }
    let rss_kb = peak_rss_kb(pid);
    child.kill().unwrap();
    child.wait().unwrap();
    server.abort();
    Spawn {
        init,
        first: latencies[0],
        warm: latencies.split_off(1),
        rss_kb,
    }
}

/// The mocked Secrets Manager: the server secret, as the template's `ServerSecret` holds it.
async fn secret_value(body: String) -> ([(&'static str, &'static str); 1], String) {
    let request: Value = serde_json::from_str(&body).unwrap_or_default();
    assert_eq!(request["SecretId"], SERVER_SECRET, "{body}");
    let value = serde_json::json!({ "CURSOR_KEY": CURSOR_KEY }).to_string();
    let answer = serde_json::json!({ "Name": SERVER_SECRET, "SecretString": value });
    (
        [("content-type", "application/x-amz-json-1.1")],
        answer.to_string(),
    )
}

/// The environment Lambda gives a `provided.al2023` function (as `template.yaml` configures it,
/// `SINGLET_FUNCTION` included: the hello ignores it), with the engine as DynamoDB.
fn lambda_env(
    function: &str,
    api: &str,
    engine: &str,
    keys_in_env: bool,
) -> Vec<(&'static str, String)> {
    let keys: Vec<(&'static str, String)> = if function == TOOLS_FUNCTION {
        // TableToolsFunction holds no server keys (template.yaml).
        Vec::new()
    } else if keys_in_env {
        vec![("CURSOR_KEY", CURSOR_KEY.to_owned())]
    } else {
        vec![
            ("SERVER_SECRET_ARN", SERVER_SECRET.to_owned()),
            ("AWS_ENDPOINT_URL_SECRETS_MANAGER", format!("http://{api}")),
        ]
    };
    [
        ("AWS_LAMBDA_RUNTIME_API", api),
        ("AWS_LAMBDA_FUNCTION_NAME", function),
        (
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
            if function == TOOLS_FUNCTION { "512" } else { "256" },
        ),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
        ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand"),
        ("AWS_LAMBDA_LOG_GROUP_NAME", &format!("/aws/lambda/{function}")),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "2026/11/29/[$LATEST]0123456789abcdef"),
        ("AWS_LAMBDA_LOG_FORMAT", "JSON"),
        ("AWS_LAMBDA_LOG_LEVEL", "INFO"),
        ("AWS_REGION", "eu-west-1"),
        ("AWS_DEFAULT_REGION", "eu-west-1"),
        ("AWS_ACCESS_KEY_ID", "ASIAEXAMPLEEXAMPLE00"),
        ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        ("AWS_SESSION_TOKEN", "IQoJb3JpZ2luX2VjEXAMPLESESSIONTOKEN"),
        ("AWS_XRAY_CONTEXT_MISSING", "LOG_ERROR"),
        ("_HANDLER", "bootstrap"),
        ("LAMBDA_TASK_ROOT", "/var/task"),
        ("LAMBDA_RUNTIME_DIR", "/var/runtime"),
        ("LANG", "en_US.UTF-8"),
        ("TZ", ":UTC"),
        ("PATH", "/usr/local/bin:/usr/bin/:/bin:/opt/bin"),
        ("LD_LIBRARY_PATH", "/var/lang/lib:/lib64:/usr/lib64:/var/runtime:/var/runtime/lib:/var/task:/var/task/lib:/opt/lib"),
        ("TABLE_NAME", TABLE),
        ("RUST_LOG", "info"),
        ("AWS_ENDPOINT_URL_DYNAMODB", engine),
        (singlet_functions::lambda::FUNCTION_VAR, function),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_owned()))
    .chain(keys)
    .collect()
}

fn peak_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The zip of `file` alone (what Lambda is handed), or `None` without the `zip` tool.
fn zipped_size(file: &FsPath) -> Option<u64> {
    let dir = std::env::temp_dir().join(format!("cold-start-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let bootstrap = dir.join("bootstrap");
    let zip = dir.join("bootstrap.zip");
    std::fs::copy(file, &bootstrap).ok()?;
    let _ = std::fs::remove_file(&zip);
    let zipped = Command::new("zip")
        .current_dir(&dir)
        .args(["-q", "-9", "bootstrap.zip", "bootstrap"])
        .status()
        .ok()?
        .success();
    let size = zipped.then(|| std::fs::metadata(&zip).ok().map(|m| m.len()))?;
    let _ = std::fs::remove_dir_all(&dir);
    size
}

fn median<T: Copy + Ord>(mut values: Vec<T>) -> T {
    values.sort();
    values[values.len() / 2]
}

fn percentile(mut values: Vec<Duration>, p: f64) -> Duration {
    values.sort();
    values[((values.len() as f64 * p).ceil() as usize).clamp(1, values.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

fn mb(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / 1e6)
}

fn ratio(value: f64, hello: f64) -> String {
    format!("{:.2}×", value / hello)
}

#[tokio::main]
async fn main() {
    let args = args();
    let binaries = build(&args.functions, &args.profile, args.against.as_deref());

    // The engine, its table, and the vehicle that get-vehicle's event asks for.
    let (client, endpoint) = engine::start_in_memory(TABLE).await;
    let ctx = Ctx::new(client, TABLE, CursorKeys::new(CURSOR_KEY));
    let registered = invoke(&ctx, "register-vehicle", &event("register-vehicle"))
        .await
        .unwrap();
    // The vehicle's id is derived from the event's Idempotency-Key under this run's key, not the
    // published one the sample get-vehicle event was written under: the events ask for the id
    // made here, so that get-vehicle's spawns time the found vehicle's path, not a 404.
    let body: Value =
        serde_json::from_str(registered["body"].as_str().expect("a body")).expect("JSON");
    let vehicle = body["vehicleId"].as_str().expect("a vehicle id");
    let sample: Value = serde_json::from_str(&event("get-vehicle")).expect("JSON");
    let sample_id = sample["pathParameters"]["vehicleId"]
        .as_str()
        .expect("an id");

    let events: Vec<String> = binaries
        .iter()
        .map(|(name, _)| event(name).replace(sample_id, vehicle))
        .collect();
    eprintln!(
        "{} spawns of each of {} binaries, {} warm invokes each, {} run(s)",
        args.spawns,
        binaries.len(),
        args.warm,
        args.runs
    );
    let mut inits: Vec<Vec<f64>> = binaries.iter().map(|_| Vec::new()).collect();
    let mut rounds = StdRng::seed_from_u64(44);
    for run in 1..=args.runs {
        let mut spawns: Vec<Vec<Spawn>> = binaries.iter().map(|_| Vec::new()).collect();
        // Each round in an order of its own (seeded, so a run can be repeated): a spawn started
        // slower right after the hello's than after a function's, the same build measured
        // twice in a fixed order 0.07× apart (docs/notebooks/cold-starts.md), so every binary
        // follows every other alike.
        for _ in 0..args.spawns {
            let mut order: Vec<usize> = (0..binaries.len()).collect();
            order.shuffle(&mut rounds);
            for i in order {
                let (name, exe) = &binaries[i];
                let spawn = spawn_once(name, exe, &events[i], &endpoint, &args).await;
                spawns[i].push(spawn);
            }
        }
        let rows = rows(&binaries, spawns);
        for (inits, row) in inits.iter_mut().zip(&rows) {
            inits.push(row.init.as_secs_f64() / rows[0].init.as_secs_f64());
        }
        if args.runs > 1 {
            println!("run {run} of {}", args.runs);
        }
        print_table(&rows, &args);
    }
    if args.runs > 1 {
        print_init_ratios(&binaries, &inits);
    }
}

/// Each function's init over the hello's, run by run, and in how many runs it was within
/// [`INIT_TARGET`]: issue 44's measure of the cold start (docs/guide/cold-starts.md).
fn print_init_ratios(binaries: &[(String, PathBuf)], inits: &[Vec<f64>]) {
    println!("init over the hello's, run by run:");
    for ((name, _), ratios) in binaries.iter().zip(inits).skip(1) {
        let within = ratios.iter().filter(|r| **r <= INIT_TARGET).count();
        let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "{name:<26} {}  within {INIT_TARGET:.2}×: {within} of {}",
            each.join(" "),
            ratios.len()
        );
    }
}

struct Row {
    name: String,
    init: Duration,
    first: Duration,
    cold: Duration,
    p50: Duration,
    p99: Duration,
    rss: u64,
    size: u64,
    zip: Option<u64>,
    arm64_zip: Option<u64>,
}

/// One row per binary from its spawns: medians, warm percentiles and sizes.
fn rows(binaries: &[(String, PathBuf)], spawns: Vec<Vec<Spawn>>) -> Vec<Row> {
    binaries
        .iter()
        .zip(spawns)
        .map(|((name, exe), spawns)| {
            let warm: Vec<Duration> = spawns.iter().flat_map(|s| s.warm.clone()).collect();
            let target = exe.parent().and_then(|p| p.parent()).unwrap();
            let binary = if name == TOOLS_FUNCTION {
                TOOLS
            } else {
                LAMBDA
            };
            let arm64 = target.join("lambda").join(binary).join("bootstrap.zip");
            Row {
                name: name.clone(),
                init: median(spawns.iter().map(|s| s.init).collect()),
                first: median(spawns.iter().map(|s| s.first).collect()),
                cold: median(spawns.iter().map(|s| s.init + s.first).collect()),
                p50: percentile(warm.clone(), 0.50),
                p99: percentile(warm, 0.99),
                rss: median(spawns.iter().map(|s| s.rss_kb).collect()) * 1024,
                size: std::fs::metadata(exe).unwrap().len(),
                zip: zipped_size(exe),
                arm64_zip: (name != HELLO)
                    .then(|| std::fs::metadata(&arm64).ok().map(|m| m.len()))
                    .flatten(),
            }
        })
        .collect()
}

/// The table of `rows`, each beside the hello's (the first row).
fn print_table(rows: &[Row], args: &Args) {
    let hello = &rows[0];
    println!(
        "{:<26} {:>8} {:>7} {:>9} {:>7} {:>8} {:>8} {:>8} {:>8} {:>7} {:>9} {:>7} {:>7} {:>9}",
        "binary",
        "init ms",
        "×hello",
        "1st inv",
        "×hello",
        "cold ms",
        "warm p50",
        "warm p99",
        "RSS MB",
        "×hello",
        "x86_64 MB",
        "zip MB",
        "×hello",
        "arm64 zip"
    );
    for row in rows {
        let zip_ratio = match (row.zip, hello.zip) {
            (Some(z), Some(h)) => ratio(z as f64, h as f64),
            _ => "-".into(),
        };
        println!(
            "{:<26} {:>8} {:>7} {:>9} {:>7} {:>8} {:>8} {:>8} {:>8} {:>7} {:>9} {:>7} {:>7} {:>9}",
            row.name,
            ms(row.init),
            ratio(row.init.as_secs_f64(), hello.init.as_secs_f64()),
            ms(row.first),
            ratio(row.first.as_secs_f64(), hello.first.as_secs_f64()),
            ms(row.cold),
            ms(row.p50),
            ms(row.p99),
            mb(row.rss),
            ratio(row.rss as f64, hello.rss as f64),
            mb(row.size),
            row.zip.map_or("-".into(), mb),
            zip_ratio,
            row.arm64_zip.map_or("-".into(), mb),
        );
    }
    println!(
        "(medians of {} spawns; warm p50/p99 over {} invokes; times in ms)",
        args.spawns,
        args.spawns * args.warm
    );
}
