//! Retention on a developer's machine (docs/guide/retention.md): the embedded engine's TTL sweep,
//! run on a schedule as DynamoDB runs its own, and the archive directory the publisher writes
//! what the sweep deleted to, as it writes to S3 on AWS.
//!
//! dynoxide deletes nothing by itself: [`sweep`] asks it to delete every item whose `expiresAt`
//! is before its clock's now, and each deletion reaches the table's stream as a `REMOVE` record
//! whose `userIdentity` is the DynamoDB service, as DynamoDB's own TTL writes it. The engine's
//! clock is the runner's ([`EngineClock`]), so a test that moves the one moves the other.

use dynoxide::Database;
use futures::future::BoxFuture;
use singlet_functions::clock::Clock;
use singlet_functions::events::archive::Archive;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The runner's clock as the engine's: the TTL sweep's "now", and its stream records' times.
pub struct EngineClock(pub Clock);

impl dynoxide::storage_backend::Clock for EngineClock {
    fn now_unix_secs(&self) -> u64 {
        self.0.now().unix_timestamp().max(0) as u64
    }

    fn now_unix_secs_f64(&self) -> f64 {
        let now = self.0.now();
        now.unix_timestamp() as f64 + f64::from(now.nanosecond()) / 1e9
    }
}

/// One TTL sweep of the engine: how many expired items it deleted. The sweep is synchronous
/// (dynoxide holds its database a page at a time), so it runs on a blocking thread.
pub async fn sweep(db: &Database) -> Result<usize, String> {
    let db = db.clone();
    tokio::task::spawn_blocking(move || db.sweep_ttl())
        .await
        .map_err(|e| format!("the TTL sweep stopped: {e}"))?
        .map_err(|e| format!("the TTL sweep failed: {e}"))
}

/// Sweeps every `every` (`--ttl-sweep-every`), for ever.
pub async fn sweep_every(db: Database, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match sweep(&db).await {
            Ok(0) => {}
            Ok(deleted) => tracing::info!(deleted, "the TTL sweep deleted expired items"),
            Err(error) => tracing::warn!(error, "the TTL sweep failed; it runs again"),
        }
    }
}

/// The archive as a directory (`--archive-dir`, default `.singlet/archive/`): one file per
/// object, named by its key. A put writes a temporary file and renames it over the key, so a
/// reader never sees half an object and the same object put twice is one file.
pub struct DirArchive {
    dir: PathBuf,
}

impl DirArchive {
    /// The archive in `dir`, made when missing.
    pub fn open(dir: &Path) -> Result<Self, String> {
        singlet_tools::files::create_private_dir(dir)
            .map_err(|e| format!("cannot create the archive {}: {e}", dir.display()))?;
        Ok(Self {
            dir: dir.to_owned(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Archive for DirArchive {
    fn put<'a>(&'a self, key: &'a str, body: &'a str) -> BoxFuture<'a, Result<(), String>> {
        let path = self.dir.join(key);
        let partial = self.dir.join(format!(".{key}.partial"));
        let body = body.to_owned();
        Box::pin(async move {
            // On the blocking pool: the runner's engine and API share this runtime, and a slow
            // disk must not stall them (tokio::fs does the same for each call it makes).
            let shown = path.display().to_string();
            tokio::task::spawn_blocking(move || {
                singlet_tools::files::write_private_file(&partial, &body)?;
                std::fs::rename(&partial, &path)
            })
            .await
            .map_err(|e| format!("cannot write {shown}: {e}"))?
            .map_err(|e| format!("cannot write {shown}: {e}"))
        })
    }
}
