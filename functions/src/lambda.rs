//! What the Lambda binary runs: logging, the context once per cold start, then the runtime
//! serving the function `SINGLET_FUNCTION` names (an HTTP route or a scheduled function).

use crate::context::Ctx;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::request::answer;
use crate::routes::{self, Route, Scheduled, Streamed, by_function, scheduled, streamed};
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

/// The variable naming the function an instance serves: a route's function (`get-vehicle`) or a
/// scheduled one (`mark-overdue`). `template.yaml` sets it on every function, from the route
/// table (a test keeps the two equal).
pub const FUNCTION_VAR: &str = "SINGLET_FUNCTION";

/// Serves the function `SINGLET_FUNCTION` names on the Lambda runtime. Without it (`cargo lambda
/// watch`, which runs the binary once for every path of its router) the instance serves every
/// route, each request by its method and path. A context that cannot be built (no table, no
/// cursor key) or a name no function has stops the cold start with one log line saying why.
pub async fn run() -> Result<(), lambda_runtime::Error> {
    init_tracing();
    let function = std::env::var(FUNCTION_VAR).ok();
    let ctx = match Ctx::from_lambda_env().await {
        Ok(ctx) => &*Box::leak(Box::new(ctx)),
        Err(reason) => {
            tracing::error!(function, reason, "the function cannot start");
            return Err(reason.into());
        }
    };
    let Some(function) = function else {
        // `cargo lambda watch`; on AWS every function sets it, and a scheduled function would
        // fail each event here.
        tracing::warn!("no {FUNCTION_VAR}: serving every route by method and path");
        return serve_http(ctx, None).await;
    };
    if let Some(route) = by_function(&function) {
        return serve_http(ctx, Some(route)).await;
    }
    if let Some(scheduled) = scheduled(&function) {
        return serve_scheduled(ctx, scheduled).await;
    }
    if let Some(streamed) = streamed(&function) {
        return serve_streamed(ctx, streamed).await;
    }
    let reason = format!("{FUNCTION_VAR}={function} names no route or scheduled function");
    tracing::error!(function, reason, "the function cannot start");
    Err(reason.into())
}

/// The route a request is for: the instance's own, or (serving every route) the one its method
/// and path match.
fn route_of(own: Option<&'static Route>, req: &Request) -> Option<&'static Route> {
    own.or_else(|| {
        // Undecoded: a route's fixed segments are plain ASCII, and a parameter matches anything.
        let path = req.uri().path().trim_start_matches('/');
        let segments: Vec<String> = path.split('/').map(str::to_owned).collect();
        routes::find(req.method().as_str(), &segments).map(|(route, _)| route)
    })
}

async fn serve_http(
    ctx: &'static Ctx,
    own: Option<&'static Route>,
) -> Result<(), lambda_runtime::Error> {
    lambda_http::run(service_fn(move |req: Request| async move {
        let Some(route) = route_of(own, &req) else {
            return Ok(ApiError::not_found("route").into_response());
        };
        let started = Instant::now();
        let answer = answer(ctx, route, req).await;
        let mut metrics = Metrics::for_route(route.function, &route.key());
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

/// A stream-fed function: the stream event in, the partial batch response
/// (`batchItemFailures`) out; an error fails the whole batch, which the mapping retries (and
/// bisects).
async fn serve_streamed(
    ctx: &'static Ctx,
    streamed: &'static Streamed,
) -> Result<(), lambda_runtime::Error> {
    lambda_runtime::run(lambda_runtime::service_fn(
        move |event: lambda_runtime::LambdaEvent<serde_json::Value>| async move {
            let deadline = event.context.deadline();
            (streamed.handler)(ctx, event.payload, Some(deadline))
                .await
                .map_err(lambda_runtime::Error::from)
        },
    ))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::Body;

    fn request(method: &str, path: &str) -> Request {
        lambda_http::http::Request::builder()
            .method(method)
            .uri(path)
            .body(Body::Empty)
            .unwrap()
    }

    #[test]
    fn an_instance_with_its_own_route_serves_it_whatever_the_path() {
        let own = by_function("get-vehicle");
        let route = route_of(own, &request("POST", "/accounts")).unwrap();
        assert_eq!(route.function, "get-vehicle");
    }

    #[test]
    fn an_instance_serving_every_route_picks_each_by_method_and_path() {
        let function = |method, path| route_of(None, &request(method, path)).map(|r| r.function);
        assert_eq!(function("GET", "/vehicles/v1"), Some("get-vehicle"));
        assert_eq!(function("DELETE", "/vehicles/v1"), Some("retire-vehicle"));
        assert_eq!(function("GET", "/plates/AB%2012"), Some("find-by-plate"));
        assert_eq!(function("PATCH", "/vehicles/v1"), None);
        assert_eq!(function("GET", "/nowhere"), None);
    }
}
