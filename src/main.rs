//! `cargo run`: singlet's API on 127.0.0.1:3000 over an embedded DynamoDB engine whose data
//! lives under `.singlet/` and whose own endpoint is 127.0.0.1:8000.

use clap::{Parser, Subcommand};
use singlet::auth::Authorizer;
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
use std::sync::Arc;

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
    #[command(flatten)]
    tokens: TokenArgs,
    #[command(flatten)]
    events: singlet::events_args::EventsArgs,
}

/// Whose tokens the runner accepts: its own (signed with a key under `--key-dir`), or another
/// issuer's (`--jwks`, `--issuer`, `--audience`, all three).
#[derive(clap::Args)]
struct TokenArgs {
    /// Where the runner's own token-signing key is made on first use.
    #[arg(long, default_value = ".singlet", global = true)]
    key_dir: PathBuf,
    /// Trust this issuer's JWKS file instead of the runner's own key.
    #[arg(long, requires_all = ["issuer", "audience"], global = true)]
    jwks: Option<PathBuf>,
    /// The trusted issuer's `iss`.
    #[arg(long, requires = "jwks", global = true)]
    issuer: Option<String>,
    /// The `aud` its tokens must carry.
    #[arg(long, requires = "jwks", global = true)]
    audience: Option<String>,
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
    /// Print a bearer token that a runner started in this directory accepts.
    Token {
        /// The token's subject (`sub`).
        #[arg(long, default_value = "local-user")]
        sub: String,
        /// Space-separated scopes, such as "fleet:write library:staff".
        #[arg(long, default_value = "")]
        scope: String,
        /// Another claim, `name=value` (such as `patron_id=<id>`); repeatable.
        #[arg(long, value_parser = parse_claim)]
        claim: Vec<(String, String)>,
        /// Seconds the token stays valid.
        #[arg(long, default_value_t = 3600)]
        ttl: i64,
    },
    /// Fill every domain that has no data with a realistic data set, through the real handlers.
    Seed,
}

fn parse_claim(raw: &str) -> Result<(String, String), String> {
    raw.split_once('=')
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .ok_or_else(|| format!("{raw:?} is not name=value"))
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
    match cli.command {
        Some(Command::Token {
            sub,
            scope,
            claim,
            ttl,
        }) => {
            let (_, issuer) = Authorizer::local(&cli.tokens.key_dir)?;
            let extra = claim
                .into_iter()
                .map(|(name, value)| (name, value.into()))
                .collect();
            println!("{}", issuer.mint(&sub, &scope, &extra, ttl));
            Ok(())
        }
        Some(Command::Invoke { function, event }) => {
            let (ctx, _) = connect(&cli.engine, false).await?;
            let ctx = ctx.with_bus(Arc::new(cli.events.bus()?));
            let event = std::fs::read_to_string(&event)
                .map_err(|e| format!("cannot read {}: {e}", event.display()))?;
            let response = invoke::invoke(&ctx, &function, &event).await?;
            println!("{}", serde_json::to_string_pretty(&response).expect("JSON"));
            Ok(())
        }
        Some(Command::Seed) => {
            let gateway = gateway(&cli.tokens, connect(&cli.engine, false).await?.0)?;
            let ctx = gateway.ctx.clone();
            singlet::console::seed_cli(front_door::app(gateway), ctx).await
        }
        None => {
            let (ctx, endpoint) = connect(&cli.engine, true).await?;
            // An external engine may serve no streams (moto): the API is served all the same.
            let embedded = cli.engine.endpoint.is_none();
            match cli.events.start(ctx.clone(), &endpoint, embedded).await {
                Ok(source) => {
                    tokio::spawn(source.run());
                }
                Err(error) => tracing::warn!(error, "no domain events: the stream cannot be read"),
            }
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, cli.port));
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
            // The bound address, so that `--port 0` (a port the system picks) is told too.
            let addr = listener
                .local_addr()
                .map_err(|e| format!("cannot read the listening address: {e}"))?;
            tracing::info!(api = %format!("http://{addr}"), "singlet is serving");
            if cli.mark_overdue_every > 0 {
                let every = std::time::Duration::from_secs(cli.mark_overdue_every);
                tokio::spawn(invoke::schedule(ctx.clone(), every));
            }
            let gateway = gateway(&cli.tokens, ctx)?;
            tokio::select! {
                served = front_door::serve(listener, gateway) => served.map_err(|e| e.to_string()),
                _ = tokio::signal::ctrl_c() => Ok(()),
            }
        }
    }
}

/// The front door's context and authorizer: the runner's own issuer (which the console mints
/// with), or the other issuer `--jwks` names.
fn gateway(tokens: &TokenArgs, ctx: Ctx) -> Result<front_door::Gateway, String> {
    let (authorizer, issuer) = match (&tokens.jwks, &tokens.issuer, &tokens.audience) {
        (Some(jwks), Some(issuer), Some(audience)) => {
            (Authorizer::from_jwks(jwks, issuer, audience)?, None)
        }
        _ => {
            let (authorizer, issuer) = Authorizer::local(&tokens.key_dir)?;
            (authorizer, Some(Arc::new(issuer)))
        }
    };
    Ok(front_door::Gateway {
        ctx,
        authorizer: Arc::new(authorizer),
        issuer,
    })
}

/// The engine (embedded, or external with `--endpoint`), the table created when missing. The
/// embedded engine's endpoint is served on its fixed port only when the runner serves the API.
/// Returns the context and the engine's endpoint.
async fn connect(args: &EngineArgs, serve_engine: bool) -> Result<(Ctx, String), String> {
    let (client, endpoint) = match &args.endpoint {
        Some(endpoint) => (
            singlet_functions::context::client_from_env(Some(endpoint)).await,
            endpoint.clone(),
        ),
        None => {
            let port = if serve_engine { args.engine_port } else { 0 };
            let data = (!args.in_memory).then_some(args.data.as_path());
            let (client, endpoint) =
                engine::start(data, SocketAddr::from((args.engine_host, port))).await?;
            if serve_engine {
                tracing::info!(%endpoint, "the embedded engine's DynamoDB endpoint");
            }
            (client, endpoint)
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
    Ok((
        Ctx::new(client, args.table.clone(), cursor_keys()?),
        endpoint,
    ))
}

/// `CURSOR_KEY` (and its rotation) when set, else the published local secret.
fn cursor_keys() -> Result<CursorKeys, String> {
    if std::env::var_os("CURSOR_KEY").is_none() {
        return Ok(CursorKeys::new(singlet::LOCAL_SECRET));
    }
    CursorKeys::from_env().map_err(|reason| format!("{reason} (at least {MIN_KEY_LEN} bytes)"))
}
