//! `cargo run` itself: the runner binary serves the API on one port and the embedded engine's
//! DynamoDB endpoint on another, creates the table, and `invoke` runs one function on one event.

use crate::process::{self, Running};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A client carrying a token (every scope) that the runner, started with the tests' key
/// directory, accepts.
fn client() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let token = crate::harness::token("tester", &crate::harness::all_scopes(), &[]);
    headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

/// Starts the runner with `args` (its schedule off unless `args` sets it) serving the API.
fn start(args: &[&str]) -> Running {
    let mut command = process::singlet();
    command.args(args);
    if !args.contains(&"--mark-overdue-every") {
        command.args(["--mark-overdue-every", "0"]);
    }
    process::serve(command)
}

#[tokio::test]
async fn the_runner_serves_the_api_and_the_engines_own_endpoint() {
    let runner = start(&["--in-memory"]);
    let base = &runner.api;
    let http = client();

    let created = http
        .post(format!("{base}/vehicles"))
        .json(&json!({"plate": "KA19 XTR", "chassis": "WVW1", "depot": "north"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let vehicle: Value = created.json().await.unwrap();
    let missing = http
        .delete(format!("{base}/vehicles"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert_eq!(
        missing.json::<Value>().await.unwrap(),
        json!({"message": "Not Found"})
    );

    // Any DynamoDB client sees the table on the engine's endpoint.
    let engine = singlet::engine::local_client(runner.engine.as_deref().unwrap());
    let lock = engine
        .get_item()
        .table_name("singlet")
        .key("PK", AttributeValue::S("PLATE#ka19xtr".into()))
        .key("SK", AttributeValue::S("PLATE#ka19xtr".into()))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    assert_eq!(
        lock["vehicleId"].as_s().unwrap(),
        vehicle["vehicleId"].as_str().unwrap()
    );
}

/// `singlet --in-memory invoke <function> --event events/<function>.json`: what it printed.
fn invoke(function: &str) -> Value {
    let output = process::singlet()
        .current_dir(ROOT)
        .args([
            "--in-memory",
            "invoke",
            function,
            "--event",
            &format!("events/{function}.json"),
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn invoke_prints_the_functions_response() {
    let response = invoke("get-vehicle");
    assert_eq!(
        response["statusCode"], 404,
        "an empty engine has no such vehicle"
    );
    assert_eq!(
        response["headers"]["content-type"],
        "application/problem+json"
    );

    let report = invoke("mark-overdue");
    assert_eq!(report["complete"], true);
    assert_eq!(report["now"], "2026-11-29T18:15:00Z");
}

/// The console's URL holds a secret made for this start, which its API requires; `--no-console`
/// serves the API alone.
#[tokio::test]
async fn the_console_needs_the_printed_secret_and_can_be_left_out() {
    let runner = start(&["--in-memory"]);
    let console = runner
        .console
        .clone()
        .expect("the runner prints the console's URL");
    let secret = console
        .split("token=")
        .nth(1)
        .expect("the URL holds the secret");
    assert!(secret.len() >= 32, "{console}");
    let http = reqwest::Client::new();
    let state = |secret: Option<&str>| {
        let mut request = http.get(format!("{}/_console/api/state", runner.api));
        if let Some(secret) = secret {
            request = request.header("x-singlet-console", secret);
        }
        request.send()
    };
    assert_eq!(state(None).await.unwrap().status(), 403);
    assert_eq!(state(Some("guess")).await.unwrap().status(), 403);
    assert_eq!(state(Some(secret)).await.unwrap().status(), 200);

    let bare = start(&["--in-memory", "--no-console"]);
    assert_eq!(bare.console, None);
    let page = http
        .get(format!("{}/_console", bare.api))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 404);
    let api = client()
        .get(format!("{}/vehicles/x1", bare.api))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 404, "the API is served");
}

/// `invoke --clock` runs a function as if its clock read that time: the marker's "now" is the
/// event's time, but never past the clock plus 5 minutes.
#[test]
fn invoke_runs_a_function_on_a_clock_of_ones_choosing() {
    let output = process::singlet()
        .current_dir(ROOT)
        .args(["--in-memory", "invoke", "mark-overdue"])
        .args(["--event", "events/mark-overdue.json"])
        .args(["--clock", "2026-11-01T00:00:00Z"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["now"], "2026-11-01T00:05:00Z", "{report}");
    let refused = process::singlet()
        .current_dir(ROOT)
        .args(["--in-memory", "invoke", "mark-overdue"])
        .args(["--event", "events/mark-overdue.json", "--clock", "tomorrow"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("ISO-8601"));
}

/// `--data` keeps the engine's data across restarts; `--endpoint` and `--table` run the API on
/// another engine's table, created when missing.
#[tokio::test]
async fn the_runner_keeps_its_data_and_can_use_an_external_engine() {
    let dir = std::env::temp_dir().join(format!("singlet-runner-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("nested").join("singlet.db");
    let data = data.to_str().unwrap();
    let body = json!({"plate": "KEEP-1", "chassis": "KEEP-1", "depot": "north"});

    let vehicle_id = {
        let runner = start(&["--data", data]);
        let base = &runner.api;
        let created = client()
            .post(format!("{base}/vehicles"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 201);
        created.json::<Value>().await.unwrap()["vehicleId"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first = start(&["--data", data]);
    let base = &first.api;
    let kept = client()
        .get(format!("{base}/vehicles/{vehicle_id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(kept.status(), 200, "the data outlives the runner");

    let endpoint = first.engine.clone().unwrap();
    let second = start(&["--endpoint", &endpoint, "--table", "other"]);
    let other = &second.api;
    let created = client()
        .post(format!("{other}/vehicles"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        created.status(),
        201,
        "another table: the plate is free there"
    );
    let engine = singlet::engine::local_client(&endpoint);
    let tables = engine.list_tables().send().await.unwrap();
    let mut names = tables.table_names().to_vec();
    names.sort();
    assert_eq!(names, vec!["other".to_owned(), "singlet".to_owned()]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The runner runs `mark-overdue` on its schedule: a loan that has fallen due shows up in its
/// branch's overdue list within a tick.
#[tokio::test]
async fn the_runner_runs_mark_overdue_on_its_schedule() {
    let runner = start(&["--in-memory", "--mark-overdue-every", "1"]);
    let base = &runner.api;
    let http = client();
    let post = |path: &str, body: Value| http.post(format!("{base}{path}")).json(&body).send();
    let branch = json!({"branchId": "central", "name": "Central", "address": "1 Square", "city": "Springfield",
        "phone": "1", "openingHours": "always"});
    assert_eq!(post("/branches", branch).await.unwrap().status(), 201);
    let book = json!({"isbn": "0-306-40615-2", "title": "T", "author": "A", "publisher": "P", "publishYear": 1976,
        "genre": "G", "description": "D", "pageCount": 1});
    assert_eq!(post("/books", book).await.unwrap().status(), 201);
    let patron = json!({"cardNumber": "c1", "firstName": "Ada", "lastName": "L", "email": "ada@example.com", "membershipTier": "standard"});
    let patron: Value = post("/branches/central/patrons", patron)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let copy: Value = post(
        "/branches/central/copies",
        json!({"isbn": "9780306406157", "condition": "good"}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let loan: Value = post(
        "/checkouts",
        json!({"patronId": patron["patronId"], "branchId": "central", "copyId": copy["copyId"]}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let (patron_id, checkout_id) = (
        loan["patronId"].as_str().unwrap(),
        loan["checkoutId"].as_str().unwrap(),
    );

    // The loan falls due: move its due date an hour back, straight on the engine's endpoint.
    let past =
        singlet_functions::clock::iso(singlet_functions::clock::now() - time::Duration::hours(1));
    singlet::engine::local_client(runner.engine.as_deref().unwrap())
        .update_item()
        .table_name("singlet")
        .key("PK", AttributeValue::S(format!("PATRON#{patron_id}")))
        .key("SK", AttributeValue::S(format!("CHECKOUT#{checkout_id}")))
        .update_expression("SET dueDate = :past, GSI1SK = :sk")
        .expression_attribute_values(":past", AttributeValue::S(past.clone()))
        .expression_attribute_values(":sk", AttributeValue::S(format!("{past}#{checkout_id}")))
        .send()
        .await
        .unwrap();
    for _ in 0..50 {
        let overdue: Value = client()
            .get(format!("{base}/branches/central/overdue"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if overdue["items"]
            .as_array()
            .is_some_and(|items| !items.is_empty())
        {
            assert_eq!(overdue["items"][0]["checkoutId"], checkout_id);
            assert_eq!(overdue["items"][0]["status"], "overdue");
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the scheduled mark-overdue did not mark the loan");
}
