//! `singlet seed`: every domain that has no data filled with a realistic data set, through the
//! real handlers behind the front door (`singlet::console`'s seed).

use super::connect::{connect_for_bulk_work, refuse_handlers_elsewhere};
use super::runner::RunnerArgs;
use singlet::serve::auth::Authorizer;
use singlet::serve::front_door;
use std::process::ExitCode;
use std::sync::Arc;

/// Seeds the table.
pub async fn run(runner: &RunnerArgs) -> Result<ExitCode, String> {
    refuse_handlers_elsewhere(runner)?;
    let (authorizer, issuer) = Authorizer::local(&runner.key_dir)?;
    let gateway = front_door::Gateway {
        ctx: connect_for_bulk_work(runner).await?.0,
        authorizer: Arc::new(authorizer),
        issuer: Some(Arc::new(issuer)),
    };
    singlet::console::seed_cli(gateway).await?;
    Ok(ExitCode::SUCCESS)
}
