//! The contract's conventions that every route shares: docs/API.md, "Conventions".

use crate::both;
use crate::harness::Api;
use serde_json::json;
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;

both!(
    bodies_must_be_json_objects_under_64_kib,
    every_route_refuses_bodies_that_are_not_json_objects_or_too_large,
);

async fn bodies_must_be_json_objects_under_64_kib(api: Api) {
    let post = |content_type: &'static str, body: Vec<u8>| {
        let api = api.clone();
        async move {
            api.call("POST", "/vehicles")
                .raw(content_type, body)
                .send()
                .await
        }
    };
    post("application/json", b"{not json".to_vec())
        .await
        .assert_problem(400, &[]);
    post("application/json", b"[1,2]".to_vec())
        .await
        .assert_problem(400, &[]);
    post("application/json", b"".to_vec())
        .await
        .assert_problem(400, &[]);
    post("text/plain", b"{}".to_vec())
        .await
        .assert_problem(415, &[]);
    post("application/x-www-form-urlencoded", b"plate=x".to_vec())
        .await
        .assert_problem(415, &[]);
    let big = json!({"plate": "P", "chassis": "C", "depot": "d", "pad": "x".repeat(70 * 1024)});
    post("application/json", big.to_string().into_bytes())
        .await
        .assert_problem(413, &[]);
    // A charset parameter is fine.
    let ok = post(
        "application/json; charset=utf-8",
        br#"{"plate":"P","chassis":"C","depot":"d"}"#.to_vec(),
    )
    .await;
    assert_eq!(ok.status, 201, "{ok:?}");
    // So is a `+json` type, and so is no content-type at all.
    let vendor = post(
        "application/vnd.singlet+json",
        br#"{"plate":"P2","chassis":"C2","depot":"d"}"#.to_vec(),
    )
    .await;
    assert_eq!(vendor.status, 201, "{vendor:?}");
    let bare = api
        .call("POST", "/vehicles")
        .raw_untyped(br#"{"plate":"P3","chassis":"C3","depot":"d"}"#.to_vec())
        .send()
        .await;
    assert_eq!(bare.status, 201, "{bare:?}");
    // Exactly 64 KiB is accepted; one byte more is not.
    let padded = |len: usize| {
        let head = r#"{"plate":"P4","chassis":"C4","depot":"d","pad":""#;
        let mut body = head.to_owned();
        body.push_str(&"x".repeat(len - head.len() - 2));
        body.push_str(r#""}"#);
        assert_eq!(body.len(), len);
        body.into_bytes()
    };
    post("application/json", padded(64 * 1024 + 1))
        .await
        .assert_problem(413, &[]);
    assert_eq!(
        post("application/json", padded(64 * 1024)).await.status,
        201
    );
    assert_eq!(api.items().await.len(), 12);
}

async fn every_route_refuses_bodies_that_are_not_json_objects_or_too_large(api: Api) {
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(65 * 1024));
    for (method, path) in [
        ("PUT", "/vehicles/v1/plate"),
        ("PUT", "/accounts/a1/email"),
        ("PATCH", "/resources/r1"),
        ("POST", "/patrons/p1/checkouts/c1/return"),
        ("POST", "/patrons/p1/checkouts/c1/renew"),
        ("DELETE", "/vehicles/v1"),
        ("GET", "/vehicles/v1"),
    ] {
        let reply = api
            .call(method, path)
            .raw("text/plain", "hello")
            .send()
            .await;
        reply.assert_problem(415, &[]);
        let reply = api
            .call(method, path)
            .raw("application/json", big.clone())
            .send()
            .await;
        reply.assert_problem(413, &[]);
        // Not JSON, or JSON but not an object: `400` on a route that reads no body too.
        for body in ["{not json", "[1]", "\"text\""] {
            let reply = api
                .call(method, path)
                .raw("application/json", body)
                .send()
                .await;
            reply.assert_problem(400, &[]);
        }
    }
    // Nothing was written by any of them.
    assert!(api.items().await.is_empty());
}

/// Over HTTP only: the direct mode has no front door to answer an undeclared route.
#[tokio::test]
async fn undeclared_methods_are_404() {
    let api = Api::start(crate::harness::Mode::Http).await;
    for (method, path) in [
        ("PATCH", "/vehicles"),
        ("GET", "/vehicles"),
        ("POST", "/vehicles/v1"),
        ("GET", "/nowhere"),
        ("GET", "/vehicles/v1/plate/x"),
    ] {
        let reply = api.call(method, path).send().await;
        assert_eq!(reply.status, 404, "{method} {path}");
        assert_eq!(reply.body, json!({"message": "Not Found"}));
    }
}

/// The engine unreachable: `503` with `retry-after`, after the SDK's own retries.
#[tokio::test]
async fn an_unreachable_engine_is_503_with_retry_after() {
    // A socket bound and never listening holds its port, so no engine another test starts can
    // take it, and the kernel refuses every connection to it.
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let closed = format!("http://{}", held.local_addr().unwrap());
    let mut api = crate::harness::Api::start(crate::harness::Mode::Direct).await;
    api.ctx = Ctx::new(
        singlet::serve::engine::local_client(&closed),
        "singlet",
        CursorKeys::random(),
    );
    for reply in [
        api.get("/vehicles/v1").await,
        api.post(
            "/vehicles",
            json!({"plate": "P", "chassis": "C", "depot": "d"}),
        )
        .await,
    ] {
        reply.assert_problem(503, &[]);
        assert_eq!(reply.header("retry-after"), Some("1"));
    }
}

/// A transaction cancelled for a reason other than a condition (`TransactionConflict`) is a
/// `503`, never a `409`.
#[tokio::test]
async fn a_cancellation_for_another_reason_is_not_a_conflict() {
    let api = Api::on_canned_engine(|_| (400, json!({
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "Message": "Transaction cancelled, please refer cancellation reasons for specific reasons [None, TransactionConflict, None]",
        "CancellationReasons": [
            {"Code": "None"},
            {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"},
            {"Code": "None"}
        ]
    })))
    .await;
    let reply = api
        .post(
            "/vehicles",
            json!({"plate": "P", "chassis": "C", "depot": "d"}),
        )
        .await;
    reply.assert_problem(503, &[]);
    assert_eq!(reply.header("retry-after"), Some("1"));
}

/// A read throttled past the SDK's retries is a `503` with `retry-after`.
#[tokio::test]
async fn a_throttled_read_is_503_with_retry_after() {
    let api = Api::on_canned_engine(|_| {
        (
            400,
            json!({
                "__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException",
                "message": "Rate of requests exceeds the allowed throughput."
            }),
        )
    })
    .await;
    let reply = api.get("/vehicles/v1").await;
    reply.assert_problem(503, &[]);
    assert_eq!(reply.header("retry-after"), Some("1"));
}

/// A client's `Host` header never reaches the function: a malformed one is still answered.
#[tokio::test]
async fn a_malformed_host_header_is_answered() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let api = crate::harness::Api::start(crate::harness::Mode::Http).await;
    let address = api.base.trim_start_matches("http://").to_owned();
    for host in ["a b", "x:99999", "[::1"] {
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        let request = format!(
            "GET /vehicles/v1 HTTP/1.1\r\nHost: {host}\r\nx-forwarded-proto: 1\r\nauthorization: Bearer {}\r\nConnection: close\r\n\r\n",
            api.token
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        assert!(response.starts_with("HTTP/1.1 404"), "{host}: {response}");
    }
}
