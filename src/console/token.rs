//! The one place the console gets a bearer token for the person using it.
//!
//! The console holds no privilege of its own: every request it runs goes through the API's own
//! router, with the route checks the front door makes for anyone, carrying a token minted here
//! exactly as `cargo run -- token` would mint one (every scope, for the person's subject).

/// Every scope the API knows (`docs/API.md`, "Authentication and authorization"): the console's
/// person may run any pattern.
pub const ALL_SCOPES: &[&str] = &[
    "fleet:read",
    "fleet:write",
    "accounts:self",
    "accounts:admin",
    "library:read",
    "library:staff",
    "library:patron",
    "audit:read",
    "audit:write",
];

/// A bearer token for `subject` with every scope, or `None` while the API takes no tokens.
///
/// TODO(auth): mint with the runner's token function, the one `cargo run -- token` uses (the
/// signing key under `.singlet/`), e.g. `crate::token::mint(subject, ALL_SCOPES, ttl)`, and once
/// routes declare their scopes take the union of `ROUTES[..].scopes` instead of `ALL_SCOPES`.
/// Nothing else in the console changes: the token goes into the `authorization` header of each
/// request it sends through the front door, which verifies it like any other.
pub fn mint(subject: &str) -> Option<String> {
    let _ = (subject, ALL_SCOPES);
    None
}
