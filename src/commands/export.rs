//! `singlet export`: the table in DynamoDB's export format (`<dir>/data/*.json.gz`,
//! `manifest-summary.json`), anonymised on request; or, with `--s3`, DynamoDB's own
//! `ExportTableToPointInTime` of a table on AWS, followed to its end (`singlet_tools::on_aws`).

use super::connect::connect_existing;
use super::on_s3::S3JobArgs;
use super::output;
use super::runner::RunnerArgs;
use clap::Args;
use singlet_tools::{on_aws, transfer};
use std::path::PathBuf;
use std::process::ExitCode;

/// `export`'s options.
#[derive(Args)]
#[command(
    after_help = "On AWS (--s3): DynamoDB's own ExportTableToPointInTime of the table \
    (point-in-time recovery on, as the stack's table has it), consistent at one point in time, \
    written under s3://<bucket>/<prefix>/AWSDynamoDB/<exportId>/ in the format `export <dir>` \
    writes; followed to its end. Exit 0 completed, 1 failed (its FailureCode and \
    FailureMessage said), 2 could not start or follow it. Costs, time, IAM permissions: \
    docs/guide/tools-on-aws.md"
)]
pub struct ExportArgs {
    /// An empty or new directory.
    #[arg(required_unless_present = "s3", conflicts_with = "s3")]
    dir: Option<PathBuf>,
    #[command(flatten)]
    on_s3: S3JobArgs,
    /// Parallel `Scan` segments, one data file each (1 to 1024).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024), conflicts_with = "s3")]
    segments: u32,
    /// Replace personal data (emails, names, phone numbers, addresses, card numbers, plates,
    /// chassis numbers), one value always by one replacement, locks re-keyed to match.
    #[arg(long)]
    anonymise: bool,
    /// Print one JSON summary on standard output.
    #[arg(long)]
    json: bool,
    /// Stop as if killed once this many items were written (for testing what a kill leaves).
    #[arg(long, hide = true, conflicts_with = "s3")]
    stop_after: Option<u64>,
}

impl ExportArgs {
    /// Whether this export runs on AWS (`--s3`).
    pub fn on_aws(&self) -> bool {
        self.on_s3.s3.is_some()
    }
}

/// `export`: the whole table in DynamoDB's export format.
pub async fn run(runner: &RunnerArgs, args: ExportArgs) -> Result<ExitCode, String> {
    if let Some(url) = &args.on_s3.s3 {
        return run_on_aws(runner, &args, url).await;
    }
    let dir = args
        .dir
        .clone()
        .expect("clap asks for a directory without --s3");
    let ctx = connect_existing(runner, "export").await?;
    singlet_tools::load_marker::refuse_unfinished(&ctx.db, &ctx.table).await?;
    // The embedded engine's table is exported from a copy of its file taken in one read: a
    // runner serving it may be writing. An endpoint's table is read as it is (singlet::export_snapshot).
    let snapshot = match &runner.endpoint {
        None => Some(singlet::export_snapshot::take(&runner.data).await?),
        Some(endpoint) => {
            eprintln!(
                "warning: {endpoint}'s table is exported as it is read, each scan segment at its \
                 own moment: writes made meanwhile can leave the export torn (a transaction's \
                 items on either side of it). Stop its writers first (or, for a table on AWS, \
                 `export --s3`: DynamoDB's ExportTableToPointInTime is consistent), and run fsck \
                 on the loaded copy"
            );
            None
        }
    };
    let source = snapshot
        .as_ref()
        .map_or(&ctx.db, |snapshot| &snapshot.client);
    let anonymiser = match args.anonymise {
        true => Some(
            singlet_tools::anonymise::Anonymiser::random()
                .with_owners_of(source, &ctx.table)
                .await?,
        ),
        false => None,
    };
    let transform = |item| match &anonymiser {
        Some(anonymiser) => anonymiser.item(item),
        None => item,
    };
    // Stopped with Ctrl-C, the export is dropped, and removes what it wrote.
    let export = transfer::export_until(
        source,
        &ctx.table,
        &dir,
        args.segments,
        &transform,
        args.stop_after,
    );
    let exported = tokio::select! {
        exported = export => exported?,
        _ = tokio::signal::ctrl_c() => {
            return Err(format!(
                "interrupted: the part of the export written in {} was removed",
                dir.display()
            ));
        }
    };
    if args.json {
        output::line(serde_json::json!({
            "exported": exported.items,
            "files": exported.files.len(),
            "consistent": snapshot.is_some(),
        }));
    } else {
        eprintln!(
            "exported {} items to {}{}",
            exported.items,
            dir.display(),
            match snapshot {
                Some(_) => ", from a copy of the table taken in one read",
                None => ", as read: consistent only if nothing wrote meanwhile",
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `export --s3`: DynamoDB's `ExportTableToPointInTime` of the table, followed to its end.
async fn run_on_aws(runner: &RunnerArgs, args: &ExportArgs, url: &str) -> Result<ExitCode, String> {
    // Refused before anything is called: a bad URL, or what DynamoDB's export cannot do.
    let to = on_aws::S3Location::parse(url)?;
    if args.anonymise {
        return Err(
            "--anonymise is not done on AWS: DynamoDB's export writes the table as it is, and \
             nothing in the stack rewrites its files. For an anonymised copy, export the table \
             with --anonymise from here (`--endpoint <DynamoDB> --table <table> export \
             --anonymise <dir>`, a scan), or export it with --s3, copy the export down \
             (`aws s3 sync`), `load` it into a local table and `export --anonymise` that one \
             (docs/guide/tools-on-aws.md)"
                .into(),
        );
    }
    let client = super::connect::aws_client(runner).await?;
    let follow = on_aws::Follow {
        poll: args.on_s3.poll(),
        ..on_aws::Follow::default()
    };
    let exported = tokio::select! {
        exported = on_aws::export_to_s3(&client, &runner.table, &to, &follow) => exported?,
        _ = tokio::signal::ctrl_c() => {
            return Err("interrupted: the export goes on in DynamoDB; the same command, run \
                again within eight hours, follows it".into());
        }
    };
    if args.json {
        output::line(serde_json::to_string(&exported).expect("a report is JSON"));
    }
    if exported.completed() {
        if !args.json {
            eprintln!(
                "export {} COMPLETED: {} items ({} bytes billed) of {} as at {}\n  export:   \
                 {}  (what `load --s3` and, copied down, `load <dir>` take)\n  manifest: {}\n  \
                 arn:      {}",
                exported.export_id,
                exported.items.unwrap_or_default(),
                exported.billed_bytes.unwrap_or_default(),
                runner.table,
                exported.export_time.as_deref().unwrap_or("?"),
                exported.export,
                exported.manifest,
                exported.export_arn,
            );
        }
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "export {} {}: {}: {} ({})",
            exported.export_id,
            exported.status,
            exported.failure_code.as_deref().unwrap_or("no FailureCode"),
            exported
                .failure_message
                .as_deref()
                .unwrap_or("no FailureMessage"),
            exported.export_arn,
        );
        if exported.started_earlier {
            eprintln!(
                "this is the export an earlier run of this command started (DynamoDB answers \
                 the same ClientToken with it for eight hours): to export again, give another \
                 prefix"
            );
        }
        Ok(ExitCode::from(1))
    }
}
