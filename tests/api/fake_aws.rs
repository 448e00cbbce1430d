//! An AWS endpoint of the test's own, for the calls no local engine has (Step Functions, S3):
//! one HTTP server on a loopback port that notes every request and answers each as the test's
//! script says; and the `singlet` binary run against such endpoints, with nothing from the
//! calling shell (no profile, no credentials file) steering it.

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use serde_json::Value;
use std::sync::{Arc, Mutex};

/// One request the endpoint received.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// The awsJson protocols' operation (`X-Amz-Target`), or empty.
    pub target: String,
    pub body: Bytes,
}

impl Request {
    /// The body as JSON (`Null` when it is none).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// An answer: its status, content type and body.
pub type Answer = (u16, &'static str, Vec<u8>);

/// An answer of the awsJson 1.0 protocol (Step Functions, DynamoDB).
pub fn json_1_0(status: u16, body: Value) -> Answer {
    (
        status,
        "application/x-amz-json-1.0",
        body.to_string().into_bytes(),
    )
}

/// The fake endpoint; stopped when dropped.
pub struct FakeAws {
    pub url: String,
    seen: Arc<Mutex<Vec<Request>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeAws {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeAws {
    /// Serves every method and path, each request answered by `answer`.
    pub async fn start(answer: impl Fn(&Request) -> Answer + Send + Sync + 'static) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (noted, answer) = (seen.clone(), Arc::new(answer));
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let (noted, answer) = (noted.clone(), answer.clone());
                async move {
                    let request = Request {
                        method: method.to_string(),
                        path: uri.path().to_owned(),
                        target: headers
                            .get("x-amz-target")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned(),
                        body,
                    };
                    let (status, content_type, body) = answer(&request);
                    noted.lock().unwrap().push(request);
                    (
                        StatusCode::from_u16(status).unwrap(),
                        [("content-type", content_type)],
                        body,
                    )
                }
            },
        );
        let (url, server) = crate::harness::serve_on_loopback(app).await;
        Self { url, seen, server }
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }
}

/// `singlet <args>` with only the environment a machine with no AWS configuration has, plus
/// test credentials, a region, and `endpoints` (`("AWS_ENDPOINT_URL_SFN", url)`, ...); run on a
/// blocking thread: its exit code, standard output and standard error.
pub async fn singlet(args: &[&str], endpoints: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    let endpoints: Vec<(String, String)> = endpoints
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let home = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake-aws-home");
        std::fs::create_dir_all(&home).unwrap();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_singlet"))
            .env_clear()
            .env("HOME", &home)
            .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
            .env("AWS_SECRET_ACCESS_KEY", "secret")
            .env("AWS_REGION", "us-east-1")
            .envs(endpoints)
            .args(&args)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    })
    .await
    .unwrap()
}

/// S3 holding `objects` (`("/<bucket>/<key>", JSON)`, path-style as the CLI addresses a local
/// endpoint): a `GET` of one answers it, any other request `404 NoSuchKey`.
pub async fn s3_holding(objects: Vec<(String, Value)>) -> FakeAws {
    let objects: std::collections::HashMap<String, Value> = objects.into_iter().collect();
    FakeAws::start(move |request| match objects.get(&request.path) {
        Some(object) if request.method == "GET" => {
            (200, "application/json", object.to_string().into_bytes())
        }
        _ => {
            let missing = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
                <Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>";
            (404, "application/xml", missing.as_bytes().to_vec())
        }
    })
    .await
}
