//! The context every handler is given: the DynamoDB client, the table's name and the server's
//! keys (cursors, derived ids). It is read from the environment here and nowhere else, once per cold start.

use crate::clock::Clock;
use crate::cursor::CursorKeys;
use crate::events::archive::{Archive, S3Archive};
use crate::events::bus::{Bus, EventBridge};
use crate::ids::IdKey;
use crate::secret::{SERVER_SECRET_VAR, SecretsManager, ServerSecret};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{BehaviorVersion, Region, SharedHttpClient};
use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
use aws_smithy_http_client::tls::{Provider, TlsContext, TrustStore};
use aws_smithy_runtime_api::client::connector_metadata::ConnectorMetadata;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use std::sync::Arc;
use std::time::Duration;

/// Everything a handler needs, built once per cold start and shared by every request.
#[derive(Clone)]
pub struct Ctx {
    pub db: Client,
    pub table: Arc<str>,
    pub cursors: Arc<CursorKeys>,
    /// Derives entity ids from `Idempotency-Key`s.
    pub ids: Arc<IdKey>,
    /// Keys the one-account lock of a subject ([`OWNER_KEY_VAR`]; the id key when unset).
    pub owners: Arc<IdKey>,
    /// How long a request may take in all before it is answered `503` ([`REQUEST_DEADLINE`]).
    pub deadline: Duration,
    /// What time it is for this context's handlers: the system's, except where the local
    /// runner sets another (`invoke --clock`).
    pub clock: Clock,
    /// Where `publish-events` publishes: EventBridge's bus `EVENT_BUS_NAME` on AWS, the runner's
    /// local bus on a developer's machine; `None` for every other function.
    pub bus: Option<Arc<dyn Bus>>,
    /// Where `publish-events` archives what TTL deleted: S3 on AWS, `.singlet/archive/` on a
    /// developer's machine; `None` for every other function.
    pub archive: Option<Arc<dyn Archive>>,
    /// How long a returned loan is kept, in days, before it expires (`LoanHistoryDays`).
    pub loan_history_days: i64,
}

/// How long a returned loan is kept unless `LOAN_HISTORY_DAYS` (the template's
/// `LoanHistoryDays`, the runner's `--loan-history-days`) says otherwise.
pub const DEFAULT_LOAN_HISTORY_DAYS: i64 = 400;

/// `LOAN_HISTORY_DAYS` as a number of days (1 to 36,500), or why it is none.
pub fn parse_loan_history_days(raw: &str) -> Result<i64, String> {
    raw.trim()
        .parse::<i64>()
        .ok()
        .filter(|days| (1..=36_500).contains(days))
        .ok_or_else(|| {
            format!("the loan history period {raw:?} is not a number of days from 1 to 36500")
        })
}

/// The variable (or the server secret's field) holding the key a subject's one-account lock is
/// keyed under, when it is not the server's current key: the key a rotation replaced, kept here
/// for good, so that the locks made before it still name their accounts (docs/guide/deploy.md,
/// "The server secret"). The lock's key is a keyed hash of the subject, and re-keying every lock at each
/// rotation would leave a window in which a subject could open a second account.
pub const OWNER_KEY_VAR: &str = "OWNER_KEY";

/// The deadline around every request's handler: under the Lambda's 10 s timeout, so a request
/// whose engine calls and retries add up is answered `503` with `retry-after` by the function,
/// never by API Gateway's generic error when the Lambda is killed.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(8);

/// The variable naming the EventBridge bus a function publishes to: set on the publisher only
/// (`routes::STREAMED`, and so `template.yaml`).
pub const EVENT_BUS_VAR: &str = "EVENT_BUS_NAME";

/// The variable naming the bucket the publisher archives what TTL deleted in (retention).
pub const ARCHIVE_BUCKET_VAR: &str = "ARCHIVE_BUCKET";

