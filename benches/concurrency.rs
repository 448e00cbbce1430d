//! One process serving many invocations at once (Lambda Managed Instances) against as many
//! processes serving one each (Lambda's default model), side by side in one run: the real Lambda
//! binary (`singlet-lambda`, serving `get-vehicle`) under the mock Runtime API of the concurrency
//! test (`tests/api/runtime_api.rs`), against the embedded engine behind a front door that adds
//! DynamoDB's round trip to every call (`--dynamodb-ms`, 5 ms by default: a handler that mostly
//! waits on DynamoDB, as this service's do).
//!
//! For each level N (1, 8, 32, 64 by default), N × `--per` invocations are queued and served by:
//! - **one process** with `AWS_LAMBDA_MAX_CONCURRENCY=N`, a multi-threaded runtime;
//! - **N processes**, each without the variable, one invocation at a time (the default model).
//!
//! It prints requests a second (from the first invocation handed out to the last answered),
//! p50 and p99 of each invocation's time from its handing out to its answer, and peak resident
//! memory (`VmHWM`, summed over the processes) per request in flight (divided by N), with the
//! one process's figures as ratios of the N processes'. It asserts only that every answer is a
//! `200`. The processes are started and polling before the clock starts: this measures warm
//! serving, not cold starts (`benches/cold_start.rs` does).
//!
//! ```sh
//! cargo bench --bench concurrency                              # 1 8 32 64, dev profile
//! cargo bench --bench concurrency -- 8 64 --per 100 --profile release --dynamodb-ms 10
//! ```

#[path = "../tests/api/runtime_api.rs"]
mod runtime_api;
/// A TCP front door to the engine that holds every chunk the engine sends back for a delay:
/// DynamoDB's round trip, on a loopback engine.
#[path = "../tests/api/slow_proxy.rs"]
mod slow_proxy;

use runtime_api::{Invocation, RuntimeApi, lambda_binary, lambda_env, peak_rss, trace_id};
use singlet::invoke::invoke;
use singlet::serve::engine;
use singlet_functions::{Ctx, cursor::CursorKeys};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const TABLE: &str = "singlet-bench";
/// The key the sample events' ids are derived under (as `benches/cold_start.rs`).
const CURSOR_KEY: &str = "singlet-cold-start-bench-key-0123456789abcdef";
const FUNCTION: &str = "get-vehicle";
const WAIT: Duration = Duration::from_secs(300);

struct Args {
    levels: Vec<usize>,
    per: usize,
    profile: String,
    dynamodb_ms: u64,
}

fn args() -> Args {
    let mut args = Args {
        levels: Vec::new(),
        per: 40,
        profile: "dev".into(),
        dynamodb_ms: 5,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut number = |name: &str| -> u64 {
            it.next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{name} takes a number"))
        };
        match arg.as_str() {
            "--bench" => {}
            "--per" => args.per = number("--per").max(1) as usize,
            "--dynamodb-ms" => args.dynamodb_ms = number("--dynamodb-ms"),
            "--profile" => args.profile = it.next().expect("--profile takes a profile's name"),
            level => args.levels.push(
                level
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .unwrap_or_else(|| panic!("{level:?}: a level is a number above 0")),
            ),
        }
    }
    if args.levels.is_empty() {
        args.levels = vec![1, 8, 32, 64];
    }
    args
}

/// One side's figures at one level.
struct Side {
    per_second: f64,
    p50: Duration,
    p99: Duration,
    /// Peak resident memory of its processes, summed, per request in flight.
    bytes_per_request: f64,
}

fn percentile(values: &mut [Duration], p: f64) -> Duration {
    values.sort();
    values[((values.len() as f64 * p).ceil() as usize).clamp(1, values.len()) - 1]
}

