//! One engine per test: dynoxide in memory on a loopback port, the real SDK client, the table
//! created from the schema, and the runner's real front door on another loopback port.
//!
//! Test bodies take an [`Api`] and run twice (the wewerewondering pattern): once calling the
//! handlers directly with the `lambda_http::Request` API Gateway would build, once over HTTP
//! through the local runner's front door.
//!
//! On another engine: with `SINGLET_TEST_ENDPOINT` set (`http://127.0.0.1:<port>`: moto,
//! DynamoDB Local, LocalStack, a runner's engine), [`Api::start`] talks to that engine through the
//! runner's own external-engine client (`--endpoint`, `engine::external_client`), each test on a
//! fresh table of its own (`singlet-<process>-<time>-<n>`, made by `ensure_table`, deleted when
//! the test's last `Api` goes), so tests running at once share nothing. What runs there: every
//! [`both!`] body, and every test that starts its API with [`Api::start`] (the races, `fsck`,
//! `migrate`, the marker, the costs, ...). What keeps an embedded engine of its own, whatever the
//! variable says: the tests that start one themselves (`engine::start_in_memory*`: a settable
//! clock moving the engine's TTL and stream time, the engine's file, a copy or a second engine,
//! the runner spawned as a process), and [`Api::on_canned_engine`] (the SDK's canned answers). A
//! test that depends on what only dynoxide does calls [`skip_on_external_engine`], which prints
//! why (docs/guide/testing.md, "On another engine").

use aws_sdk_dynamodb::types::AttributeValue;
use lambda_http::Body;
use serde_json::Value;
use singlet::serve::auth::{Authorizer, LocalIssuer};
use singlet::serve::{engine, front_door};
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use singlet_functions::request::answer;
use singlet_functions::store::bulk;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

pub use singlet_functions::model::Item;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    Direct,
    Http,
}

#[derive(Clone)]
pub struct Api {
    pub ctx: Ctx,
    /// The bearer token every call carries unless it says otherwise: every scope, subject
    /// `tester`.
    pub token: String,
    pub mode: Mode,
    pub base: String,
    /// The engine's own DynamoDB endpoint (and its stream's).
    pub engine: String,
    /// The table when it is one of an external engine's (`SINGLET_TEST_ENDPOINT`): deleted when
    /// the test's last `Api` goes.
    external: Option<Arc<ExternalTable>>,
    http: reqwest::Client,
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: Value,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// The read and write units the request consumed, as the local runner reports them.
    #[track_caller]
    pub fn consumed(&self) -> (f64, f64) {
        let header = self
            .header(front_door::CONSUMED_CAPACITY)
            .unwrap_or_else(|| panic!("no consumed capacity in {self:?}"));
        let unit = |name: &str| -> f64 {
            header
                .split("; ")
                .find_map(|part| part.strip_prefix(name))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {header}"))
        };
        (unit("rcu="), unit("wcu="))
    }

