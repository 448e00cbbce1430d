//! The connection chain every command that touches a table goes through: the engine (embedded,
//! or external with `--endpoint`), the table made or refused when missing, the context the
//! handlers and tools take, with the keys this run signs and keys under; and the guard against
//! keying a deployed table's items under the runner's published secret.

use super::runner::RunnerArgs;
use singlet::serve::engine;
use singlet_functions::Ctx;
use singlet_functions::cursor::{CursorKeys, MIN_KEY_LEN};
use singlet_functions::table::{add_missing_indexes, ensure_table};
use std::net::{Ipv4Addr, SocketAddr};

/// The engine (embedded, or external with `--endpoint`), the table created when missing. The
/// embedded engine's endpoint is served on `serve_engine_on` when given (the runner serving the
/// API; its URL is returned too), else on a free loopback port that only this process uses.
pub async fn connect(
    args: &RunnerArgs,
    serve_engine_on: Option<SocketAddr>,
) -> Result<(Ctx, Option<String>), String> {
    let (ctx, served, _, _) = connect_engine(args, serve_engine_on, Missing::Create).await?;
    Ok((ctx, served))
}

/// What to do when the table is missing.
#[derive(Clone, Copy)]
pub enum Missing {
    /// Create it (the runner, `seed`, `import`, `load`, `invoke`).
    Create,
    /// Refuse, naming the command: a tool that reads a table (`fsck`, `export`, `migrate`) would
    /// otherwise make an empty one from a mistyped `--data` or `--table` and find it clean.
    Refuse(&'static str),
}

/// [`connect`] to a table that must be there already, for the command `verb`.
pub async fn connect_existing(args: &RunnerArgs, verb: &'static str) -> Result<Ctx, String> {
    // An in-memory engine starts empty and is gone when the command ends: there would be
    // nothing to read, and `fsck` would call the empty table clean.
    if args.in_memory && args.endpoint.is_none() {
        return Err(format!(
            "--in-memory is an empty table that no one else can reach: there is nothing to \
             {verb}; name the table with --data or --endpoint"
        ));
    }
    if args.endpoint.is_none() && !args.data.exists() {
        return Err(format!(
            "there is no data file {} to {verb}: `--data` names one that the runner, `seed`, \
             `import` or `load` made",
            args.data.display()
        ));
    }
    Ok(
        connect_engine_for(args, None, Missing::Refuse(verb), Budget::BulkWork)
            .await?
            .0,
    )
}

/// [`connect`] for a tool that writes the table in bulk (`import`, `load`, `seed`): its calls
/// get the tools' budget ([`engine::bulk_timeouts`]), not the API's.
pub async fn connect_for_bulk_work(args: &RunnerArgs) -> Result<(Ctx, Option<String>), String> {
    let (ctx, served, _, _) =
        connect_engine_for(args, None, Missing::Create, Budget::BulkWork).await?;
    Ok((ctx, served))
}

/// How long each call to the engine may take.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Budget {
    /// The API's: a request a person waits on ([`singlet_functions::context::timeouts`]).
    Api,
    /// The operator tools': a page or a batch of a bulk run ([`engine::bulk_timeouts`]).
    BulkWork,
}

/// A client for a table on AWS, for `export --s3` and `load --s3`, whose work DynamoDB does:
/// `--endpoint` when given, else DynamoDB in the environment's region with its credentials
/// (variables, profile, role). No engine is opened: the embedded one has no export to S3.
pub async fn aws_client(args: &RunnerArgs) -> Result<aws_sdk_dynamodb::Client, String> {
    if let Some(endpoint) = &args.endpoint {
        return engine::external_client(endpoint).await;
    }
    let client = singlet_functions::context::client_from_env(None).await;
    if client.config().region().is_none() {
        return Err(
            "no AWS region: --s3 works on a table on AWS; set AWS_REGION (or a profile's \
             region), or name the table's --endpoint"
                .into(),
        );
    }
    Ok(client)
}

