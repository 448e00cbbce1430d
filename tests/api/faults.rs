//! Faults through real sockets: an engine that accepts connections and never answers.

use singlet::invoke::invoke;
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use singlet_functions::routes::ROUTES;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A TCP server that accepts every connection and never answers; returns its endpoint.
async fn stalling_engine() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    endpoint
}

/// Every route, on its sample event, answers `503` with `retry-after` within the SDK's operation
/// timeout when the engine stalls: never a hang, never API Gateway's generic error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_engine_is_503_with_retry_after_on_every_route() {
    let endpoint = stalling_engine().await;
    let ctx = Ctx::new(
        singlet::engine::local_client(&endpoint),
        "singlet",
        CursorKeys::new(singlet::LOCAL_SECRET),
    );
    let started = Instant::now();
    let replies = futures::future::join_all(ROUTES.iter().map(|route| {
        let ctx = ctx.clone();
        async move {
            let event =
                std::fs::read_to_string(format!("{ROOT}/events/{}.json", route.function)).unwrap();
            let reply = invoke(&ctx, route.function, &event).await.unwrap();
            (route.function, reply, started.elapsed())
        }
    }))
    .await;
    for (function, reply, took) in replies {
        assert_eq!(reply["statusCode"], 503, "{function}: {reply}");
        assert_eq!(reply["headers"]["retry-after"], "1", "{function}: {reply}");
        assert!(
            took < Duration::from_secs(8),
            "{function} answered after {took:?}, past the bound"
        );
    }
}

/// A real TCP proxy in front of the engine that, while `drop_next` is set, lets the engine
/// answer a `TransactWriteItems` and then drops the connection instead of passing the answer on:
/// a response lost after the commit.
async fn lossy_proxy(engine: String, drops: Arc<AtomicUsize>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let http = reqwest::Client::new();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (engine, drops, http) = (engine.clone(), drops.clone(), http.clone());
            tokio::spawn(async move { relay(socket, &engine, &drops, &http).await });
        }
    });
    endpoint
}

/// Relays each request of one connection; returns when the client closes or a reply is dropped.
async fn relay(
    mut socket: tokio::net::TcpStream,
    engine: &str,
    drops: &AtomicUsize,
    http: &reqwest::Client,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = Vec::new();
    loop {
        let head_end = loop {
            if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            let mut chunk = [0u8; 8192];
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
        let header = |name: &str| {
            head.lines().find_map(|line| {
                let (n, v) = line.split_once(':')?;
                n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
            })
        };
        let length: usize = header("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        while buffer.len() < head_end + length {
            let mut chunk = [0u8; 8192];
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        }
        let body = buffer[head_end..head_end + length].to_vec();
        buffer.drain(..head_end + length);
        let mut request = http.post(engine).body(body);
        for name in [
            "x-amz-target",
            "content-type",
            "authorization",
            "x-amz-date",
        ] {
            if let Some(value) = header(name) {
                request = request.header(name, value);
            }
        }
        let Ok(response) = request.send().await else {
            return;
        };
        let status = response.status().as_u16();
        let bytes = response.bytes().await.unwrap_or_default();
        let transaction = header("x-amz-target").is_some_and(|t| t.ends_with("TransactWriteItems"));
        if transaction
            && drops
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            // The engine committed; its answer is lost with the connection.
            return;
        }
        let reply = format!(
            "HTTP/1.1 {status} OK\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: {}\r\n\r\n",
            bytes.len()
        );
        if socket.write_all(reply.as_bytes()).await.is_err()
            || socket.write_all(&bytes).await.is_err()
        {
            return;
        }
    }
}

/// A response lost after the commit, on every creating `POST`, return and renew: the SDK's own
/// retry (the same `ClientRequestToken`) or the client's retry with the same `Idempotency-Key`
/// gets the first answer, and the table shows one effect, 100 times out of 100.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "about 90 s, and on a loaded machine a key can stay 503 past five client retries \
            (under investigation): run with `cargo test -- --ignored a_response_lost`"]