    /// The `(field, code)` pairs of a problem document, sorted.
    pub fn field_errors(&self) -> Vec<(String, String)> {
        let mut errors: Vec<(String, String)> = self.body["errors"]
            .as_array()
            .map(|errors| {
                errors
                    .iter()
                    .map(|e| {
                        (
                            e["field"].as_str().unwrap().to_owned(),
                            e["code"].as_str().unwrap().to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        errors.sort();
        errors
    }

    #[track_caller]
    pub fn assert_problem(&self, status: u16, errors: &[(&str, &str)]) {
        assert_eq!(self.status, status, "{self:?}");
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "{self:?}"
        );
        assert_eq!(self.body["status"], status, "{self:?}");
        let mut expected: Vec<(String, String)> = errors
            .iter()
            .map(|(f, c)| ((*f).to_owned(), (*c).to_owned()))
            .collect();
        expected.sort();
        assert_eq!(self.field_errors(), expected, "{self:?}");
        let text = self.body.to_string();
        // No key (every key has a `#`), key attribute or SDK detail in a problem.
        assert!(!text.contains('#'), "a problem leaks a key: {text}");
        for leak in ["PK", "SK", "GSI", "SdkError", "Dispatch", "Exception"] {
            assert!(!text.contains(leak), "a problem leaks {leak}: {text}");
        }
    }
}

pub struct Call<'a> {
    api: &'a Api,
    method: &'static str,
    path: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
}

impl Call<'_> {
    pub fn json(mut self, body: Value) -> Self {
        self.body = Some(body.to_string().into_bytes());
        self.header("content-type", "application/json")
    }

    pub fn raw(mut self, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self.header("content-type", content_type)
    }

    /// A body sent with no `content-type` at all.
    pub fn raw_untyped(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// No `authorization` header at all.
    pub fn anonymous(mut self) -> Self {
        self.headers.retain(|(n, _)| n != "authorization");
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.retain(|(n, _)| n != name);
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Sends the call and checks the reply against `docs/openapi.yaml` (see `contract`).
    pub async fn send(self) -> Reply {
        let (method, path) = (self.method, self.path.clone());
        let reply = self.send_unchecked().await;
        crate::contract::check(method, &path, &reply);
        reply
    }

    async fn send_unchecked(self) -> Reply {
        match self.api.mode {
            Mode::Direct => self.direct().await,
            Mode::Http => self.over_http().await,
        }
    }

    /// The handler called directly, with the request API Gateway would hand it.
    async fn direct(self) -> Reply {
        let mut header_map = axum::http::HeaderMap::new();
        for (name, value) in &self.headers {
            header_map.insert(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                axum::http::HeaderValue::from_str(value).unwrap(),
            );
        }
        let (route, request) = match front_door::lambda_request(
            &tokens().0,
            &self.method.parse().unwrap(),
            &self.path.parse().unwrap(),
            &header_map,
            &self.body.unwrap_or_default(),
        ) {
            Ok(found) => found,
            Err(refused) => {
                return Reply {
                    status: refused.0.as_u16(),
                    headers: HashMap::from([(
                        "content-type".to_owned(),
                        "application/json".to_owned(),
                    )]),
                    body: serde_json::json!({"message": refused.1}),
                };
            }
        };
        let answer =
            singlet::serve::iam::serving(route.function, answer(&self.api.ctx, route, request))
                .await;
        let response = answer.response;
        let status = response.status().as_u16();
        let mut headers: HashMap<String, String> = response
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
            .collect();
        // What the runner's front door reports over HTTP, so that both modes can read it.
        headers.insert(
            front_door::CONSUMED_CAPACITY.to_owned(),
            format!(
                "rcu={}; wcu={}",
                answer.consumed.read_units, answer.consumed.write_units
            ),
        );
        let body = match response.body() {
            Body::Empty => Value::Null,
            other => json_body(other.as_ref()),
        };
        Reply {
            status,
            headers,
            body,
        }
    }

    async fn over_http(self) -> Reply {
        let mut request = self.api.http.request(
            self.method.parse().unwrap(),
            format!("{}{}", self.api.base, self.path),
        );
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        if let Some(body) = self.body {
            request = request.body(body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
            .collect();
        let bytes = response.bytes().await.unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            json_body(&bytes)
        };
        Reply {
            status,
            headers,
            body,
        }
    }
}

/// The JSON body `request` is answered with, whatever its status.
/// `app` served on a loopback port of its own until the handle is aborted or the test ends:
/// its URL (`http://127.0.0.1:<port>`) and the server's task. Every stand-in the tests put on
/// a socket (a mock AWS service, a proxy, a Runtime API) is served this way.
pub async fn serve_on_loopback(app: axum::Router) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, server)
}

pub async fn json_answer(request: reqwest::RequestBuilder) -> Value {
    let response = request.send().await.unwrap();
    response.json().await.unwrap()
}

/// A reply's body, which must be JSON.
fn json_body(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|_| {
        panic!(
            "a body that is not JSON: {:?}",
            String::from_utf8_lossy(bytes)
        )
    })
}

/// Every scope of the route table.
pub fn all_scopes() -> String {
    singlet_functions::routes::all_scopes().join(" ")
}

/// The runner's authorizer and issuer, their key made once for every test process.
pub fn tokens() -> &'static (Arc<Authorizer>, Arc<LocalIssuer>) {
    static TOKENS: OnceLock<(Arc<Authorizer>, Arc<LocalIssuer>)> = OnceLock::new();
    TOKENS.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-keys");
        let (authorizer, issuer) = Authorizer::local(&dir).unwrap();
        (Arc::new(authorizer), Arc::new(issuer))
    })
}

