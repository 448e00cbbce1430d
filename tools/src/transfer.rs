//! `export` and `load`: the table in DynamoDB's own export format, so that AWS's tools, dynoxide's
//! `import` and this runner all read what another wrote.
//!
//! The format is `ExportTableToPointInTime`'s DynamoDB JSON: `<dir>/data/*.json.gz`, one
//! `{"Item": {…}}` a line, each attribute in the wire form (`{"S": "…"}`, `{"N": "…"}`, …), and
//! `<dir>/manifest-summary.json` with the item count (and `manifest-files.json` naming each data
//! file with its count, as AWS writes it). One data file per scan segment: a parallel `Scan`
//! writes them side by side.

use crate::progress::Progress;
use crate::throttle::Throttle;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use serde_json::{Map, Value, json};
use singlet_functions::accounts::owner_lock_under;
use singlet_functions::accounts::{AccountRow, OwnerLock};
use singlet_functions::ids::IdKey;
use singlet_functions::model::{Entity, TableEntity, decode, type_of};
use singlet_functions::store::bulk;
use singlet_functions::store::pace::{HottestKey, KeyRef, keys_of_item};
use singlet_shared::Key;
use singlet_shared::schema::{INDEXES, PK, Projection, SK};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

pub use singlet_functions::model::Item;

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    pub items: u64,
    pub files: Vec<PathBuf>,
}

/// Writes every item of `table` under `dir` in the export format, reading it with a parallel
/// `Scan` of `segments` segments. Each item passes through `transform` first (the anonymiser,
/// or nothing). `dir` must not hold an export already: an export is never mixed with another.
///
/// Each segment is read page by page, each page at its own moment: a table written to meanwhile
/// is exported torn (a transaction's items read on either side of it). `client` must therefore
/// reach a table no one writes to: the runner exports a copy of the embedded engine's file
/// (the runner's `export_snapshot`), and says so of a table reached through an endpoint.
pub async fn export(
    client: &Client,
    table: &str,
    dir: &Path,
    segments: u32,
    transform: &(dyn Fn(Item) -> Item + Sync),
) -> Result<Exported, String> {
    export_until(client, table, dir, segments, transform, None).await
}

/// [`export`]; with `stop_after` (a test hook), stopped as if killed once that many items are
/// written: what it wrote stays, as a kill leaves it (no manifest).
pub async fn export_until(
    client: &Client,
    table: &str,
    dir: &Path,
    segments: u32,
    transform: &(dyn Fn(Item) -> Item + Sync),
    stop_after: Option<u64>,
) -> Result<Exported, String> {
    let data = dir.join("data");
    if dir.join("manifest-summary.json").exists() {
        return Err(format!(
            "{} already holds an export: choose an empty directory",
            dir.display()
        ));
    }
    if data.exists() {
        return Err(partial_export(dir));
    }
    // Anything else in it is someone's files, which an export would mix itself with.
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(format!(
            "{} is not empty: export writes into an empty or new directory",
            dir.display()
        ));
    }
    crate::files::create_private_dir(&data)
        .map_err(|e| format!("cannot create {}: {e}", data.display()))?;
    let mut partial = Partial { dir: Some(dir) };
    let written = write_export(client, table, dir, segments.max(1), transform, stop_after).await;
    match &written {
        Ok(_) => partial.dir = None,
        // Left as a kill leaves it.
        Err(stopped) if stopped == STOPPED_AS_IF_KILLED => partial.dir = None,
        Err(_) => {}
    }
    written
}

/// Why `dir` cannot be exported into or loaded from: it holds `data/` and no
/// `manifest-summary.json`, which an export writes last.
fn partial_export(dir: &Path) -> String {
    format!(
        "{} holds a partial export: {} and no manifest-summary.json, which an export writes \
         last: an export stopped before it finished (killed, or its machine stopped) left it, \
         and it is not the table. Remove {} and export again, or choose an empty directory",
        dir.display(),
        dir.join("data").display(),
        dir.join("data").display()
    )
}

/// An export being written: removed when it is dropped unfinished, whether it failed or was
/// stopped (the command dropping it on Ctrl-C). Half an export is no export: what it wrote goes,
/// so the directory can be used again, and `load` is never handed part of a table as the whole.
struct Partial<'d> {
    dir: Option<&'d Path>,
}

impl Drop for Partial<'_> {
    fn drop(&mut self) {
        if let Some(dir) = self.dir {
            let _ = std::fs::remove_dir_all(dir.join("data"));
            let _ = std::fs::remove_file(dir.join("manifest-summary.json"));
            let _ = std::fs::remove_file(dir.join("manifest-files.json"));
        }
    }
}

/// [`export`] into `dir`, whose `data/` is made and empty.
async fn write_export(
    client: &Client,
    table: &str,
    dir: &Path,
    segments: u32,
    transform: &(dyn Fn(Item) -> Item + Sync),
    stop_after: Option<u64>,
) -> Result<Exported, String> {
    let data = dir.join("data");
    let exported = std::sync::atomic::AtomicU64::new(0);
    let progress = Progress::new(true);
    let written = futures::future::try_join_all((0..segments).map(|segment| {
        let path = data.join(format!("{segment:08}.json.gz"));
        let (exported, progress) = (&exported, &progress);
        async move {
            let file = crate::files::create_private_file(&path)
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            let mut out = GzEncoder::new(std::io::BufWriter::new(file), Compression::default());
            let mut in_file = 0u64;
            let mut start = None;
            loop {
                let (items, next) =
                    bulk::scan_page(client, table, segment, segments, start).await?;
                let in_page = items.len() as u64;
                for item in items {
                    let line = json!({ "Item": item_to_json(&transform(item)) });
                    writeln!(out, "{line}")
                        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                }
                in_file += in_page;
                let total =
                    exported.fetch_add(in_page, std::sync::atomic::Ordering::Relaxed) + in_page;
                progress.count(|| format!("exported {total} items"));
                if stop_after.is_some_and(|limit| total >= limit) {
                    out.flush()
                        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                    return Err(STOPPED_AS_IF_KILLED.to_owned());
                }
                match next {
                    Some(key) => start = Some(key),
                    None => break,
                }
            }
            out.finish()
                .and_then(|mut w| w.flush())
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok::<_, String>((path, in_file))
        }
    }))
    .await
    .inspect_err(|_| progress.interrupt())?;
    let items = exported.load(std::sync::atomic::Ordering::Relaxed);
    let files: Vec<Value> = written
        .iter()
        .map(|(path, count)| {
            json!({
                "dataFileS3Key": format!("data/{}", path.file_name().unwrap().to_string_lossy()),
                "itemCount": count,
            })
        })
        .collect();
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .expect("UTC times format");
    write_json(
        &dir.join("manifest-summary.json"),
        &json!({
            "version": "2020-06-30",
            "exportTime": now,
            "startTime": now,
            "endTime": now,
            "tableName": table,
            "itemCount": items,
            "outputFormat": "DYNAMODB_JSON",
            "exportType": "FULL_EXPORT",
            "manifestFilesS3Key": "manifest-files.json",
        }),
    )?;
    let manifest_files: String = files.iter().map(|f| format!("{f}\n")).collect();
    crate::files::write_private_file(&dir.join("manifest-files.json"), manifest_files)
        .map_err(|e| format!("cannot write the manifest: {e}"))?;
    progress.finish(&format!("exported {items} items"));
    Ok(Exported {
        items,
        files: written.into_iter().map(|(path, _)| path).collect(),
    })
}

