//! `singlet migrate`: the migrations and their states, or one migration run over the table
//! (`1` when conflicts were left as they were).

use super::connect::connect_existing;
use super::on_sfn::StateMachineArgs;
use super::output;
use super::runner::{RunnerArgs, check_max_key_wcu, check_max_wcu};
use clap::Args;
use singlet_tools::migrate;
use std::process::ExitCode;

/// `migrate`'s options.
#[derive(Args)]
pub struct MigrateArgs {
    /// The migration to run; without one, list them.
    name: Option<String>,
    /// Plan every item and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Parallel `Scan` segments (1 to 1024).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    segments: u32,
    /// Write units per second, at most.
    #[arg(long)]
    max_wcu: Option<f64>,
    /// Write units per second into any one partition key value of the table or an index, at
    /// most (DynamoDB serves one key 1,000).
    #[arg(long, default_value_t = singlet_functions::store::pace::DEFAULT_MAX_KEY_WCU)]
    max_key_wcu: f64,
    /// Items per `Scan` page, at most: a checkpoint after each page.
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..))]
    page_size: Option<i32>,
    /// Print one JSON object on standard output.
    #[arg(long)]
    json: bool,
    /// Stop as if killed after this many writes (for testing resumption).
    #[arg(long, hide = true)]
    stop_after: Option<u64>,
    /// Run it in the deployed stack: start the tools' state machine (`--stack` or
    /// `--state-machine`) and follow the execution to its end (exit 0 complete, or with
    /// `--dry-run` planned to its end; 1 conflicts or the execution failed, timed out or was
    /// aborted; 2 could not start or follow it).
    #[arg(long, requires = "name", conflicts_with = "stop_after")]
    on_aws: bool,
    #[command(flatten)]
    on_sfn: StateMachineArgs,
}

/// `migrate`: the migrations' states, or one run; `1` when conflicts were left as they were.
pub async fn run(runner: &RunnerArgs, args: MigrateArgs) -> Result<ExitCode, String> {
    use singlet_functions::migrations::{MIGRATIONS, by_name};
    // The name and the limits first: a typo is told before any engine is opened.
    let migration = match &args.name {
        None => None,
        Some(name) => Some(by_name(name).ok_or_else(|| {
            let known: Vec<&str> = MIGRATIONS.iter().map(|m| m.name).collect();
            format!(
                "no migration is called {name:?}; there are: {}",
                known.join(", ")
            )
        })?),
    };
    check_max_wcu(args.max_wcu)?;
    check_max_key_wcu(args.max_key_wcu)?;
    if let (true, Some(migration)) = (args.on_aws, migration) {
        return on_aws(migration.name, &args).await;
    }
    let ctx = connect_existing(runner, "migrate").await?;
    singlet_tools::load_marker::refuse_unfinished(&ctx.db, &ctx.table).await?;
    let Some(migration) = migration else {
        let states = migrate::states(&ctx).await?;
        if args.json {
            output::line(serde_json::json!({ "migrations": states }));
        } else {
            let name_width = states.iter().map(|s| s.migration.len()).max().unwrap_or(0);
            let shown = |state: &migrate::State| match state.state {
                "conflicts" if state.conflicts == 1 => "1 conflict".to_owned(),
                "conflicts" => format!("{} conflicts", state.conflicts),
                other => other.to_owned(),
            };
            let state_width = states.iter().map(|s| shown(s).len()).max().unwrap_or(0);
            for state in &states {
                output::line(format_args!(
                    "{:<name_width$}  {:<state_width$}  {}",
                    state.migration,
                    shown(state),
                    state.summary
                ));
            }
        }
        return Ok(ExitCode::SUCCESS);
    };
    let options = migrate::Options {
        segments: args.segments,
        max_wcu: args.max_wcu,
        max_key_wcu: Some(args.max_key_wcu),
        dry_run: args.dry_run,
        page_size: args.page_size,
        stop_after: args.stop_after,
        stop_at: None,
    };
    let report = migrate::run(&ctx, migration, &options).await?;
    if args.json {
        output::line(serde_json::to_string(&report).expect("JSON"));
    } else {
        eprintln!(
            "{}: scanned {}, {} {}, {} already changed by another writer, {} conflicts{}",
            report.migration,
            report.scanned,
            if report.dry_run {
                "would change"
            } else {
                "changed"
            },
            report.changed,
            report.already_changed,
            report.conflicts.len(),
            if report.complete { ", complete" } else { "" },
        );
        for conflict in &report.conflicts {
            eprintln!("conflict: {} ({})", conflict.pk, conflict.detail);
        }
    }
    Ok(if report.conflicts.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `migrate <name> --on-aws`: the run started on the stack's state machine and followed.
async fn on_aws(migration: &str, args: &MigrateArgs) -> Result<ExitCode, String> {
    use singlet::step_functions::{Tool, gather, read_s3_json, segment_reports};
    let config = super::on_sfn::aws_config().await;
    let client = aws_sdk_sfn::Client::new(&config);
    let tool = Tool::Migrate {
        migration: migration.to_owned(),
        dry_run: args.dry_run,
    };
    let ended = args
        .on_sfn
        .start_and_follow(
            &format!("migrate {migration}"),
            &client,
            tool,
            args.segments,
            (args.max_wcu, args.max_key_wcu),
            args.page_size,
        )
        .await?;
    if ended.status != "SUCCEEDED" {
        let report = serde_json::json!({
            "migration": migration,
            "executionArn": ended.execution_arn,
            "status": ended.status,
            "error": ended.error,
            "cause": ended.cause,
            "complete": false,
        });
        output::line(&report);
        eprintln!(
            "migrate {migration} on AWS: the execution ended {}: the segments' checkpoints \
             are kept; run it again with --attempt {} to resume",
            ended.how(),
            args.on_sfn.attempt + 1
        );
        return Ok(ExitCode::from(1));
    }
    let output = ended.output.unwrap_or_default();
    let s3 = super::on_sfn::s3_client(&config);
    let mut report = match output["migrate"]["report"]["reportObject"].as_str() {
        // The state machine's own gathering: the whole report it wrote (its output lists some
        // of the conflicts only).
        Some(url) => read_s3_json(&s3, url).await?,
        // A stack deployed before the state machine gathered: the segments' reports the map
        // wrote, gathered here alike.
        None => {
            let reports = segment_reports(&s3, &output).await?;
            gather(migration, &reports, u64::from(args.segments), args.dry_run)
        }
    };
    report["executionArn"] = ended.execution_arn.into();
    report["status"] = ended.status.into();
    if args.json {
        output::line(&report);
    } else {
        output::line(serde_json::to_string_pretty(&report).expect("JSON"));
    }
    // A dry run is clean when every segment planned its items to the end without a conflict.
    let done = match args.dry_run {
        true => report["ended"] == true,
        false => report["complete"] == true,
    };
    let clean = report["conflictCount"] == 0 && done;
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
