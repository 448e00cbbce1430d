//! Faults through real sockets: an engine that accepts connections and never answers.

use crate::slow_proxy::slow_proxy;
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
    // Its own retry quota: every timed-out attempt here costs 14 of the quota's 500 tokens, and
    // the default quota is shared by every client in the process (every other test's).
    let client = singlet::serve::engine::local_client(&endpoint);
    let config = client
        .config()
        .to_builder()
        .retry_partition(aws_sdk_dynamodb::config::retry::RetryPartition::new(
            "stalled-engine",
        ))
        .build();
    let ctx = Ctx::new(
        aws_sdk_dynamodb::Client::from_conf(config),
        "singlet",
        CursorKeys::new(singlet_functions::cursor::LOCAL_SECRET),
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

/// Rounds of [`a_response_lost_after_the_commit_is_answered_once`]. Each round loses the answer
/// to every creating `POST`, a renew and a return (six routes): even rounds lose one attempt's
/// answer, which the SDK's own retry (the same `ClientRequestToken`) recovers; odd rounds lose
/// every attempt's, so the request is a `503` and the client's retry with the same
/// `Idempotency-Key` must find the effect of the first. 40 rounds are 240 lost answers, 120 of
/// each kind, every one of which must come out right: the test is deterministic (its client has
/// its own retry quota and timeouts no load reaches), so 40 rounds prove as much as 100 would,
/// in a third of the time.
const ROUNDS: usize = 40;

/// A client for the lossy proxy: the Lambdas' retries without their backoff, timeouts far above
/// any load (this test is about lost answers, not stalls: a stall is the test above), and a
/// retry quota of its own. The SDK's default quota is one per process and partition, shared by
/// every client of every test: the stalled engine above spends it all (every timed-out attempt
/// costs 14 of its 500 tokens), and a client without quota does not retry at all. That, with
/// the Lambdas' 1.5 s attempt timeout on a loaded machine, is what made this test flaky.
fn lossy_client(proxy: &str) -> aws_sdk_dynamodb::Client {
    use aws_sdk_dynamodb::config::retry::{RetryPartition, TokenBucket};
    use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
    let client = singlet::serve::engine::local_client(proxy);
    let config = client
        .config()
        .to_builder()
        .retry_config(
            singlet_functions::context::retries().with_initial_backoff(Duration::from_millis(1)),
        )
        .retry_partition(
            RetryPartition::custom("lossy-proxy")
                .token_bucket(TokenBucket::unlimited())
                .build(),
        )
        .timeout_config(
            TimeoutConfig::builder()
                .operation_attempt_timeout(Duration::from_secs(20))
                .operation_timeout(Duration::from_secs(60))
                .build(),
        )
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

/// Sends `POST path` with `key`, losing the engine's answer to its transaction `lost` times;
/// checks the answer and a retry with the same key, and returns the answer.
async fn lose_answers(
    api: &crate::harness::Api,
    drops: &AtomicUsize,
    lost: usize,
    path: &str,
    key: &str,
    body: Option<&serde_json::Value>,
    success: u16,
) -> crate::harness::Reply {
    let send = || {
        let mut call = api
            .call("POST", path.to_owned())
            .header("idempotency-key", key);
        if let Some(body) = body {
            call = call.json(body.clone());
        }
        call.send()
    };
    let attempts = singlet_functions::context::retries().max_attempts() as usize;
    drops.store(lost, Ordering::SeqCst);
    let first = send().await;
    assert_eq!(
        drops.load(Ordering::SeqCst),
        0,
        "{path}: {lost} answers lost"
    );
    let again = send().await;
    assert_eq!(
        again.status, success,
        "{path}, the client's retry: {again:?}"
    );
    if lost < attempts {
        assert_eq!(
            (first.status, &first.body),
            (success, &again.body),
            "{path}: the SDK's retry got the answer, the client's the same"
        );
    } else {
        first.assert_problem(503, &[]);
        assert_eq!(first.header("retry-after"), Some("1"), "{path}");
        let third = send().await;
        assert_eq!(
            (third.status, &third.body),
            (success, &again.body),
            "{path}"
        );
    }
    again
}

/// A response lost after the commit, on every creating `POST`, return and renew: the SDK's own
/// retry (the same `ClientRequestToken`) or the client's retry with the same `Idempotency-Key`
/// gets the first answer, and the table shows one effect, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_lost_after_the_commit_is_answered_once() {
    use serde_json::json;
    let api = crate::harness::Api::start(crate::harness::Mode::Direct).await;
    let (_, engine) = singlet::serve::engine::start_in_memory("lossy").await;
    let drops = Arc::new(AtomicUsize::new(0));
    let proxy = lossy_proxy(engine, drops.clone()).await;
    let api = api.with_ctx(Ctx::new(
        lossy_client(&proxy),
        "lossy",
        CursorKeys::random(),
    ));
    crate::fixtures::library(&api).await;
    let attempts = singlet_functions::context::retries().max_attempts() as usize;
    let branch = json!({"branchId": "b", "name": "B", "address": "a", "city": "c", "phone": "1",
        "openingHours": "always"});
    let book = json!({"isbn": "080442957X", "title": "T", "author": "A", "publisher": "P",
        "publishYear": 2000, "genre": "G", "description": "D", "pageCount": 10});
    for round in 0..ROUNDS {
        let lost = if round % 2 == 0 { 1 } else { attempts };
        let key = |route: &str| format!("lost-{round}-{route}");
        let post = |path: &'static str, route: &'static str, body: serde_json::Value| {
            let (api, drops, key) = (&api, &drops, key(route));
            async move { lose_answers(api, drops, lost, path, &key, Some(&body), 201).await }
        };
        post("/vehicles", "vehicle",
            json!({"plate": format!("LOST {round}"), "chassis": format!("CH{round}"), "depot": "d"}))
            .await;
        let mut branch = branch.clone();
        branch["branchId"] = format!("lost-{round}").into();
        post("/branches", "branch", branch).await;
        let mut book = book.clone();
        book["title"] = format!("T{round}").into();
        if round == 0 {
            post("/books", "book", book).await;
        }
        post(
            "/accounts",
            "account",
            json!({"email": format!("l{round}@example.com"), "username": format!("lost{round}")}),
        )
        .await;
        post(
            "/resources",
            "resource",
            json!({"resourceId": format!("lost-{round}"), "status": "open"}),
        )
        .await;
        let patron = post(
            "/branches/central/patrons",
            "patron",
            json!({"cardNumber": format!("lost-{round}"), "firstName": "Ada", "lastName": "L",
                "email": format!("l{round}@example.com"), "membershipTier": "premium"}),
        )
        .await;
        let copy = post(
            "/branches/central/copies",
            "copy",
            json!({"isbn": crate::fixtures::ISBN, "condition": "good"}),
        )
        .await;
        let loan = post(
            "/checkouts",
            "checkout",
            json!({"patronId": patron.body["patronId"], "branchId": "central",
                "copyId": copy.body["copyId"]}),
        )
        .await;
        let loan_path = format!(
            "/patrons/{}/checkouts/{}",
            loan.body["patronId"].as_str().unwrap(),
            loan.body["checkoutId"].as_str().unwrap()
        );
        for action in ["renew", "return"] {
            let path = format!("{loan_path}/{action}");
            lose_answers(&api, &drops, lost, &path, &key(action), None, 200).await;
        }
    }
    // One effect each: a vehicle with its two locks, a branch, an account, a resource, a patron,
    // a copy, and a loan returned after one renewal, per round.
    let items = api.items().await;
    let count = |pk: &str, sk: &str| {
        items
            .iter()
            .filter(|i| {
                crate::harness::s(i, "PK").starts_with(pk)
                    && crate::harness::s(i, "SK").starts_with(sk)
            })
            .count()
    };
    assert_eq!(count("VEHICLE#", ""), ROUNDS);
    assert_eq!(count("PLATE#", ""), ROUNDS);
    assert_eq!(count("CHASSIS#", ""), ROUNDS);
    assert_eq!(count("BRANCH#lost-", "BRANCH"), ROUNDS);
    assert_eq!(count("ACCT#", "PROFILE"), ROUNDS);
    assert_eq!(count("RESOURCE#", "CURRENT"), ROUNDS);
    assert_eq!(
        count("BOOK#", "BOOK#"),
        2,
        "the fixture's book and round 0's"
    );
    assert_eq!(count("BRANCH#central", "PATRON#"), ROUNDS);
    assert_eq!(count("BRANCH#central", "COPY#"), ROUNDS);
    assert_eq!(count("PATRON#", "CHECKOUT#"), 0, "every loan returned");
    let returned: Vec<_> = items
        .iter()
        .filter(|i| crate::harness::s(i, "SK").starts_with("RETURNED#"))
        .collect();
    assert_eq!(returned.len(), ROUNDS);
    assert!(
        returned
            .iter()
            .all(|loan| crate::harness::n(loan, "renewalCount") == 1),
        "every loan renewed exactly once"
    );
}

/// One deadline around the handler: an engine slow enough that a request's calls add up past it
/// (each call well within the SDK's timeouts) is answered `503` with `retry-after` at the
/// deadline, on the handler and over HTTP. The deadline is 8 s (`REQUEST_DEADLINE`); this test
/// sets a shorter one on its context so that it runs in a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_its_deadline_is_503_with_retry_after() {
    use crate::harness::{Api, Mode};
    assert_eq!(
        singlet_functions::context::REQUEST_DEADLINE,
        Duration::from_secs(8)
    );
    for mode in [Mode::Direct, Mode::Http] {
        let (_, engine) = singlet::serve::engine::start_in_memory("singlet").await;
        let slow = slow_proxy(&engine, Duration::from_millis(600)).await;
        let mut ctx = Ctx::new(
            singlet::serve::engine::local_client(&slow),
            "singlet",
            CursorKeys::random(),
        );
        ctx.deadline = Duration::from_millis(1000);
        let api = Api::start_on(mode, ctx).await;
        // A vehicle's registration reads nothing and writes once: within the deadline.
        let registered = api
            .post(
                "/vehicles",
                serde_json::json!({"plate": "KA-1", "chassis": "C-1", "depot": "north"}),
            )
            .await;
        assert_eq!(registered.status, 201, "{mode:?}: {registered:?}");
        // Retiring it reads the vehicle and its outbox, then writes: each answer takes 600 ms,
        // 1.8 s in all.
        let id = registered.body["vehicleId"].as_str().unwrap();
        let started_retire = Instant::now();
        let retired = api.delete(format!("/vehicles/{id}")).await;
        let took = started_retire.elapsed();
        if retired.status == 204 {
            panic!("{mode:?}: the slow engine answered within the deadline ({took:?})");
        }
        retired.assert_problem(503, &[]);
        assert_eq!(retired.header("retry-after"), Some("1"), "{mode:?}");
        assert!(
            took < Duration::from_millis(1500),
            "{mode:?}: answered at the deadline, not after the engine: {took:?}"
        );
    }
}
