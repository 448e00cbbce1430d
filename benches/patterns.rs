//! What each access pattern costs, next to a baseline measured alongside it: one bare SDK
//! `GetItem` against the same embedded engine, made right before each of the pattern's runs. Every pattern goes through its real handler (the
//! request API Gateway would hand the Lambda), so the figures include validation, the SDK, the
//! engine's HTTP endpoint and the response; the ratio says how many "bare reads" a pattern
//! costs. It prints figures and asserts nothing: `cargo bench --bench patterns`.

mod common;

use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity};
use serde_json::{Value, json};
use singlet::serve::auth::Authorizer;
use singlet::serve::{engine, front_door};
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use singlet_functions::request::respond;
use singlet_functions::routes::Route;
use std::time::{Duration, Instant};

const RUNS: usize = 300;

/// The runner's authorizer, and a token with every scope it grants.
fn tokens() -> &'static (Authorizer, String) {
    static TOKENS: std::sync::OnceLock<(Authorizer, String)> = std::sync::OnceLock::new();
    TOKENS.get_or_init(common::authorizer_and_token)
}

/// The request API Gateway would hand the function, through the runner's own route matcher.
fn request(
    method: &str,
    path: &str,
    body: Option<Value>,
    extra: &[(&'static str, String)],
) -> (&'static Route, lambda_http::Request) {
    let mut headers = axum::http::HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    headers.insert(
        "authorization",
        format!("Bearer {}", tokens().1).parse().unwrap(),
    );
    for (name, value) in extra {
        headers.insert(*name, value.parse().unwrap());
    }
    let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    front_door::lambda_request(
        &tokens().0,
        &method.parse().unwrap(),
        &path.parse().unwrap(),
        &headers,
        &body,
    )
    .unwrap_or_else(|_| panic!("{method} {path} is a declared route"))
}

/// The function's answer to one request. The request is built, and its token checked, before
/// the returned future runs: that is API Gateway's work on AWS, so a measured run times the
/// function alone, as the baseline times the bare call alone.
fn call<'c>(
    ctx: &'c Ctx,
    method: &str,
    path: impl Into<String>,
    body: Option<Value>,
) -> impl std::future::Future<Output = Value> + 'c {
    let path = path.into();
    let (route, req) = request(method, &path, body, &[]);
    let method = method.to_owned();
    async move {
        let response = respond(ctx, route, req).await;
        assert!(
            response.status().is_success(),
            "{method} {path}: {:?}",
            response.body()
        );
        serde_json::from_slice(response.body().as_ref()).unwrap_or(Value::Null)
    }
}

/// One pattern's figures: its median and 90th percentile, and the median of the bare calls made
/// between its runs.
struct Row {
    name: &'static str,
    median: Duration,
    p90: Duration,
    bare: Duration,
}

/// `RUNS` runs of the future `f(i)`, each timed from its first poll (what `f` does before it
/// answers the future is preparation, not measured) and each right after one run of `bare`: the
/// pattern and its baseline see the same moments of a shared machine, so their ratio holds
/// while the machine's speed drifts.
async fn measure<B, BareFut, F, Fut, T>(name: &'static str, bare: &B, mut f: F) -> Row
where
    B: Fn() -> BareFut,
    BareFut: std::future::Future<Output = ()>,
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut times = Vec::with_capacity(RUNS);
    let mut bare_times = Vec::with_capacity(RUNS);
    for i in 0..RUNS {
        let run = bare();
        let started = Instant::now();
        run.await;
        bare_times.push(started.elapsed());
        let run = f(i);
        let started = Instant::now();
        run.await;
        times.push(started.elapsed());
    }
    times.sort();
    bare_times.sort();
    Row {
        name,
        median: times[RUNS / 2],
        p90: times[RUNS * 9 / 10],
        bare: bare_times[RUNS / 2],
    }
}

