//! Faults through real sockets: an engine that accepts connections and never answers.

use singlet::invoke::invoke;
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use singlet_functions::routes::ROUTES;
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