/// Where `load` writes: any engine through its API, or the embedded engine's own bulk path.
pub enum Target<'a> {
    /// `BatchWriteItem`s of 25, what DynamoDB leaves unprocessed sent again with backoff, each
    /// admitted by the throttle first: every partition key value its items are written under
    /// (the table's and each index's) kept under `--max-key-wcu`, the table under `--max-wcu`.
    Api(&'a Throttle),
    /// An engine's own bulk path (the runner's embedded dynoxide: `import_items`, thousands of
    /// items in one SQLite transaction each, indexes written with them, no stream records, so a
    /// loaded copy publishes no event a second time). The tools know no engine: the runner
    /// hands its own in.
    Bulk(&'a dyn BulkWriter),
}

/// An engine's bulk path for [`Target::Bulk`]: writes `items` into `table` at once and says
/// how many it wrote. With `on_the_stream`, the write records its items on the table's stream
/// as a `PutItem` would: kept outbox items reach the publisher that way only (a bulk path records
/// none unless told, and the runner publishes what the stream carries).
pub trait BulkWriter: Sync {
    fn write<'a>(
        &'a self,
        table: &'a str,
        items: Vec<Item>,
        on_the_stream: bool,
    ) -> futures::future::BoxFuture<'a, Result<u64, String>>;
}

/// Items per bulk write into the embedded engine: one SQLite transaction each.
const BULK_ITEMS: usize = 5_000;

/// What `load` did: the items it wrote, and the outbox items it left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub items: u64,
    /// The key written most into in any one second (through an engine's API only: the bulk
    /// path is not paced).
    pub hottest_key: Option<HottestKey>,
    /// Outbox items (`_et` `outbox`) are never loaded: each is an event of the table the export
    /// was taken from, published from there already (or about to be). Put into a table with a
    /// stream, each would reach its publisher as a new item and be published a second time.
    pub outbox_left_out: u64,
    /// Owner locks written where [`OwnerLockKeys::Under`]'s key puts them, not where the export
    /// had them (keyed under another key).
    pub owner_locks_moved: u64,
}

/// Whether `item` is an outbox item, which `load` leaves out ([`Loaded::outbox_left_out`]): its
/// `_et` says so (all the stream's filter looks at, whatever the key), or, for an item written
/// before `_et` existed, its key has the outbox's shape.
fn is_outbox(item: &Item) -> bool {
    use singlet_functions::model::{ENTITY_TYPE, outbox::OutboxItem};
    let outbox = OutboxItem::TYPE.name;
    match item.get(ENTITY_TYPE) {
        Some(name) => name.as_s().is_ok_and(|name| name == outbox),
        None => type_of(item).is_ok_and(|t| t.name == outbox),
    }
}

/// Which items `load` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Outbox {
    /// Every item but the outbox's ([`Loaded::outbox_left_out`]).
    #[default]
    LeaveOut,
    /// Every item (`load --keep-outbox`): for a restore whose original table is gone with events
    /// its publisher never published. The copy's publisher then publishes every one of them,
    /// those published before included (with their own `eventId`, which a consumer that keeps
    /// the ids it has seen recognises).
    Keep,
}

/// An export read once through and found loadable ([`check`]): its data files, which
/// [`load`] reads a second time to write them (holding every item of a large export in memory
/// between the two reads would cost more than reading it again).
pub struct Checked {
    files: Vec<PathBuf>,
    owners: Owners,
    /// How many items the export holds.
    items: u64,
    /// The write units its items take, written one by one (table and index entries).
    write_units: f64,
}

impl Checked {
    /// How many subjects' one-account locks (`UNIQ#OWNER#…`) the export holds, which
    /// [`OwnerLockKeys`] says where to write.
    pub fn owner_locks(&self) -> u64 {
        self.owners.locks
    }

    /// The write units its items take, written one by one, table and index entries together.
    pub fn write_units(&self) -> f64 {
        self.write_units
    }
}

/// What `load` needs to re-key the export's owner locks ([`Rekeying`]), read with the rest.
#[derive(Default)]
struct Owners {
    /// Each self-owned account's owner (a token's subject), by account id.
    of_account: HashMap<String, String>,
    /// The key of every item of the export, decodable or not: no lock is moved onto one.
    keys: std::collections::HashSet<Key>,
    /// How many owner locks the export holds.
    locks: u64,
}

/// Where `load` writes the export's owner locks (`UNIQ#OWNER#<keyed hash of the subject>`, keyed
/// under the exporting API's `OWNER_KEY`).
#[derive(Clone, Copy)]
pub enum OwnerLockKeys<'k> {
    /// At their keys in the export: a restore into the table's own stack.
    AsExported,
    /// Where this key, the one the loaded table's API keys them with, puts each lock's owner.
    Under(&'k IdKey),
}

/// Re-keys the owner locks of an export as it is written. Loaded under another key than the
/// exporting API's (the runner's published one, another stack's), every such lock would sit
/// where the copy's API never looks: its account's delete would find no lock to release (a
/// `500`), its subject could open a second account, and `fsck` refuses a table whose owner locks
/// are all keyed elsewhere. A lock whose account is in the export and self-owned by a subject is
/// written where `key` puts that subject's; any other (an orphan, which `fsck` reports), and one
/// whose new key an item of the export holds already, stays where it was.
struct Rekeying<'a> {
    owners: &'a Owners,
    key: &'a IdKey,
    /// The new keys given so far: no two locks are ever written to one.
    given: std::collections::HashSet<Key>,
    moved: u64,
}

