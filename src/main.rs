//! `cargo run`: singlet's API on 127.0.0.1:3000 over an embedded DynamoDB engine whose data
//! lives under `.singlet/` and whose own endpoint is 127.0.0.1:8000.
//!
//! The command line has two kinds of options. The runner's (which engine and table, where the
//! token key lives, how to log: [`RunnerArgs`]) are accepted before or after any subcommand. The
//! rest belong to one command each: serving ([`ServeArgs`], no subcommand) or a subcommand's
//! own struct, so that `singlet <command> --help` lists only what that command takes. A new
//! subcommand is one more [`Command`] variant with its own `Args` struct and one more arm in
//! [`run`].

use clap::{Args, Parser, Subcommand};
use singlet::auth::Authorizer;
use singlet::local_bus::LocalBus;
use singlet::logging::{self, LogFormat};
use singlet::retention::DirArchive;
use singlet::{engine, front_door, invoke, migrate, transfer};
use singlet_functions::Ctx;
use singlet_functions::cursor::{CursorKeys, MIN_KEY_LEN};
use singlet_functions::table::{add_missing_indexes, ensure_table};
use std::io::{IsTerminal, Read};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
#[command(
    version,
    about = "singlet's local runner: the API over an embedded DynamoDB engine",
    after_help = "Without a command it serves the API. `singlet <command> --help` shows a \
                  command's own options; the runner options go before or after it."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    runner: RunnerArgs,
    #[command(flatten)]
    serve: ServeArgs,
}

/// The options every command takes, before or after its name (`global`): the engine and table
/// it works on, the token key, and the logs.
#[derive(Args)]
#[command(next_help_heading = "Runner options (before or after a command)")]
struct RunnerArgs {
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
    /// An external DynamoDB endpoint instead of the embedded engine (on a loopback address, local
    /// credentials and region are used when the environment has none).
    #[arg(long, env = "AWS_ENDPOINT_URL_DYNAMODB", global = true)]
    endpoint: Option<String>,
    /// The table's name.
    #[arg(long, env = "TABLE_NAME", default_value = singlet_shared::schema::DEFAULT_TABLE_NAME, global = true, value_parser = parse_table_name)]
    table: String,
    /// Where the runner's own token-signing key is made on first use.
    #[arg(long, default_value = ".singlet", global = true)]
    key_dir: PathBuf,
    /// `human` lines or `json` objects on standard error; `auto`: human on a terminal.
    #[arg(long, value_enum, default_value_t = LogFormat::Auto, global = true)]
    log_format: LogFormat,
    /// The events file: every published event, one line of JSON each, as an EventBridge rule
    /// target receives it (serving, and `invoke publish-events`).
    #[arg(long, default_value = ".singlet/events.jsonl", global = true)]
    events_out: PathBuf,
    /// How long a returned loan stays in its patron's history, in days, before it expires
    /// (the template's `LoanHistoryDays`).
    #[arg(long, default_value_t = singlet_functions::context::DEFAULT_LOAN_HISTORY_DAYS,
          value_parser = parse_loan_history_days, global = true)]
    loan_history_days: i64,
    /// The archive of what TTL deleted: one file per deleted item, named by its stream record's
    /// `eventID`, each one line of the export format (serving, and `invoke publish-events`).
    #[arg(long, default_value = ".singlet/archive", global = true)]
    archive_dir: PathBuf,
    /// DynamoDB's per-key limits on the embedded engine (1,000 write and 3,000 read units a
    /// second per partition key value, of the table and each index), for every client.
    #[arg(long, value_enum, default_value = "on", global = true)]
    partition_limits: singlet::partition_limits::Switch,
}

/// Serving the API (no command).
#[derive(Args)]
#[command(next_help_heading = "Serving (without a command)")]
struct ServeArgs {
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
    events: singlet::events_args::EventsArgs,
}

