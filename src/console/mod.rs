//! The console, `http://127.0.0.1:3000/_console`: the local runner's teaching page (never
//! deployed). A person runs any access pattern and sees the HTTP request and answer, every
//! DynamoDB call the handler made (key, index, expressions, each part of a transaction, the
//! capacity each consumed, a cancelled transaction's reasons next to the field errors they
//! became), and the table grouped by partition with what the request added, changed or removed
//! highlighted. It races the contention patterns, runs `mark-overdue` with its clock at a chosen
//! time, seeds every domain with a realistic data set, and checks the table (`fsck`'s findings).
//!
//! Plain HTML, CSS and JavaScript compiled into the runner (`include_str!`): no CDN, no build
//! step. Its endpoints under `/_console/api/` hold no privilege: each request it runs goes through
//! the API's own router (see [`api_client`]) with a token minted for the person ([`token`]), and
//! they answer only same-origin requests made to a loopback host (see `guard`).

pub mod api_client;
pub mod capture;
pub mod explore;
mod gate;
pub mod heat;
pub mod ops;
pub mod patterns;
pub mod races;
pub mod security_headers;
pub mod seed;
pub mod table;
pub mod token;

use crate::serve::front_door::Gateway;
pub use api_client::{ApiClient, Sent};
use axum::body::{Bytes, to_bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use singlet_functions::Ctx;
use singlet_functions::loans::mark_overdue;
use std::sync::Arc;
use table::Domain;

const INDEX_HTML: &str = include_str!("assets/index.html");
const CONSOLE_CSS: &str = include_str!("assets/console.css");
const CONSOLE_JS: &str = include_str!("assets/console.js");

/// The person the console acts as unless the page names another.
const DEFAULT_PERSON: &str = "ada";
/// The largest request the console's own endpoints take.
const MAX_CONSOLE_BODY: usize = 1024 * 1024;

/// The runner's context with every DynamoDB call of a console request recorded: the same
/// client (endpoint, credentials, retries) with the console's interceptor and the version race's
/// gate (`gate`) added. Outside a console request neither does anything.
pub fn instrument(ctx: Ctx) -> Ctx {
    instrument_seeing(ctx, &heat::EngineSeen::default())
}

/// [`instrument`], noting in `seen` the engine its requests go to (for the heat view).
fn instrument_seeing(ctx: Ctx, seen: &heat::EngineSeen) -> Ctx {
    let mut config = ctx
        .db
        .config()
        .to_builder()
        .interceptor(capture::Recorder::new())
        .interceptor(seen.clone());
    if let Some(http) = ctx.db.config().http_client() {
        config = config.http_client(gate::gated(http));
    }
    let config = config.build();
    Ctx {
        db: aws_sdk_dynamodb::Client::from_conf(config),
        ..ctx
    }
}

#[derive(Clone)]
struct Console {
    api: ApiClient,
    /// The local bus's events file (`--events-out`), where the published events land.
    events_file: Option<Arc<std::path::Path>>,
    /// One console action at a time, so that "before" and "after" belong to one action.
    busy: Arc<tokio::sync::Mutex<()>>,
    /// The engine the console's requests go to, whose heat it shows.
    engine: heat::EngineSeen,
}

/// The runner's whole app: the front door's API (answering CORS for `origins`) with the console
/// mounted beside it at `/_console`. Only `main.rs` serves this: the API alone
/// (`front_door::app`) is what the tests and benches run, so no interceptor sits in their path.
/// The API here runs on an [`instrument`]ed client, and the console sends its requests through
/// that same API, so they meet every check the API makes and their DynamoDB calls are recorded.
/// `events_file` is the local bus's events file, where the stream's events are published: the
/// console shows which of a run's events have arrived there.
pub fn mount(
    gateway: Gateway,
    origins: &[String],
    events_file: Option<&std::path::Path>,
) -> axum::Router {
    let engine = heat::EngineSeen::default();
    let gateway = Gateway {
        ctx: instrument_seeing(gateway.ctx, &engine),
        ..gateway
    };
    let api = crate::serve::front_door::app_with_cors(gateway.clone(), origins);
    let console = Console {
        api: ApiClient::new(gateway),
        events_file: events_file.map(Arc::from),
        busy: Arc::default(),
        engine,
    };
    let routes = axum::Router::new()
        .route("/_console", get(page))
        .route("/_console/", get(page))
        .route("/_console/console.css", get(stylesheet))
        .route("/_console/console.js", get(script))
        .route("/_console/api/state", get(state))
        .route("/_console/api/run", post(run))
        .route("/_console/api/race", post(race))
        .route("/_console/api/mark-overdue", post(mark))
        .route("/_console/api/seed", post(seed_all))
        .route("/_console/api/reset", post(reset))
        .route("/_console/api/fsck", post(check_table))
        .route("/_console/api/explore", post(explore_table))
        .route("/_console/api/published", get(published))
        .route("/_console/api/heat", get(heat_now))
        // Anything else under the console's prefix is the console's 404, not the API's: it
        // carries the console's headers like every other answer there.
        .route("/_console/{*rest}", any(nothing_here))
        .layer(middleware::from_fn(guard))
        // Outermost, so that the guard's refusals carry them too.
        .layer(middleware::map_response(security_headers::add))
        .with_state(console);
    api.merge(routes)
}

/// A path under `/_console/` that the console does not serve.
async fn nothing_here() -> Response {
    answer(
        StatusCode::NOT_FOUND,
        &json!({"error": "the console has nothing at this path"}),
    )
}

/// `cargo run -- seed`: the data set through the front door's API over `gateway`, with a
/// progress bar.
pub async fn seed_cli(gateway: Gateway, stop_after: Option<u64>) -> Result<(), String> {
    seed::run_cli(&ApiClient::new(gateway), stop_after).await
}

/// The console's secret for this start of the runner: every `/_console/api/` call carries it
/// (header `x-singlet-console`), and the console's URL the runner prints holds it
/// (`/_console/?token=<secret>`), as Jupyter's does. Another local process or user who can reach
/// the port but has not seen the runner's output cannot read the table or run a route through
/// the console (the engine's own DynamoDB endpoint is another door, which any local process can
/// use: docs/guide/running-locally.md, "Security of the local runner"). Made at random once per process, never stored.
pub fn secret() -> &'static str {
    static SECRET: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SECRET.get_or_init(|| {
        let bytes: [u8; 24] = rand::random();
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    })
}

