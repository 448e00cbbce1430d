//! `singlet fsck`: every rule that spans items checked, and what can be repaired repaired (exit
//! 0 clean, 1 findings, 2 could not run).

use super::connect::connect_existing;
use super::on_sfn::StateMachineArgs;
use super::output;
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
    if args.on_aws {
        return match on_aws(&args).await {
            Ok(code) => code,
            Err(reason) => could_not_run(&reason),
        };
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
    /// Run it in the deployed stack: start the tools' state machine (`--stack` or
    /// `--state-machine`), whose segments read the table in parallel and whose judge checks
    /// and repairs as this command does, and follow it to its end (exit 0 clean, 1 findings
    /// remain, 2 could not run: not started, not followed, or the execution failed, timed out
    /// or was aborted).
    #[arg(long)]
    pub on_aws: bool,
    /// With --on-aws: the run's name, which names its results in the stack's bucket
    /// (`fsck/<run>/`). Default: the time it starts (UTC). A run that did not end is started
    /// again with its --run and the next --attempt: its segments go on from their checkpoints.
    #[arg(long, requires = "on_aws", value_parser = run_name)]
    pub run: Option<String>,
    #[command(flatten)]
    pub on_sfn: StateMachineArgs,
}

/// A run's name: 1 to 40 of `[A-Za-z0-9-_]` (it is part of an execution's name and a prefix).
fn run_name(name: &str) -> Result<String, String> {
    let fits = (1..=40).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if fits {
        Ok(name.to_owned())
    } else {
        Err("a run's name is 1 to 40 letters, digits, - and _".into())
    }
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
        output::line(serde_json::to_string(&report).expect("a report serialises"));
    } else {
        output::text(fsck::text(&report, options));
    }
    if report.remaining() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// `fsck --on-aws`: the run started on the stack's state machine and followed; its report read
/// back from the results bucket and printed as the laptop's run prints its own.
async fn on_aws(args: &FsckArgs) -> Result<ExitCode, String> {
    use singlet::step_functions::{Tool, read_s3_json};
    let run = match &args.run {
        Some(run) => run.clone(),
        None => {
            let format =
                time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
            time::OffsetDateTime::now_utc()
                .format(&format)
                .expect("a time formats")
        }
    };
    let config = super::on_sfn::aws_config().await;
    let client = aws_sdk_sfn::Client::new(&config);
    let tool = Tool::Fsck {
        run: run.clone(),
        repair: args.repair,
        dry_run: args.dry_run,
    };
    let ended = args
        .on_sfn
        .start_and_follow(
            "fsck",
            &client,
            tool,
            args.segments,
            (args.max_wcu, args.max_key_wcu),
            None,
        )
        .await?;
    if ended.status != "SUCCEEDED" {
        output::line(serde_json::json!({
            "run": run,
            "executionArn": ended.execution_arn,
            "status": ended.status,
            "error": ended.error,
            "cause": ended.cause,
        }));
        return Err(format!(
            "the execution ended {}: start it again with --run {run} --attempt {} (its \
             segments go on from their checkpoints)",
            ended.how(),
            args.on_sfn.attempt + 1
        ));
    }
    // The judge's answer lists some findings; the whole report is in the results bucket.
    let output = ended.output.unwrap_or_default();
    let url = output["fsck"]["report"]["reportObject"]
        .as_str()
        .ok_or_else(|| format!("{} has no report in its output", ended.execution_arn))?;
    let s3 = super::on_sfn::s3_client(&config);
    let mut whole = read_s3_json(&s3, url).await?;
    let report: fsck::Report = serde_json::from_value(whole.clone())
        .map_err(|e| format!("{url} is not fsck's report: {e}"))?;
    eprintln!(
        "fsck on AWS: {} ended SUCCEEDED; the report is {url}",
        ended.execution_arn
    );
    if args.json {
        whole["executionArn"] = ended.execution_arn.into();
        whole["report"] = url.into();
        output::line(&whole);
    } else {
        let options = fsck::Options {
            repair: args.repair,
            dry_run: args.dry_run,
            ..fsck::Options::default()
        };
        output::text(fsck::text(&report, options));
    }
    Ok(if report.remaining() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Exit `2`, the reason on standard error.
fn could_not_run(reason: &str) -> ExitCode {
    eprintln!("fsck: cannot run: {reason}");
    ExitCode::from(2)
}
