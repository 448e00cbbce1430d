//! The DynamoDB engine the runner talks to: dynoxide embedded in this process and served on a
//! loopback port (so the AWS CLI and GUIs can look at the table too), or an external endpoint.

use crate::serve::retention::EngineClock;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use dynoxide::Database;
use singlet_functions::clock::Clock;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Opens the embedded engine: a SQLite file, or memory when `data` is `None`.
pub fn open(data: Option<&Path>) -> Result<Database, String> {
    open_with_clock(data, &Clock::system())
}

/// [`open`], the engine reading its time (TTL sweeps, stream records) from `clock`. dynoxide
/// takes a clock for an in-memory database only: a file's engine reads the system's, which is
/// the runner's too unless a test moved it.
pub fn open_with_clock(data: Option<&Path>, clock: &Clock) -> Result<Database, String> {
    match data {
        Some(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                singlet_tools::files::create_private_dir(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            // Made here when new, its owner's alone: SQLite gives its `-wal` and `-shm` files
            // the database file's mode.
            if !path.exists() {
                singlet_tools::files::create_private_file(path)
                    .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            }
            let path = path.to_str().ok_or("the data path is not UTF-8")?;
            index_the_stream(path)?;
            Database::new(path).map_err(|e| format!("cannot open {path}: {e}"))
        }
        None => {
            let db = Database::memory_with_clock(Arc::new(EngineClock(clock.clone())))
                .map_err(|e| format!("cannot open an in-memory engine: {e}"))?;
            // An in-memory engine is reached through dynoxide alone: it is restored from an
            // empty file that has the indexes (SQLite's backup copies them too). The file is made
            // new under a name no one can guess (`O_EXCL`, `0600`): a file another local user
            // planted under a predictable name would be what the table started with.
            let empty = tempfile::Builder::new()
                .prefix("singlet-engine-")
                .suffix(".sqlite")
                .tempfile()
                .map_err(|e| format!("cannot make the in-memory engine's first file: {e}"))?;
            let restored = (|| {
                let path = empty
                    .path()
                    .to_str()
                    .ok_or("the temporary directory is not UTF-8")?;
                index_the_stream(path)?;
                db.restore_from(path)
                    .map_err(|e| format!("cannot start the in-memory engine from {path}: {e}"))
            })();
            for leftover in ["-wal", "-shm", "-journal"] {
                let _ = std::fs::remove_file(format!("{}{leftover}", empty.path().display()));
            }
            restored.map(|()| db)
        }
    }
}

/// The indexes dynoxide's (3.2) stream statements need and it does not make. It keeps every
/// stream record, never trimmed, in one table with no index on its position, so each write's next
/// sequence number (`MAX(CAST(sequence_number AS INTEGER)) … WHERE table_name = ?`) and each
/// `GetRecords` (`… WHERE table_name = ? AND shard_id = ? AND CAST(sequence_number AS INTEGER) > ?
/// ORDER BY …`) read the whole table: a write and a read slowed with every record the stream
/// held (docs/guide/events.md, "How long an event takes"). SQLite uses an index on an expression only for
/// the very same expression, hence the `CAST` spelled as dynoxide spells it.
const STREAM_INDEXES: &str = "
    CREATE INDEX IF NOT EXISTS singlet_stream_next
        ON _stream_records (table_name, CAST(sequence_number AS INTEGER));
    CREATE INDEX IF NOT EXISTS singlet_stream_read
        ON _stream_records (table_name, shard_id, CAST(sequence_number AS INTEGER));";

/// Adds `STREAM_INDEXES` to the engine's SQLite file at `path` (kept: `IF NOT EXISTS`),
/// made first by dynoxide, which makes its tables on opening a file, when it is new.
pub fn index_the_stream(path: &str) -> Result<(), String> {
    drop(Database::new(path).map_err(|e| format!("cannot open {path}: {e}"))?);
    rusqlite::Connection::open(path)
        .and_then(|sqlite| sqlite.execute_batch(STREAM_INDEXES))
        .map_err(|e| format!("cannot index the stream records in {path}: {e}"))
}

/// Serves `db`'s DynamoDB endpoint on `addr` in the background; returns its URL.
pub async fn serve(db: Database, addr: SocketAddr) -> Result<String, String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| listen_error(addr, &e, "--engine-port"))?;
    serve_on(db, listener, &Clock::system())
}

