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
//!   its own name in `Host`), or an IP address other than a loopback one or the address the
//!   request arrived at (so `--engine-host 0.0.0.0` still serves a container that names the
//!   host's address). An IPv6 address is read whole (`[::1]:8000`), never let through for its
//!   bracket alone.
//!
//! It holds connections to the doors' read timeouts (`door_limits`), and refuses a body declared
//! over DynamoDB's limit before reading any of it.
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
use std::net::{IpAddr, SocketAddr};
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
    let timeouts = crate::serve::door_limits::ReadTimeouts::from_env()?;
    tokio::spawn(crate::serve::door_limits::serve(listener, app, timeouts));
    Ok(format!("http://{addr}"))
}

/// Why a request is refused, if it is: [`serve`]'s rules. `arrived_at` is the address the
/// request's connection reached (the door's own, as the client named it).
pub fn refusal(headers: &HeaderMap, arrived_at: Option<IpAddr>) -> Option<&'static str> {
    if headers.contains_key(header::ORIGIN) {
        return Some(
            "the engine's endpoint does not answer web pages (the request carries Origin)",
        );
    }
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok())?;
    let allowed = match host_address(host) {
        Some(ip) => ip.is_loopback() || Some(ip) == arrived_at,
        None => {
            let name = host.rsplit_once(':').map_or(host, |(name, _port)| name);
            NAMED_HOSTS
                .iter()
                .any(|allowed| name.eq_ignore_ascii_case(allowed))
        }
    };
    (!allowed).then_some(
        "the engine's endpoint answers only to localhost, host.docker.internal, a loopback \
         address or the address it was reached at",
    )
}

/// The IP address a `Host` names (`127.0.0.1`, `127.0.0.1:8000`, `[::1]`, `[::1]:8000`), if it
/// names one, whole.
fn host_address(host: &str) -> Option<IpAddr> {
    if let Some(rest) = host.strip_prefix('[') {
        let (address, after) = rest.split_once(']')?;
        let port_ok = after.is_empty()
            || after
                .strip_prefix(':')
                .is_some_and(|port| port.parse::<u16>().is_ok());
        return port_ok
            .then(|| address.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6))
            .flatten();
    }
    let address = match host.rsplit_once(':') {
        Some((address, port)) => port.parse::<u16>().ok().map(|_| address)?,
        None => host,
    };
    address.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

async fn forward(State(door): State<Door>, request: Request) -> Response {
    let arrived_at = request
        .extensions()
        .get::<crate::serve::door_limits::ArrivedAt>()
        .map(|arrived| arrived.0.ip());
    if let Some(reason) = refusal(request.headers(), arrived_at) {
        let body = serde_json::json!({"__type": "AccessDeniedException", "message": reason});
        return (
            StatusCode::FORBIDDEN,
            [(header::CONTENT_TYPE, "application/x-amz-json-1.0")],
            body.to_string(),
        )
            .into_response();
    }
    if crate::serve::door_limits::declared_length(request.headers())
        .is_some_and(|length| length > MAX_BODY as u64)
    {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            "the request body is over 16 MB",
        )
            .into_response();
    }
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(error) if crate::serve::door_limits::timed_out(&error) => {
            return (StatusCode::REQUEST_TIMEOUT, error.to_string()).into_response();
        }
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
        // The door reached at a LAN address (`--engine-host 0.0.0.0`).
        let own = Some(IpAddr::from([192, 168, 1, 20]));
        for host in [
            "127.0.0.1:8000",
            "localhost:8000",
            "LOCALHOST",
            "host.docker.internal:8000",
            "192.168.1.20:8000",
            "[::1]:8000",
            "[::1]",
            "127.0.0.2",
        ] {
            assert_eq!(refusal(&headers(&[("host", host)]), own), None, "{host}");
        }
        for host in [
            "evil.example:8000",
            "localhost.evil.example",
            // An address the door was not reached at, and hosts that only look like IPv6.
            "192.168.1.21:8000",
            "[evil.example]:8000",
            "[::1]evil.example",
            "[::1]:8000:1",
            "[2001:db8::1]:8000",
            "127.0.0.1:port",
        ] {
            assert!(
                refusal(&headers(&[("host", host)]), own).is_some(),
                "{host}"
            );
        }
        assert!(
            refusal(
                &headers(&[
                    ("host", "127.0.0.1:8000"),
                    ("origin", "https://evil.example")
                ]),
                own
            )
            .is_some()
        );
        assert!(refusal(&headers(&[("host", "127.0.0.1"), ("origin", "null")]), own).is_some());
    }
}