/// Another issuer whose tokens the runner accepts instead of its own: all three, or none.
#[derive(Args)]
struct IssuerArgs {
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

#[derive(Subcommand)]
enum Command {
    /// Run one function once on one event file and print its response.
    Invoke(InvokeArgs),
    /// Print a bearer token that a runner started in this directory accepts.
    Token(TokenArgs),
    /// Fill every domain that has no data with a realistic data set, through the real handlers.
    Seed,
    /// Load a file of rows (JSON Lines, or CSV with a header) as the create routes would write
    /// them; refused rows go to `<file>.rejects.jsonl` (exit 1 when there are some).
    Import(ImportArgs),
    /// Write the table in DynamoDB's export format (`<dir>/data/*.json.gz`, `manifest-summary.json`).
    Export(ExportArgs),
    /// Write an export into an empty table (a table that holds items is refused), every item but
    /// the outbox's: those are events the exported table published, and would be published again.
    Load(LoadArgs),
    /// List the migrations and their state, or run one: `migrate vehicles-by-depot`.
    Migrate(MigrateArgs),
    /// Check every rule that spans items, and repair what can be (exit 0 clean, 1 findings, 2
    /// could not run).
    Fsck(singlet::fsck::Args),
    /// Render template.yaml's functions and Cargo.toml's watch router from the route table
    /// (exit 0 written or already current; with --check, 1 when a file differs).
    Render(RenderArgs),
}

#[derive(Args)]
struct RenderArgs {
    /// Write nothing: exit 1 when a file differs from its rendering.
    #[arg(long)]
    check: bool,
    /// The repository's root, where template.yaml and Cargo.toml are.
    #[arg(long, default_value = ".")]
    root: PathBuf,
}

#[derive(Args)]
struct ImportArgs {
    /// What the rows are: vehicles, accounts, branches, patrons, books or copies.
    kind: String,
    /// JSON Lines (`.jsonl`), or CSV (`.csv`) with a header row naming the fields.
    file: PathBuf,
    /// Write units per second, at most.
    #[arg(long)]
    max_wcu: Option<f64>,
    /// Print one JSON summary on standard output.
    #[arg(long)]
    json: bool,
    /// The time the rows are created at (ISO-8601; default: now). Two runs of one file with one
    /// `--clock` write the very same items.
    #[arg(long, value_parser = parse_clock)]
    clock: Option<time::OffsetDateTime>,
    /// Rows per transaction, at most.
    #[arg(long, hide = true, default_value_t = singlet::import::MAX_ACTIONS)]
    rows_per_transaction: usize,
    /// Stop as if killed once this many rows were created (for testing a second run).
    #[arg(long, hide = true)]
    stop_after: Option<u64>,
}

#[derive(Args)]
struct ExportArgs {
    /// An empty or new directory.
    dir: PathBuf,
    /// Parallel `Scan` segments, one data file each (1 to 1024).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    segments: u32,
    /// Replace personal data (emails, names, phone numbers, addresses, card numbers, plates,
    /// chassis numbers), one value always by one replacement, locks re-keyed to match.
    #[arg(long)]
    anonymise: bool,
    /// Print one JSON summary on standard output.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct LoadArgs {
    /// A directory an `export` (or DynamoDB's `ExportTableToPointInTime`) wrote.
    dir: PathBuf,
    /// Print one JSON summary on standard output.
    #[arg(long)]
    json: bool,
    /// Load the outbox items too, so that the copy's publisher publishes their events (again,
    /// for those the exported table published): for a restore whose table is gone with events
    /// it never published.
    #[arg(long)]
    keep_outbox: bool,
    /// Where to write subjects' one-account locks: `rekeyed`, where this run's key puts them
    /// (`OWNER_KEY`, else `CURSOR_KEY`, else the runner's published secret), as the copy's API
    /// looks for them; `as-exported`, at their keys in the export (a restore into the table's own
    /// stack). Default: rekeyed into an engine on this machine, as exported into any other.
    #[arg(long, value_enum)]
    owner_locks: Option<OwnerLocks>,
}

/// `load --owner-locks`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OwnerLocks {
    Rekeyed,
    AsExported,
}

#[derive(Args)]
struct MigrateArgs {
    /// The migration to run; without one, list them.
    name: Option<String>,
    /// Plan every item and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Parallel `Scan` segments (1 to 1024).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    segments: u32,
    /// Write units per second, at most.
    #[arg(long)]
    max_wcu: Option<f64>,
    /// Items per `Scan` page, at most: a checkpoint after each page.
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..))]
    page_size: Option<i32>,
    /// Print one JSON object on standard output.
    #[arg(long)]
    json: bool,
    /// Stop as if killed after this many writes (for testing resumption).
    #[arg(long, hide = true)]
    stop_after: Option<u64>,
}

