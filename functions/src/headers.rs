//! Header values of the contract that more than one module writes.

use lambda_http::http::HeaderValue;

/// A strong ETag carrying a version: `"7"`.
pub fn etag(version: u64) -> HeaderValue {
    HeaderValue::from_str(&format!("\"{version}\"")).expect("digits are a valid header")
}

/// Seconds a client should wait after a `503`.
pub const RETRY_AFTER_SECONDS: &str = "1";
