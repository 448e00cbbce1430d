//! The runner's doors under slow and large input (`singlet::serve::door_limits`), over raw TCP
//! connections to the real front door and the real engine's door: a connection that sends
//! nothing, a head sent a byte at a time and a body that stops are closed within the door's
//! read timeouts (short ones, set for the test); a large upload without a token is refused from
//! its head, before a byte of its body is sent. A head over API Gateway's quota is `431`, and a
//! head of 100 KB is refused by both doors; a path with an empty segment matches no route.

use crate::harness::{Api, Mode, all_scopes, token, tokens};
use crate::process;
use serde_json::json;
use singlet::serve::door_limits::{self, ReadTimeouts};
use singlet::serve::{engine, engine_door, front_door};
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Short timeouts, so that the tests wait well under a second for each.
const SHORT: ReadTimeouts = ReadTimeouts {
    head: Duration::from_millis(300),
    body: Duration::from_millis(300),
};

/// How long a test waits for a door to close a connection that it must close within [`SHORT`]:
/// ample on a loaded machine, and far less than a door without timeouts holds one open.
const PATIENCE: Duration = Duration::from_secs(5);

/// The front door over a fresh engine, served as the runner serves it, with `timeouts`.
async fn api_with(timeouts: ReadTimeouts) -> (SocketAddr, Ctx) {
    let (client, _) = engine::start_in_memory("singlet").await;
    let ctx = Ctx::new(client, "singlet", CursorKeys::random());
    let gateway = front_door::Gateway {
        ctx: ctx.clone(),
        authorizer: tokens().0.clone(),
        issuer: Some(tokens().1.clone()),
    };
    let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(door_limits::serve(
        listener,
        front_door::app(gateway),
        timeouts,
    ));
    (addr, ctx)
}

/// What the door sends on `stream` until it closes the connection, and how long that took;
/// fails the test if the connection is still open after [`PATIENCE`].
async fn until_closed(stream: &mut (impl AsyncReadExt + Unpin)) -> (String, Duration) {
    let started = Instant::now();
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match tokio::time::timeout_at((started + PATIENCE).into(), stream.read(&mut buffer)).await {
            Err(_) => panic!(
                "the connection is still open after {PATIENCE:?}, having sent {:?}",
                String::from_utf8_lossy(&received)
            ),
            Ok(Ok(0)) | Ok(Err(_)) => {
                return (
                    String::from_utf8_lossy(&received).into_owned(),
                    started.elapsed(),
                );
            }
            Ok(Ok(read)) => received.extend_from_slice(&buffer[..read]),
        }
    }
}

fn authorized_head(method: &str, path: &str, extra: &str) -> String {
    let token = token("tester", &all_scopes(), &[]);
    format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {token}\r\n{extra}\r\n"
    )
}

/// A connection that sends nothing is closed after the head timeout; so is one left idle after
/// an answer (keep-alive), its answer given first.
#[tokio::test]
async fn an_idle_connection_is_closed_after_the_head_timeout() {
    let (addr, _) = api_with(SHORT).await;
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let (sent, _) = until_closed(&mut silent).await;
    assert_eq!(sent, "", "nothing was asked, nothing answered");

    let mut kept = TcpStream::connect(addr).await.unwrap();
    kept.write_all(authorized_head("GET", "/vehicles/x1", "").as_bytes())
        .await
        .unwrap();
    let (sent, _) = until_closed(&mut kept).await;
    assert!(sent.starts_with("HTTP/1.1 404"), "{sent}");
}

