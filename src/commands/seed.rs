//! `singlet seed`: every domain that has no data filled with a realistic data set, through the
//! real handlers behind the front door (`singlet::console`'s seed).

use super::connect::{connect_for_bulk_work, refuse_handlers_elsewhere};
use super::runner::RunnerArgs;
use singlet::serve::auth::Authorizer;
use singlet::serve::front_door;
use std::process::ExitCode;
use std::sync::Arc;

/// Seeds the table.
/// `seed`'s options.
#[derive(clap::Args)]
pub struct SeedArgs {
    /// End the process after this many requests, as a kill would (for testing a rerun).
    #[arg(long, hide = true)]
    stop_after: Option<u64>,
}

pub async fn run(runner: &RunnerArgs, args: SeedArgs) -> Result<ExitCode, String> {
    refuse_handlers_elsewhere(runner)?;
    let (authorizer, issuer) = Authorizer::local(&runner.key_dir)?;
    let gateway = front_door::Gateway {
        ctx: connect_for_bulk_work(runner).await?.0,
        authorizer: Arc::new(authorizer),
        issuer: Some(Arc::new(issuer)),
    };
    singlet::console::seed_cli(gateway, args.stop_after).await?;
    Ok(ExitCode::SUCCESS)
}
