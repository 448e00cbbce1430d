//! What the Lambda binary runs: logging, the context once per cold start, then the runtime
//! serving the function `SINGLET_FUNCTION` names (an HTTP route, a scheduled or a stream-fed
//! function).
//!
//! An HTTP function serves as many invocations at once as Lambda hands its process: one on
//! Lambda's default model, up to `AWS_LAMBDA_MAX_CONCURRENCY` on managed instances
//! (`lambda_http::run_concurrent`). Nothing an invocation logs or reports is process-wide: its
//! log lines carry its ids from its own spans, its metric document is its own
//! ([`crate::invocation`]). A scheduled or stream-fed function serves one event at a time in a
//! process whatever that variable says (docs/guide/managed-instances.md says why).

use crate::context::Ctx;
use crate::error::ApiError;
use crate::invocation::{Invocation, max_concurrency};
use crate::metrics::Metrics;
use crate::request::answer;
use crate::routes::{self, Route, Scheduled, Streamed, by_function, scheduled, streamed};
use lambda_http::{Request, RequestExt, service_fn};
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::prelude::*;

/// JSON logs on standard output (where Lambda collects them), filtered by `RUST_LOG` (default
/// `info`), one flat object a line as Powertools for AWS Lambda writes them: every line of an
/// invocation carries its `function_request_id`, `xray_trace_id` and `cold_start`
/// ([`PowertoolsJson`]).
pub fn init_tracing() {
    let layer = tracing_subscriber::fmt::layer()
        .fmt_fields(tracing_subscriber::fmt::format::JsonFields::new())
        .event_format(PowertoolsJson)
        .with_writer(std::io::stdout);
    let _ = tracing_subscriber::registry()
        .with(filter_or("info"))
        .with(layer)
        .try_init();
}

/// `RUST_LOG`, else `default_filter`. A level per target (`info`, `info,dynoxide=error`):
/// `EnvFilter`'s span and field directives would link a regex engine into every binary for
/// nothing this project logs.
fn filter_or(default_filter: &str) -> Targets {
    std::env::var("RUST_LOG")
        .ok()
        .and_then(|directives| directives.parse().ok())
        .unwrap_or_else(|| default_filter.parse().expect("a valid default filter"))
}

/// JSON logs to `writer`, in `tracing`'s own layout (the event's fields under `fields`, its span's
/// under `span`), filtered by `RUST_LOG` or else `default_filter`: the local runner logs so to
/// standard error, so that what `invoke` prints on standard output is the response alone.
pub fn init_tracing_to<W>(writer: W, default_filter: &str)
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let json = tracing_subscriber::fmt::layer()
        .json()
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .with_writer(writer);
    let _ = tracing_subscriber::registry()
        .with(filter_or(default_filter))
        .with(json)
        .try_init();
}

/// One log line as Powertools' logger writes it: `timestamp`, `level`, `message`, `service`, the
/// event's fields, and the fields of every span it is in, outermost first (an inner span's field
/// wins). The runtime's own span names the invocation `requestId` and `xrayTraceId`; they are
/// written under Powertools' names, `function_request_id` and `xray_trace_id`, which CloudWatch
/// Logs Insights queries and dashboards built for Powertools expect.
pub struct PowertoolsJson;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for PowertoolsJson
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        use serde_json::{Map, Value};
        let mut line = Map::new();
        let now = time::OffsetDateTime::now_utc();
        let timestamp = now
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        line.insert("timestamp".into(), timestamp.into());
        line.insert("level".into(), event.metadata().level().as_str().into());
        let (service, function) = instance_names();
        line.insert("service".into(), service.as_str().into());
        if let Some(function) = function {
            line.insert("function_name".into(), function.as_str().into());
        }
        for span in ctx
            .event_scope()
            .into_iter()
            .flat_map(|scope| scope.from_root())
        {
            let extensions = span.extensions();
            let Some(fields) = extensions.get::<tracing_subscriber::fmt::FormattedFields<N>>()
            else {
                continue;
            };
            let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(fields) else {
                continue;
            };
            for (name, value) in fields {
                let name = match name.as_str() {
                    "requestId" => "function_request_id".to_owned(),
                    "xrayTraceId" => "xray_trace_id".to_owned(),
                    _ => name,
                };
                line.insert(name, value);
            }
        }
        event.record(&mut JsonVisitor(&mut line));
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// The `service` (`POWERTOOLS_SERVICE_NAME`, as Powertools reads it, else `singlet`) and the
/// function's name (`AWS_LAMBDA_FUNCTION_NAME`, else `SINGLET_FUNCTION`), read once.
fn instance_names() -> &'static (String, Option<String>) {
    static NAMES: std::sync::OnceLock<(String, Option<String>)> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        (
            var("POWERTOOLS_SERVICE_NAME").unwrap_or_else(|| "singlet".into()),
            var("AWS_LAMBDA_FUNCTION_NAME").or_else(|| var(FUNCTION_VAR)),
        )
    })
}

/// Writes an event's fields into a JSON object, numbers and booleans as such.
struct JsonVisitor<'a>(&'a mut serde_json::Map<String, serde_json::Value>);

