//! `singlet` without a command: the API served on 127.0.0.1:3000, the embedded engine's endpoint
//! on 127.0.0.1:8000, the table's stream played into the events file, the TTL sweep and the
//! overdue marker on their schedules, and the console at `/_console`.

use super::connect::{Missing, connect_engine, refuse_handlers_elsewhere};
use super::runner::RunnerArgs;
use clap::Args;
use singlet::serve::auth::Authorizer;
use singlet::serve::logging;
use singlet::serve::retention::DirArchive;
use singlet::serve::{engine, front_door};
use singlet::{console, invoke};
use singlet_functions::Ctx;
use std::io::IsTerminal;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

/// Serving the API (no command).
#[derive(Args)]
#[command(next_help_heading = "Serving (without a command)")]
pub struct ServeArgs {
    /// The API's port on 127.0.0.1 (0: one the system picks).
    #[arg(long, default_value_t = 3000)]
    port: u16,
    /// The embedded engine's DynamoDB endpoint port (0: one the system picks).
    #[arg(long, default_value_t = 8000)]
    engine_port: u16,
    /// The address the engine's endpoint binds: 0.0.0.0 lets a container started by
    /// `sam local invoke` reach it, and every other machine that can reach this one (the
    /// engine checks no credentials: the runner warns).
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    engine_host: IpAddr,
    /// How often `mark-overdue` runs, in seconds (0: never); by default as often as its
    /// EventBridge schedule (the route table's, rendered into template.yaml).
    #[arg(long, default_value_t = schedule_seconds("mark-overdue"))]
    mark_overdue_every: u64,
    /// How often the embedded engine's TTL sweep runs, in seconds (0: never): it deletes every
    /// item whose `expiresAt` has passed, as DynamoDB's TTL does in the background.
    #[arg(long, default_value_t = 60)]
    ttl_sweep_every: u64,
    /// A browser origin allowed to call the API (CORS), such as http://localhost:5173;
    /// repeatable. None by default, as the template's `CorsAllowedOrigins`.
    #[arg(long = "cors-origin", value_name = "ORIGIN", value_parser = front_door::parse_origin)]
    cors_origins: Vec<String>,
    /// Serve the API without the console at /_console.
    #[arg(long)]
    no_console: bool,
    #[command(flatten)]
    issuer: IssuerArgs,
    #[command(flatten)]
    events: singlet::serve::events_args::EventsArgs,
}

/// Another issuer whose tokens the runner accepts instead of its own: all three, or none.
#[derive(Args)]
pub struct IssuerArgs {
    /// Trust this issuer's JWKS file instead of the runner's own key.
    #[arg(long, requires_all = ["issuer", "audience"])]
    jwks: Option<PathBuf>,
    /// The trusted issuer's `iss`.
    #[arg(long, requires = "jwks")]
    issuer: Option<String>,
    /// The `aud` its tokens must carry.
    #[arg(long, requires = "jwks")]
    audience: Option<String>,
}

/// How often the scheduled `function` runs on AWS, in seconds (0 if there is no such function).
fn schedule_seconds(function: &str) -> u64 {
    singlet_functions::routes::scheduled(function)
        .map_or(0, |scheduled| u64::from(scheduled.every_minutes) * 60)
}

