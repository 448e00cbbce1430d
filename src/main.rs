//! `cargo run`: singlet's API on 127.0.0.1:3000 over an embedded DynamoDB engine whose data
//! lives under `.singlet/` and whose own endpoint is 127.0.0.1:8000; and the commands that work
//! on its table.
//!
//! This file is the table of contents: the command line and the dispatch. Each command is a file
//! of `src/commands/` with its own options, so that `singlet <command> --help` lists only what
//! that command takes; the runner's options ([`RunnerArgs`]: which engine and table, where the
//! token key lives, how to log) are accepted before or after any command. A new command is one
//! more file, one more [`Command`] variant and one more arm in [`run`].

// What a command prints goes through `commands::output`, which a reader that closed the pipe
// does not turn into a panic.
#![deny(clippy::print_stdout)]

mod commands;

use clap::{Parser, Subcommand};
use commands::runner::{COULD_NOT_RUN, RunnerArgs};
use commands::*;
use singlet::serve::logging;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    version,
    about = "singlet's local runner: the API over an embedded DynamoDB engine",
    after_help = "Without a command it serves the API. `singlet <command> --help` shows a \
                  command's own options; the runner options go before or after it."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    runner: RunnerArgs,
    #[command(flatten)]
    serve: serve::ServeArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run one function once on one event file and print its response.
    Invoke(invoke::InvokeArgs),
    /// Print a bearer token that a runner started in this directory accepts.
    Token(token::TokenArgs),
    /// Fill every domain that has no data with a realistic data set, through the real handlers
    /// (exit 2 when a domain is partial, left by a seed that was stopped).
    Seed(seed::SeedArgs),
    /// Load a file of rows (JSON Lines, or CSV with a header) as the create routes would write
    /// them; refused rows go to `<file>.rejects.jsonl` (exit 1 when there are some).
    Import(import::ImportArgs),
    /// Write the table in DynamoDB's export format (`<dir>/data/*.json.gz`, `manifest-summary.json`);
    /// with --s3, DynamoDB's own export of a table on AWS to S3.
    Export(export::ExportArgs),
    /// Write an export into an empty table (a table that holds items is refused), every item but
    /// the outbox's: those are events the exported table published, and would be published again;
    /// with --s3, DynamoDB's own import of an S3 export into a new table on AWS.
    Load(load::LoadArgs),
    /// List the migrations and their state, or run one: `migrate vehicles-by-depot`.
    Migrate(migrate::MigrateArgs),
    /// Check every rule that spans items, and repair what can be (exit 0 clean, 1 findings, 2
    /// could not run).
    Fsck(fsck::FsckArgs),
    /// Render template.yaml's functions and Cargo.toml's watch router from the route table
    /// (exit 0 written or already current; with --check, 1 when a file differs).
    Render(render::RenderArgs),
    /// Plan the table at a size: each key family's busiest key against DynamoDB's per-key
    /// limits, the bulk work paced, storage and cost (exit 1 when a family is hot, 2 on a bad
    /// workload).
    Plan(plan::PlanArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let human = logging::init(cli.runner.log_format);
    singlet::serve::partition_limits::set(cli.runner.partition_limits);
    match run(cli, human).await {
        Ok(code) => code,
        Err(e) => {
            if !human {
                tracing::error!(error = %e, "singlet stopped");
            }
            // Said plainly too: whoever reads a failed command's output is most often a person.
            eprintln!("error: {e}");
            ExitCode::from(COULD_NOT_RUN)
        }
    }
}

async fn run(cli: Cli, human: bool) -> Result<ExitCode, String> {
    let runner = &cli.runner;
    // `export --s3` reaches AWS without an endpoint (the environment's region), and
    // DescribeTable takes a table's ARN.
    let on_aws = matches!(&cli.command, Some(Command::Export(args)) if args.on_aws());
    if runner.table.starts_with("arn:") && runner.endpoint.is_none() && !on_aws {
        return Err(format!(
            "--table {} is a table in AWS: name its --endpoint too (the embedded engine's \
             tables have plain names)",
            runner.table
        ));
    }
    match cli.command {
        None => serve::run(runner, &cli.serve, human)
            .await
            .map(|()| ExitCode::SUCCESS),
        Some(Command::Invoke(args)) => invoke::run(runner, args).await,
        Some(Command::Token(args)) => token::run(runner, args),
        Some(Command::Seed(args)) => seed::run(runner, args).await,
        Some(Command::Import(args)) => import::run(runner, args).await,
        Some(Command::Export(args)) => export::run(runner, args).await,
        Some(Command::Load(args)) => load::run(runner, args).await,
        Some(Command::Migrate(args)) => migrate::run(runner, args).await,
        Some(Command::Fsck(args)) => Ok(fsck::run(runner, args).await),
        Some(Command::Render(args)) => render::run(args),
        Some(Command::Plan(args)) => Ok(plan::run(runner, args).await),
    }
}