/// A token from the runner's issuer.
pub fn token(subject: &str, scopes: &str, claims: &[(&str, &str)]) -> String {
    let extra = claims
        .iter()
        .map(|(name, value)| ((*name).to_owned(), Value::from(*value)))
        .collect();
    tokens().1.mint(subject, scopes, &extra, 600)
}

/// The variable naming an external engine for the suite (see the module's comment).
pub const TEST_ENDPOINT: &str = "SINGLET_TEST_ENDPOINT";

/// The external engine the suite runs on, if `SINGLET_TEST_ENDPOINT` names one.
pub fn external_engine() -> Option<String> {
    std::env::var(TEST_ENDPOINT).ok().filter(|e| !e.is_empty())
}

/// Whether the calling test should stop here, because the suite runs on an external engine
/// and the test checks something that engine does not do as DynamoDB does (`why`, printed).
/// Use as `if skip_on_external_engine("...") { return; }`.
pub fn skip_on_external_engine(why: &str) -> bool {
    let skip = external_engine().is_some();
    if skip {
        eprintln!("skipped on the external engine ${TEST_ENDPOINT}: {why}");
    }
    skip
}

/// Why a load test is skipped on an external engine: moto answers one request at a time
/// (`.ci/moto`'s lock), so the tool's reads queue behind the clients' transactions, each a copy
/// of the whole table there, past the API's 4 s budget (`Unavailable`), even with a few clients;
/// DynamoDB serves them at once.
pub const ONE_REQUEST_AT_A_TIME: &str = "the engine answers one request at a time, and the \
     clients' transactions queue the tool's reads past the API's 4 s budget there";

/// A bulk workload's size: `n` items on the embedded engine, a tenth of them on an external one
/// (said on standard error). moto sorts and walks its whole table for every page of a scan
/// it answers (`Table.scan`, from the first item to the page's start key), so a tool's paged
/// scans of thousands of items, beside the API's writes, pass the API's 4 s budget there
/// (`Unavailable`); DynamoDB reads a page from where the last one ended.
pub fn sized(n: usize) -> usize {
    match external_engine() {
        Some(_) => {
            let fewer = n / 10;
            eprintln!(
                "${TEST_ENDPOINT}: {fewer} items, not {n}: the engine's scans slow as its table grows"
            );
            fewer
        }
        None => n,
    }
}

/// Whether the engine reports consumed capacity as DynamoDB does, so that a test may assert
/// it: the embedded engine does; moto reports a constant per call (1 unit for a write or a
/// query, 0.5 for a `GetItem` whatever its consistency and size), where DynamoDB counts 4 KB
/// read units (halved for an eventually consistent read) and 1 KB write units per item
/// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html).
/// On an external engine it prints that the check is skipped and answers `false`.
pub fn capacity_as_dynamodb() -> bool {
    !skip_on_external_engine(&format!("its capacity check: {CAPACITY_NOT_DYNAMODBS}"))
}

/// Why a test of what a call costs is skipped on an external engine ([`capacity_as_dynamodb`]).
pub const CAPACITY_NOT_DYNAMODBS: &str =
    "the consumed capacity the engine reports is not DynamoDB's (moto's is a constant per call)";

/// Why a race whose requests queue on the engine past the SDK's 1.5 s attempt timeout is skipped
/// on an external engine: the SDK sends a timed-out `TransactWriteItems` again with the same
/// `ClientRequestToken`, which DynamoDB answers without writing twice ("Idempotency",
/// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html);
/// moto ignores the token and commits it twice, and answers one request at a time, so many at
/// once pass the API's 4 s budget (`503`).
pub const NO_RETRIED_TRANSACTIONS: &str = "the engine commits a transaction sent again with the \
     same ClientRequestToken twice (moto ignores the token), and this race's requests queue past \
     the SDK's attempt timeout there";

