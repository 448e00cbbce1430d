//! The version race's barrier: each reviewer's handler reads the resource, then its first
//! `TransactWriteItems` waits here until the other reviewer's has come too. Both have read the
//! same version before either writes, so both transactions reach the engine and the engine, not
//! the handler's read, decides which one commits: what the race is there to show.
//!
//! A wrapper around the runner's HTTP client, since only a connector can wait (the SDK's
//! interceptors cannot). It waits only inside [`before_first_write`], once per task, and never
//! longer than [`PATIENCE`]: a racer refused before it writes cannot hold the other one up.

use aws_sdk_dynamodb::config::SharedHttpClient;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::shared::IntoShared;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Barrier;

/// The longest a racer's write waits for the other's.
const PATIENCE: Duration = Duration::from_secs(2);

tokio::task_local! {
    /// The barrier the task's first transaction waits at; taken by that transaction.
    static GATE: Mutex<Option<Arc<Barrier>>>;
}

/// Runs `work` with its first `TransactWriteItems` held at `barrier`.
pub async fn before_first_write<F: Future>(barrier: Arc<Barrier>, work: F) -> F::Output {
    GATE.scope(Mutex::new(Some(barrier)), work).await
}

/// `real`, with the gate in front of it.
pub fn gated(real: SharedHttpClient) -> SharedHttpClient {
    Gated { real }.into_shared()
}

#[derive(Debug, Clone)]
struct Gated {
    real: SharedHttpClient,
}

impl HttpClient for Gated {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        GatedConnector {
            real: self.real.http_connector(settings, components),
        }
        .into_shared()
    }
}

#[derive(Debug)]
struct GatedConnector {
    real: SharedHttpConnector,
}

impl HttpConnector for GatedConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let transaction = request
            .headers()
            .get("x-amz-target")
            .is_some_and(|t| t.ends_with("TransactWriteItems"));
        let barrier = transaction
            .then(|| GATE.try_with(|gate| gate.lock().expect("not poisoned").take()))
            .and_then(Result::ok)
            .flatten();
        let Some(barrier) = barrier else {
            return self.real.call(request);
        };
        let real = self.real.clone();
        HttpConnectorFuture::new(async move {
            let _waited_or_gave_up = tokio::time::timeout(PATIENCE, barrier.wait()).await;
            real.call(request).await
        })
    }
}
