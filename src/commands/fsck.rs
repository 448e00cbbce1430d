//! `singlet fsck`: every rule that spans items checked, and what can be repaired repaired (exit
//! 0 clean, 1 findings, 2 could not run).

use super::connect::connect_existing;
use super::runner::{RunnerArgs, check_max_key_wcu, check_max_wcu};
use clap::Args;
use singlet_functions::Ctx;
use singlet_tools::fsck;
use std::process::ExitCode;

/// Checks (and repairs) the table; the report on standard output.
pub async fn run(runner: &RunnerArgs, args: FsckArgs) -> ExitCode {
    // The limits first: a typo is told before any engine is opened.
    if let Err(reason) =
        check_max_wcu(args.max_wcu).and_then(|()| check_max_key_wcu(args.max_key_wcu))
    {
        return could_not_run(&reason);
    }
    match connect_existing(runner, "check").await {
        Ok(ctx) => report(&ctx, &args).await,
        Err(reason) => could_not_run(&reason),
    }
}

/// `fsck`'s options (the runner's own, `--endpoint`, `--table`, `--data`, apply too).
#[derive(Args, Debug, Clone)]
pub struct FsckArgs {
    /// Repair every repairable finding, each by a conditional write.
    #[arg(long)]
    pub repair: bool,
    /// With `--repair`: print what each repair would write, and write nothing.
    #[arg(long, requires = "repair")]
    pub dry_run: bool,
    /// Print one JSON object on standard output, and nothing else there.
    #[arg(long)]
    pub json: bool,
    /// Parallel scan workers.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub segments: u32,
    /// With `--repair`: the repairs' write units per second, at most.
    #[arg(long)]
    pub max_wcu: Option<f64>,
    /// With `--repair`: write units per second into any one partition key value of the table or
    /// an index, at most (DynamoDB serves one key 1,000).
    #[arg(long, default_value_t = singlet_functions::store::pace::DEFAULT_MAX_KEY_WCU)]
    pub max_key_wcu: f64,
}

/// `singlet fsck`: the report on standard output (one JSON object with `--json`), progress on
/// standard error; exit `0` with nothing left to report, `1` while findings remain, `2` when it
/// could not run.
async fn report(ctx: &Ctx, args: &FsckArgs) -> ExitCode {
    let options = fsck::Options {
        repair: args.repair,
        dry_run: args.dry_run,
        segments: args.segments,
        progress: true,
        max_wcu: args.max_wcu,
        max_key_wcu: args.max_key_wcu,
    };
    let report = match fsck::fsck(ctx, options).await {
        Ok(report) => report,
        Err(reason) => return could_not_run(&reason),
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&report).expect("a report serialises")
        );
    } else {
        print!("{}", fsck::text(&report, options));
    }
    if report.remaining() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Exit `2`, the reason on standard error.
fn could_not_run(reason: &str) -> ExitCode {
    eprintln!("fsck: cannot run: {reason}");
    ExitCode::from(2)
}