/// A test's table on an external engine, deleted when the last [`Api`] on it goes (whether the
/// test passed or not), so that the engine does not keep every test's table till the run ends.
struct ExternalTable {
    endpoint: String,
    table: String,
}

impl Drop for ExternalTable {
    fn drop(&mut self) {
        let (endpoint, table) = (self.endpoint.clone(), std::mem::take(&mut self.table));
        // A drop cannot await: the delete runs on a runtime of its own, on a thread of its own.
        let deleting = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async {
                if let Ok(client) = engine::external_client(&endpoint).await {
                    let _ = client.delete_table().table_name(table).send().await;
                }
            });
        });
        let _ = deleting.join();
    }
}

/// Why a long workload on one table is skipped on an external engine: moto copies the whole
/// table for each transaction (to roll it back), so its transactions slow as the table grows,
/// and hundreds of changes with the publisher reading the stream take engine calls past the
/// API's 4 s budget (`503`); DynamoDB's latency does not grow with a table's size ("What is
/// Amazon DynamoDB?": single-digit millisecond performance at any scale,
/// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Introduction.html).
pub const SLOWER_AS_THE_TABLE_GROWS: &str = "the engine's transactions slow as its table grows \
     (moto copies the whole table for each), and this workload takes engine calls past the API's \
     4 s budget there";