/// `processes` processes, each serving `concurrency` at once, serve `total` invocations.
async fn serve(
    vehicle: &str,
    exe: &std::path::Path,
    processes: usize,
    concurrency: usize,
    total: usize,
    engine: &str,
) -> Side {
    let mut api = RuntimeApi::start(1).await;
    let sample = std::fs::read_to_string(format!("{ROOT}/events/{FUNCTION}.json")).unwrap();
    let sample_id =
        serde_json::from_str::<serde_json::Value>(&sample).unwrap()["pathParameters"]["vehicleId"]
            .as_str()
            .unwrap()
            .to_owned();
    let event = sample.replace(&sample_id, vehicle);
    let mut children: Vec<Child> = (0..processes)
        .map(|_| {
            let mut env = lambda_env(FUNCTION, api.addr, engine, TABLE, CURSOR_KEY);
            if concurrency > 1 {
                env.push(("AWS_LAMBDA_MAX_CONCURRENCY".into(), concurrency.to_string()));
            }
            Command::new(exe)
                .env_clear()
                .envs(env)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("the Lambda binary starts")
        })
        .collect();
    // Warm: every process started and every slot polling before the clock starts.
    let ready = Instant::now();
    while api.most_polling() < processes * concurrency {
        assert!(ready.elapsed() < WAIT, "the processes never all polled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = Instant::now();
    for n in 0..total {
        api.push(Invocation {
            request_id: format!("bench-{n}"),
            trace_id: trace_id(n),
            timeout: Duration::from_secs(10),
            event: event.clone(),
        });
    }
    let mut latencies = Vec::with_capacity(total);
    for _ in 0..total {
        let answer = api.answer(WAIT).await;
        assert!(!answer.failed, "{}", answer.body);
        assert!(
            answer.body.contains("\"statusCode\":200"),
            "{}",
            answer.body
        );
        latencies.push(answer.latency);
    }
    let elapsed = started.elapsed();
    let rss: u64 = children.iter().map(|child| peak_rss(child.id())).sum();
    for child in &mut children {
        let _ = child.kill();
        let _ = child.wait();
    }
    let in_flight = (processes * concurrency) as f64;
    Side {
        per_second: total as f64 / elapsed.as_secs_f64(),
        p50: percentile(&mut latencies, 0.50),
        p99: percentile(&mut latencies, 0.99),
        bytes_per_request: rss as f64 / in_flight,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = args();
    let exe = lambda_binary(&args.profile);
    let (client, own_endpoint) = engine::start_in_memory(TABLE).await;
    let ctx = Ctx::new(client, TABLE, CursorKeys::new(CURSOR_KEY));
    let registration = std::fs::read_to_string(format!("{ROOT}/events/register-vehicle.json"));
    let registered = invoke(&ctx, "register-vehicle", &registration.unwrap())
        .await
        .unwrap();
    // The vehicle's id is derived from the event's Idempotency-Key under this run's key, not the
    // one the sample get-vehicle event was written under: the event asks for the id made here.
    let body: serde_json::Value =
        serde_json::from_str(registered["body"].as_str().expect("a body")).expect("JSON");
    let vehicle = body["vehicleId"].as_str().expect("a vehicle id").to_owned();
    let engine =
        slow_proxy::slow_proxy(&own_endpoint, Duration::from_millis(args.dynamodb_ms)).await;
    eprintln!(
        "{FUNCTION}, {} profile, {} ms per DynamoDB call, {} invocations per slot, {} cores",
        args.profile,
        args.dynamodb_ms,
        args.per,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:>5} {:<13} {:>9} {:>9} {:>9} {:>11}",
        "N", "model", "req/s", "p50 ms", "p99 ms", "MB/in flight"
    );
    for &level in &args.levels {
        let total = level * args.per;
        let one = serve(&vehicle, &exe, 1, level, total, &engine).await;
        let many = serve(&vehicle, &exe, level, 1, total, &engine).await;
        for (model, side) in [("1 process", &one), (&*format!("{level} processes"), &many)] {
            println!(
                "{:>5} {:<13} {:>9.0} {:>9} {:>9} {:>11.2}",
                level,
                model,
                side.per_second,
                ms(side.p50),
                ms(side.p99),
                side.bytes_per_request / 1e6
            );
        }
        println!(
            "{:>5} {:<13} {:>8.2}× {:>8.2}× {:>8.2}× {:>10.2}×",
            level,
            "ratio",
            one.per_second / many.per_second,
            one.p50.as_secs_f64() / many.p50.as_secs_f64(),
            one.p99.as_secs_f64() / many.p99.as_secs_f64(),
            one.bytes_per_request / many.bytes_per_request
        );
    }
    println!(
        "(ratio: the one process's figure over the N processes'; warm, after every process polled)"
    );
}
