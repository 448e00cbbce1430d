//! `cargo run`: singlet's API on 127.0.0.1:3000 over an embedded DynamoDB engine whose data
//! lives under `.singlet/` and whose own endpoint is 127.0.0.1:8000.

use clap::{Parser, Subcommand};
use singlet::{engine, front_door, invoke};
use singlet_functions::cursor::{CursorKeys, MIN_KEY_LEN};
use singlet_functions::{
    Ctx,
    lambda::init_tracing_to,
    table::{add_missing_indexes, ensure_table},
};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

/// Every option is accepted before or after a subcommand (`global`).
#[derive(Parser)]
#[command(
    version,
    about = "singlet's local runner: the API over an embedded DynamoDB engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    engine: EngineArgs,
    /// The API's port on 127.0.0.1.
    #[arg(long, default_value_t = 3000, global = true)]
    port: u16,
    /// How often `mark-overdue` runs, in seconds (0: never), as its EventBridge schedule does.
    #[arg(long, default_value_t = 900, global = true)]
    mark_overdue_every: u64,
}

#[derive(clap::Args)]
struct EngineArgs {
    /// Where the embedded engine keeps its data.
    #[arg(
        long,
        default_value = ".singlet/singlet.db",
        conflicts_with = "in_memory",
        global = true
    )]
    data: PathBuf,
    /// Keep the embedded engine's data in memory only.
    #[arg(long, global = true)]
    in_memory: bool,
    /// An external DynamoDB endpoint instead of the embedded engine.
    #[arg(long, env = "AWS_ENDPOINT_URL_DYNAMODB", global = true)]
    endpoint: Option<String>,
    /// The table's name.
    #[arg(long, env = "TABLE_NAME", default_value = singlet_shared::schema::DEFAULT_TABLE_NAME, global = true)]
    table: String,
    /// The embedded engine's DynamoDB endpoint port.
    #[arg(long, default_value_t = 8000, global = true)]
    engine_port: u16,
    /// The address the engine's endpoint binds: 0.0.0.0 lets a container started by
    /// `sam local invoke` reach it.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST), global = true)]
    engine_host: IpAddr,
}

#[derive(Subcommand)]
enum Command {
    /// Run one function once on one event file and print its response.
    Invoke {
        /// The function's name, as in template.yaml (`register-vehicle`, ...).
        function: String,
        /// An event file, such as events/register-vehicle.json.
        #[arg(long)]
        event: PathBuf,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    // The embedded engine logs every error answer it gives (each 409's failed condition) as a
    // warning: only its errors are news here.
    init_tracing_to(std::io::stderr, "info,dynoxide=error");
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "singlet stopped");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    let serve_engine = cli.command.is_none();
    let ctx = connect(&cli.engine, serve_engine).await?;
    match cli.command {
        Some(Command::Invoke { function, event }) => {
            let event = std::fs::read_to_string(&event)
                .map_err(|e| format!("cannot read {}: {e}", event.display()))?;
            let response = invoke::invoke(&ctx, &function, &event).await?;
            println!("{}", serde_json::to_string_pretty(&response).expect("JSON"));
            Ok(())
        }
        None => {
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, cli.port));
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
            tracing::info!(api = %format!("http://{addr}"), "singlet is serving");
            if cli.mark_overdue_every > 0 {
                let every = std::time::Duration::from_secs(cli.mark_overdue_every);
                tokio::spawn(invoke::schedule(ctx.clone(), every));
            }
            tokio::select! {
                served = front_door::serve(listener, ctx) => served.map_err(|e| e.to_string()),
                _ = tokio::signal::ctrl_c() => Ok(()),
            }
        }
    }
}

/// The engine (embedded, or external with `--endpoint`), the table created when missing. The
/// embedded engine's endpoint is served on its fixed port only when the runner serves the API.
async fn connect(args: &EngineArgs, serve_engine: bool) -> Result<Ctx, String> {
    let client = match &args.endpoint {
        Some(endpoint) => singlet_functions::context::client_from_env(Some(endpoint)).await,
        None => {
            let port = if serve_engine { args.engine_port } else { 0 };
            let data = (!args.in_memory).then_some(args.data.as_path());
            let (client, endpoint) =
                engine::start(data, SocketAddr::from((args.engine_host, port))).await?;
            if serve_engine {
                tracing::info!(%endpoint, "the embedded engine's DynamoDB endpoint");
            }
            client
        }
    };
    if ensure_table(&client, &args.table)
        .await
        .map_err(|e| format!("cannot create the table: {e}"))?
    {
        tracing::info!(table = %args.table, "created the table");
    } else if args.endpoint.is_none() {
        // The embedded engine's table may come from an older singlet: give it the new indexes.
        // An external table is left as its owner (a template, a team) made it.
        let added = add_missing_indexes(&client, &args.table)
            .await
            .map_err(|e| format!("cannot add the table's missing indexes: {e}"))?;
        if !added.is_empty() {
            tracing::info!(table = %args.table, indexes = ?added, "added the indexes the table lacked");
        }
    }
    Ok(Ctx::new(client, args.table.clone(), cursor_keys()?))
}

/// `CURSOR_KEY` (and its rotation) when set, else the published local secret.
fn cursor_keys() -> Result<CursorKeys, String> {
    if std::env::var_os("CURSOR_KEY").is_none() {
        return Ok(CursorKeys::new(singlet::LOCAL_SECRET));
    }
    CursorKeys::from_env().map_err(|reason| format!("{reason} (at least {MIN_KEY_LEN} bytes)"))
}
