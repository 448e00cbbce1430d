//! The HTTP front door: each request becomes the API Gateway HTTP API (payload 2.0) event that
//! AWS would hand the function (route key, decoded path parameters, query string, headers,
//! base64 for binary bodies), and goes through `lambda_http`'s own conversion into the same
//! handler the Lambda runs. A method or path the route table does not declare is API Gateway's
//! own `404 {"message":"Not Found"}`.

use crate::serve::auth::{Authorizer, LocalIssuer, authorizer_context};
use crate::serve::refusal::{GatewayRefusal, gateway_message};
use axum::body::{Body as AxumBody, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use lambda_http::Body;
use percent_encoding::percent_decode_str;
use serde_json::{Map, Value, json};
use singlet_functions::Ctx;
use singlet_functions::request::answer;
use singlet_functions::routes::{self, Route};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::net::TcpListener;

/// API Gateway's own limit on an HTTP API request body.
const GATEWAY_MAX_BODY: usize = 10 * 1024 * 1024;

/// API Gateway's quota on an HTTP API request's "total combined size of request line and header
/// values" ("Quotas for configuring and running an HTTP API in API Gateway",
/// <https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-quotas.html>).
pub const GATEWAY_MAX_HEAD: usize = 10240;

/// What the front door serves with: the functions' context, the authorizer it stands in for,
/// and the runner's own issuer when it is one (the console mints its person's token with it).
#[derive(Clone)]
pub struct Gateway {
    pub ctx: Ctx,
    pub authorizer: Arc<Authorizer>,
    pub issuer: Option<Arc<LocalIssuer>>,
}

/// The API: every route of the route table, `/openapi.json` and `/`. The runner serves the
/// console beside it (`console::mount`, from `main.rs`); the tests and benches serve this alone.
pub fn app(gateway: Gateway) -> axum::Router {
    app_with_cors(gateway, &[])
}

/// [`app`], with the API's routes answering CORS for `origins` (`--cors-origin`) as API Gateway
/// does for the template's `CorsAllowedOrigins`. The console and `/openapi.json` never do.
pub fn app_with_cors(gateway: Gateway, origins: &[String]) -> axum::Router {
    with_cors(
        axum::Router::new().fallback(dispatch).with_state(gateway),
        origins,
    )
    .route("/openapi.json", axum::routing::get(openapi))
    .route("/", axum::routing::get(index))
}

/// `GET /` (the runner only; API Gateway has no such route): where things are, for a person
/// who opened the base URL, and what every route needs.
async fn index() -> Response {
    let body = json!({
        "service": "singlet",
        "description": "singlet's API, served by the local runner",
        // The console's URL carries a per-start secret, so it is not given here (and with
        // `--no-console` there is none).
        "console": "the URL the runner printed at start, if it serves one",
        "openapi": "/openapi.json",
        "authorization": "every route needs `authorization: Bearer <token>`; \
                          `cargo run -- token --scope \"<scopes>\"` prints one",
        "scopes": routes::all_scopes(),
        "routes": routes::ROUTES.iter().map(|r| r.key()).collect::<Vec<_>>(),
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The request headers a browser may send cross-origin, the methods, and the response headers
/// it may read: the same lists as the HTTP API's `CorsConfiguration` in `template.yaml` (a test
/// keeps them equal).
pub const CORS_ALLOW_HEADERS: &[&str] = &[
    "authorization",
    "content-type",
    "idempotency-key",
    "if-match",
];
pub const CORS_ALLOW_METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE"];
pub const CORS_EXPOSE_HEADERS: &[&str] =
    &["etag", "location", "idempotent-replayed", "retry-after"];
/// How long a browser may cache a preflight's answer, in seconds.
pub const CORS_MAX_AGE: u64 = 600;

/// `--cors-origin`: an origin as a browser sends it (`scheme://host[:port]`, no path).
pub fn parse_origin(raw: &str) -> Result<String, String> {
    let origin = raw.trim_end_matches('/');
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .ok_or_else(|| format!("{raw:?} is not an origin such as http://localhost:5173"))?;
    if rest.is_empty() || rest.contains(['/', '?', '#', ' ']) || origin.contains('*') {
        return Err(format!(
            "{raw:?} is not an origin such as http://localhost:5173 (scheme, host and port only)"
        ));
    }
    Ok(origin.to_ascii_lowercase())
}

/// Wraps `app` in CORS as API Gateway's HTTP API answers it when the template allows
/// `origins`: preflights answered, and a request from an allowed origin told so; no CORS at
/// all when `origins` is empty (the default, as deployed).
fn with_cors(app: axum::Router, origins: &[String]) -> axum::Router {
    use tower_http::cors::{AllowOrigin, CorsLayer};
    if origins.is_empty() {
        return app;
    }
    let origins: Vec<header::HeaderValue> = origins
        .iter()
        .filter_map(|o| header::HeaderValue::from_str(o).ok())
        .collect();
    let methods: Vec<axum::http::Method> = CORS_ALLOW_METHODS
        .iter()
        .map(|m| m.parse().expect("a method"))
        .collect();
    let headers: Vec<header::HeaderName> = CORS_ALLOW_HEADERS
        .iter()
        .map(|h| header::HeaderName::from_static(h))
        .collect();
    let exposed: Vec<header::HeaderName> = CORS_EXPOSE_HEADERS
        .iter()
        .chain([&CONSUMED_CAPACITY])
        .map(|h| header::HeaderName::from_static(h))
        .collect();
    app.layer(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins))
            .allow_methods(methods)
            .allow_headers(headers)
            .expose_headers(exposed)
            .max_age(std::time::Duration::from_secs(CORS_MAX_AGE)),
    )
}

/// The contract as OpenAPI 3.1 (`docs/openapi.yaml`), as JSON, for client generators and API
/// tools. The runner only: API Gateway serves the functions' routes and nothing else. See
/// [`served_openapi`] for what differs from the file.
async fn openapi(headers: HeaderMap) -> Response {
    // The runner binds the loopback only, so a host of another name came through a rebound DNS
    // name or a proxy: it is not echoed into the document's `servers`, which keeps the file's.
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| is_host(h) && is_loopback_host(h));
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        served_openapi(host).to_string(),
    )
        .into_response()
}