impl Ctx {
    pub fn new(db: Client, table: impl Into<Arc<str>>, cursors: CursorKeys) -> Self {
        let ids = Arc::new(IdKey::derived_from(cursors.server_secret()));
        crate::ids::use_log_key(ids.clone());
        Self {
            db,
            table: table.into(),
            owners: ids.clone(),
            ids,
            cursors: Arc::new(cursors),
            deadline: REQUEST_DEADLINE,
            clock: Clock::system(),
            bus: None,
            archive: None,
            loan_history_days: DEFAULT_LOAN_HISTORY_DAYS,
        }
    }

    /// The same context, keying subjects' one-account locks under `owner_key` ([`OWNER_KEY_VAR`]).
    pub fn with_owner_key(mut self, owner_key: &str) -> Result<Self, String> {
        if owner_key.len() < crate::cursor::MIN_KEY_LEN {
            return Err(format!(
                "{OWNER_KEY_VAR} is shorter than {} bytes",
                crate::cursor::MIN_KEY_LEN
            ));
        }
        self.owners = Arc::new(IdKey::derived_from(owner_key.as_bytes()));
        Ok(self)
    }

    /// The same context, archiving TTL deletions to `archive`.
    pub fn with_archive(mut self, archive: Arc<dyn Archive>) -> Self {
        self.archive = Some(archive);
        self
    }

    /// The same context, publishing events to `bus`.
    pub fn with_bus(mut self, bus: Arc<dyn Bus>) -> Self {
        self.bus = Some(bus);
        self
    }

    /// The Lambda context. `TABLE_NAME` and the cursor keys are required: a function that would
    /// quietly talk to a default table, or sign cursors no other instance accepts, stops its cold
    /// start instead, and the reason is the one line it logs.
    ///
    /// On AWS the keys come from the Secrets Manager secret `SERVER_SECRET_ARN` names, read once
    /// here ([`ServerSecret`]), not from plain variables that `lambda:GetFunctionConfiguration`
    /// shows; a variable of the same name is read only where the secret has no such field.
    ///
    /// A function that does not `hold_keys` ([`crate::routes::Route::holds_server_keys`]) is not
    /// granted the secret and does not read it: it signs nothing another instance must verify,
    /// so a key of its own instance is enough for what it keys (a log line's pseudonyms).
    pub async fn from_lambda_env(holds_keys: bool) -> Result<Self, String> {
        let var = |name: &str| std::env::var(name).ok();
        if !holds_keys {
            return Self::without_server_keys(var);
        }
        let Some(id) = non_empty_var(SERVER_SECRET_VAR) else {
            return Self::from_vars(var);
        };
        // The DynamoDB client is made on a thread of its own while the secret is read: making it
        // is all CPU (its crate's endpoint partitions), the read mostly a wait on the network
        // (docs/guide/cold-starts.md).
        let db = tokio::task::spawn_blocking(lambda_client);
        let secret = Self::read_secret(&id).await?;
        let db = db
            .await
            .map_err(|error| format!("the DynamoDB client: {error}"))?;
        Self::from_secret_and_vars_on(&secret, db, var)
    }

    /// The server secret `id`, read from Secrets Manager as the Lambda's other clients call AWS.
    async fn read_secret(id: &str) -> Result<ServerSecret, String> {
        let config = lambda_sdk_config();
        let credentials = config
            .credentials_provider()
            .ok_or("the Lambda's SDK configuration has no credentials")?;
        let service = SecretsManager::from_lambda_env(&credentials, lambda_connector()).await?;
        ServerSecret::fetch(&service, id).await
    }

    /// [`Ctx::from_vars`], each variable taken from `secret` when it has a field of that name.
    pub fn from_secret_and_vars(
        secret: &ServerSecret,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        Self::from_secret_and_vars_on(secret, lambda_client(), var)
    }