/// Serves `db` on `listener`: behind the per-key limits (`partition_limits`), judged on `clock`,
/// unless `--partition-limits off` turned them off.
fn serve_on(db: Database, listener: TcpListener, clock: &Clock) -> Result<String, String> {
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let endpoint = format!("http://{addr}");
    if crate::serve::partition_limits::enabled() {
        crate::serve::partition_limits::serve(db, listener, &endpoint, clock)?;
    } else {
        tokio::spawn(dynoxide::server::serve_on(listener, db));
    }
    Ok(endpoint)
}

pub use super::loopback::listen_out_of_browsers_reach;

/// [`start_with_clock`] on a loopback port out of browsers' reach
/// ([`listen_out_of_browsers_reach`]), for the engine the runner serves through its door. The
/// last value says whether the port is one browsers refuse.
pub async fn start_out_of_browsers_reach(
    data: Option<&Path>,
    clock: &Clock,
) -> Result<(Client, String, Database, bool), String> {
    let (listener, refused_by_browsers) = listen_out_of_browsers_reach()?;
    let (client, endpoint, db) = start_on(data, listener, clock)?;
    Ok((client, endpoint, db, refused_by_browsers))
}

/// The one way the runner, the tests and the benches start an engine: dynoxide with its data in
/// `data` (or memory), served on `addr`, and a client for it. Returns the client and the
/// engine's endpoint URL.
pub async fn start(data: Option<&Path>, addr: SocketAddr) -> Result<(Client, String), String> {
    let (client, endpoint, _) = start_with_clock(data, addr, &Clock::system()).await?;
    Ok((client, endpoint))
}

/// [`start`] on `clock`, handing back the engine itself too (to sweep its TTL: the runner's
/// `--ttl-sweep-every`, a test's sweep).
pub async fn start_with_clock(
    data: Option<&Path>,
    addr: SocketAddr,
    clock: &Clock,
) -> Result<(Client, String, Database), String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| listen_error(addr, &e, "--engine-port"))?;
    start_on(data, listener, clock)
}

/// The engine with its data in `data` (or memory) on `clock`, served on `listener`, and a client
/// for it: what [`start_with_clock`] and [`start_out_of_browsers_reach`] share.
fn start_on(
    data: Option<&Path>,
    listener: TcpListener,
    clock: &Clock,
) -> Result<(Client, String, Database), String> {
    let db = open_with_clock(data, clock)?;
    let endpoint = serve_on(db.clone(), listener, clock)?;
    Ok((local_client(&endpoint), endpoint, db))
}

/// An in-memory engine on a free loopback port, its table created: for tests and benches.
pub async fn start_in_memory(table: &str) -> (Client, String) {
    let (client, endpoint, _) = start_in_memory_with_clock(table, &Clock::system()).await;
    (client, endpoint)
}

/// [`start_in_memory`] on `clock`, with the engine itself: a test that moves `clock` moves the
/// engine's TTL and stream times with it, and sweeps the engine when it chooses.
pub async fn start_in_memory_with_clock(table: &str, clock: &Clock) -> (Client, String, Database) {
    let (client, endpoint, db) =
        start_with_clock(None, SocketAddr::from(([127, 0, 0, 1], 0)), clock)
            .await
            .expect("an in-memory engine starts");
    singlet_functions::table::ensure_table(&client, table)
        .await
        .expect("the table is created");
    (client, endpoint, db)
}

/// Why the runner cannot listen on `addr`, naming the option that moves it when the port is
/// taken (most often by another runner, or by DynamoDB Local on 8000).
pub fn listen_error(addr: SocketAddr, error: &std::io::Error, option: &str) -> String {
    if error.kind() == std::io::ErrorKind::AddrInUse {
        format!(
            "cannot listen on {addr}: the port is in use (another singlet?); `{option} <port>` \
             moves it, `{option} 0` takes any free port"
        )
    } else {
        format!("cannot listen on {addr}: {error}")
    }
}