/// Serves the API; `human` logs on a terminal get the start-up banner too.
pub async fn run(runner: &RunnerArgs, args: &ServeArgs, human: bool) -> Result<(), String> {
    refuse_handlers_elsewhere(runner)?;
    let read_timeouts = singlet::serve::door_limits::ReadTimeouts::from_env()?;
    let engine_addr = SocketAddr::from((args.engine_host, args.engine_port));
    if !args.engine_host.is_loopback() {
        tracing::warn!(
            engine_host = %args.engine_host,
            "the engine's endpoint is open beyond this machine: it checks no credentials, so \
             anyone who can reach this address and port can read and write the table"
        );
    }
    // An events file that cannot be written safely is refused, not served without events.
    args.events.refuse_unsafe_files(&runner.events_out)?;
    let (ctx, engine_url, embedded_engine, endpoint) =
        connect_engine(runner, Some(engine_addr), Missing::Create).await?;
    // Part of an export is no table to serve: its missing halves would be 404s and broken
    // rules, and the API's writes would make it a table the export never was.
    singlet_tools::load_marker::refuse_unfinished(&ctx.db, &ctx.table).await?;
    // The mapping's checkpoint outlives the runner where the stream does: beside the engine's
    // data, or beside the events file for an external engine (whose stream it names).
    let position_file = match (&runner.endpoint, runner.in_memory) {
        (Some(_), _) => Some(runner.events_out.with_file_name("stream-position.json")),
        (None, false) => Some(runner.data.with_file_name("stream-position.json")),
        (None, true) => None,
    };
    // The table's stream, played as Lambda's event-source mapping feeds `publish-events`. An
    // external engine may serve no streams (moto): the API is served all the same.
    let archive = Arc::new(DirArchive::open(&runner.archive_dir)?);
    match args
        .events
        .start(
            ctx.clone().with_archive(archive),
            &runner.events_out,
            &endpoint,
            position_file,
        )
        .await
    {
        Ok(Some(source)) => {
            tokio::spawn(source.run());
        }
        Ok(None) => {}
        Err(error) => tracing::warn!(error, "no domain events: the stream cannot be read"),
    }
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| engine::listen_error(addr, &e, "--port"))?;
    // The bound address, so that `--port 0` (a port the system picks) is told too.
    let addr = listener
        .local_addr()
        .map_err(|e| format!("cannot read the listening address: {e}"))?;
    let api = format!("http://{addr}");
    // The console's URL holds its per-start secret: only who reads this output can use it.
    let console = (!args.no_console).then(|| console::url(&api));
    match &console {
        Some(console) => tracing::info!(%api, %console, "singlet is serving"),
        None => tracing::info!(%api, "singlet is serving"),
    }
    let gateway = gateway(&runner.key_dir, &args.issuer, ctx.clone())?;
    if human && std::io::stderr().is_terminal() {
        eprint!(
            "{}",
            logging::banner(&logging::Banner {
                api: &api,
                console: console.as_deref(),
                engine: engine_url.as_deref(),
                table: &runner.table,
                own_tokens: gateway.issuer.is_some(),
                key_dir: &runner.key_dir,
            })
        );
    }
    // An external engine's TTL is its own (DynamoDB's runs in the background).
    if let Some(db) = embedded_engine.filter(|_| args.ttl_sweep_every > 0) {
        let every = std::time::Duration::from_secs(args.ttl_sweep_every);
        tokio::spawn(singlet::serve::retention::sweep_every(db, every));
    }
    if args.mark_overdue_every > 0 {
        let every = std::time::Duration::from_secs(args.mark_overdue_every);
        tokio::spawn(invoke::schedule(ctx, every));
    }
    // The console is the runner's alone: mounted here, beside the front door's API.
    let app = if args.no_console {
        front_door::app_with_cors(gateway, &args.cors_origins)
    } else {
        console::mount(gateway, &args.cors_origins, Some(&runner.events_out))
    };
    tokio::select! {
        served = singlet::serve::door_limits::serve(listener, app, read_timeouts) => served.map_err(|e| e.to_string()),
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// The front door's context and authorizer: the runner's own issuer (which the console mints
/// with), or the other issuer `--jwks` names.
fn gateway(
    key_dir: &std::path::Path,
    other: &IssuerArgs,
    ctx: Ctx,
) -> Result<front_door::Gateway, String> {
    let (authorizer, issuer) = match (&other.jwks, &other.issuer, &other.audience) {
        (Some(jwks), Some(issuer), Some(audience)) => {
            (Authorizer::from_jwks(jwks, issuer, audience)?, None)
        }
        _ => {
            let (authorizer, issuer) = Authorizer::local(key_dir)?;
            (authorizer, Some(Arc::new(issuer)))
        }
    };
    Ok(front_door::Gateway {
        ctx,
        authorizer: Arc::new(authorizer),
        issuer,
    })
}
