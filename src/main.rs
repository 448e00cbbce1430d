//! `cargo run`: singlet's API on 127.0.0.1:3000 over an embedded DynamoDB engine whose data
//! lives under `.singlet/` and whose own endpoint is 127.0.0.1:8000.

use clap::{Parser, Subcommand};
use singlet::{engine, front_door, invoke};
use singlet_functions::paging::CursorKey;
use singlet_functions::{Ctx, lambda::init_tracing_to, table::ensure_table};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

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
    #[arg(long, default_value_t = 3000)]
    port: u16,
    /// The embedded engine's DynamoDB endpoint port on 127.0.0.1.
    #[arg(long, default_value_t = 8000)]
    engine_port: u16,
    /// How often `mark-overdue` runs, in seconds (0: never), as its EventBridge schedule does.
    #[arg(long, default_value_t = 900)]
    mark_overdue_every: u64,
}

#[derive(clap::Args)]
struct EngineArgs {
    /// Where the embedded engine keeps its data.
    #[arg(
        long,
        default_value = ".singlet/singlet.db",
        conflicts_with = "in_memory"
    )]
    data: PathBuf,
    /// Keep the embedded engine's data in memory only.
    #[arg(long)]
    in_memory: bool,
    /// An external DynamoDB endpoint instead of the embedded engine.
    #[arg(long, env = "AWS_ENDPOINT_URL_DYNAMODB")]
    endpoint: Option<String>,
    /// The table's name.
    #[arg(long, env = "TABLE_NAME", default_value = singlet_shared::schema::DEFAULT_TABLE_NAME)]
    table: String,
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
    /// Fill every domain that has no data with a realistic data set, through the real handlers.
    Seed,
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
    let ctx = connect(&cli.engine, serve_engine.then_some(cli.engine_port)).await?;
    match cli.command {
        Some(Command::Invoke { function, event }) => {
            let event = std::fs::read_to_string(&event)
                .map_err(|e| format!("cannot read {}: {e}", event.display()))?;
            let response = invoke::invoke(&ctx, &function, &event).await?;
            println!("{}", serde_json::to_string_pretty(&response).expect("JSON"));
            Ok(())
        }
        Some(Command::Seed) => singlet::console::seed_cli(ctx).await,
        None => {
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, cli.port));
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
            tracing::info!(api = %format!("http://{addr}"), "singlet is serving");
            if cli.mark_overdue_every > 0 {
                let every = std::time::Duration::from_secs(cli.mark_overdue_every);
                tokio::spawn(invoke::schedule_mark_overdue(ctx.clone(), every));
            }
            tokio::select! {
                served = front_door::serve(listener, ctx) => served.map_err(|e| e.to_string()),
                _ = tokio::signal::ctrl_c() => Ok(()),
            }
        }
    }
}

/// The engine (embedded, or external with `--endpoint`), the table created when missing.
async fn connect(args: &EngineArgs, engine_port: Option<u16>) -> Result<Ctx, String> {
    let client = match &args.endpoint {
        Some(endpoint) => singlet_functions::db::client_from_env(Some(endpoint)).await,
        None => {
            let db = engine::open((!args.in_memory).then_some(args.data.as_path()))?;
            let port = engine_port.unwrap_or(0);
            let endpoint = engine::serve(db, SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await?;
            if engine_port.is_some() {
                tracing::info!(%endpoint, "the embedded engine's DynamoDB endpoint");
            }
            engine::local_client(&endpoint)
        }
    };
    if ensure_table(&client, &args.table)
        .await
        .map_err(|e| format!("cannot create the table: {e}"))?
    {
        tracing::info!(table = %args.table, "created the table");
    }
    Ok(Ctx::new(client, args.table.clone(), CursorKey::from_env()))
}