/// The region a local engine is given when the environment names none (any region does).
pub const LOCAL_REGION: &str = "us-east-1";

/// A client for an external engine at `endpoint` (`--endpoint`). On a loopback address (DynamoDB
/// Local, LocalStack, moto, another runner's engine) a machine with no AWS configuration at all
/// gets local credentials and region, as any of those engines accepts, rather than the SDK's
/// search of every credential provider and a failed request; the environment's credentials
/// and region are used when it has them. Elsewhere, the standard AWS configuration.
pub async fn external_client(endpoint: &str) -> Result<Client, String> {
    let host = endpoint_host(endpoint)?;
    let loopback = is_loopback(&host);
    if loopback && !aws_credentials_configured() {
        return Ok(local_client_in(endpoint, env_region()));
    }
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .http_client(singlet_functions::context::https_client())
        .timeout_config(singlet_functions::context::timeouts())
        .retry_config(singlet_functions::context::retries());
    if loopback {
        // Without this the SDK would ask the EC2 instance metadata service, and wait for it.
        let region = match env_region() {
            Some(region) => Some(region),
            None => {
                use aws_config::meta::region::ProvideRegion;
                aws_config::profile::ProfileFileRegionProvider::new()
                    .region()
                    .await
                    .map(|r| r.to_string())
            }
        };
        loader = loader.region(Region::new(region.unwrap_or_else(|| LOCAL_REGION.into())));
    }
    let config = aws_sdk_dynamodb::config::Builder::from(&loader.load().await)
        .interceptor(crate::serve::iam::Enforce)
        .build();
    Ok(Client::from_conf(config))
}

/// The host of an `http://` or `https://` URL, or why `endpoint` is none.
fn endpoint_host(endpoint: &str) -> Result<String, String> {
    let bad = |why: &str| {
        format!("--endpoint {endpoint:?} is not a URL such as http://127.0.0.1:8000: {why}")
    };
    let uri: lambda_http::http::Uri = endpoint.parse().map_err(|e| bad(&format!("{e}")))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => return Err(bad(&format!("the scheme is {other}, not http or https"))),
        None => return Err(bad("it has no scheme (http://)")),
    }
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| bad("it has no host"))?;
    Ok(host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned())
}

/// Whether `endpoint` is a well-formed URL whose host is not this machine's (a table in AWS, an
/// engine on another host): a malformed one is neither, and is told as such when connecting.
pub fn is_remote_endpoint(endpoint: &str) -> bool {
    endpoint_host(endpoint).is_ok_and(|host| !is_loopback(&host))
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether the environment gives the SDK credentials somewhere: variables, a profile, a
/// container or web identity, or the shared files. (On an EC2 instance with a role and none of
/// these, a loopback engine gets local credentials, which is what it needs.)
fn aws_credentials_configured() -> bool {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    if [
        "AWS_ACCESS_KEY_ID",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ]
    .iter()
    .any(|name| set(name))
    {
        return true;
    }
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let file = |var: &str, default: &str| {
        std::env::var_os(var)
            .map(std::path::PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(default)))
    };
    file("AWS_SHARED_CREDENTIALS_FILE", "credentials").is_some_and(|f| f.is_file())
}

/// `AWS_REGION`, else `AWS_DEFAULT_REGION` (the AWS CLI v1 reads only the latter).
fn env_region() -> Option<String> {
    ["AWS_REGION", "AWS_DEFAULT_REGION"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
}

/// An SDK error as a sentence: what failed, at which endpoint, and the whole chain of causes
/// (`dispatch failure: io error: ... Connection refused`, a TLS failure, the service's message),
/// never the bare `unhandled error` its `Display` stops at.
pub fn sdk_error(what: &str, endpoint: &str, error: &(dyn std::error::Error + 'static)) -> String {
    let chain = cause_chain(error);
    let lower = chain.to_ascii_lowercase();
    let hint = if lower.contains("connection refused") {
        " (nothing listens there: start the engine, or check the port)"
    } else if lower.contains("dns error") || lower.contains("failed to lookup address") {
        " (the host name does not resolve)"
    } else if lower.contains("timeout") || lower.contains("timed out") {
        " (the engine did not answer in time)"
    } else {
        ""
    };
    format!("{what} at {endpoint}{hint}: {chain}")
}

/// `error` and each of its sources, joined by `: `, each said once (a wrapper often repeats
/// its source's message).
pub fn cause_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut said: Vec<String> = Vec::new();
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        let message = e.to_string();
        if !said.iter().any(|s| s.contains(&message)) {
            said.push(message);
        }
        cause = e.source();
    }
    said.join(": ")
}

