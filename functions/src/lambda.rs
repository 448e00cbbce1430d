//! What every Lambda binary runs: logging, the context once per cold start, then the runtime
//! serving the function named like the binary (an HTTP route or a scheduled function).

use crate::context::Ctx;
use crate::request::respond;
use crate::routes::{Route, Scheduled, by_function, scheduled};
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

/// Serves `function` (the binary's own name) on the Lambda runtime. A context that cannot be
/// built (no table, no cursor key) stops the cold start with one log line saying why.
pub async fn run(function: &str) -> Result<(), lambda_runtime::Error> {
    init_tracing();
    let ctx = match Ctx::from_lambda_env().await {
        Ok(ctx) => &*Box::leak(Box::new(ctx)),
        Err(reason) => {
            tracing::error!(function, reason, "the function cannot start");
            return Err(reason.into());
        }
    };
    if let Some(route) = by_function(function) {
        return serve_http(ctx, route).await;
    }
    if let Some(scheduled) = scheduled(function) {
        return serve_scheduled(ctx, scheduled).await;
    }
    Err(format!("no route or scheduled function is named {function}").into())
}

async fn serve_http(ctx: &'static Ctx, route: &'static Route) -> Result<(), lambda_runtime::Error> {
    lambda_http::run(service_fn(move |req: Request| async move {
        Ok::<_, std::convert::Infallible>(respond(ctx, route, req).await)
    }))
    .await
}

async fn serve_scheduled(
    ctx: &'static Ctx,
    scheduled: &'static Scheduled,
) -> Result<(), lambda_runtime::Error> {
    lambda_runtime::run(lambda_runtime::service_fn(
        move |event: lambda_runtime::LambdaEvent<serde_json::Value>| async move {
            let deadline = event.context.deadline();
            (scheduled.handler)(ctx, event.payload, Some(deadline))
                .await
                .map_err(lambda_runtime::Error::from)
        },
    ))
    .await
}
