//! `singlet import`: a file of rows (JSON Lines, or CSV with a header) written as the create
//! routes would write them; refused rows go to `<file>.rejects.jsonl` (exit 1 when there are some).

use super::connect::{OWNER_KEYS, connect_for_bulk_work, refuse_the_published_secret_elsewhere};
use super::output;
use super::runner::{RunnerArgs, check_max_key_wcu, check_max_wcu, parse_clock};
use clap::Args;
use singlet_tools::import;
use std::path::PathBuf;
use std::process::ExitCode;

/// `import`'s options.
#[derive(Args)]
pub struct ImportArgs {
    /// What the rows are: vehicles, accounts, branches, patrons, books or copies.
    kind: String,
    /// JSON Lines (`.jsonl`), or CSV (`.csv`) with a header row naming the fields.
    file: PathBuf,
    /// Write units per second, at most.
    #[arg(long)]
    max_wcu: Option<f64>,
    /// Write units per second into any one partition key value of the table or an index, at
    /// most (DynamoDB serves one key 1,000).
    #[arg(long, default_value_t = singlet_functions::store::pace::DEFAULT_MAX_KEY_WCU)]
    max_key_wcu: f64,
    /// Print one JSON summary on standard output.
    #[arg(long)]
    json: bool,
    /// The time the rows are created at (ISO-8601; default: now). Two runs of one file with one
    /// `--clock` write the very same items.
    #[arg(long, value_parser = parse_clock)]
    clock: Option<time::OffsetDateTime>,
    /// Rows per transaction, at most.
    #[arg(long, hide = true, default_value_t = import::MAX_ACTIONS)]
    rows_per_transaction: usize,
    /// Stop as if killed once this many rows were created (for testing a second run).
    #[arg(long, hide = true)]
    stop_after: Option<u64>,
}

/// `import`: a file of rows; `1` when some were refused.
pub async fn run(runner: &RunnerArgs, args: ImportArgs) -> Result<ExitCode, String> {
    // The kind and the limit first: a typo is told before any engine is opened.
    let kind = import::Kind::parse(&args.kind)?;
    check_max_wcu(args.max_wcu)?;
    check_max_key_wcu(args.max_key_wcu)?;
    if !args.file.exists() {
        return Err(format!("{} does not exist", args.file.display()));
    }
    if !args.file.is_file() {
        return Err(format!("{} is not a file", args.file.display()));
    }
    // Both told before any engine is opened and any row written.
    import::check_rejects_path(&args.file)?;
    let rows = import::read(&args.file, kind)?;
    if kind == import::Kind::Accounts {
        refuse_the_published_secret_elsewhere(
            runner,
            "an accounts import keys owners' one-account locks",
            OWNER_KEYS,
        )?;
    }
    let (ctx, _) = connect_for_bulk_work(runner).await?;
    singlet_tools::load_marker::refuse_unfinished(&ctx.db, &ctx.table).await?;
    let options = import::Options {
        max_wcu: args.max_wcu,
        max_key_wcu: Some(args.max_key_wcu),
        at: args.clock.unwrap_or_else(singlet_functions::clock::now),
        rows_per_transaction: args.rows_per_transaction,
        in_flight: import::IN_FLIGHT,
        stop_after: args.stop_after,
        progress: true,
    };
    let summary = import::write(&ctx, rows, &options).await?;
    if summary.stopped {
        return Ok(ExitCode::from(1));
    }
    if args.json {
        output::line(serde_json::to_string(&summary).expect("JSON"));
    } else {
        eprintln!(
            "read {}, created {}, rejected {}, already imported {}",
            summary.read, summary.created, summary.rejected, summary.already_imported
        );
        if summary.rejected > 0 {
            eprintln!("the rejected rows: {}", summary.rejects.display());
        }
    }
    Ok(if summary.rejected == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
