//! `singlet token`: a bearer token that a runner started in this directory accepts, minted
//! with the runner's own key (`singlet::serve::auth`).

use super::output;
use super::runner::RunnerArgs;
use clap::Args;
use singlet::serve::auth::Authorizer;
use std::process::ExitCode;

/// `token`'s options.
#[derive(Args)]
pub struct TokenArgs {
    /// The token's subject (`sub`).
    #[arg(long, default_value = "local-user")]
    sub: String,
    /// Space-separated scopes, such as "fleet:write library:staff" (without it, the token is
    /// `403` on every route).
    #[arg(long, default_value = "")]
    scope: String,
    /// Another claim, `name=value` (such as `patron_id=<id>`), or a default one replaced
    /// (`nbf=soon` makes a malformed token; `scope=` leaves `scope` out); repeatable. A whole
    /// number given to `exp`, `nbf` or `iat` is a number, anything else a string.
    #[arg(long, value_parser = parse_claim)]
    claim: Vec<(String, serde_json::Value)>,
    /// Seconds the token stays valid.
    #[arg(long, default_value_t = 3600)]
    ttl: i64,
}

/// Prints the token.
pub fn run(runner: &RunnerArgs, args: TokenArgs) -> Result<ExitCode, String> {
    let (_, issuer) = Authorizer::local(&runner.key_dir)?;
    let scoped = !args.scope.trim().is_empty()
        || args
            .claim
            .iter()
            .any(|(name, _)| name == "scope" || name == "scp");
    if !scoped {
        eprintln!(
            "warning: this token has no scope, so every route answers it 403. Give --scope with \
             one or more of:\n  {}\n(each route's scopes: docs/guide/authentication.md)",
            singlet_functions::routes::all_scopes().join(" ")
        );
    }
    let extra = args.claim.into_iter().collect();
    output::line(issuer.mint(&args.sub, &args.scope, &extra, args.ttl));
    Ok(ExitCode::SUCCESS)
}

fn parse_claim(raw: &str) -> Result<(String, serde_json::Value), String> {
    let (name, value) = raw
        .split_once('=')
        .ok_or_else(|| format!("{raw:?} is not name=value"))?;
    if name.trim().is_empty() {
        return Err(format!("{raw:?} names no claim: name=value"));
    }
    let value = match (name, value.parse::<i64>()) {
        ("exp" | "nbf" | "iat", Ok(seconds)) => seconds.into(),
        _ => value.into(),
    };
    Ok((name.to_owned(), value))
}
