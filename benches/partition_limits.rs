//! What the per-key limiter (src/partition_limits/) costs: the handlers' p50 under 32 concurrent
//! clients on an engine behind the limiter against the same run on one without it
//! (`--partition-limits off`), rounds alternated so both see the same moments of a shared machine;
//! and the meter's memory over a ten-minute run (on its own clock) that touches a million
//! distinct keys. It prints figures and asserts only that the memory is bounded:
//! `cargo bench --bench partition_limits`.

use serde_json::{Value, json};
use singlet::serve::auth::Authorizer;
use singlet::serve::partition_limits::heat::{Charge, HEAT_SECONDS, KEPT_PER_FAMILY, Kind, Meter};
use singlet::serve::partition_limits::{self, Switch};
use singlet::serve::{engine, front_door};
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use singlet_functions::request::respond;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CLIENTS: usize = 32;
/// Requests per client per round: a registration and a read of what it registered, in turn.
const PER_CLIENT: usize = 20;
const ROUNDS: usize = 3;

fn token() -> &'static (Authorizer, String) {
    static TOKEN: std::sync::OnceLock<(Authorizer, String)> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| {
        let dir = std::env::temp_dir().join("singlet-bench-keys");
        let (authorizer, issuer) = Authorizer::local(&dir).unwrap();
        let scopes = singlet_functions::routes::all_scopes().join(" ");
        let token = issuer.mint("bench", &scopes, &Default::default(), 3600);
        (authorizer, token)
    })
}

/// One request through its handler, as the runner's front door hands it; its time.
async fn call(ctx: &Ctx, method: &str, path: &str, body: Option<Value>) -> (Duration, Value) {
    let mut headers = axum::http::HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    headers.insert(
        "authorization",
        format!("Bearer {}", token().1).parse().unwrap(),
    );
    let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let (route, request) = front_door::lambda_request(
        &token().0,
        &method.parse().unwrap(),
        &path.parse().unwrap(),
        &headers,
        &body,
    )
    .unwrap();
    let started = Instant::now();
    let response = respond(ctx, route, request).await;
    let took = started.elapsed();
    assert!(
        response.status().is_success(),
        "{method} {path}: {:?}",
        response.body()
    );
    (
        took,
        serde_json::from_slice(response.body().as_ref()).unwrap_or(Value::Null),
    )
}

/// One round on `ctx`: every client registers vehicles and reads each back; every request's time.
async fn round(ctx: &Ctx, round: usize) -> Vec<Duration> {
    let clients = (0..CLIENTS).map(|c| {
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let mut times = Vec::new();
            for i in 0..PER_CLIENT / 2 {
                let n = format!("{round}-{c}-{i}");
                let body =
                    json!({"plate": format!("B{n}"), "chassis": format!("C{n}"), "depot": "d"});
                let (took, vehicle) = call(&ctx, "POST", "/vehicles", Some(body)).await;
                times.push(took);
                let id = vehicle["vehicleId"].as_str().unwrap().to_owned();
                let (took, _) = call(&ctx, "GET", &format!("/vehicles/{id}"), None).await;
                times.push(took);
            }
            times
        })
    });
    let mut times = Vec::new();
    for client in futures::future::join_all(clients).await {
        times.extend(client.unwrap());
    }
    times
}

async fn context(switch: Switch) -> Ctx {
    partition_limits::set(switch);
    let (client, _) = engine::start_in_memory("singlet").await;
    Ctx::new(client, "singlet", CursorKeys::random())
}

fn percentile(times: &mut [Duration], p: usize) -> Duration {
    times.sort();
    times[times.len() * p / 100]
}

fn resident_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[tokio::main]
async fn main() {
    let limited = context(Switch::On).await;
    let unlimited = context(Switch::Off).await;
    partition_limits::set(Switch::On);
    // Warm both (connections, the table's schema in the limiter).
    round(&limited, 100).await;
    round(&unlimited, 100).await;
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        on.extend(round(&limited, r).await);
        off.extend(round(&unlimited, r).await);
    }
    let (on50, off50) = (percentile(&mut on, 50), percentile(&mut off, 50));
    let (on90, off90) = (percentile(&mut on, 90), percentile(&mut off, 90));
    println!(
        "{CLIENTS} clients, {} requests each way (register-vehicle, get-vehicle in turn)",
        on.len()
    );
    println!("  limits on : p50 {on50:>9.2?}  p90 {on90:>9.2?}");
    println!("  limits off: p50 {off50:>9.2?}  p90 {off90:>9.2?}");
    println!(
        "  the limiter's cost on p50: {:+.1} %",
        (on50.as_secs_f64() / off50.as_secs_f64() - 1.0) * 100.0
    );

    // The meter alone: ten minutes of its clock, a million distinct keys in all.
    let meter = Arc::new(Meter::default());
    let before = resident_kib();
    let seconds = 600;
    let per_second = 1_000_000 / seconds;
    let started = Instant::now();
    for second in 0..seconds {
        for k in 0..per_second {
            let charge = Charge {
                table: "singlet".into(),
                index: None,
                pk: format!("PATRON#{second}-{k}"),
                kind: Kind::Write,
                halves: 2,
            };
            meter.take(second as i64, &[charge]).unwrap();
        }
    }
    let took = started.elapsed();
    let after = resident_kib();
    let kept = meter.keys_kept();
    println!(
        "meter: {} distinct keys over {seconds} s of its clock in {took:.2?} ({:.2?} a charge)",
        per_second * seconds,
        took / (per_second * seconds) as u32
    );
    println!(
        "  keys kept: {} this second + {kept} hot keys of the last {HEAT_SECONDS} s (bound: {} per family)",
        meter.keys_this_second(),
        HEAT_SECONDS as usize * KEPT_PER_FAMILY
    );
    if let (Some(before), Some(after)) = (before, after) {
        println!("  resident memory: {before} KiB before, {after} KiB after");
    }
    assert!(kept <= HEAT_SECONDS as usize * KEPT_PER_FAMILY);
    assert!(meter.keys_this_second() <= per_second);
}
