//! The one place the console gets a bearer token for the person using it.
//!
//! The console holds no privilege of its own: every request it runs goes through the API's own
//! router, with the route checks the front door makes for anyone, carrying a token minted here
//! exactly as `cargo run -- token` would mint one (every scope, for the person's subject).

/// Every scope some route of the route table takes: the console's person may run any pattern.
pub fn all_scopes() -> Vec<&'static str> {
    let mut scopes: Vec<&'static str> = singlet_functions::routes::ROUTES
        .iter()
        .flat_map(|route| route.scopes.iter().copied())
        .collect();
    scopes.sort_unstable();
    scopes.dedup();
    scopes
}

/// A bearer token for `subject` with every scope, or `None` while the API takes no tokens.
///
/// TODO(auth): mint with the runner's token function, the one `cargo run -- token` uses (the
/// signing key under `.singlet/`), e.g. `crate::token::mint(subject, &all_scopes(), ttl)`.
/// Nothing else in the console changes: the token goes into the `authorization` header of each
/// request it sends through the front door, which verifies it like any other.
pub fn mint(subject: &str) -> Option<String> {
    let _ = (subject, all_scopes());
    None
}