impl tracing::field::Visit for JsonVisitor<'_> {
    fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
}

/// The variable naming the function an instance serves: a route's function (`get-vehicle`), a
/// scheduled one (`mark-overdue`) or a stream-fed one (`publish-events`). `template.yaml` sets it
/// on every function, rendered from the route table (`cargo run -- render`).
pub const FUNCTION_VAR: &str = "SINGLET_FUNCTION";

/// Serves the function `SINGLET_FUNCTION` names on the Lambda runtime: an HTTP route or a
/// scheduled function (`singlet-lambda`). Without it (`cargo lambda watch`, which runs the binary
/// once for every path of its router) the instance serves every route, each request by its method
/// and path. A context that cannot be built (no table, no cursor key) or a name this binary does
/// not serve stops the cold start with one log line saying why.
///
/// The stream-fed publisher is not served here but by [`run_streamed`] in a bootstrap of its own
/// (`singlet-events-lambda`): nothing this function reaches names the publisher, so the linker
/// leaves its EventBridge and S3 clients out of the API's bootstrap.
pub async fn run() -> Result<(), lambda_runtime::Error> {
    init_tracing();
    let function = std::env::var(FUNCTION_VAR).ok();
    // Serving every route (`cargo lambda watch`) needs every key; a scheduled function needs none.
    let holds_keys = match function.as_deref() {
        None => true,
        Some(function) => by_function(function).is_some_and(|route| route.holds_server_keys()),
    };
    let ctx = start(function.as_deref(), Ctx::from_lambda_env(holds_keys).await)?;
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
    cannot_start(
        &function,
        "singlet-lambda serves the routes and scheduled functions",
    )
}

/// Serves the stream-fed function `SINGLET_FUNCTION` names (`publish-events`), with the bus and
/// the archive its variables name: the events bootstrap, `singlet-events-lambda`.
pub async fn run_streamed() -> Result<(), lambda_runtime::Error> {
    init_tracing();
    let function = std::env::var(FUNCTION_VAR).unwrap_or_default();
    let Some(streamed) = streamed(&function) else {
        return cannot_start(
            &function,
            "singlet-events-lambda serves the stream-fed functions",
        );
    };
    let var = |name: &str| std::env::var(name).ok();
    let ctx = Ctx::from_lambda_env(false)
        .await
        .map(|ctx| ctx.with_publisher_outlets(var));
    serve_streamed(start(Some(&function), ctx)?, streamed).await
}

/// The context made once per cold start, kept for the process's life; or the one line saying
/// why there is none.
fn start(
    function: Option<&str>,
    ctx: Result<Ctx, String>,
) -> Result<&'static Ctx, lambda_runtime::Error> {
    match ctx {
        Ok(ctx) => Ok(&*Box::leak(Box::new(ctx))),
        Err(reason) => {
            tracing::error!(function, reason, "the function cannot start");
            Err(reason.into())
        }
    }
}