    /// [`Ctx::from_secret_and_vars`] with the client `db`: every variable the context reads
    /// (the keys, and the owner key a rotation left, [`OWNER_KEY_VAR`]) is the secret's field
    /// of that name first.
    fn from_secret_and_vars_on(
        secret: &ServerSecret,
        db: Client,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let var = |name: &str| secret.get(name).or_else(|| var(name));
        Self::checked(CursorKeys::from_vars(var)?, db, var)
    }

    /// [`Ctx::from_lambda_env`] with the variables read by `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        Self::checked(CursorKeys::from_vars(&var)?, lambda_client(), var)
    }

    /// The context with the server's keys `cursors` and the client `db`, unless the keys are
    /// published ones.
    fn checked(
        cursors: CursorKeys,
        db: Client,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        // `sam local invoke` runs this binary with events/env.json's published key, on purpose.
        if cursors.is_published() && var("AWS_SAM_LOCAL").as_deref() != Some("true") {
            return Err(
                "CURSOR_KEY is a key published with singlet's source: anyone could sign \
                 cursors and compute derived ids; deploy with a secret of your own"
                    .into(),
            );
        }
        Self::with_cursor_keys(cursors, db, var)
    }

    /// The context of a function that does not hold the server's keys, from the variables read
    /// by `var`: keys of this instance alone, which nothing it does has to share.
    pub fn without_server_keys(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        Self::with_cursor_keys(CursorKeys::random(), lambda_client(), var)
    }

    /// [`Ctx::from_vars`] with the server's keys given.
    fn with_cursor_keys(
        cursors: CursorKeys,
        db: Client,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let table = var("TABLE_NAME")
            .filter(|t| !t.is_empty())
            .ok_or("TABLE_NAME is not set: the function does not know its table")?;
        let mut ctx = Self::new(db, table, cursors);
        if let Some(owner_key) = var(OWNER_KEY_VAR).filter(|k| !k.is_empty()) {
            ctx = ctx.with_owner_key(&owner_key)?;
        }
        if let Some(days) = var("LOAN_HISTORY_DAYS").filter(|d| !d.is_empty()) {
            ctx.loan_history_days = parse_loan_history_days(&days)?;
        }
        Ok(ctx)
    }

    /// The publisher's outlets, from the variables read by `var`: the bus its events go to, and
    /// the archive of what TTL deleted. Only the events bootstrap (`singlet-events-lambda`) calls
    /// this, so only it links the EventBridge and S3 clients; the API's bootstrap holds neither
    /// (docs/guide/deploy.md, "`sam build`").
    pub fn with_publisher_outlets(mut self, var: impl Fn(&str) -> Option<String>) -> Self {
        if let Some(bucket) = var(ARCHIVE_BUCKET_VAR).filter(|name| !name.is_empty()) {
            self = self.with_archive(Arc::new(S3Archive::new(s3_client(), bucket)));
        }
        match var(EVENT_BUS_VAR).filter(|name| !name.is_empty()) {
            Some(bus_name) => {
                self.with_bus(Arc::new(EventBridge::new(eventbridge_client(), bus_name)))
            }
            None => self,
        }
    }
}

/// What every client a Lambda makes shares, from the variables Lambda sets and nothing else:
/// the region from `AWS_REGION`, the execution role's credentials from `AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` (the SDK's environment provider), Amazon's
/// roots ([`amazon_roots`]), the timeouts and the retries. `aws_config::load` would also look for
/// profile files, SSO, web identity, container and instance credentials, none of which a Lambda
/// has: that search cost every cold start time, and every binary the credential providers' code
/// (docs/guide/cold-starts.md).
///
/// Made once and shared: every client then shares one HTTPS connector, whose trust store and TLS
/// context are the costly part of making a client, and one credentials cache; the Secrets
/// Manager client's connection pool is the DynamoDB client's.
fn lambda_sdk_config() -> aws_config::SdkConfig {
    static CONFIG: std::sync::OnceLock<aws_config::SdkConfig> = std::sync::OnceLock::new();
    CONFIG.get_or_init(new_lambda_sdk_config).clone()
}

