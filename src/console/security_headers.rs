//! The headers every answer of the console carries, so that its page runs only its own code and
//! no other site can frame it or make a browser read its answers as something else:
//!
//! - `Content-Security-Policy`: scripts, styles and calls from the console's own origin only
//!   (`/_console/console.js`, `/_console/console.css`, `/_console/api/`), no inline script, no
//!   plugin, no `<base>` or form that points elsewhere, and no page may frame it
//!   (`frame-ancestors 'none'`, which `X-Frame-Options: DENY` says to older browsers). The page
//!   sets its few inline colours through the CSSOM (`el.style`), which a policy does not govern.
//! - `X-Content-Type-Options: nosniff`: each answer is read as the type it says.
//! - `Referrer-Policy: same-origin`: the console's URL holds its secret (`?token=`), which a
//!   link followed from it to another site must not carry away. (Not `no-referrer`: under it a
//!   browser sends a same-origin `POST` with `Origin: null`, which the console's guard refuses.)
//!
//! (OWASP's HTTP headers cheat sheet and MDN's pages for each header say what each does.)

use axum::http::{HeaderName, HeaderValue};
use axum::response::Response;

/// The console's content security policy.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// The headers, in the order they are set.
pub const HEADERS: &[(&str, &str)] = &[
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "same-origin"),
];

/// `response` with [`HEADERS`].
pub async fn add(mut response: Response) -> Response {
    for (name, value) in HEADERS {
        response.headers_mut().insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    response
}