/// A client for a local engine at `endpoint`: fixed local credentials and region, the SDK's
/// real HTTP stack, and the timeouts and retries the Lambdas use.
pub fn local_client(endpoint: &str) -> Client {
    local_client_in(endpoint, None)
}

/// [`local_client`] in `region` (else [`LOCAL_REGION`]): DynamoDB Local keeps each region's
/// tables apart, so the AWS CLI, started with the same region, sees the same tables.
fn local_client_in(endpoint: &str, region: Option<String>) -> Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new(region.unwrap_or_else(|| LOCAL_REGION.into())))
        .credentials_provider(local_credentials())
        .http_client(singlet_functions::context::https_client())
        .timeout_config(singlet_functions::context::timeouts())
        .retry_config(singlet_functions::context::retries())
        .interceptor(crate::serve::iam::Enforce)
        .build();
    Client::from_conf(config)
}

/// The operator tools' budget for each engine call, which the tools library defines for the
/// runner's commands and the stack's tools functions alike.
pub use singlet_tools::budget::{BULK_ATTEMPT_BUDGET, bulk_timeouts, for_bulk_work};

/// A DynamoDB Streams client beside `db`, on the same `endpoint` and in `db`'s region, with
/// credentials found the way [`external_client`] finds them (local ones for a loopback engine on
/// a machine with no AWS configuration), so the stream is read where the table is: DynamoDB
/// Local keeps each region's tables and streams apart. The embedded engine serves
/// `DynamoDBStreams_20120810` on its own endpoint, as DynamoDB Local and LocalStack do. Runner
/// only: the Lambda binary never links this SDK.
pub async fn streams_client(db: &Client, endpoint: &str) -> aws_sdk_dynamodbstreams::Client {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(db.config().region().cloned())
        .http_client(singlet_functions::context::https_client())
        .timeout_config(singlet_functions::context::timeouts())
        .retry_config(singlet_functions::context::retries());
    let loopback = endpoint_host(endpoint).is_ok_and(|host| is_loopback(&host));
    if loopback && !aws_credentials_configured() {
        loader = loader.credentials_provider(local_credentials());
    }
    aws_sdk_dynamodbstreams::Client::new(&loader.load().await)
}

/// The fixed credentials every local engine accepts.
fn local_credentials() -> Credentials {
    Credentials::new("local", "local", None, None, "singlet-local")
}

/// The embedded engine's bulk path, for `load` ([`singlet_tools::transfer::Target::Bulk`]): one
/// `import_items` call, off the async threads (the engine's call blocks).
pub struct Bulk(pub dynoxide::Database);

impl singlet_tools::transfer::BulkWriter for Bulk {
    fn write<'a>(
        &'a self,
        table: &'a str,
        items: Vec<singlet_tools::transfer::Item>,
        on_the_stream: bool,
    ) -> futures::future::BoxFuture<'a, Result<u64, String>> {
        Box::pin(async move {
            let items = items
                .iter()
                .map(|item| serde_json::from_value(singlet_tools::transfer::item_to_json(item)))
                .collect::<Result<Vec<dynoxide::types::Item>, _>>()
                .map_err(|e| format!("an item the engine cannot read: {e}"))?;
            let (db, table) = (self.0.clone(), table.to_owned());
            let imported = tokio::task::spawn_blocking(move || {
                let options = dynoxide::ImportOptions {
                    record_streams: on_the_stream,
                    ..Default::default()
                };
                db.import_items(&table, items, options)
            })
            .await
            .map_err(|e| format!("the bulk write stopped: {e}"))?
            .map_err(|e| format!("the engine refused the bulk write: {e}"))?;
            Ok(imported.items_imported as u64)
        })
    }
}
