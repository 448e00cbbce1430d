//! A real TCP proxy in front of an engine that holds every chunk of the engine's answers for a
//! delay before passing it on: an engine that answers, slowly (the faults tests), or DynamoDB's
//! round trip on a loopback engine (the concurrency bench, which takes this file by its path).

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The proxy's endpoint (`http://127.0.0.1:<port>`) in front of `engine`, each chunk of the
/// engine's answers held `delay`; what the client sends passes at once.
pub async fn slow_proxy(engine: &str, delay: Duration) -> String {
    let target = engine.trim_start_matches("http://").to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let target = target.clone();
            tokio::spawn(async move {
                let Ok(upstream) = tokio::net::TcpStream::connect(&target).await else {
                    return;
                };
                let _ = upstream.set_nodelay(true);
                let _ = client.set_nodelay(true);
                let (mut from_client, mut to_client) = client.into_split();
                let (mut from_engine, mut to_engine) = upstream.into_split();
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut from_client, &mut to_engine).await;
                });
                let mut chunk = vec![0u8; 65536];
                while let Ok(n) = from_engine.read(&mut chunk).await {
                    if n == 0 {
                        break;
                    }
                    tokio::time::sleep(delay).await;
                    if to_client.write_all(&chunk[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    endpoint
}