#[derive(Args)]
struct InvokeArgs {
    /// The function's name, as in template.yaml (`register-vehicle`, ...).
    #[arg(required_unless_present = "list")]
    function: Option<String>,
    /// An event file, such as events/register-vehicle.json; `-` reads standard input.
    #[arg(long, required_unless_present = "list")]
    event: Option<PathBuf>,
    /// List the functions (each one's route or schedule) instead.
    #[arg(long, conflicts_with_all = ["function", "event"])]
    list: bool,
    /// Run the function as if its clock read this time (ISO-8601, such as
    /// 2026-12-29T09:00:00Z): a loan checked out is due from then; a scheduled function's event
    /// fires then (its `time` is this), so `mark-overdue` marks what is due by then. Local only:
    /// nothing sets a function's clock on Lambda.
    #[arg(long, value_parser = parse_clock)]
    clock: Option<time::OffsetDateTime>,
}

#[derive(Args)]
struct TokenArgs {
    /// The token's subject (`sub`).
    #[arg(long, default_value = "local-user")]
    sub: String,
    /// Space-separated scopes, such as "fleet:write library:staff" (without it, the token is
    /// `403` on every route).
    #[arg(long, default_value = "")]
    scope: String,
    /// Another claim, `name=value` (such as `patron_id=<id>`), or a default one replaced
    /// (`nbf=soon` makes a malformed token; `scope=` leaves `scope` out); repeatable. A whole
    /// number given to `exp`, `nbf` or `iat` is a number, anything else a string.
    #[arg(long, value_parser = parse_claim)]
    claim: Vec<(String, serde_json::Value)>,
    /// Seconds the token stays valid.
    #[arg(long, default_value_t = 3600)]
    ttl: i64,
}

fn parse_clock(raw: &str) -> Result<time::OffsetDateTime, String> {
    singlet_functions::clock::settable(raw)
}

fn parse_loan_history_days(raw: &str) -> Result<i64, String> {
    singlet_functions::context::parse_loan_history_days(raw)
}

/// A name DynamoDB takes for a table: 3 to 255 letters, digits, `_`, `-` and `.`, or a table's
/// ARN (`arn:aws:dynamodb:<region>:<account>:table/<name>`, another account's table on an
/// external endpoint); told before any engine is opened, not as the engine's validation error.
fn parse_table_name(raw: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    // arn:<partition>:dynamodb:<region>:<12-digit account>:table/<name>
    let name = match raw.split(':').collect::<Vec<_>>()[..] {
        ["arn", partition, "dynamodb", region, account, resource]
            if partition.starts_with("aws")
                && !region.is_empty()
                && account.len() == 12
                && account.bytes().all(|b| b.is_ascii_digit()) =>
        {
            resource.strip_prefix("table/").unwrap_or_default()
        }
        _ => raw,
    };
    if (3..=255).contains(&name.len()) && name.chars().all(allowed) {
        Ok(raw.to_owned())
    } else {
        Err(format!(
            "{raw:?} is not a table name: 3 to 255 letters, digits, _, - and . (or a table's ARN)"
        ))
    }
}

fn parse_claim(raw: &str) -> Result<(String, serde_json::Value), String> {
    let (name, value) = raw
        .split_once('=')
        .ok_or_else(|| format!("{raw:?} is not name=value"))?;
    if name.trim().is_empty() {
        return Err(format!("{raw:?} names no claim: name=value"));
    }
    let value = match (name, value.parse::<i64>()) {
        ("exp" | "nbf" | "iat", Ok(seconds)) => seconds.into(),
        _ => value.into(),
    };
    Ok((name.to_owned(), value))
}

/// How often the scheduled `function` runs on AWS, in seconds (0 if there is no such function).
fn schedule_seconds(function: &str) -> u64 {
    singlet_functions::routes::scheduled(function)
        .map_or(0, |scheduled| u64::from(scheduled.every_minutes) * 60)
}