/// `docs/openapi.yaml` as this runner serves it: its `servers` is the address the request
/// reached (`host`, `127.0.0.1:<port>`, a loopback name only), so a generated client's default base URL is this
/// runner whatever port it bound, and every response declares the runner's own
/// [`CONSUMED_CAPACITY`] header.
pub fn served_openapi(host: Option<&str>) -> Value {
    static DOCUMENT: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    let mut document = DOCUMENT
        .get_or_init(|| {
            let mut document: Value =
                serde_norway::from_str(OPENAPI_YAML).expect("docs/openapi.yaml parses");
            let consumed = json!({"$ref": "#/components/headers/ConsumedCapacity"});
            let declare = |response: &mut Value| {
                if let Some(response) = response.as_object_mut() {
                    let headers = response.entry("headers").or_insert_with(|| json!({}));
                    headers[CONSUMED_CAPACITY] = consumed.clone();
                }
            };
            for response in document["components"]["responses"]
                .as_object_mut()
                .into_iter()
                .flat_map(|responses| responses.values_mut())
            {
                declare(response);
            }
            let operations = document["paths"]
                .as_object_mut()
                .into_iter()
                .flat_map(|paths| paths.values_mut())
                .filter_map(Value::as_object_mut)
                .flat_map(|item| item.iter_mut())
                .filter(|(key, _)| {
                    ["get", "put", "post", "delete", "patch"].contains(&key.as_str())
                });
            for (_, operation) in operations {
                let responses = operation
                    .get_mut("responses")
                    .and_then(Value::as_object_mut)
                    .into_iter()
                    .flat_map(|responses| responses.values_mut());
                // A `$ref` names a shared response, declared above.
                for response in responses.filter(|response| response.get("$ref").is_none()) {
                    declare(response);
                }
            }
            document
        })
        .clone();
    if let Some(host) = host {
        document["servers"] = json!([{
            "url": format!("http://{host}"),
            "description": "This local runner (`cargo run`).",
        }]);
    }
    document
}

/// The OpenAPI document, compiled in.
pub const OPENAPI_YAML: &str = include_str!("../../docs/openapi.yaml");

/// Serves the API on `listener`, with the doors' read timeouts ([`crate::serve::door_limits`]).
pub async fn serve(listener: TcpListener, gateway: Gateway) -> std::io::Result<()> {
    crate::serve::door_limits::serve(listener, app(gateway), Default::default()).await
}

/// Serves `gateway` in the background on a free loopback port and answers its base URL
/// (`http://127.0.0.1:<port>`): the front door the tests and benchmarks talk to.
pub async fn serve_on_loopback(gateway: Gateway) -> std::io::Result<String> {
    let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(serve(listener, gateway));
    Ok(base)
}