/// A table name no other test of any run on the same engine uses.
fn fresh_table_name() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() % 1_000_000_000)
        .unwrap_or(0);
    format!(
        "singlet-{}-{started}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

impl Api {
    /// The test's API on an engine of its own: an embedded one, or a fresh table on the engine
    /// `SINGLET_TEST_ENDPOINT` names.
    pub async fn start(mode: Mode) -> Api {
        match external_engine() {
            Some(endpoint) => Api::start_external(mode, &endpoint).await,
            None => Api::start_embedded(mode).await,
        }
    }

    /// The test's API on an in-memory dynoxide of its own, whatever `SINGLET_TEST_ENDPOINT`
    /// says.
    pub async fn start_embedded(mode: Mode) -> Api {
        let (client, endpoint) = engine::start_in_memory("singlet").await;
        let mut api = Api::start_on(mode, Ctx::new(client, "singlet", CursorKeys::random())).await;
        api.engine = endpoint;
        api
    }

    /// The test's API on a fresh table of the engine at `endpoint`, through the runner's
    /// external-engine client.
    async fn start_external(mode: Mode, endpoint: &str) -> Api {
        let client = engine::external_client(endpoint)
            .await
            .unwrap_or_else(|e| panic!("${TEST_ENDPOINT}: {e}"));
        let table = fresh_table_name();
        singlet_functions::table::ensure_table(&client, &table)
            .await
            .unwrap_or_else(|e| panic!("cannot create {table} at {endpoint}: {e:?}"));
        let mut api =
            Api::start_on(mode, Ctx::new(client, table.as_str(), CursorKeys::random())).await;
        api.engine = endpoint.to_owned();
        api.external = Some(Arc::new(ExternalTable {
            endpoint: endpoint.to_owned(),
            table,
        }));
        api
    }

    /// An API on `ctx` (an engine of the test's making), called directly and over HTTP; its
    /// engine's endpoint is unknown here (`engine` is empty).
    pub async fn start_on(mode: Mode, ctx: Ctx) -> Api {
        crate::logs::capture();
        let gateway = front_door::Gateway {
            ctx: ctx.clone(),
            authorizer: tokens().0.clone(),
            issuer: Some(tokens().1.clone()),
        };
        let base = front_door::serve_on_loopback(gateway).await.unwrap();
        Api {
            ctx,
            token: token("tester", &all_scopes(), &[]),
            mode,
            base,
            engine: String::new(),
            external: None,
            http: reqwest::Client::new(),
        }
    }

    /// An API whose engine is the SDK's own test HTTP client answering `answer(operation)` (the
    /// status and JSON body for `GetItem`, `TransactWriteItems`, ...): for the failures only real
    /// DynamoDB produces (throttling, `TransactionConflict`) or a race too narrow to hit.
    pub async fn on_canned_engine(
        answer: impl Fn(&str) -> (u16, Value) + Send + Sync + 'static,
    ) -> Api {
        use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
        use aws_smithy_runtime_api::client::http::{SharedHttpConnector, http_client_fn};
        let canned = SharedHttpConnector::new(canned::Canned(Arc::new(answer)));
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("test", "test", None, None, "test"))
            .endpoint_url("http://127.0.0.1:1")
            .http_client(http_client_fn(move |_, _| canned.clone()))
            .interceptor(singlet::serve::iam::Enforce)
            .build();
        let mut api = Api::start_embedded(Mode::Direct).await;
        api.ctx = Ctx::new(
            aws_sdk_dynamodb::Client::from_conf(config),
            "singlet",
            CursorKeys::random(),
        );
        api
    }

    pub fn call(&self, method: &'static str, path: impl Into<String>) -> Call<'_> {
        Call {
            api: self,
            method,
            path: path.into(),
            headers: vec![("authorization".into(), format!("Bearer {}", self.token))],
            body: None,
        }
    }

    /// The same API, its handlers on another context (called directly).
    pub fn with_ctx(&self, ctx: Ctx) -> Api {
        Api {
            ctx,
            ..self.clone()
        }
    }

    /// The same API, calling with another token.
    pub fn as_token(&self, token: String) -> Api {
        Api {
            token,
            ..self.clone()
        }
    }

    pub async fn get(&self, path: impl Into<String>) -> Reply {
        self.call("GET", path).send().await
    }

    pub async fn post(&self, path: impl Into<String>, body: Value) -> Reply {
        self.call("POST", path).json(body).send().await
    }

    pub async fn put(&self, path: impl Into<String>, body: Value) -> Reply {
        self.call("PUT", path).json(body).send().await
    }

    pub async fn delete(&self, path: impl Into<String>) -> Reply {
        self.call("DELETE", path).send().await
    }

    /// The item at a key, read straight from the table.
    pub async fn item(&self, pk: &str, sk: &str) -> Option<Item> {
        item_at(&self.ctx.db, &self.ctx.table, pk, sk).await
    }

    /// Every item in the table but the events' outbox items (a Scan: tests only). What a
    /// pattern writes is asserted here; its event, one outbox item per change, in
    /// `domain_events.rs`.
    pub async fn items(&self) -> Vec<Item> {
        let mut items = self.all_items().await;
        items.retain(|item| !s(item, "PK").starts_with("OUTBOX#"));
        items
    }

    /// Every item in the table, outbox items included.
    pub async fn all_items(&self) -> Vec<Item> {
        bulk::scan_all(&self.ctx.db, &self.ctx.table, "")
            .await
            .unwrap()
    }

    /// Every item whose PK starts with `prefix`.
    pub async fn items_with_pk_prefix(&self, prefix: &str) -> Vec<Item> {
        self.items()
            .await
            .into_iter()
            .filter(|i| s(i, "PK").starts_with(prefix))
            .collect()
    }

    /// The outbox items of one subject (`OUTBOX#<type>#<id>`), which [`Api::items`] leaves out.
    pub async fn outbox_of(&self, subject_type: &str, id: &str) -> Vec<Item> {
        let partition = format!("OUTBOX#{subject_type}#{id}");
        self.all_items()
            .await
            .into_iter()
            .filter(|i| s(i, "PK") == partition)
            .collect()
    }

    /// Deletes every `IDEMPOTENCY#` record, as the table's TTL eventually does.
    pub async fn forget_idempotency_keys(&self) {
        for record in self.items_with_pk_prefix("IDEMPOTENCY#").await {
            self.ctx
                .db
                .delete_item()
                .table_name(&*self.ctx.table)
                .key("PK", record["PK"].clone())
                .key("SK", record["SK"].clone())
                .send()
                .await
                .unwrap();
        }
    }
}

/// A string attribute of an item.
pub fn s<'a>(item: &'a Item, name: &str) -> &'a str {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
        .unwrap_or("")
}

