//! How long the runner's doors (the API's port, `front_door`, with the console beside it; the
//! engine's door, `engine_door`) wait for what a client sends: a connection must deliver a whole
//! request head within [`ReadTimeouts::head`] of opening or of its previous answer (an idle
//! keep-alive connection is closed after as long), and a request's body within
//! [`ReadTimeouts::body`] of its head. Without these, a client that opened connections and sent
//! nothing, or headers and bodies a byte at a time, held each connection (and the body read so
//! far) for as long as it liked.
//!
//! API Gateway bounds a request too: its HTTP API answers within its 30-second integration
//! timeout, and takes at most 10 MB of payload and 10,240 bytes of request line and headers
//! ("Quotas for configuring and running an HTTP API in API Gateway",
//! <https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-quotas.html>). It
//! documents no read timeout of its own, so the runner's are chosen for a client on the same
//! machine: 10 s for a head (hyper's own default is 30 s), 30 s for a body (API Gateway's
//! integration timeout, in which 10 MB crosses any local link many times over).
//!
//! A request's head is bounded in size too: a head over [`MAX_HEAD_BYTES`] (request line, names,
//! values and line ends) is answered `431` with no body by either door and its connection closed,
//! before the rest of it is read (hyper's own limit, about 400 KB, held 100 KB of headers a
//! request). The API's door then holds a smaller head to API Gateway's quota itself
//! (`front_door`, 10,240 bytes of request line and header values).
//!
//! `SINGLET_HEAD_TIMEOUT_MS` and `SINGLET_BODY_TIMEOUT_MS` set them (milliseconds) for a test or a
//! slow link; a value that is not a whole number of milliseconds from 1 to 3,600,000 is refused.

use axum::body::Bytes;
use axum::http::{HeaderMap, Request, header};
use http_body::{Body, Frame, SizeHint};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;

/// The largest request head either door reads (request line and header section, in bytes): over
/// three times API Gateway's 10,240 bytes of request line and header values, so that a head API
/// Gateway would take, with its header names and line ends, reaches the front door's own exact
/// check ([`crate::serve::front_door::GATEWAY_MAX_HEAD`]).
pub const MAX_HEAD_BYTES: usize = 32 * 1024;

/// The variables that set [`ReadTimeouts`], in milliseconds.
pub const HEAD_TIMEOUT_VAR: &str = "SINGLET_HEAD_TIMEOUT_MS";
pub const BODY_TIMEOUT_VAR: &str = "SINGLET_BODY_TIMEOUT_MS";

/// How long a door waits for a request's head and for its body (the module's comment says why).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadTimeouts {
    /// From a connection's opening, or its previous answer, to the end of a request's head.
    pub head: Duration,
    /// From the end of a request's head to the end of its body.
    pub body: Duration,
}

impl Default for ReadTimeouts {
    fn default() -> Self {
        Self {
            head: Duration::from_secs(10),
            body: Duration::from_secs(30),
        }
    }
}

impl ReadTimeouts {
    /// The defaults, or what [`HEAD_TIMEOUT_VAR`] and [`BODY_TIMEOUT_VAR`] say.
    pub fn from_env() -> Result<Self, String> {
        let mut timeouts = Self::default();
        for (var, slot) in [
            (HEAD_TIMEOUT_VAR, &mut timeouts.head),
            (BODY_TIMEOUT_VAR, &mut timeouts.body),
        ] {
            match std::env::var(var) {
                Ok(text) => *slot = milliseconds(var, &text)?,
                Err(std::env::VarError::NotPresent) => {}
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err(format!("{var} is not a number of milliseconds"));
                }
            }
        }
        Ok(timeouts)
    }
}

fn milliseconds(var: &str, text: &str) -> Result<Duration, String> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|ms| (1..=3_600_000).contains(ms))
        .map(Duration::from_millis)
        .ok_or_else(|| {
            format!("{var}={text:?} is not a whole number of milliseconds from 1 to 3600000")
        })
}

/// The address a request's connection arrived at (this door's own, as the client reached it):
/// in every request's extensions.
#[derive(Debug, Clone, Copy)]
pub struct ArrivedAt(pub SocketAddr);

/// Serves `app` on `listener` over HTTP/1.1, every connection held to `timeouts`: a head that
/// does not arrive in time closes the connection, and a body that does not arrive in time fails
/// the read of it ([`timed_out`] tells), so the handler answers and the connection closes. What
/// `axum::serve` does otherwise (it sets no timer, so hyper's own header timeout never runs).
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    timeouts: ReadTimeouts,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use tower::ServiceExt;
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(timeouts.head)
        .max_header_size(MAX_HEAD_BYTES);
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            // As axum::serve: a connection that failed as it was accepted is that client's
            // problem; anything else (no file descriptors left) is waited out.
            Err(error) if is_connection_error(&error) => continue,
            Err(error) => {
                tracing::warn!(%error, "cannot accept a connection");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let Ok(arrived) = stream.local_addr() else {
            continue;
        };
        let app = app.clone();
        let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
            let mut request = request.map(|body| {
                axum::body::Body::new(Deadline {
                    inner: body,
                    expires: Box::pin(tokio::time::sleep(timeouts.body)),
                })
            });
            request.extensions_mut().insert(ArrivedAt(arrived));
            app.clone().oneshot(request)
        });
        let connection = http.serve_connection(TokioIo::new(stream), service);
        tokio::spawn(async move {
            // A client that went away, or was timed out, is no error of the door's.
            let _ = connection.await;
        });
    }
}

fn is_connection_error(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        error.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    )
}

/// A request body that fails with [`BodyTimedOut`] once its deadline has passed.
struct Deadline {
    inner: hyper::body::Incoming,
    expires: Pin<Box<tokio::time::Sleep>>,
}

/// What reading a body past its deadline fails with.
#[derive(Debug)]
pub struct BodyTimedOut;

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body did not arrive in time")
    }
}

impl std::error::Error for BodyTimedOut {}

impl Body for Deadline {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        if this.expires.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyTimedOut))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether reading a body failed because its deadline passed (through whatever wrapped it:
/// `axum::body::to_bytes`'s limit, axum's error).
pub fn timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if error.is::<BodyTimedOut>() {
            return true;
        }
        cause = error.source();
    }
    false
}

/// The body length a request declares (`Content-Length`), when it declares one that parses.
pub fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_is_a_whole_number_of_milliseconds_in_range() {
        assert_eq!(
            milliseconds(HEAD_TIMEOUT_VAR, "250"),
            Ok(Duration::from_millis(250))
        );
        for bad in ["", "0", "-1", "1.5", "10s", "3600001"] {
            let refused = milliseconds(HEAD_TIMEOUT_VAR, bad).unwrap_err();
            assert!(refused.contains(HEAD_TIMEOUT_VAR), "{refused}");
        }
    }

    #[test]
    fn a_timed_out_body_is_told_through_its_wrappers() {
        let wrapped = axum::Error::new(axum::Error::new(BodyTimedOut));
        assert!(timed_out(&wrapped));
        assert!(!timed_out(&axum::Error::new(std::io::Error::other(
            "reset"
        ))));
    }
}
