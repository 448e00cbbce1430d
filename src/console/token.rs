//! The one place the console gets a bearer token for the person using it.
//!
//! The console holds no privilege of its own: every request it runs goes through the API's own
//! router, with the route checks the front door makes for anyone, carrying a token minted here
//! exactly as `cargo run -- token` would mint one (every scope, for the person's subject).

use crate::auth::LocalIssuer;
use std::sync::Arc;

static ISSUER: std::sync::OnceLock<Option<Arc<LocalIssuer>>> = std::sync::OnceLock::new();

/// The issuer the console mints with: the runner's own (none when the runner trusts another
/// issuer: the console then runs nothing, and says so).
pub fn use_issuer(issuer: Option<Arc<LocalIssuer>>) {
    let _ = ISSUER.set(issuer);
}

/// A bearer token for `subject` with every scope, exactly as `cargo run -- token` mints one; or
/// `None` when the runner is not its own issuer.
pub fn mint(subject: &str) -> Option<String> {
    let issuer = ISSUER.get()?.as_ref()?;
    Some(issuer.mint(
        subject,
        &singlet_functions::routes::all_scopes().join(" "),
        &Default::default(),
        3600,
    ))
}