async fn dispatch(State(gateway): State<Gateway>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    // Everything API Gateway decides from the head is decided before the body is read: a head or
    // a body declared too large, a route that is not there and a token that does not pass are
    // answered without reading (or holding) a byte of it.
    if head_size(&parts.method, &parts.uri, &parts.headers) > GATEWAY_MAX_HEAD {
        // AWS documents the quota but not its answer: `431` (RFC 6585) in API Gateway's shape.
        return closing(gateway_message(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "Request Header Fields Too Large",
        ));
    }
    if crate::serve::door_limits::declared_length(&parts.headers)
        .is_some_and(|length| length > GATEWAY_MAX_BODY as u64)
    {
        return closing(gateway_message(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Request Entity Too Large",
        ));
    }
    let admitted = match admit(
        &gateway.authorizer,
        &parts.method,
        &parts.uri,
        &parts.headers,
    ) {
        Ok(admitted) => admitted,
        Err(refused) if has_body(&parts.headers) => return closing(refused.into_response()),
        Err(refused) => return refused.into_response(),
    };
    let body = match to_bytes(body, GATEWAY_MAX_BODY).await {
        Ok(body) => body,
        Err(error) if crate::serve::door_limits::timed_out(&error) => {
            return closing(gateway_message(
                StatusCode::REQUEST_TIMEOUT,
                "Request Timeout",
            ));
        }
        Err(_) => {
            return closing(gateway_message(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Request Entity Too Large",
            ));
        }
    };
    let (route, lambda_request) =
        match handed_over(admitted, &parts.method, &parts.uri, &parts.headers, &body) {
            Ok(found) => found,
            Err(refused) => return refused.into_response(),
        };
    let answer =
        crate::serve::iam::serving(route.function, answer(&gateway.ctx, route, lambda_request))
            .await;
    let mut response = into_axum(answer.response);
    // The local runner only: what the request cost, for a person with curl.
    if let Ok(value) = axum::http::HeaderValue::from_str(&format!(
        "rcu={}; wcu={}",
        answer.consumed.read_units, answer.consumed.write_units
    )) {
        response.headers_mut().insert(CONSUMED_CAPACITY, value);
    }
    response
}

/// What API Gateway's head quota counts of a request: its request line
/// (`METHOD SP target SP HTTP/1.1`) and the bytes of its header values.
fn head_size(method: &axum::http::Method, uri: &axum::http::Uri, headers: &HeaderMap) -> usize {
    let target = uri
        .path_and_query()
        .map_or(1, |target| target.as_str().len());
    let line = method.as_str().len() + 1 + target + " HTTP/1.1".len();
    line + headers.values().map(|value| value.len()).sum::<usize>()
}

/// Whether a request declares a body (a length above zero, or chunks).
fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || crate::serve::door_limits::declared_length(headers).is_some_and(|length| length > 0)
}