#[tokio::main]
async fn main() {
    let (client, _) = engine::start_in_memory("singlet").await;
    let ctx = Ctx::new(client, "singlet", CursorKeys::random());

    let vehicle = call(
        &ctx,
        "POST",
        "/vehicles",
        Some(json!({"plate": "BASE-0", "chassis": "BASE-0", "depot": "d"})),
    )
    .await;
    let vehicle_id = vehicle["vehicleId"].as_str().unwrap().to_owned();
    // One strongly consistent GetItem of the vehicle, made with the SDK alone: without and with
    // the consumed capacity per index that every handler's call asks for (the data layer meters
    // each request), so what the metering alone adds shows next to the handlers.
    let bare_get = |capacity: ReturnConsumedCapacity| {
        let ctx = &ctx;
        let key = format!("VEHICLE#{vehicle_id}");
        async move {
            ctx.db
                .get_item()
                .table_name("singlet")
                .key("PK", AttributeValue::S(key.clone()))
                .key("SK", AttributeValue::S(key))
                .consistent_read(true)
                .return_consumed_capacity(capacity)
                .send()
                .await
                .unwrap();
        }
    };
    let bare = || bare_get(ReturnConsumedCapacity::None);
    // The one request of register-vehicle (its four conditional puts and two checks, for fresh
    // numbers `n`), made with the SDK alone: what a creating pattern costs before its handler's
    // own work.
    let bare_registration = |n: usize, capacity: ReturnConsumedCapacity| {
        let request = ctx
            .db
            .transact_write_items()
            .set_transact_items(Some(common::registration_as_sent(&ctx, n)))
            .return_consumed_capacity(capacity);
        async move {
            request.send().await.unwrap();
        }
    };

    let mut rows = vec![
        measure("bare GetItem, capacity per index", &bare, |_| {
            bare_get(ReturnConsumedCapacity::Indexes)
        })
        .await,
        measure("bare registration", &bare, |i| {
            bare_registration(i, ReturnConsumedCapacity::None)
        })
        .await,
        measure("bare registration, capacity per index", &bare, |i| {
            bare_registration(RUNS + i, ReturnConsumedCapacity::Indexes)
        })
        .await,
        // What the runner's front door does for a request before the function runs (its token
        // check, the payload-2.0 event built and parsed by `lambda_http`): no I/O, timed.
        measure("front door: get-vehicle's event, no I/O", &bare, |_| {
            let path = format!("/vehicles/{vehicle_id}");
            async move {
                request("GET", &path, None, &[]);
            }
        })
        .await,
        measure("get-vehicle (GetItem)", &bare, |_| {
            call(&ctx, "GET", format!("/vehicles/{vehicle_id}"), None)
        })
        .await,
        measure("register-vehicle (4 puts, 2 checks)", &bare, |i| {
            call(
                &ctx,
                "POST",
                "/vehicles",
                Some(json!({"plate": format!("P-{i}"), "chassis": format!("C-{i}"), "depot": "d"})),
            )
        })
        .await,
        measure("change-plate (read + one transaction)", &bare, |i| {
            call(
                &ctx,
                "PUT",
                format!("/vehicles/{vehicle_id}/plate"),
                Some(json!({"plate": format!("NEW-{i}")})),
            )
        })
        .await,
        measure("create-account (one transaction)", &bare, |i| {
            call(
                &ctx,
                "POST",
                "/accounts",
                Some(json!({"email": format!("u{i}@example.com"), "username": format!("user{i}")})),
            )
        })
        .await,
    ];
    call(
        &ctx,
        "POST",
        "/resources",
        Some(json!({"resourceId": "bench", "status": "s0", "actor": "a"})),
    )
    .await;
    let mut version = 1;
    rows.push(
        measure("change-resource (read + guarded transaction)", &bare, |i| {
            let (route, req) = request(
                "PATCH",
                "/resources/bench",
                Some(json!({"status": format!("s{i}"), "action": "a", "actor": "a"})),
                &[("if-match", format!("\"{version}\""))],
            );
            version += 1;
            let ctx = &ctx;
            async move {
                let response = respond(ctx, route, req).await;
                assert_eq!(response.status(), 200);
            }
        })
        .await,
    );

    println!(
        "{RUNS} runs each, against the embedded engine on a loopback port, each after one bare \
         GetItem (no capacity asked)"
    );
    println!(
        "{:<46} {:>10} {:>10} {:>10} {:>8}",
        "pattern", "median", "p90", "bare", "× bare"
    );
    for row in rows {
        println!(
            "{:<46} {:>8.0}µs {:>8.0}µs {:>8.0}µs {:>7.2}×",
            row.name,
            row.median.as_secs_f64() * 1e6,
            row.p90.as_secs_f64() * 1e6,
            row.bare.as_secs_f64() * 1e6,
            row.median.as_secs_f64() / row.bare.as_secs_f64()
        );
    }
}