/// What a command that could not run exits with (clap's usage errors too); `1` is left to a
/// command that ran and has something to report.
const COULD_NOT_RUN: u8 = 2;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let human = logging::init(cli.runner.log_format);
    singlet::partition_limits::set(cli.runner.partition_limits);
    match run(cli, human).await {
        Ok(code) => code,
        Err(e) => {
            if !human {
                tracing::error!(error = %e, "singlet stopped");
            }
            // Said plainly too: whoever reads a failed command's output is most often a person.
            eprintln!("error: {e}");
            ExitCode::from(COULD_NOT_RUN)
        }
    }
}

async fn run(cli: Cli, human: bool) -> Result<ExitCode, String> {
    let runner = &cli.runner;
    if runner.table.starts_with("arn:") && runner.endpoint.is_none() {
        return Err(format!(
            "--table {} is a table in AWS: name its --endpoint too (the embedded engine's \
             tables have plain names)",
            runner.table
        ));
    }
    match cli.command {
        Some(Command::Token(args)) => token(runner, args),
        Some(Command::Invoke(args)) => {
            let (Some(function), Some(event)) = (args.function, args.event) else {
                print!("{}", invoke::list());
                return Ok(ExitCode::SUCCESS);
            };
            // The name first: a typo is told before any engine is opened.
            invoke::check_function(&function)?;
            refuse_handlers_elsewhere(runner)?;
            let mut event = read_event(&event)?;
            let (mut ctx, _) = connect(runner, None).await?;
            if let Some(at) = args.clock {
                ctx.clock = singlet_functions::clock::Clock::reading(at);
                event = invoke::fired_at(&function, event, at)?;
            }
            let ctx = ctx
                .with_bus(Arc::new(LocalBus::open(&runner.events_out)?))
                .with_archive(Arc::new(DirArchive::open(&runner.archive_dir)?));
            let response = invoke::invoke(&ctx, &function, &event).await?;
            println!("{}", serde_json::to_string_pretty(&response).expect("JSON"));
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Seed) => {
            refuse_handlers_elsewhere(runner)?;
            let (authorizer, issuer) = Authorizer::local(&runner.key_dir)?;
            let gateway = front_door::Gateway {
                ctx: connect(runner, None).await?.0,
                authorizer: Arc::new(authorizer),
                issuer: Some(Arc::new(issuer)),
            };
            singlet::console::seed_cli(gateway).await?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Import(args)) => import(runner, args).await,
        Some(Command::Export(args)) => export(runner, args).await,
        Some(Command::Load(args)) => load(runner, args).await,
        Some(Command::Migrate(args)) => migrate_command(runner, args).await,
        Some(Command::Fsck(args)) => Ok(match connect_existing(runner, "check").await {
            Ok(ctx) => singlet::fsck::cli(&ctx, &args).await,
            Err(reason) => singlet::fsck::could_not_run(&reason),
        }),
        Some(Command::Render(args)) => singlet::render::cli(&args.root, args.check),
        None => serve(runner, &cli.serve, human)
            .await
            .map(|()| ExitCode::SUCCESS),
    }
}

fn token(runner: &RunnerArgs, args: TokenArgs) -> Result<ExitCode, String> {
    let (_, issuer) = Authorizer::local(&runner.key_dir)?;
    let scoped = !args.scope.trim().is_empty()
        || args
            .claim
            .iter()
            .any(|(name, _)| name == "scope" || name == "scp");
    if !scoped {
        eprintln!(
            "warning: this token has no scope, so every route answers it 403. Give --scope with \
             one or more of:\n  {}\n(each route's scopes: README, \"Authentication\")",
            singlet_functions::routes::all_scopes().join(" ")
        );
    }
    let extra = args.claim.into_iter().collect();
    println!("{}", issuer.mint(&args.sub, &args.scope, &extra, args.ttl));
    Ok(ExitCode::SUCCESS)
}

