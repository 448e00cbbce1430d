//! The local runner under load: 32 concurrent clients, each sending its requests one after the
//! other over HTTP to the runner's front door (in this process, on a loopback port, with the
//! runner's own authorizer checking a token with every scope), next to the same DynamoDB calls
//! made straight on the engine with the SDK client by 32 concurrent tasks. For a read
//! (`get-vehicle`: one `GetItem`) and a write (`register-vehicle`: one `TransactWriteItems` of
//! four puts and two checks, the one the handler sends, built with its own types and conditions:
//! `common::registration_as_sent`), it prints
//! p50 and p99 of both, their ratio, and the errors (any non-2xx answer or failed call); the two
//! are measured in blocks taken in turn, so that a shared machine's drift falls on both. It
//! asserts nothing but zero errors. A third row times the front door alone: the read without a
//! token, which it refuses (`401`) before any token check or function runs, next to the direct
//! read. `cargo bench --bench load [-- REQUESTS_PER_CLIENT]`.

mod common;

use aws_sdk_dynamodb::types::ReturnConsumedCapacity;
use common::registration_as_sent;
use serde_json::json;
use singlet::serve::engine;
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use singlet_functions::store::key_item;
use singlet_shared::keys;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const CLIENTS: usize = 32;
/// Requests each client sends, after a warm-up round that is not measured.
const REQUESTS_PER_CLIENT: usize = 50;
const WARM_UP: usize = 5;
/// The measured requests come in this many blocks, the direct calls' and the API's in turn, so
/// that a shared machine's drift falls on both alike.
const BLOCKS: usize = 5;

/// Latencies of every request and the count of errors.
struct Measured {
    times: Vec<Duration>,
    errors: usize,
}

impl Measured {
    fn merge(mut self, other: Measured) -> Measured {
        self.times.extend(other.times);
        self.times.sort();
        self.errors += other.errors;
        self
    }

    fn percentile(&self, p: f64) -> Duration {
        let index = ((self.times.len() as f64 - 1.0) * p).round() as usize;
        self.times[index]
    }
}

/// `CLIENTS` tasks, each running `call(n)` `per_client` times in turn (`n` unique across every
/// task and round); `call` answers whether it succeeded.
async fn under_load<F, Fut>(per_client: usize, first: usize, call: F) -> Measured
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send,
{
    let call = Arc::new(call);
    let errors = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let call = call.clone();
            let errors = errors.clone();
            tokio::spawn(async move {
                let mut times = Vec::with_capacity(per_client);
                for round in 0..per_client {
                    let started = Instant::now();
                    let ok = call(first + round * CLIENTS + client).await;
                    times.push(started.elapsed());
                    if !ok {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                times
            })
        })
        .collect();
    let mut times = Vec::new();
    for task in tasks {
        times.extend(task.await.expect("a client finishes"));
    }
    times.sort();
    Measured {
        times,
        errors: errors.load(Ordering::Relaxed),
    }
}

/// Sends `request`: whether it was answered, whole, with a status `expected` accepts.
async fn answered(
    request: reqwest::RequestBuilder,
    expected: fn(reqwest::StatusCode) -> bool,
) -> bool {
    match request.send().await {
        Ok(response) => expected(response.status()) && response.bytes().await.is_ok(),
        Err(_) => false,
    }
}

/// `direct` and `api` under load, `per_client` requests per client each, in `BLOCKS` blocks taken
/// in turn; numbers from `first` on.
async fn in_turn<D, DFut, A, AFut>(
    per_client: usize,
    first: usize,
    direct: D,
    api: A,
) -> (Measured, Measured)
where
    D: Fn(usize) -> DFut + Clone + Send + Sync + 'static,
    DFut: Future<Output = bool> + Send,
    A: Fn(usize) -> AFut + Clone + Send + Sync + 'static,
    AFut: Future<Output = bool> + Send,
{
    let per_block = per_client.div_ceil(BLOCKS);
    let none = || Measured {
        times: Vec::new(),
        errors: 0,
    };
    let (mut direct_measured, mut api_measured) = (none(), none());
    for block in 0..BLOCKS {
        let first = first + block * per_block * CLIENTS;
        direct_measured = direct_measured.merge(under_load(per_block, first, direct.clone()).await);
        api_measured = api_measured.merge(under_load(per_block, first, api.clone()).await);
    }
    (direct_measured, api_measured)
}