/// A number attribute of an item.
#[track_caller]
pub fn n(item: &Item, name: &str) -> i64 {
    let value = item.get(name).and_then(|v| v.as_n().ok());
    value
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number {name} in {item:?}"))
}

// ---- Raw engine writes: what the API never writes (items in an old shape, a table broken on
// purpose, a restore), straight to the engine --------------------------------------------------

/// A string attribute value.
pub fn str_attr(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_owned())
}

/// The item at a key of `table`, read straight from the engine (strongly consistent).
pub async fn item_at(
    db: &aws_sdk_dynamodb::Client,
    table: &str,
    pk: &str,
    sk: &str,
) -> Option<Item> {
    db.get_item()
        .table_name(table)
        .key("PK", str_attr(pk))
        .key("SK", str_attr(sk))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
}

/// Every outbox item of `table`, read straight from the engine.
pub async fn outbox_items(db: &aws_sdk_dynamodb::Client, table: &str) -> Vec<Item> {
    bulk::scan_all(db, table, singlet_shared::keys::OUTBOX_PREFIX)
        .await
        .unwrap()
}

/// Puts `item` as it is.
pub async fn put_raw(ctx: &Ctx, item: Item) {
    ctx.db
        .put_item()
        .table_name(&*ctx.table)
        .set_item(Some(item))
        .send()
        .await
        .unwrap();
}

/// Puts `items` as they are, a `BatchWriteItem` at a time.
pub async fn put_raw_all(ctx: &Ctx, items: Vec<Item>) {
    for chunk in items.chunks(bulk::BATCH_LIMIT) {
        bulk::put_batch(&ctx.db, &ctx.table, chunk.to_vec())
            .await
            .unwrap();
    }
}

pub async fn delete_raw(ctx: &Ctx, pk: &str, sk: &str) {
    ctx.db
        .delete_item()
        .table_name(&*ctx.table)
        .key("PK", str_attr(pk))
        .key("SK", str_attr(sk))
        .send()
        .await
        .unwrap();
}

/// Moves an open loan's due date to `due` (an ISO-8601 UTC time) straight on the engine `db`,
/// its open-loans index sort key with it, as if it had been lent long ago.
pub async fn set_due_date(
    db: &aws_sdk_dynamodb::Client,
    table: &str,
    patron_id: &str,
    checkout_id: &str,
    due: &str,
) {
    let (patron, checkout) = (id(patron_id), id(checkout_id));
    let key = singlet_shared::keys::checkout(&patron, &checkout);
    let index_key = singlet_shared::keys::open_loan(&checkout, due);
    db.update_item()
        .table_name(table)
        .key("PK", str_attr(&key.pk))
        .key("SK", str_attr(&key.sk))
        .update_expression("SET dueDate = :due, GSI1SK = :sk")
        .expression_attribute_values(":due", str_attr(due))
        .expression_attribute_values(":sk", str_attr(&index_key.sk))
        .send()
        .await
        .unwrap();
}

fn id(text: &str) -> singlet_shared::Id {
    singlet_shared::Id::parse(text).unwrap()
}

/// One raw `UpdateItem`: `expression` with `values` (`:name` → value); `#s` is `status` (a
/// reserved word).
pub async fn update_raw(
    ctx: &Ctx,
    pk: &str,
    sk: &str,
    expression: &str,
    values: &[(&str, AttributeValue)],
) {
    let mut update = ctx
        .db
        .update_item()
        .table_name(&*ctx.table)
        .key("PK", str_attr(pk))
        .key("SK", str_attr(sk))
        .update_expression(expression);
    if expression.contains("#s") {
        update = update.expression_attribute_names("#s", "status");
    }
    for (name, value) in values {
        update = update.expression_attribute_values(*name, value.clone());
    }
    update.send().await.unwrap();
}