/// A `SINGLET_FUNCTION` this binary does not serve: `serves` says what it does.
fn cannot_start(function: &str, serves: &str) -> Result<(), lambda_runtime::Error> {
    let reason = format!(
        "{FUNCTION_VAR}={function} names no function of this binary's: {serves} (template.yaml \
         gives each function its binary)"
    );
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
    let service = service_fn(move |req: Request| {
        let invocation = Arc::new(match req.lambda_context_ref() {
            Some(context) => Invocation::of(context),
            // `lambda_http` hands every request its context; without one, nothing to name.
            None => Invocation {
                request_id: String::new(),
                trace_id: None,
                deadline: std::time::SystemTime::now() + ctx.deadline,
                cold_start: crate::invocation::first_invocation(),
            },
        });
        let cold_start = invocation.cold_start;
        let served = invocation.clone();
        invocation
            .scope(async move {
                let Some(route) = route_of(own, &req) else {
                    return Ok(ApiError::not_found("route").into_response());
                };
                let started = Instant::now();
                let answer = answer(ctx, route, req).await;
                let mut metrics = Metrics::for_route(route.function, &route.key());
                stamp(&mut metrics, &served);
                let status = answer.response.status().as_u16();
                metrics
                    .request(status)
                    .consumed(answer.consumed.read_units, answer.consumed.write_units)
                    .latency(started.elapsed());
                match status {
                    409 => {
                        for code in &answer.codes {
                            metrics.conflict(code.as_str());
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
            })
            // Every line the invocation logs says whether it paid the cold start.
            .instrument(tracing::info_span!("invocation", cold_start))
    });
    let concurrency = max_concurrency();
    if concurrency > 1 {
        tracing::info!(
            max_concurrency = concurrency,
            "serving up to {concurrency} invocations at once"
        );
        lambda_http::run_concurrent(service).await
    } else {
        lambda_http::run(service).await
    }
}

/// Marks `metrics` as `invocation`'s: its cold start, and its request and trace ids under the
/// names its log lines carry them (`function_request_id`, `xray_trace_id`), so that a metric
/// document is found with the lines of its own invocation.
fn stamp(metrics: &mut Metrics, invocation: &Invocation) {
    if invocation.cold_start {
        metrics.cold_start();
    }
    if !invocation.request_id.is_empty() {
        metrics.property("function_request_id", invocation.request_id.as_str());
    }
    if let Some(trace_id) = &invocation.trace_id {
        metrics.property("xray_trace_id", trace_id.as_str());
    }
}

/// A scheduled or stream-fed function serves one event at a time in a process, even where
/// Lambda would hand it more: the marker's runs and the publisher's batches are each one
/// sequence of table or bus writes, which a second one in the same process would only contend
/// with (docs/guide/managed-instances.md). Says so once when the variable asked for more.
fn one_at_a_time(function: &str) {
    let concurrency = max_concurrency();
    if concurrency > 1 {
        tracing::warn!(
            function,
            max_concurrency = concurrency,
            "serving one event at a time: {function} never runs twice at once in a process"
        );
    }
}

async fn serve_scheduled(
    ctx: &'static Ctx,
    scheduled: &'static Scheduled,
) -> Result<(), lambda_runtime::Error> {
    one_at_a_time(scheduled.function);
    lambda_runtime::run(lambda_runtime::service_fn(
        move |event: lambda_runtime::LambdaEvent<serde_json::Value>| {
            let invocation = Arc::new(Invocation::of(&event.context));
            let cold_start = invocation.cold_start;
            let served = invocation.clone();
            invocation
                .scope(async move {
                    let deadline = served.deadline;
                    let started = Instant::now();
                    let report = (scheduled.handler)(ctx, event.payload, Some(deadline))
                        .await
                        .map_err(lambda_runtime::Error::from)?;
                    // A run's report says what it counted, each figure under its metric's name.
                    let mut metrics = Metrics::new(scheduled.function);
                    stamp(&mut metrics, &served);
                    for (name, n) in report.counts() {
                        metrics.count(name, n);
                    }
                    metrics.duration(started.elapsed()).flush();
                    Ok::<_, lambda_runtime::Error>(report.to_json())
                })
                .instrument(tracing::info_span!("invocation", cold_start))
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
    one_at_a_time(streamed.function);
    lambda_runtime::run(lambda_runtime::service_fn(
        move |event: lambda_runtime::LambdaEvent<serde_json::Value>| {
            let invocation = Arc::new(Invocation::of(&event.context));
            let cold_start = invocation.cold_start;
            invocation
                .clone()
                .scope(async move {
                    (streamed.handler)(ctx, event.payload, Some(invocation.deadline))
                        .await
                        .map_err(lambda_runtime::Error::from)
                })
                .instrument(tracing::info_span!("invocation", cold_start))
        },
    ))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::Body;
    use std::sync::{Arc, Mutex};

    /// What a Powertools-style logger wrote while `log` ran, one JSON object per line.
    fn logged(log: impl FnOnce()) -> Vec<serde_json::Value> {
        #[derive(Clone, Default)]
        struct Buffer(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let written = buffer.clone();
        let layer = tracing_subscriber::fmt::layer()
            .fmt_fields(tracing_subscriber::fmt::format::JsonFields::new())
            .event_format(PowertoolsJson)
            .with_writer(move || buffer.clone());
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, log);
        let text = String::from_utf8(written.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn every_line_of_an_invocation_carries_its_ids_and_cold_start() {
        let lines = logged(|| {
            let runtime = tracing::info_span!(
                "Lambda runtime invoke",
                requestId = "8f5e3b8a-request",
                xrayTraceId = "Root=1-6750a1b2-0123456789abcdef01234567"
            );
            let _runtime = runtime.enter();
            let invocation = tracing::info_span!("invocation", cold_start = true);
            let _invocation = invocation.enter();
            let request = tracing::info_span!("request", route = "GET /vehicles/{vehicleId}");
            let _request = request.enter();
            tracing::info!(status = 200u16, read_units = 0.5, "request handled");
            tracing::warn!("something else");
        });
        assert_eq!(lines.len(), 2);
        for line in &lines {
            assert_eq!(line["function_request_id"], "8f5e3b8a-request");
            assert_eq!(
                line["xray_trace_id"],
                "Root=1-6750a1b2-0123456789abcdef01234567"
            );
            assert_eq!(line["cold_start"], true);
            assert_eq!(line["route"], "GET /vehicles/{vehicleId}");
            assert_eq!(line["service"], "singlet");
            assert!(line["timestamp"].as_str().unwrap().ends_with('Z'));
            assert!(
                line.get("requestId").is_none(),
                "under Powertools' name only"
            );
        }
        assert_eq!(lines[0]["level"], "INFO");
        assert_eq!(lines[0]["message"], "request handled");
        assert_eq!(lines[0]["status"], 200);
        assert_eq!(lines[0]["read_units"], 0.5);
        assert_eq!(lines[1]["level"], "WARN");
    }

    #[test]
    fn only_the_first_invocation_is_a_cold_start() {
        // The flag is per process: this test is the only one in this binary that reads it.
        let first = crate::invocation::first_invocation;
        assert!(first());
        assert!(!first());
        assert!(!first());
    }

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
