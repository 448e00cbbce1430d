//! `singlet load`: an export into an empty table, every item but the outbox's (those are events
//! the exported table published, and would be published again); into the embedded engine by its
//! bulk path. With `--s3`, DynamoDB's own `ImportTable` of an S3 export into a new table on AWS,
//! followed to its end and finished (`singlet_tools::on_aws`).

use super::connect::{
    OWNER_KEYS, connect_for_bulk_work, connect_to, refuse_the_published_secret_elsewhere,
};
use super::on_s3::S3JobArgs;
use super::output;
use super::runner::{RunnerArgs, check_max_key_wcu, check_max_wcu};
use clap::Args;
use singlet::serve::engine;
use singlet_tools::throttle::Throttle;
use singlet_tools::{on_aws, transfer};
use std::path::PathBuf;
use std::process::ExitCode;

/// `load`'s options.
#[derive(Args)]
#[command(
    after_help = "<dir> is an export's directory, as `export <dir>` writes it, or as \
    DynamoDB's export to S3 lays it out, copied down with `aws s3 sync s3://<bucket>/<prefix> \
    <dir>` (<dir>/AWSDynamoDB/<exportId>/manifest-summary.json, manifest-files.json, data/).\n\n\
    On AWS (--s3): DynamoDB's own ImportTable of the export into a NEW table (--table names it; \
    ImportTable creates it with the table's keys and indexes), followed to its end; then its \
    outbox items are deleted and, after, its stream and TTL switched on (ImportTable sets \
    neither). Exit 0 the copy is whole, 1 the import failed, was cancelled or left items out, 2 \
    could not start or follow it. Costs, time, IAM permissions: docs/guide/tools-on-aws.md"
)]
pub struct LoadArgs {
    /// A directory an `export` (or DynamoDB's `ExportTableToPointInTime`) wrote.
    #[arg(required_unless_present = "s3", conflicts_with = "s3")]
    dir: Option<PathBuf>,
    #[command(flatten)]
    on_s3: S3JobArgs,
    /// Print one JSON summary on standard output.
    #[arg(long)]
    json: bool,
    /// Load the outbox items too, so that the copy's publisher publishes their events (again,
    /// for those the exported table published): for a restore whose table is gone with events
    /// it never published.
    #[arg(long)]
    keep_outbox: bool,
    /// Where to write subjects' one-account locks: `rekeyed`, where this run's key puts them
    /// (`OWNER_KEY`, else `CURSOR_KEY`, else the runner's published secret), as the copy's API
    /// looks for them; `as-exported`, at their keys in the export (a restore into the table's own
    /// stack). Default: rekeyed into an engine on this machine, as exported into any other.
    #[arg(long, value_enum)]
    owner_locks: Option<OwnerLocks>,
    /// Into an `--endpoint`: write units per second, at most (the embedded engine is written
    /// in bulk, below its door, and not paced). With --s3: the outbox items' deletes, default
    /// 1000.
    #[arg(long)]
    max_wcu: Option<f64>,
    /// Into an `--endpoint`, and the outbox items' deletes with --s3: write units per second
    /// into any one partition key value of the table or an index, at most (DynamoDB serves one
    /// key 1,000).
    #[arg(long, default_value_t = singlet_functions::store::pace::DEFAULT_MAX_KEY_WCU)]
    max_key_wcu: f64,
    /// Stop as if killed once this many items were written (for testing what a kill leaves).
    #[arg(long, hide = true, conflicts_with = "s3")]
    stop_after: Option<u64>,
}

/// `load --owner-locks`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OwnerLocks {
    Rekeyed,
    AsExported,
}

