//! The two bootstraps of the API's stack, as `sam build` builds them, run under the mock Runtime
//! API against the embedded engine: `singlet-lambda` serves the routes and the scheduled marker,
//! `singlet-events-lambda` the stream-fed publisher with its EventBridge client. Each refuses, at
//! its cold start and saying which binary serves it, a function that is the other's: a template
//! that gave a function the wrong binary fails its first invocation, not a later one.

use crate::domain_events::stream_of;
use crate::runtime_api::{
    Invocation, RuntimeApi, binary_built, lambda_env, registration_event, trace_id,
};
use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::{Value, json};
use singlet::serve::engine::start_in_memory;
use singlet::serve::event_source::{enable_stream, lambda_record};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TABLE: &str = "singlet-bootstraps";
/// Not a published key: a Lambda refuses one.
const CURSOR_KEY: &str = "singlet-bootstraps-test-key-0123456789abcdef";
const WAIT: Duration = Duration::from_secs(120);

/// `binary` serving under `env`, its standard output and error discarded; killed when dropped.
struct Bootstrap(Child);

impl Bootstrap {
    fn start(binary: &str, env: Vec<(String, String)>) -> Self {
        let child = Command::new(binary_built(binary, "dev"))
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the bootstrap starts");
        Self(child)
    }
}

impl Drop for Bootstrap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A stand-in for EventBridge's endpoint: it keeps every `PutEvents` body and accepts every entry.
async fn eventbridge() -> (String, Arc<Mutex<Vec<Value>>>, tokio::task::JoinHandle<()>) {
    async fn put_events(
        State(seen): State<Arc<Mutex<Vec<Value>>>>,
        headers: HeaderMap,
        body: String,
    ) -> ([(&'static str, &'static str); 1], String) {
        assert_eq!(
            headers.get("x-amz-target").and_then(|v| v.to_str().ok()),
            Some("AWSEvents.PutEvents")
        );
        let body: Value = serde_json::from_str(&body).unwrap();
        let entries = body["Entries"].as_array().map_or(0, Vec::len);
        seen.lock().unwrap().push(body);
        let accepted: Vec<Value> = (0..entries)
            .map(|n| json!({ "EventId": format!("event-{n}") }))
            .collect();
        (
            [("content-type", "application/x-amz-json-1.1")],
            json!({ "FailedEntryCount": 0, "Entries": accepted }).to_string(),
        )
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let app = axum::Router::new()
        .fallback(axum::routing::post(put_events))
        .with_state(seen.clone());
    let (url, server) = crate::harness::serve_on_loopback(app).await;
    (url, seen, server)
}

/// The table's stream from its start, as the Lambda event a mapping hands the publisher.
async fn stream_event(db: &aws_sdk_dynamodb::Client, engine: &str) -> Value {
    let (streams, arn, shard) = stream_of(db, engine, TABLE).await;
    let iterator = streams
        .get_shard_iterator()
        .stream_arn(&arn)
        .shard_id(shard)
        .shard_iterator_type(ShardIteratorType::TrimHorizon)
        .send()
        .await
        .unwrap()
        .shard_iterator
        .unwrap();
    let read = streams
        .get_records()
        .shard_iterator(iterator)
        .send()
        .await
        .unwrap();
    let records: Vec<Value> = read
        .records()
        .iter()
        .map(|record| lambda_record(record, &arn))
        .collect();
    json!({ "Records": records })
}

/// A vehicle registered by the API's bootstrap is published by the events bootstrap: its
/// EventBridge client puts the vehicle's event on the bus its variable names, and the batch
/// answers no failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_bootstrap_writes_what_the_events_bootstrap_publishes() {
    let (db, engine) = start_in_memory(TABLE).await;
    enable_stream(&db, TABLE).await.unwrap();

    let mut api = RuntimeApi::start(1).await;
    let _registering = Bootstrap::start(
        "singlet-lambda",
        lambda_env("register-vehicle", api.addr, &engine, TABLE, CURSOR_KEY),
    );
    api.push(Invocation {
        request_id: "register-0".into(),
        trace_id: trace_id(0),
        timeout: Duration::from_secs(10),
        event: registration_event(0),
    });
    let registered = api.answer(WAIT).await;
    assert!(!registered.failed, "{}", registered.body);
    let response: Value = serde_json::from_str(&registered.body).unwrap();
    assert_eq!(response["statusCode"], 201, "{response}");

    let event = stream_event(&db, &engine).await;
    assert!(
        !event["Records"].as_array().unwrap().is_empty(),
        "the registration wrote to the stream"
    );
    let (bus_url, put, _bus) = eventbridge().await;
    let mut events = RuntimeApi::start(1).await;
    let mut env = lambda_env("publish-events", events.addr, &engine, TABLE, CURSOR_KEY);
    env.push(("EVENT_BUS_NAME".into(), "singlet-test-events".into()));
    env.push(("AWS_ENDPOINT_URL_EVENTBRIDGE".into(), bus_url));
    let _publishing = Bootstrap::start("singlet-events-lambda", env);
    events.push(Invocation {
        request_id: "publish-0".into(),
        trace_id: trace_id(1),
        timeout: Duration::from_secs(60),
        event: event.to_string(),
    });
    let published = events.answer(WAIT).await;
    assert!(!published.failed, "{}", published.body);
    let answer: Value = serde_json::from_str(&published.body).unwrap();
    assert_eq!(answer["batchItemFailures"], json!([]), "{answer}");

    let put = put.lock().unwrap().clone();
    let entries: Vec<&Value> = put
        .iter()
        .flat_map(|body| body["Entries"].as_array().unwrap())
        .collect();
    assert_eq!(entries.len(), 1, "one event for one registration: {put:?}");
    assert_eq!(entries[0]["EventBusName"], "singlet-test-events");
    assert_eq!(entries[0]["DetailType"], "VehicleRegistered", "{put:?}");
    let detail: Value = serde_json::from_str(entries[0]["Detail"].as_str().unwrap()).unwrap();
    assert_eq!(
        detail["subject"]["id"],
        response_body(&response)["vehicleId"],
        "the event is the registered vehicle's"
    );
    assert_eq!(entries[0]["Source"], "singlet.fleet");
}