/// [`connect`], with the embedded engine itself when there is one (for its TTL sweep), and the
/// endpoint the runner's own clients use (dynoxide's, not its door's).
pub async fn connect_engine(
    args: &RunnerArgs,
    serve_engine_on: Option<SocketAddr>,
    missing: Missing,
) -> Result<(Ctx, Option<String>, Option<dynoxide::Database>, String), String> {
    connect_engine_for(args, serve_engine_on, missing, Budget::Api).await
}

/// [`connect_engine`], each call of its client within `budget`, from the first (`DescribeTable`).
async fn connect_engine_for(
    args: &RunnerArgs,
    serve_engine_on: Option<SocketAddr>,
    missing: Missing,
    budget: Budget,
) -> Result<(Ctx, Option<String>, Option<dynoxide::Database>, String), String> {
    let mut served = None;
    let mut embedded = None;
    let clock = singlet_functions::clock::Clock::system();
    let (client, endpoint) = match &args.endpoint {
        Some(endpoint) => (engine::external_client(endpoint).await?, endpoint.clone()),
        None => {
            let data = (!args.in_memory).then_some(args.data.as_path());
            let (client, endpoint, db) = match serve_engine_on {
                // dynoxide on a loopback port browsers refuse, for the runner's own clients;
                // other programs reach it through the door on `addr`.
                Some(addr) => {
                    let (client, endpoint, db, refused_by_browsers) =
                        engine::start_out_of_browsers_reach(data, &clock).await?;
                    if refused_by_browsers {
                        tracing::info!(own_endpoint = %endpoint, "dynoxide's own endpoint, for the runner's clients, on a port browsers refuse");
                    } else {
                        tracing::warn!(own_endpoint = %endpoint, "every port browsers refuse is taken: dynoxide's own endpoint, for the runner's clients, is on one a web page could reach");
                    }
                    let door = singlet::serve::engine_door::serve(endpoint.clone(), addr).await?;
                    tracing::info!(endpoint = %door, "the embedded engine's DynamoDB endpoint");
                    served = Some(door);
                    (client, endpoint, db)
                }
                None => {
                    let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
                    engine::start_with_clock(data, loopback, &clock).await?
                }
            };
            embedded = Some(db);
            (client, endpoint)
        }
    };
    let client = match budget {
        Budget::Api => client,
        Budget::BulkWork => engine::for_bulk_work(&client),
    };
    let mut ctx = table_ready(args, client, &endpoint, missing).await?;
    ctx.clock = clock;
    Ok((ctx, served, embedded, endpoint))
}

/// [`connect`] to the embedded engine `db`, opened by the caller (which keeps it for its bulk
/// path), served on a free loopback port.
pub async fn connect_to(
    args: &RunnerArgs,
    db: dynoxide::Database,
) -> Result<(Ctx, Option<String>), String> {
    let endpoint = engine::serve(db, SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).await?;
    let client = engine::local_client(&endpoint);
    Ok((
        table_ready(args, client, &endpoint, Missing::Create).await?,
        None,
    ))
}