impl Rekeying<'_> {
    fn place(&mut self, mut item: Item) -> Item {
        if !type_of(&item).is_ok_and(|t| t.name == OwnerLock::TYPE.name) {
            return item;
        }
        let Ok(TableEntity::OwnerLock(lock)) = decode(&item) else {
            return item;
        };
        let Some(owner) = self.owners.of_account.get(lock.account_id.as_str()) else {
            return item;
        };
        let placed = owner_lock_under(self.key, owner, &lock.account_id)
            .key()
            .into_key();
        if placed == *lock.key()
            || self.owners.keys.contains(&placed)
            || !self.given.insert(placed.clone())
        {
            return item;
        }
        item.insert(PK.into(), AttributeValue::S(placed.pk));
        item.insert(SK.into(), AttributeValue::S(placed.sk));
        self.moved += 1;
        item
    }
}

/// Reads the whole export under `dir` without writing anything: every line an item with a key,
/// every value one DynamoDB takes (`unwritable`), no key twice (the keys are held in memory
/// meanwhile), as many items as the manifest counts, and as many in each data file as
/// `manifest-files.json` says.
///
/// `dir` is an export's own directory (`manifest-summary.json`, `manifest-files.json`,
/// `data/`), as `export <dir>` writes it and as DynamoDB writes each export under its prefix
/// (`<prefix>/AWSDynamoDB/<exportId>/`), or the prefix itself, copied from S3 with
/// `aws s3 sync s3://<bucket>/<prefix> <dir>`, when it holds one finished export
/// (`export_dir`). The data files are the ones `manifest-files.json` lists when there is one
/// (by `dataFileS3Key`, which DynamoDB gives from the bucket's root: `listed_data_files`), else
/// every `data/*.json.gz` (and `*.json`).
pub fn check(dir: &Path) -> Result<Checked, String> {
    let dir = &export_dir(dir)?;
    let expected = read_manifest(dir)?;
    let listed = listed_data_files(dir)?;
    let files = match &listed {
        Some(listed) => listed.iter().map(|(path, _)| path.clone()).collect(),
        None => data_files(dir)?,
    };
    let (read, owners, per_file, write_units) = check_export(&files)?;
    for ((path, listed), read) in listed.iter().flatten().zip(&per_file) {
        if let Some(listed) = listed
            && listed != read
        {
            return Err(format!(
                "manifest-files.json counts {listed} items in {} but it holds {read}: nothing \
                 was written",
                path.display()
            ));
        }
    }
    if read != expected {
        return Err(format!(
            "the manifest counts {expected} items but the data files hold {read}: nothing was \
             written"
        ));
    }
    Ok(Checked {
        files,
        owners,
        items: read,
        write_units,
    })
}

/// Where DynamoDB puts each export under the prefix it was asked for
/// (`<prefix>/AWSDynamoDB/<exportId>/`: "DynamoDB table export output format",
/// <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/S3DataExport.Output.html>).
pub const EXPORTS_FOLDER: &str = "AWSDynamoDB";

