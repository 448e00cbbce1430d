//! What each access pattern costs, next to a baseline measured in the same run: one bare SDK
//! `GetItem` against the same embedded engine. Every pattern goes through its real handler (the
//! request API Gateway would hand the Lambda), so the figures include validation, the SDK, the
//! engine's HTTP endpoint and the response; the ratio says how many "bare reads" a pattern
//! costs. It prints figures and asserts nothing: `cargo bench --bench patterns`.

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::{Body, Request, RequestExt};
use serde_json::{Value, json};
use singlet::engine;
use singlet_functions::paging::CursorKey;
use singlet_functions::routes::{ROUTES, respond};
use singlet_functions::{Ctx, table::ensure_table};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

const RUNS: usize = 300;

fn request(
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (Request, &'static singlet_functions::routes::Route) {
    let segments: Vec<String> = path
        .trim_start_matches('/')
        .split('/')
        .map(str::to_owned)
        .collect();
    let (route, params) = ROUTES
        .iter()
        .find_map(|r| r.matches(method, &segments).map(|p| (r, p)))
        .expect("a declared route");
    let body = body.map_or(Body::Empty, |b| Body::Text(b.to_string()));
    let req = lambda_http::http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body)
        .unwrap()
        .with_path_parameters(params);
    (req, route)
}

async fn call(ctx: &Ctx, method: &str, path: impl Into<String>, body: Option<Value>) -> Value {
    let path = path.into();
    let (req, route) = request(method, &path, body);
    let response = respond(ctx, route.handler, req).await;
    assert!(
        response.status().is_success(),
        "{method} {path}: {:?}",
        response.body()
    );
    serde_json::from_slice(response.body().as_ref()).unwrap_or(Value::Null)
}

/// The median and the 90th percentile of `RUNS` runs of `f(i)`.
async fn measure<F, Fut, T>(mut f: F) -> (Duration, Duration)
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut times = Vec::with_capacity(RUNS);
    for i in 0..RUNS {
        let started = Instant::now();
        f(i).await;
        times.push(started.elapsed());
    }
    times.sort();
    (times[RUNS / 2], times[RUNS * 9 / 10])
}

#[tokio::main]
async fn main() {
    let db = engine::open(None).unwrap();
    let endpoint = engine::serve(db, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .unwrap();
    let client = engine::local_client(&endpoint);
    ensure_table(&client, "singlet").await.unwrap();
    let ctx = Ctx::new(client, "singlet", CursorKey::random());

    let vehicle = call(
        &ctx,
        "POST",
        "/vehicles",
        Some(json!({"plate": "BASE-0", "chassis": "BASE-0", "depot": "d"})),
    )
    .await;
    let vehicle_id = vehicle["vehicleId"].as_str().unwrap().to_owned();
    let baseline = measure(|_| {
        let ctx = &ctx;
        let key = format!("VEHICLE#{vehicle_id}");
        async move {
            ctx.db
                .get_item()
                .table_name("singlet")
                .key("PK", AttributeValue::S(key.clone()))
                .key("SK", AttributeValue::S(key))
                .consistent_read(true)
                .send()
                .await
                .unwrap();
        }
    })
    .await;

    let mut rows: Vec<(&str, (Duration, Duration))> = vec![("baseline: bare GetItem", baseline)];
    rows.push((
        "get-vehicle (GetItem)",
        measure(|_| call(&ctx, "GET", format!("/vehicles/{vehicle_id}"), None)).await,
    ));
    rows.push((
        "register-vehicle (3-put transaction)",
        measure(|i| {
            call(
                &ctx,
                "POST",
                "/vehicles",
                Some(json!({"plate": format!("P-{i}"), "chassis": format!("C-{i}"), "depot": "d"})),
            )
        })
        .await,
    ));
    rows.push((
        "change-plate (read + 3-part transaction)",
        measure(|i| {
            call(
                &ctx,
                "PUT",
                format!("/vehicles/{vehicle_id}/plate"),
                Some(json!({"plate": format!("NEW-{i}")})),
            )
        })
        .await,
    ));
    rows.push((
        "create-account (3-put transaction)",
        measure(|i| {
            call(
                &ctx,
                "POST",
                "/accounts",
                Some(json!({"email": format!("u{i}@example.com"), "username": format!("user{i}")})),
            )
        })
        .await,
    ));
    call(
        &ctx,
        "POST",
        "/resources",
        Some(json!({"resourceId": "bench", "status": "s0", "actor": "a"})),
    )
    .await;
    let mut version = 1;
    rows.push((
        "change-resource (read + guarded transaction)",
        measure(|i| {
            let (req, route) = request(
                "PATCH",
                "/resources/bench",
                Some(json!({"status": format!("s{i}"), "action": "a", "actor": "a"})),
            );
            let (mut req, version_now) = (req, version);
            version += 1;
            req.headers_mut()
                .insert("if-match", format!("\"{version_now}\"").parse().unwrap());
            let ctx = &ctx;
            async move {
                let response = respond(ctx, route.handler, req).await;
                assert_eq!(response.status(), 200);
            }
        })
        .await,
    ));

    let base = baseline.0.as_secs_f64();
    println!("{RUNS} runs each, against the embedded engine on a loopback port");
    println!(
        "{:<46} {:>10} {:>10} {:>12}",
        "pattern", "median", "p90", "× baseline"
    );
    for (name, (median, p90)) in rows {
        println!(
            "{name:<46} {:>8.0}µs {:>8.0}µs {:>11.2}×",
            median.as_secs_f64() * 1e6,
            p90.as_secs_f64() * 1e6,
            median.as_secs_f64() / base
        );
    }
}