/// The context over `client`, its table created when missing unless `missing` refuses (and given
/// missing indexes on the embedded engine).
async fn table_ready(
    args: &RunnerArgs,
    client: aws_sdk_dynamodb::Client,
    endpoint: &str,
    missing: Missing,
) -> Result<Ctx, String> {
    if let Missing::Refuse(verb) = missing {
        let exists = singlet_functions::table::table_exists(&client, &args.table)
            .await
            .map_err(|e| engine::sdk_error("cannot describe the table", endpoint, &e))?;
        if !exists {
            // The embedded engine's endpoint is a port of this run only: name its file instead.
            // (An in-memory engine is never asked: `connect_existing` refuses one.)
            let place = match &args.endpoint {
                Some(_) => format!("at {endpoint}"),
                None => format!("in {}", args.data.display()),
            };
            return Err(format!(
                "there is no table {} to {verb} {place}: `--table` names it",
                args.table
            ));
        }
    }
    if ensure_table(&client, &args.table)
        .await
        .map_err(|e| engine::sdk_error("cannot create the table", endpoint, &e))?
    {
        tracing::info!(table = %args.table, "created the table");
    } else if args.endpoint.is_none() {
        // The embedded engine's table may come from an older singlet: give it the new indexes.
        // An external table is left as its owner (a template, a team) made it.
        let added = add_missing_indexes(&client, &args.table)
            .await
            .map_err(|e| {
                engine::sdk_error("cannot add the table's missing indexes", endpoint, &e)
            })?;
        if !added.is_empty() {
            tracing::info!(table = %args.table, indexes = ?added, "added the indexes the table lacked");
        }
    }
    let mut ctx = Ctx::new(client, args.table.clone(), cursor_keys()?);
    ctx.loan_history_days = args.loan_history_days;
    // The API's owner key, when it has one (a table whose secret was rotated: `fsck`, `import`).
    match std::env::var(singlet_functions::context::OWNER_KEY_VAR) {
        Ok(owner_key) if !owner_key.is_empty() => ctx.with_owner_key(&owner_key),
        _ => Ok(ctx),
    }
}

/// Refuses to work on a table that is not on this machine under the runner's published secret
/// when none of `keys` is set: a deployed table's API signs cursors, derives ids and keys
/// subjects' one-account locks under its own secret (a Lambda refuses the published one), so
/// under the published secret cursors anyone could forge would be signed, and locks would sit
/// where the API never looks, leaving each subject free to open a second account and each such
/// account undeletable. `why` says what there is to key. A malformed endpoint passes, to be told
/// as such when the command connects.
pub fn refuse_the_published_secret_elsewhere(
    runner: &RunnerArgs,
    why: &str,
    keys: &[&str],
) -> Result<(), String> {
    let Some(endpoint) = runner
        .endpoint
        .as_deref()
        .filter(|endpoint| engine::is_remote_endpoint(endpoint))
    else {
        return Ok(());
    };
    let set = |name: &&str| std::env::var_os(name).is_some_and(|value| !value.is_empty());
    if keys.iter().any(set) {
        return Ok(());
    }
    Err(format!(
        "{why}, which the API at {endpoint} does under its own {}, and this run has none: \
         under the runner's published secret, which no Lambda accepts, they would not be the \
         API's. Set CURSOR_KEY (and OWNER_KEY, if the API's secret has one) as the API has them \
         (for an engine of your own on another host, CURSOR_KEY set to the runner's published \
         secret says so): nothing was written",
        keys.join(" or ")
    ))
}

/// [`refuse_the_published_secret_elsewhere`] for a command that runs the API's handlers
/// (serving, `seed`, `invoke`), which sign cursors with `CURSOR_KEY`.
pub fn refuse_handlers_elsewhere(runner: &RunnerArgs) -> Result<(), String> {
    refuse_the_published_secret_elsewhere(
        runner,
        "the API's handlers sign cursors, derive ids and key owner locks",
        &["CURSOR_KEY"],
    )
}

/// What [`refuse_the_published_secret_elsewhere`] needs set to key subjects' one-account locks.
pub const OWNER_KEYS: &[&str] = &["CURSOR_KEY", singlet_functions::context::OWNER_KEY_VAR];

/// `CURSOR_KEY` (and its rotation) when set, else the published local secret.
fn cursor_keys() -> Result<CursorKeys, String> {
    if std::env::var_os("CURSOR_KEY").is_none() {
        return Ok(CursorKeys::new(singlet_functions::cursor::LOCAL_SECRET));
    }
    CursorKeys::from_env().map_err(|reason| format!("{reason} (at least {MIN_KEY_LEN} bytes)"))
}