/// A head sent a byte at a time, never finished, is cut off at the head timeout, unanswered,
/// however steadily its bytes keep coming.
#[tokio::test]
async fn a_head_sent_slowly_is_cut_off() {
    let (addr, _) = api_with(SHORT).await;
    let (mut reading, mut writing) = TcpStream::connect(addr).await.unwrap().into_split();
    let trickle = tokio::spawn(async move {
        let head = authorized_head("GET", "/vehicles/x1", "x-padding: ");
        for byte in head.bytes().chain(std::iter::repeat(b'a')) {
            if writing.write_all(&[byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let (sent, took) = until_closed(&mut reading).await;
    trickle.abort();
    assert!(
        !sent.contains("HTTP/1.1 404"),
        "the request was served: {sent}"
    );
    assert!(took >= SHORT.head, "closed before its timeout: {took:?}");
}

/// A body that stops coming is answered `408` at the body timeout, and the connection closed;
/// nothing is written.
#[tokio::test]
async fn a_body_that_stops_is_answered_408_and_closed() {
    let (addr, ctx) = api_with(SHORT).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = authorized_head(
        "POST",
        "/vehicles",
        "content-type: application/json\r\ncontent-length: 100\r\n",
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(br#"{"plate": "SL"#).await.unwrap();
    let (sent, _) = until_closed(&mut stream).await;
    assert!(sent.starts_with("HTTP/1.1 408"), "{sent}");
    assert!(sent.contains(r#"{"message":"Request Timeout"}"#), "{sent}");
    assert!(sent.contains("connection: close"), "{sent}");
    let scanned = ctx.db.scan().table_name("singlet").send().await.unwrap();
    assert_eq!(scanned.count, 0, "nothing written");
}

/// A tokenless upload of 9 MiB (under API Gateway's 10 MB) is answered `401` from its head: the
/// body is never sent, and the door does not wait for it. A body declared over 10 MB is `413`
/// the same way, token or not. The door runs with its default timeouts here, as `cargo run`'s.
#[tokio::test]
async fn a_large_upload_is_judged_by_its_head_before_its_body_is_sent() {
    let (addr, ctx) = api_with(ReadTimeouts::default()).await;
    let tokenless = "POST /vehicles HTTP/1.1\r\nhost: 127.0.0.1\r\n\
                     content-type: application/json\r\ncontent-length: 9437184\r\n\r\n";
    let over = authorized_head(
        "POST",
        "/vehicles",
        "content-type: application/json\r\ncontent-length: 10485761\r\n",
    );
    for (head, status, message) in [
        (tokenless.to_owned(), "401", "Unauthorized"),
        (over, "413", "Request Entity Too Large"),
    ] {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let (sent, _) = until_closed(&mut stream).await;
        assert!(sent.starts_with(&format!("HTTP/1.1 {status}")), "{sent}");
        assert!(
            sent.ends_with(&format!(r#"{{"message":"{message}"}}"#)),
            "{sent}"
        );
        assert!(sent.contains("connection: close"), "{sent}");
    }
    let scanned = ctx.db.scan().table_name("singlet").send().await.unwrap();
    assert_eq!(scanned.count, 0, "nothing written");
}

/// `cargo run` holds both of its doors, the API's port and the engine's, to the timeouts that
/// `SINGLET_HEAD_TIMEOUT_MS` and `SINGLET_BODY_TIMEOUT_MS` set: a silent connection is closed on
/// each, and a body that stops is `408` on the engine's door as on the API's.
#[tokio::test]
async fn the_runners_doors_both_hold_their_read_timeouts() {
    let mut command = process::singlet();
    command
        .args(["--in-memory", "--mark-overdue-every", "0"])
        .env(door_limits::HEAD_TIMEOUT_VAR, "300")
        .env(door_limits::BODY_TIMEOUT_VAR, "300");
    let runner = process::serve(command);
    let api = runner.api.trim_start_matches("http://").to_owned();
    let engine = runner
        .engine
        .as_deref()
        .unwrap()
        .trim_start_matches("http://")
        .to_owned();
    for door in [&api, &engine] {
        let mut silent = TcpStream::connect(door.as_str()).await.unwrap();
        let (sent, _) = until_closed(&mut silent).await;
        assert_eq!(sent, "", "{door}");
    }
    let mut stopped = TcpStream::connect(engine.as_str()).await.unwrap();
    stopped
        .write_all(
            b"POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/x-amz-json-1.0\r\n\
              x-amz-target: DynamoDB_20120810.ListTables\r\ncontent-length: 50\r\n\r\n{",
        )
        .await
        .unwrap();
    let (sent, _) = until_closed(&mut stopped).await;
    assert!(sent.starts_with("HTTP/1.1 408"), "{sent}");
}

/// A timeout that is not a whole number of milliseconds is refused at start (exit 2), naming its
/// variable, before anything is served.
#[test]
fn a_malformed_read_timeout_is_refused_at_start() {
    for (var, value) in [
        (door_limits::HEAD_TIMEOUT_VAR, "soon"),
        (door_limits::BODY_TIMEOUT_VAR, "0"),
    ] {
        let output = process::singlet()
            .args(["--in-memory", "--port", "0", "--engine-port", "0"])
            .env(var, value)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{var}={value}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(var), "{stderr}");
    }
}

/// API Gateway's HTTP API takes at most 10,240 bytes of request line and header values ("Quotas
/// for configuring and running an HTTP API in API Gateway"): a head of exactly that reaches its
/// route (`404`: no such vehicle); one byte more is `431 {"message":"Request Header Fields Too
/// Large"}` from the front door, the route and the token never looked at, and the connection
/// closed.
#[tokio::test]
async fn a_head_over_api_gateways_quota_is_431() {
    let (addr, _) = api_with(ReadTimeouts::default()).await;
    let token = format!("Bearer {}", token("tester", &all_scopes(), &[]));
    let line = "GET /vehicles/x1 HTTP/1.1";
    // Every header value the request carries but the padding.
    let values = ["127.0.0.1", token.as_str(), "close"];
    let fixed = line.len() + values.iter().map(|v| v.len()).sum::<usize>();
    let quota = front_door::GATEWAY_MAX_HEAD;
    for (padding, status) in [(quota - fixed, "404"), (quota - fixed + 1, "431")] {
        let head = format!(
            "{line}\r\nhost: 127.0.0.1\r\nauthorization: {token}\r\nconnection: close\r\n\
             x-padding: {}\r\n\r\n",
            "a".repeat(padding)
        );
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let (sent, _) = until_closed(&mut stream).await;
        assert!(
            sent.starts_with(&format!("HTTP/1.1 {status}")),
            "{padding} bytes of padding: {sent}"
        );
        if status == "431" {
            assert!(
                sent.ends_with(r#"{"message":"Request Header Fields Too Large"}"#),
                "{sent}"
            );
        }
    }
}

/// A head of 100 KB is refused by both doors, the API's and the engine's, with `431` and the
/// connection closed, once [`door_limits::MAX_HEAD_BYTES`] of it are read: neither holds it
/// whole (the doors' HTTP library alone would read about 400 KB).
#[tokio::test]
async fn a_head_of_100_kb_is_refused_by_both_doors() {
    let (api, _) = api_with(ReadTimeouts::default()).await;
    let (_, engine) = engine::start_in_memory("singlet").await;
    let door = engine_door::serve(engine, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let padding = format!("x-padding: {}\r\n", "a".repeat(100 * 1024));
    let to_api = authorized_head("GET", "/vehicles/x1", &padding);
    let to_engine = format!(
        "POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/x-amz-json-1.0\r\n\
         x-amz-target: DynamoDB_20120810.ListTables\r\ncontent-length: 2\r\n{padding}\r\n{{}}"
    );
    for (addr, head) in [
        (api.to_string(), to_api),
        (door.trim_start_matches("http://").to_owned(), to_engine),
    ] {
        let (mut reading, mut writing) = TcpStream::connect(&addr).await.unwrap().into_split();
        // Sent beside the reading: the door answers before it has read it all, and a write
        // into a closed connection fails, which is no matter here.
        let sending = tokio::spawn(async move {
            let _ = writing.write_all(head.as_bytes()).await;
        });
        let (sent, _) = until_closed(&mut reading).await;
        sending.abort();
        assert!(sent.starts_with("HTTP/1.1 431"), "{addr}: {sent}");
    }
}

/// A path with an empty segment matches no route: `//vehicles/{id}`, `/vehicles//{id}` and
/// `/vehicles/{id}/` are API Gateway's `404 {"message":"Not Found"}`, as any path no route
/// declares, while `/vehicles/{id}` reads the vehicle; a write to such a path changes nothing.
#[tokio::test]
async fn a_path_with_an_empty_segment_matches_no_route() {
    let api = Api::start(Mode::Http).await;
    let created = api
        .post(
            "/vehicles",
            json!({"plate": "KA01AB1234", "chassis": "CH-1", "depot": "north"}),
        )
        .await;
    assert_eq!(created.status, 201, "{created:?}");
    let id = created.body["vehicleId"].as_str().unwrap().to_owned();
    assert_eq!(api.get(format!("/vehicles/{id}")).await.status, 200);
    for path in [
        format!("//vehicles/{id}"),
        format!("///vehicles/{id}"),
        format!("/vehicles//{id}"),
        format!("/vehicles/{id}/"),
    ] {
        let reply = api.get(&path).await;
        assert_eq!(
            (reply.status, &reply.body),
            (404, &json!({"message": "Not Found"})),
            "{path}"
        );
    }
    let before = api.items().await;
    let reply = api
        .put(
            format!("//vehicles/{id}/plate"),
            json!({"plate": "KA02CD5678"}),
        )
        .await;
    assert_eq!(
        (reply.status, &reply.body),
        (404, &json!({"message": "Not Found"}))
    );
    assert_eq!(api.items().await, before, "nothing changed");
}