/// The console's address on `api` (`http://127.0.0.1:3000`), its secret included.
pub fn url(api: &str) -> String {
    format!("{api}/_console/?token={}", secret())
}

/// Whether `sent` is the secret, compared in constant time.
fn is_secret(sent: &[u8]) -> bool {
    let secret = secret().as_bytes();
    sent.len() == secret.len() && sent.iter().zip(secret).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0
}

/// Whether `authority` (`host[:port]`) names this machine's loopback interface.
fn is_loopback(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    matches!(host, "127.0.0.1" | "localhost" | "::1")
}

/// The console answers only its own page: a call to its API must carry the runner's
/// [`secret`] in the console's own header (which no cross-origin page can send without a CORS
/// preflight that the console never grants), be addressed to a loopback host (no DNS-rebound
/// name), come from a loopback origin when it names one, not be cross-site, and a `POST` must be
/// JSON.
async fn guard(request: Request, next: Next) -> Response {
    let headers = request.headers();
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let host = text(header::HOST).is_some_and(is_loopback);
    let origin = text(header::ORIGIN).is_none_or(|origin| {
        origin
            .strip_prefix("http://")
            .is_some_and(|authority| is_loopback(authority.trim_end_matches('/')))
    });
    let same_site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_none_or(|site| matches!(site, "same-origin" | "none"));
    let post = request.method() != Method::POST
        || text(header::CONTENT_TYPE).is_some_and(|t| t.starts_with("application/json"));
    // The page and its assets hold nothing; what the API answers needs the secret.
    let secret = !request.uri().path().starts_with("/_console/api/")
        || headers
            .get("x-singlet-console")
            .is_some_and(|sent| is_secret(sent.as_bytes()));
    if !secret {
        return answer(
            StatusCode::FORBIDDEN,
            &json!({"error": "the console's API needs the secret in the console URL the runner printed"}),
        );
    }
    if host && origin && same_site && post {
        next.run(request).await
    } else {
        answer(
            StatusCode::FORBIDDEN,
            &json!({"error": "the console answers only its own page on a loopback address"}),
        )
    }
}