fn row(name: &str, api: &Measured, direct: &Measured) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{name:<38} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>7.2}× {:>7.2}× {:>7}",
        ms(direct.percentile(0.5)),
        ms(direct.percentile(0.99)),
        ms(api.percentile(0.5)),
        ms(api.percentile(0.99)),
        api.percentile(0.5).as_secs_f64() / direct.percentile(0.5).as_secs_f64(),
        api.percentile(0.99).as_secs_f64() / direct.percentile(0.99).as_secs_f64(),
        api.errors + direct.errors
    );
}

#[tokio::main]
async fn main() {
    let per_client = common::requests_per_client(REQUESTS_PER_CLIENT);
    let (client, _) = engine::start_in_memory("singlet").await;
    let ctx = Ctx::new(client, "singlet", CursorKeys::random());

    let (base, bearer) = common::front_door_on_loopback(&ctx).await;
    let http = reqwest::Client::new();

    let vehicle = http
        .post(format!("{base}/vehicles"))
        .header("authorization", &bearer)
        .json(&json!({"plate": "READ-1", "chassis": "READ-1", "depot": "north"}))
        .send()
        .await
        .unwrap();
    assert_eq!(vehicle.status(), 201);
    let vehicle: serde_json::Value = vehicle.json().await.unwrap();
    let vehicle_id = vehicle["vehicleId"].as_str().unwrap().to_owned();

    let get_over_http = {
        let (http, url, bearer) = (
            http.clone(),
            format!("{base}/vehicles/{vehicle_id}"),
            bearer.clone(),
        );
        move |_: usize| {
            let request = http.get(&url).header("authorization", &bearer);
            answered(request, |status| status.is_success())
        }
    };
    let get_direct = {
        let ctx = ctx.clone();
        let key = key_item(&keys::vehicle(
            &singlet_shared::Id::parse(&vehicle_id).unwrap(),
        ));
        move |_: usize| {
            let request = ctx
                .db
                .get_item()
                .table_name(&*ctx.table)
                .set_key(Some(key.clone()))
                .consistent_read(true)
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
            async move { request.send().await.is_ok_and(|out| out.item.is_some()) }
        }
    };
    // The front door alone: the same request without a token is API Gateway's `401`, answered
    // before any token check or function runs, so it times the HTTP exchange itself.
    let refused_over_http = {
        let (http, url) = (http.clone(), format!("{base}/vehicles/{vehicle_id}"));
        move |_: usize| {
            let request = http.get(&url);
            answered(request, |status| status == 401)
        }
    };
    let register_over_http = {
        let (http, url, bearer) = (http.clone(), format!("{base}/vehicles"), bearer.clone());
        move |n: usize| {
            let request = http.post(&url).header("authorization", &bearer).json(
                &json!({"plate": format!("P-{n}"), "chassis": format!("C-{n}"), "depot": "north"}),
            );
            answered(request, |status| status.is_success())
        }
    };
    let register_direct = {
        let ctx = ctx.clone();
        move |n: usize| {
            let request = ctx
                .db
                .transact_write_items()
                .set_transact_items(Some(registration_as_sent(&ctx, n)))
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes);
            async move { request.send().await.is_ok() }
        }
    };

    // Warm-up: connections open, the engine's pages in memory. Unique numbers never repeat.
    let measured_from = WARM_UP * CLIENTS;
    under_load(WARM_UP, 0, get_direct.clone()).await;
    under_load(WARM_UP, 0, get_over_http.clone()).await;
    under_load(WARM_UP, 0, register_direct.clone()).await;
    under_load(WARM_UP, 0, register_over_http.clone()).await;
    under_load(WARM_UP, 0, refused_over_http.clone()).await;

    let (read_direct, read_api) =
        in_turn(per_client, measured_from, get_direct, get_over_http).await;
    let (write_direct, write_api) = in_turn(
        per_client,
        measured_from,
        register_direct,
        register_over_http,
    )
    .await;
    let refused = under_load(per_client, measured_from, refused_over_http).await;

    println!(
        "{CLIENTS} concurrent clients × {per_client} requests each, in {BLOCKS} blocks taken in turn; direct: the SDK client on the engine, API: HTTP through the runner's front door"
    );
    println!(
        "{:<38} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7}",
        "pattern (ms)", "dir p50", "dir p99", "API p50", "API p99", "p50 ×", "p99 ×", "errors"
    );
    row("get-vehicle (GetItem)", &read_api, &read_direct);
    row(
        "register-vehicle (TransactWriteItems)",
        &write_api,
        &write_direct,
    );
    // Against the direct read: what the HTTP exchange with the front door costs by itself.
    row("front door alone (401, no token)", &refused, &read_direct);
    let errors = read_api.errors
        + read_direct.errors
        + write_api.errors
        + write_direct.errors
        + refused.errors;
    assert_eq!(errors, 0, "errors under load");
}
