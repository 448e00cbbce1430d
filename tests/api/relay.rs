//! A test's own HTTP front door before the engine (one that counts, holds or inspects the calls
//! passing through it) hands each call on as the client sent it and the engine's answer back as
//! the engine gave it.

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};

/// Sends `request` (to the engine, with the client's body) with the `headers` the client sent,
/// but `host` and `content-length`, which the new request sets itself; the engine's answer, less
/// the headers of its own connection (`content-length`, `transfer-encoding`, `connection`),
/// which the front door's server sets for its own.
pub async fn relay(
    request: reqwest::RequestBuilder,
    headers: &HeaderMap,
) -> (StatusCode, HeaderMap, Bytes) {
    let request = headers
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "host" | "content-length"))
        .fold(request, |request, (name, value)| {
            request.header(name, value)
        });
    let response = request.send().await.expect("the engine answers");
    let status = response.status();
    let answer_headers = response
        .headers()
        .iter()
        .filter(|(name, _)| {
            !matches!(
                name.as_str(),
                "content-length" | "transfer-encoding" | "connection"
            )
        })
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    (status, answer_headers, response.bytes().await.unwrap())
}
