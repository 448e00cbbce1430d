//! The one place the console gets a bearer token for the person using it.
//!
//! The console holds no privilege of its own: every request it runs goes through the API's own
//! router, with the route checks the front door makes for anyone, carrying a token minted here
//! exactly as `cargo run -- token` would mint one (every scope, for the person's subject).

use crate::serve::auth::LocalIssuer;

/// A bearer token for `subject` with every scope, exactly as `cargo run -- token` mints one,
/// from the runner's own `issuer`; `None` when the runner trusts another issuer (the console then
/// runs nothing, and says so).
pub fn mint(issuer: Option<&LocalIssuer>, subject: &str) -> Option<String> {
    Some(issuer?.mint(
        subject,
        &singlet_functions::routes::all_scopes().join(" "),
        &Default::default(),
        3600,
    ))
}
