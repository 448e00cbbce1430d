//! A consistent copy of the embedded engine's table, for `export`.
//!
//! An export reads the table with a parallel `Scan`, each segment page by page, each page at its
//! own moment: a transaction committed while it runs (a vehicle registered with its locks and its
//! event, a loan with its copy and its patron's count) can be read with some of its items before
//! it and some after, and the copy loaded from such an export breaks the rules `fsck` checks. So
//! the runner exports no live table of its own engine: it first copies the engine's data file in
//! one read (SQLite's `VACUUM INTO`, through dynoxide's `Database::vacuum_into`, which reads the
//! whole database in one read transaction: every transaction the serving runner committed is in
//! the copy whole, or not at all, whichever process wrote it), serves the copy on a loopback port
//! of this process alone, and exports that. An external endpoint's table cannot be copied so:
//! DynamoDB's consistent export is its own `ExportTableToPointInTime`, and `export` says that a
//! table read through an endpoint may be torn by writers.

use aws_sdk_dynamodb::Client;
use std::net::SocketAddr;
use std::path::Path;

/// How long one page of the copy may take, queue included.
const PAGE_BUDGET: std::time::Duration = std::time::Duration::from_secs(60);

/// The copy, served: dropped, its file goes.
pub struct Snapshot {
    /// A client of the copy's engine.
    pub client: Client,
    /// The lock on the copy's directory, released before it is removed (fields drop in order).
    _held: std::fs::File,
    /// The copy's directory, beside the data file (`0700`, the copy in it `0600`).
    _dir: tempfile::TempDir,
}

/// Copies the embedded engine's data file `data` in one read and serves the copy.
pub async fn take(data: &Path) -> Result<Snapshot, String> {
    let source_path = data
        .to_str()
        .ok_or("the data path is not UTF-8")?
        .to_owned();
    let parent = data
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // Beside the data file: on its file system (a copy the size of the table), and under the
    // directory the runner keeps private. Made `0700` under a name no one can guess, whatever the
    // directory it is in: a data file kept elsewhere (`--data`) may sit in a shared one.
    remove_abandoned_copies(parent);
    let mut builder = tempfile::Builder::new();
    builder.prefix(COPY_PREFIX);
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700));
    let dir = builder.tempdir_in(parent).map_err(|e| {
        format!(
            "cannot make a directory for the copy in {}: {e}",
            parent.display()
        )
    })?;
    // Held for the copy's life: a later export removes the directories of copies nobody holds
    // (an export killed before it could remove its own), and only those.
    let held = std::fs::File::create(dir.path().join(HELD))
        .and_then(|file| {
            file.try_lock()
                .map_err(std::io::Error::other)
                .map(|()| file)
        })
        .map_err(|e| format!("cannot hold the copy's directory: {e}"))?;
    let copy = dir.path().join("snapshot.db");
    let copy_path = copy
        .to_str()
        .ok_or("the data path is not UTF-8")?
        .to_owned();
    let copied = {
        let copy_path = copy_path.clone();
        tokio::task::spawn_blocking(move || {
            let source = dynoxide::Database::new(&source_path)
                .map_err(|e| format!("cannot open {source_path}: {e}"))?;
            source
                .vacuum_into(&copy_path)
                .map_err(|e| format!("cannot copy {source_path}: {e}"))
        })
        .await
        .map_err(|e| format!("the copy stopped: {e}"))?
    };
    copied?;
    // SQLite made the copy under the umask; only its directory kept it private until now.
    #[cfg(unix)]
    std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(|e| format!("cannot make the copy {copy_path} private: {e}"))?;
    let db = dynoxide::Database::new(&copy_path)
        .map_err(|e| format!("cannot open the copy {copy_path}: {e}"))?;
    let endpoint = crate::serve::engine::serve(db, SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    // The engine answers one request at a time (one SQLite connection): the segments' pages
    // queue behind one another, so a page of a large table waits for the others' pages, however
    // healthy the engine. The runner's few-second budget per call is for the API's requests; the
    // copy serves this export alone, and a page gets a minute.
    let client = crate::serve::engine::local_client(&endpoint);
    let config = client
        .config()
        .to_builder()
        .timeout_config(
            aws_sdk_dynamodb::config::timeout::TimeoutConfig::builder()
                .operation_timeout(PAGE_BUDGET)
                .build(),
        )
        .build();
    Ok(Snapshot {
        client: Client::from_conf(config),
        _held: held,
        _dir: dir,
    })
}

/// The prefix of a copy's directory.
const COPY_PREFIX: &str = ".export-snapshot-";
/// The file in a copy's directory its export holds a lock on while it lives.
const HELD: &str = "held";

/// Removes the copies in `parent` that no export holds: each was left by an export killed before
/// it could remove its own, and is a whole copy of the table. A copy whose lock cannot be taken
/// is another export's, running now, and is left alone; so is anything that cannot be read.
fn remove_abandoned_copies(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let is_copy = name.to_str().is_some_and(|n| n.starts_with(COPY_PREFIX));
        if !is_copy || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let dir = entry.path();
        let abandoned = match std::fs::File::open(dir.join(HELD)) {
            Ok(held) => held.try_lock().is_ok(),
            // Killed between making the directory and holding it.
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        };
        if abandoned {
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => {
                    tracing::info!(dir = %dir.display(), "removed an export's abandoned copy")
                }
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot remove an export's abandoned copy")
                }
            }
        }
    }
}