fn answer(status: StatusCode, body: &impl serde::Serialize) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        serde_json::to_string(body).expect("JSON"),
    )
        .into_response()
}

fn failed(error: String) -> Response {
    answer(StatusCode::BAD_REQUEST, &json!({"error": error}))
}

fn asset(content_type: &'static str, text: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        text,
    )
        .into_response()
}

async fn page() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

async fn stylesheet() -> Response {
    asset("text/css; charset=utf-8", CONSOLE_CSS)
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", CONSOLE_JS)
}

async fn body<T: DeserializeOwned>(request: Request) -> Result<T, Response> {
    let bytes: Bytes = to_bytes(request.into_body(), MAX_CONSOLE_BODY)
        .await
        .map_err(|_| failed("the request is too large".into()))?;
    serde_json::from_slice(&bytes).map_err(|e| failed(format!("not a console request: {e}")))
}

fn person(raw: &Option<String>) -> String {
    raw.as_deref()
        .map(str::trim)
        .filter(|p| !p.is_empty() && p.len() <= 64)
        .unwrap_or(DEFAULT_PERSON)
        .to_owned()
}

/// The heat of every key over the last minutes ([`heat`]).
async fn heat_now(State(console): State<Console>) -> Response {
    answer(StatusCode::OK, &console.engine.report())
}

/// The page's data: domains, patterns with examples, races, and the table.
async fn state(State(console): State<Console>) -> Response {
    let ctx = &console.api.ctx;
    match table::scan(ctx).await {
        Ok(snapshot) => {
            let partitions = table::partitions(&snapshot, None);
            answer(
                StatusCode::OK,
                &json!({
                    "person": DEFAULT_PERSON,
                    "token": console.api.mints(),
                    "table": ctx.table.as_ref(),
                    "domains": Domain::ALL.iter().map(|d| json!({"id": d, "title": d.title()})).collect::<Vec<_>>(),
                    "patterns": patterns::catalogue(&snapshot),
                    "races": races::RACES.iter().map(|(id, title, domain)| json!({"id": id, "title": title, "domain": domain})).collect::<Vec<_>>(),
                    "partitions": partitions,
                    "changes": table::summary(&partitions),
                    "indexes": singlet_shared::schema::INDEXES.iter().map(|i| i.name).collect::<Vec<_>>(),
                }),
            )
        }
        Err(error) => answer(StatusCode::SERVICE_UNAVAILABLE, &json!({"error": error})),
    }
}

#[derive(Deserialize)]
struct RunRequest {
    person: Option<String>,
    request: Sent,
}

/// Runs one request through the API and shows what it did.
async fn run(State(console): State<Console>, request: Request) -> Response {
    let asked: RunRequest = match body(request).await {
        Ok(asked) => asked,
        Err(refused) => return refused,
    };
    let _one_at_a_time = console.busy.lock().await;
    let api = &console.api;
    let before = match table::scan(&api.ctx).await {
        Ok(before) => before,
        Err(error) => return failed(error),
    };
    let (sent, result, calls) = api.run(&person(&asked.person), asked.request).await;
    let mut operations: Vec<ops::Operation> = calls.iter().map(|c| ops::read(c, true)).collect();
    let after = match table::scan(&api.ctx).await {
        Ok(after) => after,
        Err(error) => return failed(error),
    };
    let (http, error) = match result {
        Ok(http) => {
            ops::link_reasons(&mut operations, http.status, &http.body);
            (Some(http), None)
        }
        Err(error) => (None, Some(error)),
    };
    let partitions = table::partitions(&after, Some(&before));
    answer(
        StatusCode::OK,
        &json!({
            "request": sent,
            "answer": http,
            "error": error,
            "operations": operations,
            "events": table::emitted(&after, &before),
            "changes": table::summary(&partitions),
            "partitions": partitions,
            "patterns": patterns::catalogue(&after),
            "heat": console.engine.report(),
        }),
    )
}

