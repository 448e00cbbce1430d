//! The context every handler is given: the DynamoDB client, the table's name and the server's
//! keys (cursors, derived ids). It is read from the environment here and nowhere else, once per cold start.

use crate::cursor::CursorKeys;
use crate::ids::IdKey;
use aws_sdk_dynamodb::Client;
use std::sync::Arc;

/// Everything a handler needs, built once per cold start and shared by every request.
#[derive(Clone)]
pub struct Ctx {
    pub db: Client,
    pub table: Arc<str>,
    pub cursors: Arc<CursorKeys>,
    /// Derives entity ids from `Idempotency-Key`s.
    pub ids: Arc<IdKey>,
}

impl Ctx {
    pub fn new(db: Client, table: impl Into<Arc<str>>, cursors: CursorKeys) -> Self {
        Self {
            db,
            table: table.into(),
            ids: Arc::new(IdKey::derived_from(cursors.signing_secret())),
            cursors: Arc::new(cursors),
        }
    }

    /// The Lambda context. `TABLE_NAME` and the cursor keys are required: a function that would
    /// quietly talk to a default table, or sign cursors no other instance accepts, stops its cold
    /// start instead, and the reason is the one line it logs.
    pub async fn from_lambda_env() -> Result<Self, String> {
        let table = std::env::var("TABLE_NAME")
            .ok()
            .filter(|t| !t.is_empty())
            .ok_or("TABLE_NAME is not set: the function does not know its table")?;
        let cursors = CursorKeys::from_env()?;
        Ok(Self::new(client_from_env(None).await, table, cursors))
    }
}

/// A client from the standard AWS configuration (environment, profile, instance role), on
/// `endpoint` when given, else on `AWS_ENDPOINT_URL_DYNAMODB` or DynamoDB itself.
pub async fn client_from_env(endpoint: Option<&str>) -> Client {
    let mut loader = aws_config::from_env().http_client(https_client());
    if let Some(endpoint) = endpoint {
        loader = loader.endpoint_url(endpoint);
    }
    Client::new(&loader.load().await)
}

/// An HTTPS client on rustls with `ring`: no aws-lc-rs jitter-entropy seeding on the first request.
pub fn https_client() -> aws_sdk_dynamodb::config::SharedHttpClient {
    use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}
