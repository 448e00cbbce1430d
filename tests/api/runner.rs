//! `cargo run` itself: the runner binary serves the API on one port and the embedded engine's
//! DynamoDB endpoint on another, creates the table, and `invoke` runs one function on one event.

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Kills the runner when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_runner_serves_the_api_and_the_engines_own_endpoint() {
    let (port, engine_port) = (free_port(), free_port());
    let _runner = Running(
        Command::new(env!("CARGO_BIN_EXE_singlet"))
            .args(["--in-memory", "--mark-overdue-every", "0"])
            .args([
                "--port",
                &port.to_string(),
                "--engine-port",
                &engine_port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let mut up = false;
    for _ in 0..100 {
        if http
            .get(format!("{base}/vehicles/none"))
            .send()
            .await
            .is_ok()
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "the runner did not start");

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
    let engine = singlet::engine::local_client(&format!("http://127.0.0.1:{engine_port}"));
    let lock = engine
        .get_item()
        .table_name("singlet")
        .key("PK", AttributeValue::S("PLATE#ka19 xtr".into()))
        .key("SK", AttributeValue::S("PLATE#ka19 xtr".into()))
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

#[test]
fn invoke_prints_the_functions_response() {
    let output = Command::new(env!("CARGO_BIN_EXE_singlet"))
        .current_dir(ROOT)
        .args([
            "--in-memory",
            "invoke",
            "get-vehicle",
            "--event",
            "events/get-vehicle.json",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let response: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        response["statusCode"], 404,
        "an empty engine has no such vehicle"
    );
    assert_eq!(
        response["headers"]["content-type"],
        "application/problem+json"
    );

    let output = Command::new(env!("CARGO_BIN_EXE_singlet"))
        .current_dir(ROOT)
        .args([
            "--in-memory",
            "invoke",
            "mark-overdue",
            "--event",
            "events/mark-overdue.json",
        ])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["complete"], true);
    assert_eq!(report["now"], "2026-11-29T18:15:00Z");
}