/// `import`: a file of rows; `1` when some were refused.
async fn import(runner: &RunnerArgs, args: ImportArgs) -> Result<ExitCode, String> {
    // The kind and the limit first: a typo is told before any engine is opened.
    let kind = singlet::import::Kind::parse(&args.kind)?;
    if args.max_wcu.is_some_and(|max| max.is_nan() || max <= 0.0) {
        return Err("--max-wcu must be more than 0".into());
    }
    if !args.file.exists() {
        return Err(format!("{} does not exist", args.file.display()));
    }
    if !args.file.is_file() {
        return Err(format!("{} is not a file", args.file.display()));
    }
    // Told before any row is written: a rejects file that cannot be written would otherwise
    // stop an import that has created its rows, and exit 2 would not mean "nothing written".
    let rejects = singlet::import::rejects_path(&args.file);
    if rejects.exists() && !rejects.is_file() {
        return Err(format!(
            "{} is in the way of the rejects file: it is not a file",
            rejects.display()
        ));
    }
    if kind == singlet::import::Kind::Accounts {
        refuse_the_published_secret_elsewhere(
            runner,
            "an accounts import keys owners' one-account locks",
            OWNER_KEYS,
        )?;
    }
    let (ctx, _) = connect(runner, None).await?;
    let options = singlet::import::Options {
        max_wcu: args.max_wcu,
        at: args.clock.unwrap_or_else(singlet_functions::clock::now),
        rows_per_transaction: args.rows_per_transaction,
        in_flight: singlet::import::IN_FLIGHT,
        stop_after: args.stop_after,
        progress: true,
    };
    let summary = singlet::import::run(&ctx, kind, &args.file, &options).await?;
    if summary.stopped {
        return Ok(ExitCode::from(1));
    }
    if args.json {
        println!("{}", serde_json::to_string(&summary).expect("JSON"));
    } else {
        eprintln!(
            "read {}, created {}, rejected {}, already imported {}",
            summary.read, summary.created, summary.rejected, summary.already_imported
        );
        if summary.rejected > 0 {
            eprintln!("the rejected rows: {}", summary.rejects.display());
        }
    }
    Ok(if summary.rejected == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `export`: the whole table in DynamoDB's export format.
async fn export(runner: &RunnerArgs, args: ExportArgs) -> Result<ExitCode, String> {
    let ctx = connect_existing(runner, "export").await?;
    let anonymiser = match args.anonymise {
        true => Some(
            singlet::anonymise::Anonymiser::random()
                .with_owners_of(&ctx.db, &ctx.table)
                .await?,
        ),
        false => None,
    };
    let transform = |item| match &anonymiser {
        Some(anonymiser) => anonymiser.item(item),
        None => item,
    };
    // Stopped with Ctrl-C, the export is dropped, and removes what it wrote.
    let export = transfer::export(&ctx.db, &ctx.table, &args.dir, args.segments, &transform);
    let exported = tokio::select! {
        exported = export => exported?,
        _ = tokio::signal::ctrl_c() => {
            return Err(format!(
                "interrupted: the part of the export written in {} was removed",
                args.dir.display()
            ));
        }
    };
    if args.json {
        println!(
            "{}",
            serde_json::json!({"exported": exported.items, "files": exported.files.len()})
        );
    } else {
        eprintln!(
            "exported {} items to {}",
            exported.items,
            args.dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `load`: an export into an empty table; into the embedded engine by its bulk path.
async fn load(runner: &RunnerArgs, args: LoadArgs) -> Result<ExitCode, String> {
    // The whole export read first: a bad one is told before any engine or data file is made.
    let export = transfer::check(&args.dir)?;
    let rekeyed = args.owner_locks.map_or_else(
        || transfer::rekeys_by_default(runner.endpoint.as_deref()),
        |locks| locks == OwnerLocks::Rekeyed,
    );
    if rekeyed && export.owner_locks() > 0 {
        refuse_the_published_secret_elsewhere(
            runner,
            "--owner-locks rekeyed keys subjects' one-account locks",
            OWNER_KEYS,
        )?;
    }
    let embedded = match &runner.endpoint {
        Some(_) => None,
        None => Some(engine::open(
            (!runner.in_memory).then_some(runner.data.as_path()),
        )?),
    };
    let (ctx, _) = match &embedded {
        Some(db) => connect_to(runner, db.clone()).await?,
        None => connect(runner, None).await?,
    };
    let target = match &embedded {
        Some(db) => transfer::Target::Embedded(db),
        None => transfer::Target::Api,
    };
    let owner_locks = if rekeyed {
        transfer::OwnerLockKeys::Under(&ctx.owners)
    } else {
        transfer::OwnerLockKeys::AsExported
    };
    let outbox = if args.keep_outbox {
        transfer::Outbox::Keep
    } else {
        transfer::Outbox::LeaveOut
    };
    let loaded = tokio::select! {
        loaded = transfer::load(&ctx.db, &ctx.table, &export, target, outbox, owner_locks) => loaded?,
        _ = tokio::signal::ctrl_c() => {
            return Err(format!(
                "interrupted: {} may hold part of the export; delete its items (or the table) \
                 and load again",
                ctx.table
            ));
        }
    };
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "loaded": loaded.items,
                "outboxLeftOut": loaded.outbox_left_out,
                "ownerLocksMoved": loaded.owner_locks_moved,
            })
        );
    } else {
        eprintln!("loaded {} items into {}", loaded.items, ctx.table);
        if loaded.owner_locks_moved > 0 {
            eprintln!(
                "wrote {} owner locks where this run's key puts them, the export's being keyed \
                 under another: the copy's API and fsck need this run's keys",
                loaded.owner_locks_moved
            );
        } else if !rekeyed && export.owner_locks() > 0 {
            eprintln!(
                "kept {} owner locks at their keys in the export, as for a restore into the \
                 table's own stack (--owner-locks rekeyed writes them where this run's key puts \
                 them)",
                export.owner_locks()
            );
        }
        if loaded.outbox_left_out > 0 {
            eprintln!(
                "left out {} outbox items: events the exported table published (loaded, they \
                 would be published again; --keep-outbox loads them)",
                loaded.outbox_left_out
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `migrate`: the migrations' states, or one run; `1` when conflicts were left as they were.
async fn migrate_command(runner: &RunnerArgs, args: MigrateArgs) -> Result<ExitCode, String> {
    use singlet_functions::migrations::{MIGRATIONS, by_name};
    // The name and the limits first: a typo is told before any engine is opened.
    let migration = match &args.name {
        None => None,
        Some(name) => Some(by_name(name).ok_or_else(|| {
            let known: Vec<&str> = MIGRATIONS.iter().map(|m| m.name).collect();
            format!(
                "no migration is called {name:?}; there are: {}",
                known.join(", ")
            )
        })?),
    };
    if args.max_wcu.is_some_and(|max| max.is_nan() || max <= 0.0) {
        return Err("--max-wcu must be more than 0".into());
    }
    let ctx = connect_existing(runner, "migrate").await?;
    let Some(migration) = migration else {
        let states = migrate::states(&ctx).await?;
        if args.json {
            println!("{}", serde_json::json!({ "migrations": states }));
        } else {
            let name_width = states.iter().map(|s| s.migration.len()).max().unwrap_or(0);
            let shown = |state: &migrate::State| match state.state {
                "conflicts" if state.conflicts == 1 => "1 conflict".to_owned(),
                "conflicts" => format!("{} conflicts", state.conflicts),
                other => other.to_owned(),
            };
            let state_width = states.iter().map(|s| shown(s).len()).max().unwrap_or(0);
            for state in &states {
                println!(
                    "{:<name_width$}  {:<state_width$}  {}",
                    state.migration,
                    shown(state),
                    state.summary
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    };
    let options = migrate::Options {
        segments: args.segments,
        max_wcu: args.max_wcu,
        dry_run: args.dry_run,
        page_size: args.page_size,
        stop_after: args.stop_after,
    };
    let report = migrate::run(&ctx, migration, &options).await?;
    if args.json {
        println!("{}", serde_json::to_string(&report).expect("JSON"));
    } else {
        eprintln!(
            "{}: scanned {}, {} {}, {} already changed by another writer, {} conflicts{}",
            report.migration,
            report.scanned,
            if report.dry_run {
                "would change"
            } else {
                "changed"
            },
            report.changed,
            report.already_changed,
            report.conflicts.len(),
            if report.complete { ", complete" } else { "" },
        );
        for conflict in &report.conflicts {
            eprintln!("conflict: {} ({})", conflict.pk, conflict.detail);
        }
    }
    Ok(if report.conflicts.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// An event file's text, or standard input's for `-`.
fn read_event(path: &std::path::Path) -> Result<String, String> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read the event from standard input: {e}"))?;
        return Ok(text);
    }
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// Serves the API; `human` logs on a terminal get the start-up banner too.
async fn serve(runner: &RunnerArgs, args: &ServeArgs, human: bool) -> Result<(), String> {
    refuse_handlers_elsewhere(runner)?;
    let engine_addr = SocketAddr::from((args.engine_host, args.engine_port));
    if !args.engine_host.is_loopback() {
        tracing::warn!(
            engine_host = %args.engine_host,
            "the engine's endpoint is open beyond this machine: it checks no credentials, so \
             anyone who can reach this address and port can read and write the table"
        );
    }
    let (ctx, engine_url, embedded_engine, endpoint) =
        connect_engine(runner, Some(engine_addr), Missing::Create).await?;
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
        Ok(source) => {
            tokio::spawn(source.run());
        }
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
    let console = (!args.no_console).then(|| singlet::console::url(&api));
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
        tokio::spawn(singlet::retention::sweep_every(db, every));
    }
    if args.mark_overdue_every > 0 {
        let every = std::time::Duration::from_secs(args.mark_overdue_every);
        tokio::spawn(invoke::schedule(ctx, every));
    }
    // The console is the runner's alone: mounted here, beside the front door's API.
    let app = if args.no_console {
        front_door::app_with_cors(gateway, &args.cors_origins)
    } else {
        singlet::console::mount(gateway, &args.cors_origins, Some(&runner.events_out))
    };
    tokio::select! {
        served = axum::serve(listener, app) => served.map_err(|e| e.to_string()),
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

/// The engine (embedded, or external with `--endpoint`), the table created when missing. The
/// embedded engine's endpoint is served on `serve_engine_on` when given (the runner serving the
/// API; its URL is returned too), else on a free loopback port that only this process uses.
async fn connect(
    args: &RunnerArgs,
    serve_engine_on: Option<SocketAddr>,
) -> Result<(Ctx, Option<String>), String> {
    let (ctx, served, _, _) = connect_engine(args, serve_engine_on, Missing::Create).await?;
    Ok((ctx, served))
}

/// What to do when the table is missing.
#[derive(Clone, Copy)]
enum Missing {
    /// Create it (the runner, `seed`, `import`, `load`, `invoke`).
    Create,
    /// Refuse, naming the command: a tool that reads a table (`fsck`, `export`, `migrate`) would
    /// otherwise make an empty one from a mistyped `--data` or `--table` and find it clean.
    Refuse(&'static str),
}

/// [`connect`] to a table that must be there already, for the command `verb`.
async fn connect_existing(args: &RunnerArgs, verb: &'static str) -> Result<Ctx, String> {
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
    Ok(connect_engine(args, None, Missing::Refuse(verb)).await?.0)
}

/// [`connect`], with the embedded engine itself when there is one (for its TTL sweep), and the
/// endpoint the runner's own clients use (dynoxide's, not its door's).
async fn connect_engine(
    args: &RunnerArgs,
    serve_engine_on: Option<SocketAddr>,
    missing: Missing,
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
                    let door = singlet::engine_door::serve(endpoint.clone(), addr).await?;
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
    let mut ctx = table_ready(args, client, &endpoint, missing).await?;
    ctx.clock = clock;
    Ok((ctx, served, embedded, endpoint))
}

/// [`connect`] to the embedded engine `db`, opened by the caller (which keeps it for its bulk
/// path), served on a free loopback port.
async fn connect_to(
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
fn refuse_the_published_secret_elsewhere(
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
fn refuse_handlers_elsewhere(runner: &RunnerArgs) -> Result<(), String> {
    refuse_the_published_secret_elsewhere(
        runner,
        "the API's handlers sign cursors, derive ids and key owner locks",
        &["CURSOR_KEY"],
    )
}

/// What [`refuse_the_published_secret_elsewhere`] needs set to key subjects' one-account locks.
const OWNER_KEYS: &[&str] = &["CURSOR_KEY", singlet_functions::context::OWNER_KEY_VAR];

/// `CURSOR_KEY` (and its rotation) when set, else the published local secret.
fn cursor_keys() -> Result<CursorKeys, String> {
    if std::env::var_os("CURSOR_KEY").is_none() {
        return Ok(CursorKeys::new(singlet::LOCAL_SECRET));
    }
    CursorKeys::from_env().map_err(|reason| format!("{reason} (at least {MIN_KEY_LEN} bytes)"))
}