fn new_lambda_sdk_config() -> aws_config::SdkConfig {
    aws_config::SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(std::env::var("AWS_REGION").ok().map(Region::new))
        .credentials_provider(aws_sdk_dynamodb::config::SharedCredentialsProvider::new(
            aws_config::environment::EnvironmentVariableCredentialsProvider::new(),
        ))
        .http_client(SharedHttpClient::new(LambdaHttpClient))
        .timeout_config(timeouts())
        .retry_config(retries())
        .build()
}

/// `variable`'s value when it is set and not empty: a service's endpoint for `sam local` and the
/// tests (`AWS_ENDPOINT_URL_DYNAMODB`, ...), where an empty value means the service itself, and
/// the server secret's id (`SERVER_SECRET_VAR`), where it means none.
fn non_empty_var(variable: &str) -> Option<String> {
    std::env::var(variable).ok().filter(|url| !url.is_empty())
}

/// The Lambda's DynamoDB client (`lambda_sdk_config`), on `AWS_ENDPOINT_URL_DYNAMODB` when set.
pub fn lambda_client() -> Client {
    let mut config = aws_sdk_dynamodb::config::Builder::from(&lambda_sdk_config());
    config.set_endpoint_url(non_empty_var("AWS_ENDPOINT_URL_DYNAMODB"));
    config.push_interceptor(trace_header());
    Client::from_conf(config.build())
}

/// Every Lambda client's calls carry the trace id of the invocation that made them
/// ([`crate::invocation::TraceHeader`]), however many invocations one process serves.
fn trace_header() -> aws_sdk_dynamodb::config::SharedInterceptor {
    aws_sdk_dynamodb::config::SharedInterceptor::new(crate::invocation::TraceHeader)
}

/// The publisher's EventBridge client, built as [`lambda_client`] is.
pub fn eventbridge_client() -> aws_sdk_eventbridge::Client {
    let mut config = aws_sdk_eventbridge::config::Builder::from(&lambda_sdk_config());
    config.set_endpoint_url(non_empty_var("AWS_ENDPOINT_URL_EVENTBRIDGE"));
    config.push_interceptor(trace_header());
    aws_sdk_eventbridge::Client::from_conf(config.build())
}

/// The publisher's S3 client, built as [`lambda_client`] is; path-style addressing on an
/// endpoint of its own (`AWS_ENDPOINT_URL_S3`: a local S3 has no bucket subdomains).
pub fn s3_client() -> aws_sdk_s3::Client {
    let mut config = aws_sdk_s3::config::Builder::from(&lambda_sdk_config());
    if let Some(endpoint) = non_empty_var("AWS_ENDPOINT_URL_S3") {
        config.set_endpoint_url(Some(endpoint));
        config.set_force_path_style(Some(true));
    }
    config.push_interceptor(trace_header());
    aws_sdk_s3::Client::from_conf(config.build())
}

/// How long a connection to AWS (or the engine) may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(1000);

/// How long one request to the engine may take, and all its retries together: well under the
/// Lambda's 10 s timeout, so a stalled engine is a `503` with `retry-after` (and a writer learns
/// its write may not have committed) rather than API Gateway's generic error.
pub fn timeouts() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .operation_attempt_timeout(Duration::from_millis(1500))
        .operation_timeout(Duration::from_millis(4000))
        .build()
}

/// The SDK's standard retries (throttling, transient errors, timed-out attempts), three
/// attempts in all within [`timeouts`].
///
/// Standard, not adaptive, on purpose: a throttle here is most often one hot partition key
/// (DynamoDB's per-key limits, docs/guide/partition-limits.md), and adaptive mode's client-side
/// rate limiter slows every request of the client after a throttle, to every key, where
/// standard mode backs off the throttled request alone (exponential, with jitter). A request
/// still throttled after its attempts is the API's `503` `/problems/throttled`
/// (`ApiError::Throttled`), which the caller retries after `Retry-After`.
pub fn retries() -> RetryConfig {
    RetryConfig::standard().with_max_attempts(3)
}