/// A free query or scan of the table or an index (see [`explore`]).
async fn explore_table(State(console): State<Console>, request: Request) -> Response {
    let asked: explore::Asked = match body(request).await {
        Ok(asked) => asked,
        Err(refused) => return refused,
    };
    let _one_at_a_time = console.busy.lock().await;
    match explore::explore(&console.api.ctx, &asked).await {
        Ok(explored) => answer(StatusCode::OK, &explored),
        Err(error) => failed(error),
    }
}

/// How many of the events file's last lines `published` answers.
const PUBLISHED_SHOWN: usize = 200;

/// The last events the local bus published (the events file's last lines, newest first): what a
/// rule target would have received.
async fn published(State(console): State<Console>) -> Response {
    let Some(path) = console.events_file.as_deref() else {
        return answer(StatusCode::OK, &json!({"file": null, "events": []}));
    };
    let text = match tokio::fs::read_to_string(path).await {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => return failed(format!("cannot read {}: {error}", path.display())),
    };
    let events: Vec<Value> = text
        .lines()
        .rev()
        .take(PUBLISHED_SHOWN)
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    answer(
        StatusCode::OK,
        &json!({"file": path.display().to_string(), "events": events}),
    )
}

#[derive(Deserialize)]
struct RaceRequest {
    person: Option<String>,
    race: String,
}

async fn race(State(console): State<Console>, request: Request) -> Response {
    let asked: RaceRequest = match body(request).await {
        Ok(asked) => asked,
        Err(refused) => return refused,
    };
    let _one_at_a_time = console.busy.lock().await;
    match races::run(&asked.race, &console.api, &person(&asked.person)).await {
        Ok(outcome) => {
            let after = table::scan(&console.api.ctx).await.unwrap_or_default();
            answer(
                StatusCode::OK,
                &json!({"race": outcome, "patterns": patterns::catalogue(&after),
                        "heat": console.engine.report()}),
            )
        }
        Err(error) => failed(error),
    }
}

#[derive(Deserialize)]
struct MarkRequest {
    /// ISO-8601: the EventBridge event's `time`, "now" for the run.
    time: String,
}

/// Runs `mark-overdue` once with the chosen time as "now", as its schedule would.
async fn mark(State(console): State<Console>, request: Request) -> Response {
    let asked: MarkRequest = match body(request).await {
        Ok(asked) => asked,
        Err(refused) => return refused,
    };
    let now = match singlet_functions::clock::settable(&asked.time) {
        Ok(now) => now,
        Err(reason) => return failed(reason),
    };
    let _one_at_a_time = console.busy.lock().await;
    let ctx = &console.api.ctx;
    let before = match table::scan(ctx).await {
        Ok(before) => before,
        Err(error) => return failed(error),
    };
    // The marker as its schedule runs it, on a context whose clock reads the chosen time (as
    // `invoke mark-overdue --clock` does): its "now" is the event's time, which the clock allows.
    let clocked = Ctx {
        clock: singlet_functions::clock::Clock::reading(now),
        ..ctx.clone()
    };
    let event = json!({"time": singlet_functions::clock::iso(now)});
    let marking = crate::serve::iam::serving(
        mark_overdue::FUNCTION,
        mark_overdue::run(&clocked, event, None),
    );
    let (report, calls) = capture::recording(marking).await;
    let operations: Vec<ops::Operation> = calls.iter().map(|c| ops::read(c, false)).collect();
    let after = match table::scan(ctx).await {
        Ok(after) => after,
        Err(error) => return failed(error),
    };
    let partitions = table::partitions(&after, Some(&before));
    let moved = moved_loans(&before, &after);
    let report = match report {
        Ok(report) => {
            use singlet_functions::routes::RunReport;
            report.to_json()
        }
        Err(error) => json!({"error": error}),
    };
    answer(
        StatusCode::OK,
        &json!({
            "report": report,
            "now": singlet_functions::clock::iso(now),
            "moved": moved,
            "operations": operations,
            "events": table::emitted(&after, &before),
            "changes": table::summary(&partitions),
            "partitions": partitions,
            "patterns": patterns::catalogue(&after),
        }),
    )
}