fn response_body(response: &Value) -> Value {
    serde_json::from_str(response["body"].as_str().unwrap()).unwrap()
}

/// Each bootstrap refuses, at its cold start, a function the other serves: it exits before asking
/// for an invocation (on AWS, the function's init fails), its one log line naming what it serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bootstrap_refuses_the_others_functions_at_its_cold_start() {
    let (_, engine) = start_in_memory(TABLE).await;
    let api = RuntimeApi::start(1).await;
    for (binary, function, says) in [
        (
            "singlet-lambda",
            "publish-events",
            "singlet-lambda serves the routes",
        ),
        (
            "singlet-events-lambda",
            "register-vehicle",
            "singlet-events-lambda serves the stream-fed functions",
        ),
    ] {
        let exe = binary_built(binary, "dev");
        let env = lambda_env(function, api.addr, &engine, TABLE, CURSOR_KEY);
        let ran = tokio::task::spawn_blocking(move || {
            Command::new(exe)
                .env_clear()
                .envs(env)
                .stdin(Stdio::null())
                .output()
                .expect("the bootstrap runs")
        })
        .await
        .unwrap();
        assert!(!ran.status.success(), "{binary} serving {function} started");
        let logged = String::from_utf8_lossy(&ran.stdout);
        assert!(
            logged.contains(&format!("SINGLET_FUNCTION={function}")) && logged.contains(says),
            "{binary} serving {function} logged: {logged}"
        );
    }
    assert_eq!(api.most_polling(), 0, "neither asked for an invocation");
}