/// A client from the standard AWS configuration (environment, profile, instance role), on
/// `endpoint` when given, else on `AWS_ENDPOINT_URL_DYNAMODB` or DynamoDB itself.
pub async fn client_from_env(endpoint: Option<&str>) -> Client {
    let mut loader = aws_config::from_env()
        .http_client(https_client())
        .timeout_config(timeouts())
        .retry_config(retries());
    if let Some(endpoint) = endpoint {
        loader = loader.endpoint_url(endpoint);
    }
    Client::new(&loader.load().await)
}

/// An HTTPS client trusting the system's roots, for the local runner.
pub fn https_client() -> SharedHttpClient {
    https_client_trusting(TrustStore::default())
}

/// An HTTPS client on rustls with `ring` (no aws-lc-rs jitter-entropy seeding on the first
/// request), trusting `roots`.
fn https_client_trusting(roots: TrustStore) -> SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .tls_context(tls_context(roots))
        .build_https()
}

fn tls_context(roots: TrustStore) -> TlsContext {
    TlsContext::builder()
        .with_trust_store(roots)
        .build()
        .expect("a trust store is a valid TLS context")
}

/// The one HTTPS connector a Lambda makes, on first use, trusting Amazon's roots
/// ([`amazon_roots`]): every client's calls go through it (`LambdaHttpClient`), and so does the
/// server secret's read at cold start ([`crate::secret`]).
pub fn lambda_connector() -> SharedHttpConnector {
    static CONNECTOR: std::sync::OnceLock<SharedHttpConnector> = std::sync::OnceLock::new();
    CONNECTOR
        .get_or_init(|| https_connector_trusting(amazon_roots()))
        .clone()
}

/// An HTTPS connector on rustls with `ring`, trusting `roots`, with [`timeouts`]' connect timeout.
fn https_connector_trusting(roots: TrustStore) -> SharedHttpConnector {
    let settings = HttpConnectorSettings::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .build();
    SharedHttpConnector::new(
        aws_smithy_http_client::Connector::builder()
            .connector_settings(settings)
            .tls_provider(Provider::Rustls(CryptoMode::Ring))
            .tls_context(tls_context(roots))
            .build(),
    )
}

/// The Lambda's HTTP client: [`lambda_connector`] for every client and every call.
///
/// Why not the SDK's hyper client: asked to validate each client's configuration, it builds a
/// whole HTTPS connector and throws it away (so that a machine's native roots load at client
/// creation), and it keeps a connector per client. With Amazon's roots compiled in, that was a
/// TLS context and five PEM certificates parsed for nothing per client made, about 240,000
/// instructions each (`callgrind`, docs/notebooks/cold-starts.md). Here the connector is made when a
/// request first needs it, once: the settings each client passes are ignored because every
/// client a Lambda makes has the same ones ([`timeouts`]).
#[derive(Debug)]
struct LambdaHttpClient;

impl HttpClient for LambdaHttpClient {
    fn http_connector(
        &self,
        _settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        lambda_connector()
    }

    fn connector_metadata(&self) -> Option<ConnectorMetadata> {
        Some(ConnectorMetadata::new("hyper", Some("1.x".into())))
    }
}

/// The five roots of Amazon Trust Services (`amazon-roots.pem`: Amazon Root CA 1 to 4 and
/// Starfield Services Root CA G2), to which every AWS endpoint's certificate chains, DynamoDB's
/// included. Compiled in, they spare a cold start reading and parsing the system's ~140 roots.
pub fn amazon_roots() -> TrustStore {
    TrustStore::empty().with_pem_certificate(include_bytes!("amazon-roots.pem").as_slice())
}