async fn a_response_lost_after_the_commit_is_answered_once() {
    let api = crate::harness::Api::start(crate::harness::Mode::Direct).await;
    let (_, engine) = singlet::engine::start_in_memory("lossy").await;
    let drops = Arc::new(AtomicUsize::new(0));
    let proxy = lossy_proxy(engine, drops.clone()).await;
    // The SDK's retries as configured, but without their backoff, so 100 rounds take seconds.
    let client = singlet::engine::local_client(&proxy);
    let config = client
        .config()
        .to_builder()
        .retry_config(
            aws_sdk_dynamodb::config::retry::RetryConfig::standard()
                .with_max_attempts(3)
                .with_initial_backoff(Duration::from_millis(1)),
        )
        .build();
    let api = api.with_ctx(Ctx::new(
        aws_sdk_dynamodb::Client::from_conf(config),
        "lossy",
        CursorKeys::random(),
    ));
    crate::fixtures::library(&api).await;
    for i in 0..100 {
        let key = format!("lost-{i}");
        let post = |path: &'static str, body: serde_json::Value| {
            let (api, key, drops) = (api.clone(), key.clone(), drops.clone());
            async move {
                drops.store(1, Ordering::SeqCst);
                let first = api
                    .call("POST", path)
                    .header(
                        "idempotency-key",
                        &format!("{key}-{}", path.trim_start_matches('/').replace('/', "-")),
                    )
                    .json(body.clone())
                    .send()
                    .await;
                let again = api
                    .call("POST", path)
                    .header(
                        "idempotency-key",
                        &format!("{key}-{}", path.trim_start_matches('/').replace('/', "-")),
                    )
                    .json(body)
                    .send()
                    .await;
                assert_eq!(first.status, 201, "{path} #{i}: {first:?}");
                assert_eq!(
                    (again.status, &again.body),
                    (201, &first.body),
                    "{path} #{i}"
                );
                first
            }
        };
        let vehicle = post(
            "/vehicles",
            serde_json::json!({"plate": format!("LOST {i}"), "chassis": format!("CH{i}"), "depot": "d"}),
        )
        .await;
        assert!(vehicle.body["vehicleId"].is_string());
        let patron = post(
            "/branches/central/patrons",
            serde_json::json!({"cardNumber": format!("lost-{i}"), "firstName": "Ada", "lastName": "L",
                "email": format!("l{i}@example.com"), "membershipTier": "premium"}),
        )
        .await;
        let copy = post(
            "/branches/central/copies",
            serde_json::json!({"isbn": crate::fixtures::ISBN, "condition": "good"}),
        )
        .await;
        let loan = post(
            "/checkouts",
            serde_json::json!({"patronId": patron.body["patronId"], "branchId": "central",
                "copyId": copy.body["copyId"]}),
        )
        .await;
        let loan_path = format!(
            "/patrons/{}/checkouts/{}",
            loan.body["patronId"].as_str().unwrap(),
            loan.body["checkoutId"].as_str().unwrap()
        );
        for action in ["renew", "return"] {
            drops.store(1, Ordering::SeqCst);
            let path = format!("{loan_path}/{action}");
            let first = api
                .call("POST", path.clone())
                .header("idempotency-key", &format!("{key}-{action}"))
                .send()
                .await;
            let mut again = first.clone();
            for _ in 0..5 {
                again = api
                    .call("POST", path.clone())
                    .header("idempotency-key", &format!("{key}-{action}"))
                    .send()
                    .await;
                if again.status != 503 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            assert!([200, 503].contains(&first.status), "{path}: {first:?}");
            assert_eq!(again.status, 200, "{path}: {again:?}");
            if first.status == 200 {
                assert_eq!(again.body, first.body, "{path}");
            }
        }
        let returned = api
            .get(format!(
                "/patrons/{}/checkouts",
                loan.body["patronId"].as_str().unwrap()
            ))
            .await;
        assert_eq!(returned.body["items"], serde_json::json!([]), "#{i}");
    }
    // One effect each: 100 vehicles with their two locks, 100 patrons, 100 copies, 100 returned
    // loans renewed once.
    let items = api.items().await;
    let count = |prefix: &str| {
        items
            .iter()
            .filter(|i| crate::harness::s(i, "PK").starts_with(prefix))
            .count()
    };
    assert_eq!(count("VEHICLE#"), 100);
    assert_eq!(count("PLATE#"), 100);
    let returned: Vec<_> = items
        .iter()
        .filter(|i| crate::harness::s(i, "SK").starts_with("RETURNED#"))
        .collect();
    assert_eq!(returned.len(), 100);
    assert!(
        returned
            .iter()
            .all(|loan| crate::harness::n(loan, "renewalCount") == 1),
        "every loan renewed exactly once"
    );
}