/// The export's own directory for `dir`: `dir` itself when it holds `manifest-summary.json`
/// (or is anything else, which [`read_manifest`] then names), or, for an S3 prefix copied
/// whole, the one export under `dir/AWSDynamoDB/` whose `manifest-summary.json` (which DynamoDB
/// writes last) is there. Several finished exports are refused, each named, for the operator
/// to choose one.
fn export_dir(dir: &Path) -> Result<PathBuf, String> {
    let exports = dir.join(EXPORTS_FOLDER);
    if dir.join("manifest-summary.json").exists() || !exports.is_dir() {
        return Ok(dir.to_owned());
    }
    let mut finished = Vec::new();
    let mut unfinished = Vec::new();
    for entry in std::fs::read_dir(&exports)
        .map_err(|e| format!("cannot read {}: {e}", exports.display()))?
    {
        let path = entry
            .map_err(|e| format!("cannot read {}: {e}", exports.display()))?
            .path();
        if !path.is_dir() {
            continue;
        }
        if path.join("manifest-summary.json").is_file() {
            finished.push(path);
        } else {
            unfinished.push(path);
        }
    }
    finished.sort();
    match (finished.len(), unfinished.first()) {
        (1, _) => Ok(finished.remove(0)),
        (0, Some(unfinished)) => Err(format!(
            "{} holds no manifest-summary.json, which DynamoDB writes when an export completes: \
             the export is not finished (or failed), or was not copied whole (`aws s3 sync` \
             the whole prefix): nothing was written",
            unfinished.display()
        )),
        (0, None) => Err(format!(
            "{} is not an export: {} holds no export",
            dir.display(),
            exports.display()
        )),
        (_, _) => Err(format!(
            "{} holds {} finished exports: load one of them, {}",
            exports.display(),
            finished.len(),
            finished
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// A data file `manifest-files.json` lists, and the item count it gives it.
type Listed = (PathBuf, Option<u64>);

/// The data files `manifest-files.json` lists, with the item count it gives each, or `None`
/// when the export has no such file (one made by hand, or by an older singlet). Each line is
/// `{"dataFileS3Key": "…", "itemCount": n, …}`; DynamoDB's keys run from the bucket's root
/// (`<prefix>/AWSDynamoDB/<exportId>/data/<name>.json.gz`), `export <dir>`'s from the export's
/// own directory (`data/<name>.json.gz`): either is found under `dir`. A file it lists that is
/// missing, or a data file it does not list, is refused: the copy is not this export whole.
fn listed_data_files(dir: &Path) -> Result<Option<Vec<Listed>>, String> {
    let path = dir.join("manifest-files.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mut listed = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{}:{}", path.display(), n + 1);
        let entry: Value =
            serde_json::from_str(line).map_err(|e| format!("{}: not JSON: {e}", at()))?;
        let key = entry["dataFileS3Key"]
            .as_str()
            .ok_or_else(|| format!("{}: no dataFileS3Key", at()))?;
        let file = data_file_of(dir, key).map_err(|why| format!("{}: {why}", at()))?;
        if !file.is_file() {
            return Err(format!(
                "{}: {key} is not in {} (looked for {}): copy the whole export, e.g. \
                 `aws s3 sync s3://<bucket>/<prefix> <dir>`: nothing was written",
                at(),
                dir.display(),
                file.display()
            ));
        }
        listed.push((file, entry["itemCount"].as_u64()));
    }
    let listed_paths: std::collections::HashSet<&PathBuf> =
        listed.iter().map(|(path, _)| path).collect();
    if let Some(stray) = data_files(dir)
        .unwrap_or_default()
        .into_iter()
        .find(|file| !listed_paths.contains(file))
    {
        return Err(format!(
            "{} is not in {}: a data file of another export, or written by hand; remove it or \
             load a clean copy: nothing was written",
            stray.display(),
            path.display()
        ));
    }
    Ok(Some(listed))
}

/// The file under the export's directory `dir` that `key`, a `dataFileS3Key`, names: what
/// follows `AWSDynamoDB/<exportId>/` in it (DynamoDB's keys), or all of it (`export <dir>`'s).
/// A key with an empty, `.` or `..` part, or a `\`, is refused: it would name a file outside
/// `dir`.
fn data_file_of(dir: &Path, key: &str) -> Result<PathBuf, String> {
    let parts: Vec<&str> = key.split('/').collect();
    if key.contains('\\')
        || parts
            .iter()
            .any(|p| p.is_empty() || *p == "." || *p == "..")
    {
        return Err(format!("{key:?} is not a data file's key"));
    }
    let within = match parts.iter().rposition(|p| *p == EXPORTS_FOLDER) {
        Some(at) if parts.len() > at + 2 => &parts[at + 2..],
        _ => &parts[..],
    };
    Ok(dir.join(within.join("/")))
}

/// Writes a [`check`]ed export into `table`, which must be empty, through `target`; the outbox
/// items as `outbox` says, and the owner locks where `owner_locks` says.
///
/// The export was read once through and found loadable before this writes anything, and the
/// table's emptiness is checked first: a bad export is refused with the table untouched, so
/// that, fixed, it loads. Were it checked as it is written, a bad line near the end would leave a
/// half-loaded table that `load` then refuses as not empty.
///
/// A load marks the table first ([`crate::load_marker`]) and removes the mark after its last
/// item: a load stopped part way leaves the mark, which a load run again and `fsck` name.
pub async fn load(
    client: &Client,
    table: &str,
    export: &Checked,
    target: Target<'_>,
    outbox: Outbox,
    owner_locks: OwnerLockKeys<'_>,
) -> Result<Loaded, String> {
    load_until(client, table, export, target, outbox, owner_locks, None).await
}

/// What [`load_until`] answers when it stopped as if killed.
pub const STOPPED_AS_IF_KILLED: &str = "stopped as if killed";

/// [`load`]; with `stop_after` (a test hook), stopped as if killed once that many items are
/// written: the items and the mark stay, as a kill leaves them.
pub async fn load_until(
    client: &Client,
    table: &str,
    export: &Checked,
    target: Target<'_>,
    outbox: Outbox,
    owner_locks: OwnerLockKeys<'_>,
    stop_after: Option<u64>,
) -> Result<Loaded, String> {
    let files = &export.files;
    let mut rekeying = match owner_locks {
        OwnerLockKeys::AsExported => None,
        OwnerLockKeys::Under(key) => Some(Rekeying {
            owners: &export.owners,
            key,
            given: Default::default(),
            moved: 0,
        }),
    };
    if let Some(unfinished) = crate::load_marker::read(client, table).await? {
        return Err(unfinished.describe(table));
    }
    if bulk::holds_items(client, table).await? {
        return Err(format!(
            "{table} already holds items: load writes only into an empty table"
        ));
    }
    crate::load_marker::mark(client, table, export.items).await?;
    let chunk = match target {
        Target::Api(_) => 25,
        Target::Bulk(_) => BULK_ITEMS,
    };
    let (mut written, mut outbox_left_out) = (0u64, 0u64);
    let progress = Progress::new(true);
    let stopped = |error: String, written: u64| {
        progress.interrupt();
        format!(
            "{error}; {written} items were written before load stopped: delete them (or the \
             table) and load again"
        )
    };
    // One batch across the files: their items are taken in turn ([`InTurn`]).
    let mut batch = Vec::with_capacity(chunk);
    let mut items = InTurn::new(files).peekable();
    while let Some(item) = items.next() {
        let item = item.map_err(|e| stopped(e, written))?;
        let mut full = false;
        if outbox == Outbox::LeaveOut && is_outbox(&item) {
            outbox_left_out += 1;
        } else {
            let item = match &mut rekeying {
                Some(rekeying) => rekeying.place(item),
                None => item,
            };
            // Through an API, a batch never holds more than one key's budget for a second:
            // it is admitted whole, and then written at once.
            if let Target::Api(throttle) = target
                && !batch.is_empty()
                && over_a_keys_budget(&batch, &item, throttle.max_key_wcu())
            {
                let written_now = write_paced(client, table, throttle, std::mem::take(&mut batch))
                    .await
                    .map_err(|e| stopped(e, written))?;
                written += written_now;
                full = true;
            }
            batch.push(item);
        }
        if full {
            progress.count(|| format!("loaded {written} items"));
            if stop_after.is_some_and(|limit| written >= limit) {
                progress.interrupt();
                return Err(STOPPED_AS_IF_KILLED.into());
            }
        }
        if batch.len() == chunk || (items.peek().is_none() && !batch.is_empty()) {
            let items = std::mem::take(&mut batch);
            written += match target {
                Target::Api(throttle) => write_paced(client, table, throttle, items).await,
                Target::Bulk(engine) => engine.write(table, items, outbox == Outbox::Keep).await,
            }
            .map_err(|e| stopped(e, written))?;
            progress.count(|| format!("loaded {written} items"));
            if stop_after.is_some_and(|limit| written >= limit) {
                progress.interrupt();
                return Err(STOPPED_AS_IF_KILLED.into());
            }
        }
    }
    crate::load_marker::unmark(client, table).await?;
    progress.finish(&format!("loaded {written} items"));
    Ok(Loaded {
        items: written,
        hottest_key: match target {
            Target::Api(throttle) => throttle.hottest_key(),
            Target::Bulk(_) => None,
        },
        outbox_left_out,
        owner_locks_moved: rekeying.map_or(0, |r| r.moved),
    })
}

/// Reads every item of `files` without writing any: how many there are, or the first reason the
/// export cannot be loaded (a line that is not an item, an item without a key, a key twice).
/// An export's items read through: how many, its owners' facts, the items in each file, and the
/// write units the items take written one by one ([`batch_units_per_key`], all keys together).
fn check_export(files: &[PathBuf]) -> Result<(u64, Owners, Vec<u64>, f64), String> {
    let mut owners = Owners::default();
    let mut units = 0.0;
    let mut per_file = Vec::with_capacity(files.len());
    for path in files {
        let mut in_file = 0u64;
        for (n, item) in read_items(path)?.enumerate() {
            in_file += 1;
            let item = item.map_err(|e| format!("{e}: nothing was written"))?;
            let at = || format!("{}: item {}", path.display(), n + 1);
            let Some(key) = singlet_functions::model::key_of(&item)
                .filter(|key| !key.pk.is_empty() && !key.sk.is_empty())
            else {
                return Err(format!(
                    "{} has no key (PK and SK, strings that are not empty): nothing was written",
                    at()
                ));
            };
            if let Some((name, why)) = item
                .iter()
                .find_map(|(name, value)| unwritable(value).map(|why| (name, why)))
            {
                return Err(format!(
                    "{}: {name} is {why}, which DynamoDB refuses: nothing was written",
                    at()
                ));
            }
            units += batch_units_per_key(std::slice::from_ref(&item))
                .iter()
                .map(|(_, units)| units)
                .sum::<f64>();
            let size = item_size(&item);
            if size > MAX_ITEM_BYTES {
                return Err(format!(
                    "{}: the item is {size} bytes as DynamoDB counts them, more than its \
                     {MAX_ITEM_BYTES}-byte (400 KB) item: nothing was written",
                    at()
                ));
            }
            if let Some(why) = unwritable_keys(&item) {
                return Err(format!(
                    "{}: {why}, which DynamoDB refuses: nothing was written",
                    at()
                ));
            }
            match type_of(&item).map(|t| t.name) {
                Ok(name) if name == AccountRow::TYPE.name => {
                    // An account without an owner (made before accounts had owners) has no lock.
                    if let Ok(TableEntity::Account(row)) = decode(&item)
                        && row.owners_one
                        && !row.owner.is_empty()
                    {
                        owners
                            .of_account
                            .insert(row.account.account_id.to_string(), row.owner);
                    }
                }
                Ok(name) if name == OwnerLock::TYPE.name => owners.locks += 1,
                _ => {}
            }
            if crate::load_marker::is_mark(&item) {
                return Err(format!(
                    "{}: the mark of a load stopped part way ({}): the table this export was \
                     taken from held part of another export, not a table: nothing was written",
                    at(),
                    crate::load_marker::KEY
                ));
            }
            if !owners.keys.insert(key) {
                return Err(format!(
                    "{}: item {} has the key of an item before it: nothing was written",
                    path.display(),
                    n + 1
                ));
            }
        }
        per_file.push(in_file);
    }
    Ok((owners.keys.len() as u64, owners, per_file, units))
}

/// How many data files [`InTurn`] reads at once.
const FILES_IN_TURN: usize = 16;

/// The items of an export's data files taken in turn, one from each of [`FILES_IN_TURN`] files
/// at a time, then the next files: a file is a scan segment's, which holds an item collection's
/// items one after another (a patron's loans, a branch's patrons), and loading them so would write
/// one partition key after another; AWS's advice for bulk loads is to spread the writes over the
/// keys (<https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-data-upload.html>).
/// A file that cannot be opened is an item that is an error, where its items would have been.
struct InTurn {
    waiting: std::collections::VecDeque<PathBuf>,
    open: Vec<Box<dyn Iterator<Item = Result<Item, String>>>>,
    next: usize,
}

impl InTurn {
    fn new(files: &[PathBuf]) -> Self {
        Self {
            waiting: files.iter().cloned().collect(),
            open: Vec::new(),
            next: 0,
        }
    }
}

impl Iterator for InTurn {
    type Item = Result<Item, String>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.open.is_empty() {
                if self.waiting.is_empty() {
                    return None;
                }
                while self.open.len() < FILES_IN_TURN
                    && let Some(path) = self.waiting.pop_front()
                {
                    match read_items(&path) {
                        Ok(items) => self.open.push(Box::new(items)),
                        Err(error) => self.open.push(Box::new(std::iter::once(Err(error)))),
                    }
                }
                self.next = 0;
            }
            let at = self.next % self.open.len();
            match self.open[at].next() {
                Some(item) => {
                    self.next = at + 1;
                    return Some(item);
                }
                None => {
                    drop(self.open.remove(at));
                    self.next = at;
                }
            }
        }
    }
}

/// Whether `item` would take some key of `batch` past `budget` units.
fn over_a_keys_budget(batch: &[Item], item: &Item, budget: f64) -> bool {
    let in_batch = batch_units_per_key(batch);
    batch_units_per_key(std::slice::from_ref(item))
        .into_iter()
        .any(|(key, units)| {
            let held = in_batch
                .iter()
                .find(|(k, _)| *k == key)
                .map_or(0.0, |(_, units)| *units);
            held + units > budget
        })
}

/// One batch admitted by `throttle` (every key's units and the whole's) and then written.
async fn write_paced(
    client: &Client,
    table: &str,
    throttle: &Throttle,
    items: Vec<Item>,
) -> Result<u64, String> {
    let keys = batch_units_per_key(&items);
    let units = keys.iter().map(|(_, units)| units).sum();
    let admission = throttle.admit_keys(units, &keys).await;
    let wrote = write_batch(client, table, items).await;
    throttle.settle(admission, units);
    wrote
}

/// The write units a batch of puts takes on each partition key value it writes, of the table and
/// of each index: an item's size in KB, rounded up, on its table key and on each key of an index
/// that projects every attribute; one unit on a keys-only index's (its entry is the keys alone).
fn batch_units_per_key(items: &[Item]) -> Vec<(KeyRef, f64)> {
    let mut units: Vec<(KeyRef, f64)> = Vec::new();
    for item in items {
        let item_units = item_size(item).div_ceil(1024).max(1) as f64;
        for key in keys_of_item(item) {
            let keys_only = INDEXES.iter().any(|index| {
                Some(index.name) == key.index && index.projection == Projection::KeysOnly
            });
            let key_units = if keys_only { 1.0 } else { item_units };
            match units.iter_mut().find(|(k, _)| *k == key) {
                Some((_, counted)) => *counted += key_units,
                None => units.push((key, key_units)),
            }
        }
    }
    units
}

/// One `BatchWriteItem` of at most 25 puts, sent again for whatever comes back unprocessed.
async fn write_batch(client: &Client, table: &str, items: Vec<Item>) -> Result<u64, String> {
    bulk::put_batch(client, table, items)
        .await
        .map_err(|e| format!("{e}; run load again into an empty table"))
}

/// The item count `manifest-summary.json` declares.
fn read_manifest(dir: &Path) -> Result<u64, String> {
    let path = dir.join("manifest-summary.json");
    if !path.exists() && dir.join("data").is_dir() {
        return Err(partial_export(dir));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{} is not an export: cannot read {}: {e}",
            dir.display(),
            path.display()
        )
    })?;
    let manifest: Value =
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
    // DynamoDB writes these (an export of `export <dir>` too); a manifest made by hand may not.
    if let Some(format) = manifest["outputFormat"].as_str()
        && format != "DYNAMODB_JSON"
    {
        return Err(format!(
            "{} is a {format} export: load reads DYNAMODB_JSON (`export --s3` asks for it)",
            dir.display()
        ));
    }
    if manifest["exportType"].as_str() == Some("INCREMENTAL_EXPORT") {
        return Err(format!(
            "{} is an incremental export (the changes of a period), not a table: load reads a \
             full export",
            dir.display()
        ));
    }
    manifest["itemCount"]
        .as_u64()
        .ok_or_else(|| format!("{} has no itemCount", path.display()))
}

