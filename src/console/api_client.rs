//! How the console calls the API: an HTTP request handed in-process to the front door's own
//! router, so it takes the very path a `curl` takes (route match, the API Gateway event built by
//! `front_door::gateway_event`, every check the front door makes, then `request::answer` and the
//! handler), with the person's token in its `authorization` header. The handler runs in the
//! caller's task, so [`super::capture::recording`] sees its DynamoDB calls.

use super::capture::{self, Call};
use super::token;
use crate::serve::front_door::Gateway;
use axum::body::{Body, to_bytes};
use axum::http::{HeaderName, HeaderValue, Method, Request, header};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use singlet_functions::Ctx;
use singlet_functions::clock::Clock;
use time::OffsetDateTime;
use tower::ServiceExt;

/// The largest answer the console reads back.
const MAX_ANSWER: usize = 16 * 1024 * 1024;

/// The API (the front door's router) and the context its handlers run with.
#[derive(Clone)]
pub struct ApiClient {
    api: axum::Router,
    gateway: Gateway,
    pub ctx: Ctx,
}

/// A request as the console's page sends it, and as it shows it back.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Sent {
    pub method: String,
    /// The path with its query string: `/vehicles/abc?limit=5`.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
}

/// The API's answer.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Received {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The body as JSON when it is JSON, else as text, `null` when empty.
    pub body: Value,
    pub elapsed_ms: f64,
}

impl Sent {
    pub fn new(method: &str, path: impl Into<String>) -> Self {
        Sent {
            method: method.to_owned(),
            path: path.into(),
            ..Sent::default()
        }
    }

    pub fn json(mut self, body: Value) -> Self {
        self.body = Some(body.to_string());
        self.header("content-type", "application/json")
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    fn has(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    }
}

impl ApiClient {
    /// The front door's API (`front_door::app`) over `gateway`.
    pub fn new(gateway: Gateway) -> Self {
        ApiClient {
            api: crate::serve::front_door::app(gateway.clone()),
            ctx: gateway.ctx.clone(),
            gateway,
        }
    }

    /// The same API with its handlers' clock reading `now` (as `invoke --clock` runs a
    /// function): the seed lends books in the past through the checkout route itself.
    pub fn at(&self, now: OffsetDateTime) -> Self {
        let mut gateway = self.gateway.clone();
        gateway.ctx.clock = Clock::reading(now);
        ApiClient::new(gateway)
    }

    /// Whether it mints the person's token (the runner is its own issuer).
    pub fn mints(&self) -> bool {
        self.gateway.issuer.is_some()
    }

    /// The request as it will be sent: the person's token added unless the request carries an
    /// `authorization` of its own (to show a `401`, say).
    pub fn prepare(&self, person: &str, sent: Sent) -> Sent {
        match token::mint(self.gateway.issuer.as_deref(), person) {
            Some(token) if !sent.has("authorization") => {
                sent.header("authorization", &format!("Bearer {token}"))
            }
            _ => sent,
        }
    }

    /// Sends a prepared request through the API's router.
    pub async fn send(&self, sent: &Sent) -> Result<Received, String> {
        let method = Method::from_bytes(sent.method.as_bytes())
            .map_err(|_| format!("{:?} is not an HTTP method", sent.method))?;
        if !sent.path.starts_with('/') || sent.path.starts_with("/_console") {
            return Err("the path must start with / and name an API route".into());
        }
        let mut request = Request::builder()
            .method(method)
            .uri(&sent.path)
            .header(header::HOST, "127.0.0.1")
            .header(header::USER_AGENT, "singlet-console");
        for (name, value) in &sent.headers {
            let name = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| format!("{name:?} is not a header name"))?;
            let value = HeaderValue::from_str(value.trim())
                .map_err(|_| format!("the value of {name} is not a header value"))?;
            request = request.header(name, value);
        }
        let request = request
            .body(Body::from(sent.body.clone().unwrap_or_default()))
            .map_err(|e| format!("not a request: {e}"))?;
        let started = std::time::Instant::now();
        let response = match self.api.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        let (parts, body) = response.into_parts();
        let bytes = to_bytes(body, MAX_ANSWER)
            .await
            .map_err(|e| format!("cannot read the answer: {e}"))?;
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned().into())
        };
        Ok(Received {
            status: parts.status.as_u16(),
            headers: parts
                .headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_owned()))
                .collect(),
            body,
            elapsed_ms,
        })
    }

    /// Sends a request as `person`, recording the DynamoDB calls its handler made.
    pub async fn run(
        &self,
        person: &str,
        sent: Sent,
    ) -> (Sent, Result<Received, String>, Vec<Call>) {
        let sent = self.prepare(person, sent);
        let (answer, calls) = capture::recording(self.send(&sent)).await;
        (sent, answer, calls)
    }

    /// Sends a request as `person` and returns its answer only: for the seed and a race's setup.
    pub async fn call(&self, person: &str, sent: Sent) -> Result<Received, String> {
        self.send(&self.prepare(person, sent)).await
    }
}