/// `response` with `Connection: close`: an answer given before the body was read, whose unread
/// rest the connection is not kept open for (hyper closes it after the answer; the header tells
/// the client so).
fn closing(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

/// What API Gateway decided from a request's head: its route, path parameters and verified claims.
struct Admitted {
    route: &'static Route,
    params: HashMap<String, String>,
    claims: crate::serve::auth::Claims,
}

/// The route serving an HTTP request and its token's claims, from the request's head alone; or
/// API Gateway's own answer when no route declares the method and path (`404`) or the token does
/// not pass its authorizer (`401`, `403`).
fn admit(
    authorizer: &Authorizer,
    method: &axum::http::Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
) -> Result<Admitted, GatewayRefusal> {
    let Some((route, params)) = routes::find(method.as_str(), &segments(uri.path())) else {
        return Err(GatewayRefusal(StatusCode::NOT_FOUND, "Not Found"));
    };
    let claims = authorizer.authorize(headers, route)?;
    Ok(Admitted {
        route,
        params,
        claims,
    })
}

/// The request API Gateway would hand the admitted request's function, with its `body`.
fn handed_over(
    admitted: Admitted,
    method: &axum::http::Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(&'static Route, lambda_http::Request), GatewayRefusal> {
    let Admitted {
        route,
        params,
        claims,
    } = admitted;
    let mut event = gateway_event(route, params, method, uri, headers, body);
    event["requestContext"]["authorizer"] = authorizer_context(&claims);
    match lambda_http::request::from_str(&event.to_string()) {
        Ok(request) => Ok((route, request)),
        Err(_) => Err(GatewayRefusal(StatusCode::BAD_REQUEST, "Bad Request")),
    }
}

/// The route serving an HTTP request, and the request API Gateway would hand its function; or
/// API Gateway's own answer when no route declares the method and path (`404`) or the token does
/// not pass its authorizer (`401`, `403`). The one route matcher of the runner, the tests and
/// the benches.
pub fn lambda_request(
    authorizer: &Authorizer,
    method: &axum::http::Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(&'static Route, lambda_http::Request), GatewayRefusal> {
    let admitted = admit(authorizer, method, uri, headers)?;
    handed_over(admitted, method, uri, headers, body)
}

/// The header in which the local runner reports the capacity units a request consumed.
pub const CONSUMED_CAPACITY: &str = "x-consumed-capacity";

/// The percent-decoded segments of a path, as the route matcher takes them. Only the one
/// leading `/` is dropped: an empty segment is part of a path (RFC 3986, section 3.3), so
/// `//vehicles/x`, like `/vehicles//x` or `/vehicles/x/`, matches no route (`404`). AWS
/// documents no merging of slashes; this is the strict reading (docs/guide/authentication.md).
pub fn segments(path: &str) -> Vec<String> {
    path.strip_prefix('/')
        .unwrap_or(path)
        .split('/')
        .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect()
}

/// The payload-2.0 event API Gateway would build for this request.
pub fn gateway_event(
    route: &Route,
    path_parameters: HashMap<String, String>,
    method: &axum::http::Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Value {
    let mut header_map = Map::new();
    for name in headers.keys() {
        let values: Vec<&str> = headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        header_map.insert(name.as_str().to_owned(), values.join(",").into());
    }
    // API Gateway sets these itself: no client value reaches the function (nor `lambda_http`'s
    // URL parser, which refuses a malformed host by panicking).
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| is_host(h))
        .unwrap_or("localhost")
        .to_owned();
    header_map.insert("host".into(), host.clone().into());
    header_map.insert("x-forwarded-proto".into(), "http".into());
    let raw_query = uri.query().unwrap_or_default();
    let mut query: Map<String, Value> = Map::new();
    for (name, value) in form_pairs(raw_query) {
        match query.get_mut(&name) {
            // API Gateway joins repeated parameters with commas.
            Some(Value::String(existing)) => *existing = format!("{existing},{value}"),
            _ => {
                query.insert(name, value.into());
            }
        }
    }
    let (body, base64) = match std::str::from_utf8(body) {
        _ if body.is_empty() => (Value::Null, false),
        Ok(text) => (text.into(), false),
        Err(_) => {
            use base64::Engine;
            (
                base64::engine::general_purpose::STANDARD
                    .encode(body)
                    .into(),
                true,
            )
        }
    };
    // API Gateway's HTTP API hands the function the path already decoded.
    let path = percent_decode_str(uri.path()).decode_utf8_lossy();
    let now = time::OffsetDateTime::now_utc();
    json!({
        "version": "2.0",
        "routeKey": route.key(),
        "rawPath": path,
        "rawQueryString": raw_query,
        "headers": header_map,
        "queryStringParameters": if query.is_empty() { Value::Null } else { query.into() },
        "pathParameters": if path_parameters.is_empty() { Value::Null } else { json!(path_parameters) },
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": host,
            "domainPrefix": "local",
            "http": {
                "method": method.as_str(),
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": headers.get(header::USER_AGENT).and_then(|h| h.to_str().ok()).unwrap_or(""),
            },
            "requestId": uuid_like(),
            "routeKey": route.key(),
            "stage": "$default",
            "time": now.format(&time::format_description::well_known::Rfc2822).unwrap_or_default(),
            "timeEpoch": now.unix_timestamp() * 1000,
        },
        "body": body,
        "isBase64Encoded": base64,
    })
}

/// `name` or `name:port`: letters, digits, dots and hyphens, and a port that fits 16 bits.
fn is_host(value: &str) -> bool {
    let (name, port) = value.split_once(':').unwrap_or((value, "0"));
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        && port.parse::<u16>().is_ok()
}

/// `localhost` or a `127.0.0.0/8` address, with or without a port.
fn is_loopback_host(value: &str) -> bool {
    let name = value.split_once(':').map_or(value, |(name, _)| name);
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn form_pairs(raw: &str) -> Vec<(String, String)> {
    raw.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &str| {
                percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (decode(name), decode(value))
        })
        .collect()
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("local-{:016x}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A handler's response as the HTTP response API Gateway would send.
fn into_axum(response: lambda_http::Response<Body>) -> Response {
    let (parts, body) = response.into_parts();
    let body = match body {
        Body::Empty => AxumBody::empty(),
        Body::Text(text) => AxumBody::from(text),
        Body::Binary(bytes) => AxumBody::from(bytes),
        _ => AxumBody::empty(),
    };
    Response::from_parts(parts, body)
}
