//! `singlet export`: the table in DynamoDB's export format (`<dir>/data/*.json.gz`,
//! `manifest-summary.json`), anonymised on request.

use super::connect::connect_existing;
use super::runner::RunnerArgs;
use clap::Args;
use singlet_tools::transfer;
use std::path::PathBuf;
use std::process::ExitCode;

/// `export`'s options.
#[derive(Args)]
pub struct ExportArgs {
    /// An empty or new directory.
    dir: PathBuf,
    /// Parallel `Scan` segments, one data file each (1 to 1024).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    segments: u32,
    /// Replace personal data (emails, names, phone numbers, addresses, card numbers, plates,
    /// chassis numbers), one value always by one replacement, locks re-keyed to match.
    #[arg(long)]
    anonymise: bool,
    /// Print one JSON summary on standard output.
    #[arg(long)]
    json: bool,
    /// Stop as if killed once this many items were written (for testing what a kill leaves).
    #[arg(long, hide = true)]
    stop_after: Option<u64>,
}

/// `export`: the whole table in DynamoDB's export format.
pub async fn run(runner: &RunnerArgs, args: ExportArgs) -> Result<ExitCode, String> {
    let ctx = connect_existing(runner, "export").await?;
    // The embedded engine's table is exported from a copy of its file taken in one read: a
    // runner serving it may be writing. An endpoint's table is read as it is (singlet::export_snapshot).
    let snapshot = match &runner.endpoint {
        None => Some(singlet::export_snapshot::take(&runner.data).await?),
        Some(endpoint) => {
            eprintln!(
                "warning: {endpoint}'s table is exported as it is read, each scan segment at its \
                 own moment: writes made meanwhile can leave the export torn (a transaction's \
                 items on either side of it). Stop its writers first (on AWS, DynamoDB's \
                 ExportTableToPointInTime is consistent), and run fsck on the loaded copy"
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
        &args.dir,
        args.segments,
        &transform,
        args.stop_after,
    );
    let exported = tokio::select! {
        exported = export => exported?,
        _ = tokio::signal::ctrl_c() => {
            return Err(format!(
                "interrupted: the part of the export written in {} was removed",
                args.dir.display()
            ));
        }
    };
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "exported": exported.items,
                "files": exported.files.len(),
                "consistent": snapshot.is_some(),
            })
        );
    } else {
        eprintln!(
            "exported {} items to {}{}",
            exported.items,
            args.dir.display(),
            match snapshot {
                Some(_) => ", from a copy of the table taken in one read",
                None => ", as read: consistent only if nothing wrote meanwhile",
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}