/// `load`: an export into an empty table; into the embedded engine by its bulk path.
pub async fn run(runner: &RunnerArgs, args: LoadArgs) -> Result<ExitCode, String> {
    // The limits and the whole export first: a bad one is told before any engine or data file
    // is made.
    check_max_wcu(args.max_wcu)?;
    check_max_key_wcu(args.max_key_wcu)?;
    if let Some(url) = &args.on_s3.s3 {
        return run_on_aws(runner, &args, url).await;
    }
    let dir = args
        .dir
        .clone()
        .expect("clap asks for a directory without --s3");
    let export = transfer::check(&dir)?;
    if export.write_units() > 0.0 {
        // Said before the first write: how long the export takes to load on AWS (the embedded
        // engine takes it in bulk, far faster), and what would be faster.
        let mut work = singlet_tools::warm::Work::default();
        work.spread(export.write_units());
        eprintln!("{}", work.said("load", args.max_wcu, args.max_key_wcu));
    }
    let rekeyed = args.owner_locks.map_or_else(
        || rekeys_by_default(runner.endpoint.as_deref()),
        |locks| locks == OwnerLocks::Rekeyed,
    );
    if rekeyed && export.owner_locks() > 0 {
        refuse_the_published_secret_elsewhere(
            runner,
            "--owner-locks rekeyed keys subjects' one-account locks",
            OWNER_KEYS,
        )?;
    }
    let embedded = match &runner.endpoint {
        Some(_) => None,
        None => Some(engine::Bulk(engine::open(
            (!runner.in_memory).then_some(runner.data.as_path()),
        )?)),
    };
    let (ctx, _) = match &embedded {
        Some(bulk) => connect_to(runner, bulk.0.clone()).await?,
        None => connect_for_bulk_work(runner).await?,
    };
    let throttle = Throttle::new(args.max_wcu).with_max_key_wcu(args.max_key_wcu);
    let target = match &embedded {
        Some(db) => transfer::Target::Bulk(db),
        None => transfer::Target::Api(&throttle),
    };
    let owner_locks = if rekeyed {
        transfer::OwnerLockKeys::Under(&ctx.owners)
    } else {
        transfer::OwnerLockKeys::AsExported
    };
    let outbox = if args.keep_outbox {
        transfer::Outbox::Keep
    } else {
        transfer::Outbox::LeaveOut
    };
    let loaded = tokio::select! {
        loaded = transfer::load_until(&ctx.db, &ctx.table, &export, target, outbox, owner_locks, args.stop_after) => loaded?,
        _ = tokio::signal::ctrl_c() => {
            return Err(format!(
                "interrupted: {} holds part of the export, and its mark says so; delete the \
                 table (or its items) and load again",
                ctx.table
            ));
        }
    };
    if args.json {
        output::line(serde_json::json!({
            "loaded": loaded.items,
            "outboxLeftOut": loaded.outbox_left_out,
            "ownerLocksMoved": loaded.owner_locks_moved,
            "hottestKey": loaded.hottest_key,
        }));
    } else {
        eprintln!("loaded {} items into {}", loaded.items, ctx.table);
        if loaded.owner_locks_moved > 0 {
            eprintln!(
                "wrote {} owner locks where this run's key puts them, the export's being keyed \
                 under another: the copy's API and fsck need this run's keys",
                loaded.owner_locks_moved
            );
        } else if !rekeyed && export.owner_locks() > 0 {
            eprintln!(
                "kept {} owner locks at their keys in the export, as for a restore into the \
                 table's own stack (--owner-locks rekeyed writes them where this run's key puts \
                 them)",
                export.owner_locks()
            );
        }
        if loaded.outbox_left_out > 0 {
            eprintln!(
                "left out {} outbox items: events the exported table published (loaded, they \
                 would be published again; --keep-outbox loads them)",
                loaded.outbox_left_out
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `load --s3`: DynamoDB's `ImportTable` of an S3 export into a new table, followed, and the
/// table finished (outbox items deleted, then stream and TTL on).
async fn run_on_aws(runner: &RunnerArgs, args: &LoadArgs, url: &str) -> Result<ExitCode, String> {
    // Refused before anything is called.
    let source = on_aws::ExportSource::parse(url)?;
    if runner.table.starts_with("arn:") {
        return Err(format!(
            "--table {} is an ARN: load --s3 names the new table ImportTable creates, by its name",
            runner.table
        ));
    }
    if args.keep_outbox {
        return Err(
            "--keep-outbox is not done on AWS: ImportTable writes every item with no stream (it \
             cannot create one), and the stream switched on after starts empty, so kept outbox \
             items would never reach the publisher; load --s3 deletes them. To publish the \
             events of a table that is gone, copy the export down (`aws s3 sync`) and `load \
             --keep-outbox <dir>` into an engine whose runner publishes them \
             (docs/guide/tools-on-aws.md)"
                .into(),
        );
    }
    if args.owner_locks == Some(OwnerLocks::Rekeyed) {
        return Err(
            "--owner-locks rekeyed is not done on AWS: ImportTable writes every item as it is \
             in the export (as-exported, a restore into the table's own stack); to rekey, copy \
             the export down and `load <dir>` with the target API's keys"
                .into(),
        );
    }
    let client = super::connect::aws_client(runner).await?;
    let settings = on_aws::ImportSettings {
        follow: on_aws::Follow {
            poll: args.on_s3.poll(),
            ..on_aws::Follow::default()
        },
        max_wcu: args
            .max_wcu
            .unwrap_or(on_aws::ImportSettings::default().max_wcu),
        max_key_wcu: args.max_key_wcu,
        ..on_aws::ImportSettings::default()
    };
    let imported = tokio::select! {
        imported = on_aws::import_from_s3(&client, &runner.table, &source, &settings) => imported?,
        _ = tokio::signal::ctrl_c() => {
            return Err(format!(
                "interrupted: the import goes on in DynamoDB; the same command, run again, \
                 follows it and finishes {} (outbox, stream, TTL)",
                runner.table
            ));
        }
    };
    if args.json {
        output::line(serde_json::to_string(&imported).expect("a report is JSON"));
    }
    let of = imported
        .export_items
        .map_or(String::new(), |items| format!(" of the export's {items}"));
    match &imported.finished {
        Some(finished) => {
            if !args.json {
                eprintln!(
                    "import {} COMPLETED: {} items{of} imported into {} ({} errors); {} outbox \
                     items deleted; stream {}; TTL on {} {}. Not switched on: point-in-time \
                     recovery and deletion protection (docs/guide/fsck.md, \"Restore drill\", \
                     step 3)",
                    imported.export_id,
                    imported.imported_items,
                    imported.table,
                    imported.errors,
                    finished.outbox_deleted,
                    if finished.stream_switched_on {
                        "switched on (NEW_AND_OLD_IMAGES)"
                    } else {
                        "on already"
                    },
                    singlet_shared::schema::TTL_ATTRIBUTE,
                    if finished.ttl_switched_on {
                        "switched on"
                    } else {
                        "on already"
                    },
                );
            }
            if imported.whole() {
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!(
                    "the copy is not whole: {} items imported{of}, {} lines ImportTable could \
                     not import (each in the log group {})",
                    imported.imported_items,
                    imported.errors,
                    imported.log_group.as_deref().unwrap_or("of the import"),
                );
                Ok(ExitCode::from(1))
            }
        }
        None => {
            eprintln!(
                "import {} {}: {}: {} ({}); nothing was switched on",
                imported.export_id,
                imported.status,
                imported.failure_code.as_deref().unwrap_or("no FailureCode"),
                imported
                    .failure_message
                    .as_deref()
                    .unwrap_or("no FailureMessage"),
                imported.import_arn,
            );
            if imported.started_earlier {
                eprintln!(
                    "this is the import an earlier run of this command started (DynamoDB \
                     answers the same ClientToken with it for eight hours): to import again, \
                     name another --table"
                );
            }
            Ok(ExitCode::from(1))
        }
    }
}

/// Whether `load` rekeys owner locks (under the run's key) when not told: into an engine on this
/// machine (the embedded one, or `endpoint` on a loopback address), where the run's key is the
/// one its API uses; not into a table elsewhere, most often a restore into the table's own stack,
/// where a key left in the shell from another stack would move every lock where the API never
/// looks.
fn rekeys_by_default(endpoint: Option<&str>) -> bool {
    !endpoint.is_some_and(engine::is_remote_endpoint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_locks_are_rekeyed_by_default_on_this_machine_only() {
        assert!(rekeys_by_default(None), "the embedded engine");
        for local in [
            "http://127.0.0.1:8000",
            "http://localhost:8000",
            "http://[::1]:8000",
        ] {
            assert!(rekeys_by_default(Some(local)), "{local}");
        }
        for elsewhere in [
            "https://dynamodb.eu-west-1.amazonaws.com",
            "http://host.docker.internal:8000",
        ] {
            assert!(!rekeys_by_default(Some(elsewhere)), "{elsewhere}");
        }
    }
}
