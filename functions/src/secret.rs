//! The server's keys, read once per cold start from Secrets Manager: one `GetSecretValue`,
//! signed with the SDK's own SigV4 signer (`aws-sigv4`) and sent on the HTTPS connector every
//! DynamoDB call of the function then reuses.
//!
//! Why not `aws-sdk-secretsmanager`'s client: making it parses that crate's own copy of AWS's
//! endpoint partitions and compiles their region patterns, and its request pipeline runs a dozen
//! interceptors, all for one call per instance: 870,000 of the 1.41 million instructions the read
//! cost before a function's first `/next`, and what kept the functions that hold the keys above
//! 1.25× the hello's init (docs/guide/cold-starts.md). What is left is what any call to AWS needs: a
//! TLS context (the one the function's DynamoDB calls would otherwise build on their first
//! request), the signature and the exchange.

use aws_credential_types::Credentials;
use aws_credential_types::provider::ProvideCredentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::http::{HttpConnector, SharedHttpConnector};
use aws_smithy_runtime_api::client::identity::Identity;
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::byte_stream::ByteStream;
use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// The variable naming the Secrets Manager secret (its ARN or name) that holds the server's keys
/// on AWS.
pub const SERVER_SECRET_VAR: &str = "SERVER_SECRET_ARN";

/// The variable holding Secrets Manager's endpoint: the template sets it from the stack's region
/// and partition (`https://secretsmanager.${AWS::Region}.${AWS::URLSuffix}`), so no table of
/// partitions is restated here; the tests and the cold-start bench point it at a mock.
pub const ENDPOINT_VAR: &str = "AWS_ENDPOINT_URL_SECRETS_MANAGER";

/// How many times the read is tried before the cold start gives up (as the SDK's standard
/// retries: a throttled, failed or timed-out attempt is tried again), and how long it may take
/// in all.
const ATTEMPTS: u32 = 3;
const DEADLINE: Duration = Duration::from_secs(4);

/// Secrets Manager, as the one call a cold start makes to it needs it.
pub struct SecretsManager {
    endpoint: String,
    region: String,
    credentials: Credentials,
    connector: SharedHttpConnector,
}

impl SecretsManager {
    /// Secrets Manager at `endpoint` in `region`, called as `credentials` on `connector`.
    pub fn new(
        endpoint: impl Into<String>,
        region: impl Into<String>,
        credentials: Credentials,
        connector: SharedHttpConnector,
    ) -> Self {
        Self {
            endpoint: endpoint.into().trim_end_matches('/').to_owned(),
            region: region.into(),
            credentials,
            connector,
        }
    }

    /// Secrets Manager as a Lambda reaches it: [`ENDPOINT_VAR`], `AWS_REGION` and the execution
    /// role's credentials from the variables Lambda sets, on `connector`.
    pub async fn from_lambda_env(
        credentials: &impl ProvideCredentials,
        connector: SharedHttpConnector,
    ) -> Result<Self, String> {
        let endpoint = std::env::var(ENDPOINT_VAR)
            .ok()
            .filter(|url| !url.is_empty())
            .ok_or_else(|| {
                format!("{ENDPOINT_VAR} is not set: the server secret has no endpoint")
            })?;
        let region = std::env::var("AWS_REGION")
            .ok()
            .filter(|region| !region.is_empty())
            .ok_or("AWS_REGION is not set: the server secret cannot be read")?;
        let credentials = credentials
            .provide_credentials()
            .await
            .map_err(|error| format!("no credentials to read the server secret: {error}"))?;
        Ok(Self::new(endpoint, region, credentials, connector))
    }

    /// The `SecretString` of the secret `id`: tried [`ATTEMPTS`] times where the failure may pass.
    async fn secret_string(&self, id: &str) -> Result<String, String> {
        let body = serde_json::json!({ "SecretId": id }).to_string();
        let mut attempt = 1;
        loop {
            match self.get_secret_value(&body).await {
                Ok(answer) => return Ok(answer),
                Err(Failure::Transient(reason)) if attempt < ATTEMPTS => {
                    tracing::warn!(attempt, reason, "reading the server secret, trying again");
                    tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
                    attempt += 1;
                }
                Err(Failure::Transient(reason) | Failure::Final(reason)) => return Err(reason),
            }
        }
    }

