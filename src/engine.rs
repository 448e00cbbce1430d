//! The DynamoDB engine the runner talks to: dynoxide embedded in this process and served on a
//! loopback port (so the AWS CLI and GUIs can look at the table too), or an external endpoint.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use dynoxide::Database;
use std::net::SocketAddr;
use std::path::Path;
use tokio::net::TcpListener;

/// Opens the embedded engine: a SQLite file, or memory when `data` is `None`.
pub fn open(data: Option<&Path>) -> Result<Database, String> {
    match data {
        Some(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            let path = path.to_str().ok_or("the data path is not UTF-8")?;
            Database::new(path).map_err(|e| format!("cannot open {path}: {e}"))
        }
        None => Database::memory().map_err(|e| format!("cannot open an in-memory engine: {e}")),
    }
}

/// Serves `db`'s DynamoDB endpoint on `addr` in the background; returns its URL.
pub async fn serve(db: Database, addr: SocketAddr) -> Result<String, String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(dynoxide::server::serve_on(listener, db));
    Ok(format!("http://{addr}"))
}

/// The one way the runner, the tests and the benches start an engine: dynoxide with its data in
/// `data` (or memory), served on `addr`, and a client for it. Returns the client and the
/// engine's endpoint URL.
pub async fn start(data: Option<&Path>, addr: SocketAddr) -> Result<(Client, String), String> {
    let db = open(data)?;
    let endpoint = serve(db, addr).await?;
    Ok((local_client(&endpoint), endpoint))
}

/// An in-memory engine on a free loopback port, its table created: for tests and benches.
pub async fn start_in_memory(table: &str) -> (Client, String) {
    let (client, endpoint) = start(None, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("an in-memory engine starts");
    singlet_functions::table::ensure_table(&client, table)
        .await
        .expect("the table is created");
    (client, endpoint)
}

/// A client for a local engine at `endpoint`: fixed local credentials and region, the SDK's
/// real HTTP stack, and the timeouts and retries the Lambdas use.
pub fn local_client(endpoint: &str) -> Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "local",
            "local",
            None,
            None,
            "singlet-local",
        ))
        .http_client(singlet_functions::context::https_client())
        .timeout_config(singlet_functions::context::timeouts())
        .retry_config(singlet_functions::context::retries())
        .build();
    Client::from_conf(config)
}

/// A DynamoDB Streams client for the engine at `endpoint`: the embedded engine serves
/// `DynamoDBStreams_20120810` on its own endpoint (as DynamoDB Local and LocalStack do), with the
/// fixed local credentials; an external engine with the standard AWS configuration. Runner only:
/// the Lambda binary never links this SDK.
pub async fn streams_client(endpoint: &str, embedded: bool) -> aws_sdk_dynamodbstreams::Client {
    use aws_sdk_dynamodbstreams::config::{BehaviorVersion, Credentials, Region};
    if !embedded {
        let config = aws_config::from_env()
            .endpoint_url(endpoint)
            .http_client(singlet_functions::context::https_client())
            .timeout_config(singlet_functions::context::timeouts())
            .retry_config(singlet_functions::context::retries())
            .load()
            .await;
        return aws_sdk_dynamodbstreams::Client::new(&config);
    }
    let config = aws_sdk_dynamodbstreams::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            "local",
            "local",
            None,
            None,
            "singlet-local",
        ))
        .http_client(singlet_functions::context::https_client())
        .timeout_config(singlet_functions::context::timeouts())
        .retry_config(singlet_functions::context::retries())
        .build();
    aws_sdk_dynamodbstreams::Client::from_conf(config)
}
