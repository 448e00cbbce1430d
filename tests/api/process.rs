//! The `singlet` binary as a child process, for the tests of the runner itself: started with
//! nothing from the calling shell steering it, on ports the system picks (`--port 0`,
//! `--engine-port 0`: a port a test picked and freed could be taken again before the runner binds
//! it), its addresses read from its own log lines, killed when the test ends however it ends.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The runner binary with the tests' key directory (whose tokens `harness::token` mints), local
/// credentials, and none of the variables that would steer it from the calling shell.
pub fn singlet() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_singlet"));
    command
        .arg("--key-dir")
        .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-keys"))
        .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
        .env_remove("TABLE_NAME")
        .env_remove("RUST_LOG")
        .env_remove("CURSOR_KEY")
        .env_remove("CURSOR_KEY_PREVIOUS")
        .env_remove("CURSOR_KEY_PREVIOUS_UNTIL")
        .env_remove("OWNER_KEY")
        // Any credentials do for a local engine, as for DynamoDB Local.
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_REGION", "us-east-1");
    command
}

/// What `command` printed on standard output, as JSON, once it succeeded (what it printed on
/// standard error, if it did not).
pub fn json_printed(command: &mut Command) -> Value {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// A runner serving the API: its base URL, and its embedded engine's endpoint if it serves one.
pub struct Running {
    child: Child,
    pub api: String,
    pub engine: Option<String>,
    /// dynoxide's own endpoint, which the runner's clients use, and whether the runner said it
    /// is on a port browsers refuse (`false`: it warned that every such port was taken).
    pub own_engine: Option<(String, bool)>,
    /// The console's URL, secret included, as the runner printed it (none with `--no-console`).
    pub console: Option<String>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `command` serving the API on a port the system picks (and the embedded engine's
/// endpoint too, unless `command` names a port), once it has logged where it listens.
pub fn serve(mut command: Command) -> Running {
    let named_engine_port = command
        .get_args()
        .any(|a| a.to_string_lossy().starts_with("--engine-port"));
    command.args(["--port", "0"]);
    if !named_engine_port {
        command.args(["--engine-port", "0"]);
    }
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Held from here, so that a runner that never says where it serves is still killed.
    let mut running = Running {
        child,
        api: String::new(),
        engine: None,
        own_engine: None,
        console: None,
    };
    // The runner logs JSON lines on standard error; the pipe is drained to the end, so that a
    // chatty runner never blocks on a full pipe.
    let stderr = running.child.stderr.take().unwrap();
    let (lines, logged) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    // Everything it said (a refused argument, a panic, an error logged), for the failure message.
    let mut said = Vec::new();
    while running.api.is_empty() {
        let line = logged
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| {
                panic!(
                    "the runner did not say where it serves ({e}): {command:?}\n{}",
                    said.join("\n")
                )
            });
        let mut said_line = serde_json::from_str::<Value>(&line).unwrap_or_default();
        let fields = said_line["fields"].take();
        if let Some(own) = fields["own_endpoint"].as_str() {
            running.own_engine = Some((own.to_owned(), said_line["level"] == "INFO"));
        }
        if let Some(endpoint) = fields["endpoint"].as_str() {
            running.engine = Some(endpoint.to_owned());
        }
        if let Some(api) = fields["api"].as_str() {
            running.api = api.to_owned();
            running.console = fields["console"].as_str().map(str::to_owned);
        }
        said.push(line);
    }
    running
}

/// Makes an empty table in the data file `data` (and its directory), as `load` of an export of
/// no items does: for a command that refuses a data file that is not there (`fsck`, `migrate`,
/// `export`).
pub fn an_empty_table(data: &Path) {
    let empty = data.with_extension("empty-export");
    std::fs::create_dir_all(empty.join("data")).unwrap();
    std::fs::write(empty.join("manifest-summary.json"), r#"{"itemCount": 0}"#).unwrap();
    let made = singlet()
        .arg("--data")
        .arg(data)
        .arg("load")
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(made.status.code(), Some(0), "{made:?}");
}