/// The export's data files, in name order.
pub fn data_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let data = dir.join("data");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&data)
        .map_err(|e| format!("cannot read {}: {e}", data.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            name.ends_with(".json.gz") || name.ends_with(".json")
        })
        .collect();
    files.sort();
    Ok(files)
}

/// DynamoDB's largest item, 400 KB, counted as DynamoDB counts it ([`item_size`]): "The maximum
/// item size in DynamoDB is 400 KB, which includes both attribute name binary length (UTF-8
/// length) and attribute value lengths" (Amazon DynamoDB Developer Guide, "Constraints in Amazon
/// DynamoDB", Items; <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html>).
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

/// The longest line of a data file `load` reads: ten times [`MAX_ITEM_BYTES`]. A line holds its
/// item in DynamoDB JSON, which spells each byte DynamoDB counts in more: a string's control
/// character is six (`\u0001`), and the widest item is a list of booleans, each element two bytes
/// to DynamoDB (one for the element, one for the value) and fifteen in the line
/// (`{"BOOL":false},`), 7.5 times. A line longer than this holds no item DynamoDB takes, and is
/// refused as soon as it is this long: it is never held whole (a gzip member of a few hundred
/// KB can unpack to a line of hundreds of MB).
pub const MAX_LINE_BYTES: usize = 10 * MAX_ITEM_BYTES;

