//! The embedded engine's endpoint as the runner serves it to other programs (`--engine-port`,
//! 8000 by default, for the AWS CLI, a DynamoDB GUI, `invoke --endpoint`, `sam local`): a
//! forwarding door in front of dynoxide that refuses what only a web browser sends.
//!
//! Why: dynoxide (3.2) checks no signature and answers every CORS preflight with
//! `Access-Control-Allow-Origin: *`, so any web page the developer opens could `Scan` the local
//! table from the browser (emails, card numbers, plates) or `PutItem` forged locks and outbox
//! items, at the port every DynamoDB tool defaults to. The door refuses, with `403`:
//!
//! - a request that carries `Origin` (a browser's cross-origin `fetch`, its preflight, a form's
//!   `POST`); no SDK or CLI sends one;
//! - a `Host` that is a name other than `localhost` or `host.docker.internal` (DNS rebinding: a
//!   page whose own name was made to point at 127.0.0.1 reaches the port as same-origin, but with
//!   its own name in `Host`). An IP address is let through, so `--engine-host 0.0.0.0` still
//!   serves a container.
//!
//! dynoxide itself listens on a second loopback port, which the runner's own clients use: one
//! every browser refuses to fetch from (`engine::listen_out_of_browsers_reach`), so it is no way
//! around the door for a web page. What neither stops: any program of any local user can reach
//! both ports, as with DynamoDB Local; that needs dynoxide to check credentials itself
//! (docs/guide/running-locally.md, "Security of the local runner").

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use tokio::net::TcpListener;

/// DynamoDB accepts request bodies up to 16 MB; so does dynoxide.
const MAX_BODY: usize = 16 * 1024 * 1024;

/// The hosts a request may name besides an IP address.
const NAMED_HOSTS: [&str; 2] = ["localhost", "host.docker.internal"];

#[derive(Clone)]
struct Door {
    /// dynoxide's own endpoint: `http://127.0.0.1:<port>`.
    engine: String,
    client: reqwest::Client,
}

/// Serves the door on `addr`, forwarding to the engine at `engine`; returns the door's URL.
pub async fn serve(engine: String, addr: SocketAddr) -> Result<String, String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| crate::serve::engine::listen_error(addr, &e, "--engine-port"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let door = Door {
        engine,
        client: reqwest::Client::new(),
    };
    let app = axum::Router::new().fallback(forward).with_state(door);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(format!("http://{addr}"))
}

/// Why a request is refused, if it is: [`serve`]'s rules.
pub fn refusal(headers: &HeaderMap) -> Option<&'static str> {
    if headers.contains_key(header::ORIGIN) {
        return Some(
            "the engine's endpoint does not answer web pages (the request carries Origin)",
        );
    }
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok())?;
    let name = match host.strip_prefix('[') {
        // An IPv6 address: `[::1]:8000`.
        Some(_) => return None,
        None => host.rsplit_once(':').map_or(host, |(name, _port)| name),
    };
    let allowed = name.parse::<std::net::IpAddr>().is_ok()
        || NAMED_HOSTS
            .iter()
            .any(|allowed| name.eq_ignore_ascii_case(allowed));
    (!allowed).then_some(
        "the engine's endpoint answers only to an IP address, localhost or host.docker.internal",
    )
}

async fn forward(State(door): State<Door>, request: Request) -> Response {
    if let Some(reason) = refusal(request.headers()) {
        let body = serde_json::json!({"__type": "AccessDeniedException", "message": reason});
        return (
            StatusCode::FORBIDDEN,
            [(header::CONTENT_TYPE, "application/x-amz-json-1.0")],
            body.to_string(),
        )
            .into_response();
    }
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(error) => return (StatusCode::PAYLOAD_TOO_LARGE, error.to_string()).into_response(),
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut headers = parts.headers;
    headers.remove(header::HOST);
    let answer = door
        .client
        .request(parts.method, format!("{}{path}", door.engine))
        .headers(headers)
        .body(body)
        .send()
        .await;
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            tracing::warn!(error = %error, "the engine did not answer through its door");
            return (StatusCode::BAD_GATEWAY, "the engine did not answer").into_response();
        }
    };
    let status = answer.status();
    let headers = answer.headers().clone();
    let body = match answer.bytes().await {
        Ok(body) => body,
        Err(_) => {
            return (StatusCode::BAD_GATEWAY, "the engine's answer broke off").into_response();
        }
    };
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn tools_pass_and_browsers_and_rebound_names_do_not() {
        for host in [
            "127.0.0.1:8000",
            "localhost:8000",
            "LOCALHOST",
            "host.docker.internal:8000",
            "192.168.1.20:8000",
            "[::1]:8000",
        ] {
            assert_eq!(refusal(&headers(&[("host", host)])), None, "{host}");
        }
        assert!(refusal(&headers(&[("host", "evil.example:8000")])).is_some());
        assert!(refusal(&headers(&[("host", "localhost.evil.example")])).is_some());
        assert!(
            refusal(&headers(&[
                ("host", "127.0.0.1:8000"),
                ("origin", "https://evil.example")
            ]))
            .is_some()
        );
        assert!(refusal(&headers(&[("host", "127.0.0.1"), ("origin", "null")])).is_some());
    }
}
