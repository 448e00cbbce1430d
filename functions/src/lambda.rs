//! What every Lambda binary runs: tracing, the context once per cold start, then the runtime.

use crate::db::Ctx;
use crate::routes::{Handler, respond};
use lambda_http::{Request, service_fn};
use tracing_subscriber::EnvFilter;

/// JSON logs on standard output (where Lambda collects them), filtered by `RUST_LOG` (default
/// `info`).
pub fn init_tracing() {
    init_tracing_to(std::io::stdout, "info");
}

/// JSON logs to `writer`, filtered by `RUST_LOG` or else `default_filter`: the local runner logs
/// to standard error, so that what `invoke` prints on standard output is the response alone.
pub fn init_tracing_to<W>(writer: W, default_filter: &str)
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let _ = tracing_subscriber::fmt()
        .with_writer(writer)
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .try_init();
}

/// Serves one HTTP access pattern on the Lambda runtime.
pub async fn serve_http(handler: Handler) -> Result<(), lambda_http::Error> {
    init_tracing();
    let ctx: &'static Ctx = Box::leak(Box::new(Ctx::from_env().await));
    lambda_http::run(service_fn(move |req: Request| async move {
        Ok::<_, std::convert::Infallible>(respond(ctx, handler, req).await)
    }))
    .await
}