    /// One `GetSecretValue` (Secrets Manager's JSON protocol: a `POST` to `/` naming the
    /// operation in `x-amz-target`), signed for `secretsmanager` in the region.
    async fn get_secret_value(&self, body: &str) -> Result<String, Failure> {
        const HEADERS: [(&str, &str); 2] = [
            ("content-type", "application/x-amz-json-1.1"),
            ("x-amz-target", "secretsmanager.GetSecretValue"),
        ];
        let url = format!("{}/", self.endpoint);
        let identity = Identity::from(self.credentials.clone());
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("secretsmanager")
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|error| Failure::Final(error.to_string()))?
            .into();
        let signable = SignableRequest::new(
            "POST",
            &url,
            HEADERS.into_iter(),
            SignableBody::Bytes(body.as_bytes()),
        )
        .map_err(|error| Failure::Final(format!("the endpoint {url} cannot be signed: {error}")))?;
        let (signature, _) = sign(signable, &params)
            .map_err(|error| Failure::Final(error.to_string()))?
            .into_parts();

        let mut request = HttpRequest::new(SdkBody::from(body.to_owned()));
        request
            .set_method("POST")
            .map_err(|error| Failure::Final(error.to_string()))?;
        request
            .set_uri(url.as_str())
            .map_err(|error| Failure::Final(format!("the endpoint {url}: {error}")))?;
        for (name, value) in HEADERS.into_iter().chain(signature.headers()) {
            request
                .headers_mut()
                .insert(name.to_owned(), value.to_owned());
        }
        let exchange = async {
            let response = self
                .connector
                .call(request)
                .await
                .map_err(|error| Failure::Transient(error.to_string()))?;
            let status = response.status().as_u16();
            let bytes = ByteStream::new(response.into_body())
                .collect()
                .await
                .map_err(|error| Failure::Transient(error.to_string()))?
                .into_bytes();
            Ok::<_, Failure>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(DEADLINE, exchange)
            .await
            .map_err(|_| Failure::Transient(format!("no answer within {DEADLINE:?}")))??;
        let answer: Answer = serde_json::from_slice(&bytes).unwrap_or_default();
        match status {
            200 => answer.secret_string.ok_or_else(|| {
                Failure::Final("it holds no SecretString (a binary secret?)".to_owned())
            }),
            _ => {
                let code = answer.code.as_deref().unwrap_or("no error code");
                // `__type` may carry the model's namespace: `…#ThrottlingException`.
                let code = code.rsplit('#').next().unwrap_or(code);
                let reason = format!(
                    "{code} ({status}): {}",
                    answer.message.as_deref().unwrap_or("no message")
                );
                Err(if status >= 500 || code.contains("Throttl") {
                    Failure::Transient(reason)
                } else {
                    Failure::Final(reason)
                })
            }
        }
    }
}

/// Why an attempt failed: worth another try or not.
enum Failure {
    Transient(String),
    Final(String),
}

/// The fields of `GetSecretValue`'s answer (or of its error) that the read uses.
#[derive(Default, serde::Deserialize)]
struct Answer {
    #[serde(rename = "SecretString")]
    secret_string: Option<String>,
    #[serde(rename = "__type")]
    code: Option<String>,
    #[serde(alias = "Message")]
    message: Option<String>,
}

/// The server's keys as a Secrets Manager secret holds them: a JSON object whose fields are named
/// as the variables they stand for (`{"CURSOR_KEY": "…"}`, and `CURSOR_KEY_PREVIOUS` with
/// `CURSOR_KEY_PREVIOUS_UNTIL` during a rotation: docs/guide/deploy.md, "The server secret"). The
/// template generates it, so no person ever types or sees the key.
#[derive(Default)]
pub struct ServerSecret(HashMap<String, String>);

impl ServerSecret {
    /// The secret `id`'s current value, read from `service`. Every failure is a sentence naming
    /// the secret and the whole cause, never a part of the value.
    pub async fn fetch(service: &SecretsManager, id: &str) -> Result<Self, String> {
        let text = service
            .secret_string(id)
            .await
            .map_err(|reason| format!("cannot read the server secret {id}: {reason}"))?;
        let fields = serde_json::from_str(&text).map_err(|_| {
            format!(
                "the server secret {id} is not a JSON object of strings such as \
                 {{\"CURSOR_KEY\": \"…\"}}"
            )
        })?;
        Ok(Self(fields))
    }

    /// The field `name`, if the secret has it.
    pub fn get(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
}