impl Api {
    /// The name of a second table `name` beside the test's, in the same engine: `name` itself
    /// on an engine of the test's own, the test's table's name with `-name` after it on an
    /// external engine, so that no two tests (nor two runs on one engine) make the same table.
    pub fn table_beside(&self, name: &str) -> String {
        if self.external.is_some() {
            format!("{}-{name}", self.ctx.table)
        } else {
            name.to_owned()
        }
    }

    /// A fresh table in the same engine, named as [`Api::table_beside`] names `name`, holding
    /// exactly `items`: a restore that kept these.
    pub async fn table_holding(&self, name: &str, items: &[Item]) -> Ctx {
        let name = self.table_beside(name);
        singlet_functions::table::ensure_table(&self.ctx.db, &name)
            .await
            .unwrap();
        let ctx = Ctx::new(self.ctx.db.clone(), name.as_str(), CursorKeys::random());
        put_raw_all(&ctx, items.to_vec()).await;
        ctx
    }
}

/// What every test that runs on both paths checks once its body is done: each item it left in
/// its table, whatever the body did, decodes through the model's registry. So the whole suite's
/// tables, not one table filled for the purpose, are read as entities, with no item unknown.
pub async fn every_item_is_an_entity(api: &Api) {
    for item in api.all_items().await {
        if let Err(undecodable) = singlet_functions::model::decode(&item) {
            panic!("the table holds an item the registry does not know: {undecodable:?}");
        }
    }
}

/// Runs one async test body against both modes, then checks [`every_item_is_an_entity`].
#[macro_export]
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn direct() {
                    let api = $crate::harness::Api::start($crate::harness::Mode::Direct).await;
                    super::$name(api.clone()).await;
                    $crate::harness::every_item_is_an_entity(&api).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn http() {
                    let api = $crate::harness::Api::start($crate::harness::Mode::Http).await;
                    super::$name(api.clone()).await;
                    $crate::harness::every_item_is_an_entity(&api).await;
                }
            }
        )*
    };
}

/// The SDK's HTTP seam answering every request itself, from the operation's name: the engine of
/// [`Api::on_canned_engine`]. (The SDK's own `test-util` helper would do, but that feature
/// changes `serde_json`'s features for the whole test build, and so `cargo run` after
/// `cargo test` would rebuild half the dependencies.)
mod canned {
    use aws_smithy_runtime_api::client::http::{HttpConnector, HttpConnectorFuture};
    use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
    use aws_smithy_runtime_api::http::StatusCode;
    use aws_smithy_types::body::SdkBody;
    use serde_json::Value;
    use std::sync::Arc;

    type Answer = dyn Fn(&str) -> (u16, Value) + Send + Sync;

    #[derive(Clone)]
    pub struct Canned(pub Arc<Answer>);

    impl std::fmt::Debug for Canned {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Canned")
        }
    }

    impl HttpConnector for Canned {
        fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
            let target = request.headers().get("x-amz-target").unwrap_or("");
            let (status, body) = (self.0)(target.trim_start_matches("DynamoDB_20120810."));
            let mut response = HttpResponse::new(
                StatusCode::try_from(status).expect("an HTTP status"),
                SdkBody::from(body.to_string()),
            );
            response
                .headers_mut()
                .insert("content-type", "application/x-amz-json-1.0");
            HttpConnectorFuture::ready(Ok(response))
        }
    }
}

/// The overdue marker's loop run as its function (`mark-overdue`), so that the runner's policy
/// check applies to its calls as it does when the schedule runs it.
pub async fn mark_overdue(
    ctx: &Ctx,
    now: time::OffsetDateTime,
    page_size: i32,
    may_start_page: impl FnMut() -> bool,
) -> Result<singlet_functions::loans::mark_overdue::Report, singlet_functions::error::ApiError> {
    use singlet_functions::loans::mark_overdue::{FUNCTION, mark_overdue};
    singlet::serve::iam::serving(FUNCTION, mark_overdue(ctx, now, page_size, may_start_page)).await
}