/// The items of one data file (gzipped or plain), each line `{"Item": {…}}`. A gzipped file is
/// read to its end through every member: gzip allows several one after the other (RFC 1952,
/// 2.2: "A gzip file consists of a series of "members""), and a file written in parts, or
/// several files joined with `cat`, has them.
pub fn read_items(
    path: &Path,
) -> Result<impl Iterator<Item = Result<Item, String>> + use<>, String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    // A zero-byte object is an empty file whatever its name: DynamoDB writes a file for each
    // partition of the table, an empty partition's too.
    let empty = file.metadata().is_ok_and(|m| m.len() == 0);
    let reader: Box<dyn std::io::Read> = if path.extension().is_some_and(|e| e == "gz") && !empty {
        Box::new(MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let name = path.display().to_string();
    let mut lines = bounded_lines(BufReader::new(reader), MAX_LINE_BYTES);
    let mut number = 0usize;
    Ok(std::iter::from_fn(move || {
        loop {
            number += 1;
            let line = match lines.next()? {
                Ok(line) => line,
                Err(LineError::TooLong) => {
                    return Some(Err(format!(
                        "{name}:{number}: the line is longer than {MAX_LINE_BYTES} bytes, ten \
                         times DynamoDB's {MAX_ITEM_BYTES}-byte item: it holds no item DynamoDB \
                         takes (read no further)"
                    )));
                }
                Err(LineError::Read(e)) => return Some(Err(format!("cannot read {name}: {e}"))),
            };
            let Ok(line) = std::str::from_utf8(&line) else {
                return Some(Err(format!("{name}:{number}: not UTF-8 text")));
            };
            if line.trim().is_empty() {
                continue;
            }
            let parsed = serde_json::from_str::<Value>(line)
                .map_err(|e| format!("{name}:{number}: not JSON: {e}"))
                .and_then(|value| {
                    item_from_json(&value["Item"])
                        .map_err(|e| format!("{name}:{number}: not an export line: {e}"))
                });
            return Some(parsed);
        }
    }))
}

/// Why a line of a data file could not be read.
enum LineError {
    /// Longer than the bound: the rest of the file is not read.
    TooLong,
    Read(std::io::Error),
}

/// The lines of `reader`, each without its `\n` (or `\r\n`), none held longer than `max` bytes:
/// a longer line is an error as soon as `max + 1` of its bytes are read, and ends the lines.
fn bounded_lines(
    mut reader: impl BufRead,
    max: usize,
) -> impl Iterator<Item = Result<Vec<u8>, LineError>> {
    let mut ended = false;
    std::iter::from_fn(move || {
        if ended {
            return None;
        }
        let mut line = Vec::new();
        // `max + 2`: the longest line allowed, and its `\r\n`.
        let read = (&mut reader)
            .take(max as u64 + 2)
            .read_until(b'\n', &mut line);
        match read {
            Err(e) => {
                ended = true;
                Some(Err(LineError::Read(e)))
            }
            Ok(0) => None,
            Ok(_) => {
                if line.last() == Some(&b'\n') {
                    line.pop();
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                }
                if line.len() > max {
                    ended = true;
                    return Some(Err(LineError::TooLong));
                }
                Some(Ok(line))
            }
        }
    })
}

/// The size DynamoDB counts for `item`, as its guide tells it ("DynamoDB item sizes and
/// formats", <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html>):
/// each attribute's name in UTF-8 bytes and its value: a string's UTF-8 bytes, a binary's raw
/// bytes, a number's one byte per two significant digits and one more, a null or a boolean one
/// byte, a list or a map three bytes and one more per element besides its elements. The
/// guide calls a number's size approximate: this is its formula.
pub fn item_size(item: &Item) -> usize {
    fn number(n: &str) -> usize {
        let digits: String = n
            .split(['e', 'E'])
            .next()
            .unwrap_or_default()
            .chars()
            .filter(char::is_ascii_digit)
            .collect();
        let significant = digits.trim_start_matches('0').trim_end_matches('0').len();
        significant.div_ceil(2) + 1
    }
    fn value(attribute: &AttributeValue) -> usize {
        match attribute {
            AttributeValue::S(s) => s.len(),
            AttributeValue::N(n) => number(n),
            AttributeValue::B(b) => b.as_ref().len(),
            AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
            AttributeValue::Ss(set) => set.iter().map(String::len).sum(),
            AttributeValue::Ns(set) => set.iter().map(|n| number(n)).sum(),
            AttributeValue::Bs(set) => set.iter().map(|b| b.as_ref().len()).sum(),
            AttributeValue::L(list) => 3 + list.iter().map(|v| 1 + value(v)).sum::<usize>(),
            AttributeValue::M(map) => {
                3 + map
                    .iter()
                    .map(|(name, v)| 1 + name.len() + value(v))
                    .sum::<usize>()
            }
            _ => 0,
        }
    }
    item.iter().map(|(name, v)| name.len() + value(v)).sum()
}

fn write_json(path: &Path, value: &Value) -> Result<(), String> {
    crate::files::write_private_file(
        path,
        serde_json::to_string_pretty(value).expect("JSON") + "\n",
    )
    .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Why DynamoDB would refuse `value` in an item, if it would: a number that is not one, a set
/// that is empty or holds a value twice, at any depth. Found before anything is written, as the
/// rest of the export's faults are ([`check`]).
fn unwritable(value: &AttributeValue) -> Option<String> {
    fn unique<T: Eq + std::hash::Hash>(set: &[T]) -> bool {
        set.iter().collect::<std::collections::HashSet<_>>().len() == set.len()
    }
    let number = |n: &String| is_dynamodb_number(n);
    match value {
        AttributeValue::N(n) if !number(n) => Some(format!("the number {n:?}")),
        AttributeValue::Ns(set) if set.iter().any(|n| !number(n)) => {
            Some("a number set holding something that is not a number".into())
        }
        AttributeValue::Ss(set) if set.is_empty() || !unique(set) => {
            Some("a string set that is empty or holds a value twice".into())
        }
        AttributeValue::Ns(set)
            if set.is_empty()
                || !unique(&set.iter().map(|n| dynamodb_number(n)).collect::<Vec<_>>()) =>
        {
            Some("a number set that is empty or holds a value twice".into())
        }
        AttributeValue::Bs(set) if set.is_empty() || !unique(set) => {
            Some("a binary set that is empty or holds a value twice".into())
        }
        AttributeValue::L(list) => list.iter().find_map(unwritable),
        AttributeValue::M(map) => map.values().find_map(unwritable),
        _ => None,
    }
}

/// Why DynamoDB would refuse `item`'s keys, if it would: the table's partition key is at most
/// 2,048 bytes and its sort key 1,024, and an index's key attributes, where an item has them,
/// are strings that are not empty, within the same limits (an item with a number there is
/// refused, not left out of the index).
fn unwritable_keys(item: &Item) -> Option<String> {
    use singlet_shared::schema::{INDEXES, PK, SK};
    let keys = [(PK, SK)]
        .into_iter()
        .chain(INDEXES.iter().map(|index| (index.pk, index.sk)));
    for (partition, sort) in keys {
        for (name, limit) in [(partition, 2048), (sort, 1024)] {
            match item.get(name) {
                None => {}
                Some(AttributeValue::S(key)) if key.is_empty() => {
                    return Some(format!("{name} is an empty string"));
                }
                Some(AttributeValue::S(key)) if key.len() > limit => {
                    return Some(format!(
                        "{name} is {} bytes, more than a key's {limit}",
                        key.len()
                    ));
                }
                Some(AttributeValue::S(_)) => {}
                Some(_) => return Some(format!("{name}, a key attribute, is not a string")),
            }
        }
    }
    None
}

/// Whether DynamoDB takes `text` as a number ([`dynamodb_number`]).
fn is_dynamodb_number(text: &str) -> bool {
    dynamodb_number(text).is_some()
}

/// `text` as DynamoDB takes a number, by its value (so that `1`, `1.0` and `10e-1` are one, as
/// in a number set), or `None` when it does not take it: an optional sign, digits with at most
/// one point, an optional exponent, nothing around it (no spaces, no `NaN`, no `Infinity`), at
/// most 38 significant digits, and a magnitude of 0 or from 1E-130 to below 1E+126 (its
/// documented limits; a zero's exponent is held to the same range, as the engine holds it).
/// The value is its sign, its significant digits and the power of ten of the first of them.
fn dynamodb_number(text: &str) -> Option<(bool, String, i128)> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(unsigned) => (true, unsigned),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => {
            let digits = exponent.strip_prefix(['-', '+']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (mantissa, exponent)
        }
        None => (unsigned, "0"),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = [whole, fraction].concat();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // In i128: an exponent near i64's bounds plus the digits' count does not overflow it.
    let exponent = exponent.parse::<i128>().ok()?;
    let significant = digits.trim_start_matches('0').trim_end_matches('0');
    if significant.is_empty() {
        return (-130..=125)
            .contains(&exponent)
            .then(|| (false, String::new(), 0));
    }
    if significant.len() > 38 {
        return None;
    }
    let leading_zeros = digits.len() - digits.trim_start_matches('0').len();
    let magnitude = exponent + whole.len() as i128 - 1 - leading_zeros as i128;
    (-130..=125)
        .contains(&magnitude)
        .then(|| (negative, significant.to_owned(), magnitude))
}

/// An item in DynamoDB JSON, the wire form an export line holds.
pub fn item_to_json(item: &Item) -> Value {
    let mut sorted: Vec<_> = item.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    Value::Object(
        sorted
            .into_iter()
            .map(|(name, value)| (name.clone(), value_to_json(value)))
            .collect(),
    )
}

fn value_to_json(value: &AttributeValue) -> Value {
    match value {
        AttributeValue::S(s) => json!({ "S": s }),
        AttributeValue::N(n) => json!({ "N": n }),
        AttributeValue::B(b) => json!({ "B": BASE64.encode(b.as_ref()) }),
        AttributeValue::Bool(b) => json!({ "BOOL": b }),
        AttributeValue::Null(b) => json!({ "NULL": b }),
        AttributeValue::Ss(set) => json!({ "SS": set }),
        AttributeValue::Ns(set) => json!({ "NS": set }),
        AttributeValue::Bs(set) => {
            json!({ "BS": set.iter().map(|b| BASE64.encode(b.as_ref())).collect::<Vec<_>>() })
        }
        AttributeValue::L(list) => {
            json!({ "L": list.iter().map(value_to_json).collect::<Vec<_>>() })
        }
        AttributeValue::M(map) => json!({ "M": item_to_json(map) }),
        other => unreachable!("an attribute type this SDK does not know: {other:?}"),
    }
}

/// An item from DynamoDB JSON.
pub fn item_from_json(value: &Value) -> Result<Item, String> {
    let map = value.as_object().ok_or("an item is not a JSON object")?;
    map.iter()
        .map(|(name, value)| Ok((name.clone(), value_from_json(value)?)))
        .collect()
}

fn value_from_json(value: &Value) -> Result<AttributeValue, String> {
    let object: &Map<String, Value> = value.as_object().ok_or("an attribute is not an object")?;
    let (kind, inner) = match (object.len(), object.iter().next()) {
        (1, Some(pair)) => pair,
        _ => return Err("an attribute has not exactly one type".into()),
    };
    let text = || {
        inner
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("{kind} is not a string"))
    };
    let texts = || -> Result<Vec<String>, String> {
        inner
            .as_array()
            .ok_or_else(|| format!("{kind} is not a list"))?
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("{kind} holds a non-string"))
            })
            .collect()
    };
    let bytes = |s: String| {
        BASE64
            .decode(s)
            .map(Blob::new)
            .map_err(|e| format!("{kind} is not base64: {e}"))
    };
    Ok(match kind.as_str() {
        "S" => AttributeValue::S(text()?),
        "N" => AttributeValue::N(text()?),
        "B" => AttributeValue::B(bytes(text()?)?),
        "BOOL" => AttributeValue::Bool(inner.as_bool().ok_or("BOOL is not a boolean")?),
        "NULL" => AttributeValue::Null(inner.as_bool().ok_or("NULL is not a boolean")?),
        "SS" => AttributeValue::Ss(texts()?),
        "NS" => AttributeValue::Ns(texts()?),
        "BS" => AttributeValue::Bs(texts()?.into_iter().map(bytes).collect::<Result<_, _>>()?),
        "L" => AttributeValue::L(
            inner
                .as_array()
                .ok_or("L is not a list")?
                .iter()
                .map(value_from_json)
                .collect::<Result<_, _>>()?,
        ),
        "M" => AttributeValue::M(item_from_json(inner)?),
        other => return Err(format!("unknown attribute type {other}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loads_items_are_taken_from_its_files_in_turn() {
        let dir = std::env::temp_dir().join(format!("singlet-in-turn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, pks: &[&str]| {
            let path = dir.join(name);
            let lines: String = pks
                .iter()
                .map(|pk| {
                    format!("{{\"Item\":{{\"PK\":{{\"S\":\"{pk}\"}},\"SK\":{{\"S\":\"x\"}}}}}}\n")
                })
                .collect();
            std::fs::write(&path, lines).unwrap();
            path
        };
        let files = [file("a.json", &["a1", "a2", "a3"]), file("b.json", &["b1"])];
        let read: Vec<String> = InTurn::new(&files)
            .map(|item| item.unwrap()["PK"].as_s().unwrap().clone())
            .collect();
        assert_eq!(read, ["a1", "b1", "a2", "a3"]);
        let missing = [dir.join("missing.json")];
        assert!(InTurn::new(&missing).next().unwrap().is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_attribute_type_round_trips_through_dynamodb_json() {
        let item: Item = HashMap::from([
            ("s".into(), AttributeValue::S("ada".into())),
            ("n".into(), AttributeValue::N("1.5".into())),
            ("b".into(), AttributeValue::B(Blob::new(vec![0, 1, 255]))),
            ("t".into(), AttributeValue::Bool(true)),
            ("z".into(), AttributeValue::Null(true)),
            (
                "ss".into(),
                AttributeValue::Ss(vec!["a".into(), "b".into()]),
            ),
            ("ns".into(), AttributeValue::Ns(vec!["1".into()])),
            ("bs".into(), AttributeValue::Bs(vec![Blob::new(vec![7])])),
            (
                "l".into(),
                AttributeValue::L(vec![AttributeValue::S("x".into())]),
            ),
            (
                "m".into(),
                AttributeValue::M(HashMap::from([("k".into(), AttributeValue::N("2".into()))])),
            ),
        ]);
        let json = item_to_json(&item);
        assert_eq!(json["s"], json!({"S": "ada"}));
        assert_eq!(json["b"], json!({"B": "AAH/"}));
        assert_eq!(item_from_json(&json).unwrap(), item);
    }

    #[test]
    fn a_number_is_one_dynamodb_takes() {
        for good in [
            "0",
            "-0",
            "12",
            "+12",
            "-1.5",
            ".5",
            "5.",
            "1e3",
            "1E-3",
            "0.000",
            "0e125",
            "1e125",
            "9.9999999999999999999999999999999999999E+125",
            "1E-130",
            "0.001e-127",
            "12345678901234567890123456789012345678",
            "1000000000000000000000000000000000000000",
        ] {
            assert!(is_dynamodb_number(good), "{good}");
        }
        for bad in [
            "",
            " 12",
            "12 ",
            "-",
            ".",
            "e3",
            "1e",
            "1e+",
            "1.2.3",
            "NaN",
            "inf",
            "Infinity",
            "0x10",
            "1_000",
            "1e126",
            "10e125",
            "1E-131",
            "0.1e-130",
            "0e126",
            "0e-131",
            "0.0e-200",
            "11e9223372036854775807",
            "0.1e-9223372036854775808",
            "1e99999999999999999999999999999999999999999",
            "123456789012345678901234567890123456789",
        ] {
            assert!(!is_dynamodb_number(bad), "{bad}");
        }
        // One value however it is written: a number set holding two spellings of it is refused.
        for (a, b) in [
            ("1", "1.0"),
            ("1", "10e-1"),
            ("0", "-0"),
            ("10", "1e1"),
            ("-2", "-2.00"),
        ] {
            assert_eq!(dynamodb_number(a), dynamodb_number(b), "{a} {b}");
        }
        assert_ne!(dynamodb_number("1"), dynamodb_number("-1"));
        assert_ne!(dynamodb_number("1"), dynamodb_number("10"));
        let set = AttributeValue::Ns(vec!["1".into(), "1.0".into()]);
        assert!(unwritable(&set).is_some());
    }

    #[test]
    fn a_malformed_attribute_is_refused_with_its_reason() {
        assert!(
            item_from_json(&json!({"a": {"S": 1}}))
                .unwrap_err()
                .contains("S is not a string")
        );
        assert!(
            item_from_json(&json!({"a": {"X": "1"}}))
                .unwrap_err()
                .contains("unknown")
        );
        assert!(item_from_json(&json!({"a": {"S": "1", "N": "1"}})).is_err());
    }
}
