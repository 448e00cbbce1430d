//! `singlet load`: an export into an empty table, every item but the outbox's (those are events
//! the exported table published, and would be published again); into the embedded engine by its
//! bulk path.

use super::connect::{OWNER_KEYS, connect, connect_to, refuse_the_published_secret_elsewhere};
use super::runner::{RunnerArgs, check_max_key_wcu, check_max_wcu};
use clap::Args;
use singlet::serve::engine;
use singlet_tools::throttle::Throttle;
use singlet_tools::transfer;
use std::path::PathBuf;
use std::process::ExitCode;

/// `load`'s options.
#[derive(Args)]
pub struct LoadArgs {
    /// A directory an `export` (or DynamoDB's `ExportTableToPointInTime`) wrote.
    dir: PathBuf,
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
    /// in bulk, below its door, and not paced).
    #[arg(long)]
    max_wcu: Option<f64>,
    /// Into an `--endpoint`: write units per second into any one partition key value of the
    /// table or an index, at most (DynamoDB serves one key 1,000).
    #[arg(long, default_value_t = singlet_functions::store::pace::DEFAULT_MAX_KEY_WCU)]
    max_key_wcu: f64,
    /// Stop as if killed once this many items were written (for testing what a kill leaves).
    #[arg(long, hide = true)]
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
    let export = transfer::check(&args.dir)?;
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
        None => connect(runner, None).await?,
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
        println!(
            "{}",
            serde_json::json!({
                "loaded": loaded.items,
                "outboxLeftOut": loaded.outbox_left_out,
                "ownerLocksMoved": loaded.owner_locks_moved,
                "hottestKey": loaded.hottest_key,
            })
        );
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