/// The loans a `mark-overdue` run moved: open before, overdue after (as the model reads them),
/// each with the index entry it left and the one it entered.
fn moved_loans(before: &table::Snapshot, after: &table::Snapshot) -> Vec<Value> {
    use singlet_functions::loans::LoanStatus;
    use singlet_functions::model::{Entity, TableEntity, decode};
    let loan = |item: &table::Item| match decode(item) {
        Ok(TableEntity::Loan(loan)) => Some(loan),
        _ => None,
    };
    let entry = |(index, key): (singlet_shared::schema::Index, singlet_shared::IndexKey)| json!({"index": index.name, "pk": key.pk, "sk": key.sk});
    after
        .iter()
        .filter_map(|(key, item)| {
            let now = loan(item).filter(|l| l.status == LoanStatus::Overdue)?;
            let was = loan(before.get(key)?).filter(|l| l.status == LoanStatus::Open)?;
            Some(json!({
                "pk": key.0, "sk": key.1,
                "summary": format!("{}, due {} at {}", now.title, now.due_date, now.branch_id),
                "from": was.index_keys().into_iter().next().map(entry),
                "to": now.index_keys().into_iter().next().map(entry),
            }))
        })
        .collect()
}

#[derive(Deserialize)]
struct PersonRequest {
    person: Option<String>,
}

/// Seeds every domain that has no data, through the API.
async fn seed_all(State(console): State<Console>, request: Request) -> Response {
    let asked: PersonRequest = match body(request).await {
        Ok(asked) => asked,
        Err(refused) => return refused,
    };
    let _one_at_a_time = console.busy.lock().await;
    let ctx = &console.api.ctx;
    let before = table::scan(ctx).await.unwrap_or_default();
    let report = seed::seed(&console.api, &person(&asked.person), &|_, _, _| {}).await;
    let after = match table::scan(ctx).await {
        Ok(after) => after,
        Err(error) => return failed(error),
    };
    let partitions = table::partitions(&after, Some(&before));
    match report {
        Ok(report) => answer(
            StatusCode::OK,
            &json!({
                "seed": report,
                "changes": table::summary(&partitions),
                "partitions": partitions,
                "patterns": patterns::catalogue(&after),
            }),
        ),
        Err(error) => failed(error),
    }
}

/// Empties the local table. (The engine's own endpoint, open on loopback, can do as much.)
/// "Check the table": `fsck` over the whole table (never a repair: that stays the command's, run
/// on purpose), its report as `fsck --json` prints it.
async fn check_table(State(console): State<Console>, request: Request) -> Response {
    if let Err(refused) = body::<Value>(request).await {
        return refused;
    }
    let _one_at_a_time = console.busy.lock().await;
    match singlet_tools::fsck::fsck(&console.api.ctx, singlet_tools::fsck::Options::default()).await
    {
        Ok(report) => answer(StatusCode::OK, &json!({ "fsck": report })),
        Err(error) => failed(error),
    }
}

async fn reset(State(console): State<Console>, request: Request) -> Response {
    if let Err(refused) = body::<Value>(request).await {
        return refused;
    }
    let _one_at_a_time = console.busy.lock().await;
    let ctx = &console.api.ctx;
    let before = match table::scan(ctx).await {
        Ok(before) => before,
        Err(error) => return failed(error),
    };
    for (pk, sk) in before.keys() {
        let key = singlet_shared::Key {
            pk: pk.clone(),
            sk: sk.clone(),
        };
        // Unconditional: whatever entity it is, it goes.
        let delete = singlet_functions::store::Delete::any(key);
        if let Err(error) = ctx.delete_item(delete).await {
            return failed(format!("cannot empty the table: {error:?}"));
        }
    }
    let after = table::Snapshot::new();
    answer(
        StatusCode::OK,
        &json!({
            "removed": before.len(),
            "partitions": table::partitions(&after, None),
            "changes": table::summary(&[]),
            "patterns": patterns::catalogue(&after),
        }),
    )
}
