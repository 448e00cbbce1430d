//! What every Lambda binary runs: logging, the context once per cold start, then the runtime
//! serving the function named like the binary (an HTTP route or a scheduled function).

use crate::context::Ctx;
use crate::metrics::Metrics;
use crate::request::answer;
use crate::routes::{Route, Scheduled, by_function, scheduled};
use lambda_http::{Request, service_fn};
use std::time::Instant;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::prelude::*;

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
    // A level per target (`info`, `info,dynoxide=error`): `EnvFilter`'s span and field
    // directives would link a regex engine into every binary for nothing this project logs.
    let filter: Targets = std::env::var("RUST_LOG")
        .ok()
        .and_then(|directives| directives.parse().ok())
        .unwrap_or_else(|| default_filter.parse().expect("a valid default filter"));
    let json = tracing_subscriber::fmt::layer()
        .json()
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .with_writer(writer);
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(json)
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
    let key = route.key();
    lambda_http::run(service_fn(move |req: Request| {
        let key = key.clone();
        async move {
            let started = Instant::now();
            let answer = answer(ctx, route, req).await;
            let mut metrics = Metrics::for_route(route.function, &key);
            let status = answer.response.status().as_u16();
            metrics
                .request(status)
                .consumed(answer.consumed.read_units, answer.consumed.write_units)
                .latency(started.elapsed());
            match status {
                409 => {
                    for code in problem_codes(&answer.response) {
                        metrics.conflict(&code);
                    }
                }
                412 => {
                    metrics.precondition_failed("precondition-failed");
                }
                428 => {
                    metrics.precondition_failed("precondition-required");
                }
                _ => {}
            }
            metrics.flush();
            Ok::<_, std::convert::Infallible>(answer.response)
        }
    }))
    .await
}

/// The field error codes of a problem document (`taken`, `unavailable`, ...).
fn problem_codes(response: &lambda_http::Response<lambda_http::Body>) -> Vec<String> {
    let body: serde_json::Value =
        serde_json::from_slice(response.body().as_ref()).unwrap_or_default();
    body["errors"]
        .as_array()
        .map(|errors| {
            errors
                .iter()
                .filter_map(|e| e["code"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

async fn serve_scheduled(
    ctx: &'static Ctx,
    scheduled: &'static Scheduled,
) -> Result<(), lambda_runtime::Error> {
    lambda_runtime::run(lambda_runtime::service_fn(
        move |event: lambda_runtime::LambdaEvent<serde_json::Value>| async move {
            let deadline = event.context.deadline();
            let started = Instant::now();
            let report = (scheduled.handler)(ctx, event.payload, Some(deadline))
                .await
                .map_err(lambda_runtime::Error::from)?;
            // A run's report counts what it did (`mark-overdue`: loans marked, items skipped or
            // unreadable, pages read).
            let count = |name: &str| report[name].as_u64().unwrap_or(0);
            Metrics::new(scheduled.function)
                .loans_marked(count("marked"))
                .items_skipped(count("skipped") + count("unreadable"))
                .pages_read(count("pagesRead"))
                .duration(started.elapsed())
                .flush();
            Ok::<_, lambda_runtime::Error>(report)
        },
    ))
    .await
}
