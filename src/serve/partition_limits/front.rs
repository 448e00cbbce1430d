//! The engine's endpoint with the limiter in front: every request to the embedded engine (the
//! runner's own clients, and through the door every other program) reaches this listener, is
//! judged, and the ones that pass go on to dynoxide, served on a second loopback port that only
//! this front uses.
//!
//! Why a front and not a hook: dynoxide (3.2) has no partition model and no hook for one, and
//! serves its endpoint only as a whole (`dynoxide::server::serve_on`). The one place every
//! request passes is the engine's own listener, so the front takes it over.

use super::Limiter;
use super::judge::Verdict;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use tokio::net::TcpListener;

/// DynamoDB accepts request bodies up to 16 MB; so does dynoxide.
const MAX_BODY: usize = 16 * 1024 * 1024;
const TARGET_PREFIX: &str = "DynamoDB_20120810.";

#[derive(Clone)]
struct Front {
    limiter: Arc<Limiter>,
    /// dynoxide's own endpoint behind the front.
    engine: String,
    client: reqwest::Client,
}

/// Serves dynoxide behind the front on `listener`: dynoxide itself on a loopback port no web page
/// can reach (as the engine's own port is, `engine::listen_out_of_browsers_reach`).
pub fn serve(
    db: dynoxide::Database,
    listener: TcpListener,
    limiter: Arc<Limiter>,
) -> Result<(), String> {
    let (behind, _) = crate::serve::loopback::listen_out_of_browsers_reach()?;
    let engine = format!("http://{}", behind.local_addr().map_err(|e| e.to_string())?);
    tokio::spawn(dynoxide::server::serve_on(behind, db));
    let front = Front {
        limiter,
        engine,
        client: reqwest::Client::builder()
            .no_proxy()
            .build()
            .map_err(|e| format!("cannot make the engine's front client: {e}"))?,
    };
    let app = axum::Router::new().fallback(forward).with_state(front);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(())
}

async fn forward(State(front): State<Front>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(error) => return (StatusCode::PAYLOAD_TOO_LARGE, error.to_string()).into_response(),
    };
    let operation = parts
        .headers
        .get("x-amz-target")
        .and_then(|t| t.to_str().ok())
        .and_then(|t| t.strip_prefix(TARGET_PREFIX))
        .filter(|_| parts.method == axum::http::Method::POST);
    let verdict = match operation {
        Some(operation) => Some(front.limiter.judge(operation, &body)),
        None => None,
    };
    let (sent, pending) = match verdict {
        Some(Verdict::Refuse(refusal)) => return refused(&parts.headers, refusal),
        Some(Verdict::Send {
            body: rewritten,
            pending,
        }) => (rewritten.map_or(body, Into::into), Some(pending)),
        None => (body, None),
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut headers = parts.headers;
    headers.remove(header::HOST);
    headers.remove(header::CONTENT_LENGTH);
    let answer = front
        .client
        .request(parts.method, format!("{}{path}", front.engine))
        .headers(headers)
        .body(sent)
        .send()
        .await;
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            tracing::warn!(error = %error, "the engine did not answer its front");
            return (StatusCode::BAD_GATEWAY, "the engine did not answer").into_response();
        }
    };
    let status = answer.status();
    let mut headers = answer.headers().clone();
    let body = match answer.bytes().await {
        Ok(body) => body,
        Err(_) => {
            return (StatusCode::BAD_GATEWAY, "the engine's answer broke off").into_response();
        }
    };
    let body = match pending.and_then(|p| front.limiter.settle(p, status.as_u16(), &body)) {
        Some(rewritten) => {
            // The checksum was of the engine's body; a client checks it when it is there.
            headers.remove("x-amz-crc32");
            headers.remove(header::CONTENT_LENGTH);
            rewritten.into()
        }
        None => body,
    };
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// DynamoDB's `400` for a throttled request, in the content type the request was sent in.
fn refused(request: &axum::http::HeaderMap, body: String) -> Response {
    let content_type = request
        .get(header::CONTENT_TYPE)
        .and_then(|t| t.to_str().ok())
        .filter(|t| t.starts_with("application/json"))
        .map_or("application/x-amz-json-1.0", |_| "application/json");
    let mut response = (StatusCode::BAD_REQUEST, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        HeaderName::from_static("x-amzn-requestid"),
        HeaderValue::from_str(&uuid_like()).unwrap_or(HeaderValue::from_static("singlet")),
    );
    response
}

fn uuid_like() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
