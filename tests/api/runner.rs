//! `cargo run` itself: the runner binary serves the API on one port and the embedded engine's
//! DynamoDB endpoint on another, creates the table, and `invoke` runs one function on one event.

use crate::process::{self, Running};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A client carrying a token (every scope) that the runner, started with the tests' key
/// directory, accepts.
fn client() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let token = crate::harness::token("tester", &crate::harness::all_scopes(), &[]);
    headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

/// Starts the runner with `args` (its schedule off unless `args` sets it) serving the API.
fn start(args: &[&str]) -> Running {
    let mut command = process::singlet();
    command.args(args);
    if !args.contains(&"--mark-overdue-every") {
        command.args(["--mark-overdue-every", "0"]);
    }
    process::serve(command)
}

#[tokio::test]
async fn the_runner_serves_the_api_and_the_engines_own_endpoint() {
    let runner = start(&["--in-memory"]);
    let base = &runner.api;
    let http = client();

    let created = http
        .post(format!("{base}/vehicles"))
        .json(&json!({"plate": "KA19 XTR", "chassis": "WVW1", "depot": "north"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let vehicle: Value = created.json().await.unwrap();
    let missing = http
        .delete(format!("{base}/vehicles"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert_eq!(
        missing.json::<Value>().await.unwrap(),
        json!({"message": "Not Found"})
    );

    // Any DynamoDB client sees the table on the engine's endpoint.
    let engine = singlet::serve::engine::local_client(runner.engine.as_deref().unwrap());
    let lock = engine
        .get_item()
        .table_name("singlet")
        .key("PK", AttributeValue::S("PLATE#ka19xtr".into()))
        .key("SK", AttributeValue::S("PLATE#ka19xtr".into()))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    assert_eq!(
        lock["vehicleId"].as_s().unwrap(),
        vehicle["vehicleId"].as_str().unwrap()
    );
}

/// The engine's endpoint answers tools, not web pages (`singlet::serve::engine_door`): a browser's
/// request (it carries `Origin`), its CORS preflight, and a request naming a host that DNS
/// rebinding would (`Host: evil.example`), or an address the door was not reached at, are
/// refused with `403` and nothing of the table; the same `Scan` without them is answered.
#[tokio::test]
async fn the_engines_endpoint_refuses_web_pages() {
    let runner = start(&["--in-memory"]);
    let engine = runner.engine.clone().unwrap();
    // dynoxide's own endpoint, which the runner's clients use and the door forwards to, is on a
    // port every browser refuses to fetch from, unless (many runners at once) all were taken.
    let (own, refused_by_browsers) = runner.own_engine.clone().expect("the runner names it");
    let port: u16 = own.rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(
        singlet::serve::loopback::BROWSER_BLOCKED_PORTS.contains(&port),
        refused_by_browsers,
        "{own}: said {refused_by_browsers}"
    );
    let http = client();
    let created = http
        .post(format!("{}/vehicles", runner.api))
        .json(&json!({"plate": "WEB 1", "chassis": "WEBC1", "depot": "north"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let scan = |extra: &[(&'static str, &'static str)]| {
        let mut request = reqwest::Client::new()
            .post(&engine)
            .header("content-type", "application/x-amz-json-1.0")
            .header("x-amz-target", "DynamoDB_20120810.Scan")
            .header("x-amz-date", "20261202T000000Z")
            .header(
                "authorization",
                "AWS4-HMAC-SHA256 Credential=any/20261202/us-east-1/dynamodb/aws4_request, \
                 SignedHeaders=host;x-amz-date;x-amz-target, Signature=00",
            )
            .body(r#"{"TableName": "singlet"}"#);
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        request.send()
    };

    let answered = scan(&[]).await.unwrap();
    assert_eq!(answered.status(), 200);
    assert!(answered.text().await.unwrap().contains("web 1"));

    // A loopback address, IPv6 included, is this machine's.
    let answered = scan(&[("host", "[::1]:8000")]).await.unwrap();
    assert_eq!(answered.status(), 200);
    for refused in [
        vec![("origin", "https://evil.example")],
        vec![("host", "evil.example:8000")],
        // Not an IPv6 address for its bracket alone, nor an address the door was not reached at.
        vec![("host", "[evil.example]:8000")],
        vec![("host", "203.0.113.9:8000")],
    ] {
        let answer = scan(&refused).await.unwrap();
        assert_eq!(answer.status(), 403, "{refused:?}");
        let body = answer.text().await.unwrap();
        assert!(body.contains("AccessDeniedException"), "{body}");
        assert!(!body.contains("web 1"), "{body}");
    }
    let preflight = reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, &engine)
        .header("origin", "https://evil.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "x-amz-target")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 403);
    assert!(
        preflight
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
}

/// `singlet --in-memory invoke <function> --event events/<function>.json`: what it printed.
fn invoke(function: &str) -> Value {
    process::json_printed(process::singlet().current_dir(ROOT).args([
        "--in-memory",
        "invoke",
        function,
        "--event",
        &format!("events/{function}.json"),
    ]))
}

#[test]
fn invoke_prints_the_functions_response() {
    let response = invoke("get-vehicle");
    assert_eq!(
        response["statusCode"], 404,
        "an empty engine has no such vehicle"
    );
    assert_eq!(
        response["headers"]["content-type"],
        "application/problem+json"
    );

    let report = invoke("mark-overdue");
    assert_eq!(report["complete"], true);
    assert_eq!(report["now"], "2026-11-29T18:15:00Z");
}

/// The console's URL holds a secret made for this start, which its API requires; `--no-console`
/// serves the API alone.
#[tokio::test]
async fn the_console_needs_the_printed_secret_and_can_be_left_out() {
    let runner = start(&["--in-memory"]);
    let console = runner
        .console
        .clone()
        .expect("the runner prints the console's URL");
    let secret = console
        .split("token=")
        .nth(1)
        .expect("the URL holds the secret");
    assert!(secret.len() >= 32, "{console}");
    let http = reqwest::Client::new();
    let state = |secret: Option<&str>| {
        let mut request = http.get(format!("{}/_console/api/state", runner.api));
        if let Some(secret) = secret {
            request = request.header("x-singlet-console", secret);
        }
        request.send()
    };
    assert_eq!(state(None).await.unwrap().status(), 403);
    assert_eq!(state(Some("guess")).await.unwrap().status(), 403);
    assert_eq!(state(Some(secret)).await.unwrap().status(), 200);

    let bare = start(&["--in-memory", "--no-console"]);
    assert_eq!(bare.console, None);
    let page = http
        .get(format!("{}/_console", bare.api))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 404);
    let api = client()
        .get(format!("{}/vehicles/x1", bare.api))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 404, "the API is served");
}

/// `invoke --clock` runs a function as if its clock read that time, and fires a scheduled
/// function's event then: the sample event's own `time` (29 November) gives way, so the marker's
/// "now" is the clock's (were it the event's, the clock would cap it at the clock plus 5 minutes).
#[test]
fn invoke_runs_a_function_on_a_clock_of_ones_choosing() {
    let report = process::json_printed(
        process::singlet()
            .current_dir(ROOT)
            .args(["--in-memory", "invoke", "mark-overdue"])
            .args(["--event", "events/mark-overdue.json"])
            .args(["--clock", "2026-11-01T00:00:00Z"]),
    );
    assert_eq!(report["now"], "2026-11-01T00:00:00Z", "{report}");
    let refused = process::singlet()
        .current_dir(ROOT)
        .args(["--in-memory", "invoke", "mark-overdue"])
        .args(["--event", "events/mark-overdue.json", "--clock", "tomorrow"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("ISO-8601"));
    // A time a clock cannot keep is refused, not read as one centuries the other way (2500
    // read as 1915 before).
    let refused = process::singlet()
        .current_dir(ROOT)
        .args(["--in-memory", "invoke", "mark-overdue"])
        .args(["--event", "events/mark-overdue.json"])
        .args(["--clock", "2500-06-01T00:00:00Z"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "a usage error");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("too far from now"),
        "{refused:?}"
    );
}

/// `--data` keeps the engine's data across restarts; `--endpoint` and `--table` run the API on
/// another engine's table, created when missing.
#[tokio::test]
async fn the_runner_keeps_its_data_and_can_use_an_external_engine() {
    let dir = std::env::temp_dir().join(format!("singlet-runner-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let data = dir.join("nested").join("singlet.db");
    let data = data.to_str().unwrap();
    let body = json!({"plate": "KEEP-1", "chassis": "KEEP-1", "depot": "north"});

    let vehicle_id = {
        let runner = start(&["--data", data]);
        let base = &runner.api;
        let created = client()
            .post(format!("{base}/vehicles"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 201);
        created.json::<Value>().await.unwrap()["vehicleId"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first = start(&["--data", data]);
    let base = &first.api;
    let kept = client()
        .get(format!("{base}/vehicles/{vehicle_id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(kept.status(), 200, "the data outlives the runner");
    // The table's file, and SQLite's beside it, are their user's alone.
    #[cfg(unix)]
    for file in [data.to_owned(), format!("{data}-wal")] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{file}");
    }

    let endpoint = first.engine.clone().unwrap();
    let second = start(&["--endpoint", &endpoint, "--table", "other"]);
    let other = &second.api;
    let created = client()
        .post(format!("{other}/vehicles"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        created.status(),
        201,
        "another table: the plate is free there"
    );
    let engine = singlet::serve::engine::local_client(&endpoint);
    let tables = engine.list_tables().send().await.unwrap();
    let mut names = tables.table_names().to_vec();
    names.sort();
    assert_eq!(names, vec!["other".to_owned(), "singlet".to_owned()]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The runner runs `mark-overdue` on its schedule: a loan that has fallen due shows up in its
/// branch's overdue list within a tick.
#[tokio::test]
async fn the_runner_runs_mark_overdue_on_its_schedule() {
    let runner = start(&["--in-memory", "--mark-overdue-every", "1"]);
    let base = &runner.api;
    let http = client();
    let post = |path: &str, body: Value| http.post(format!("{base}{path}")).json(&body).send();
    let branch = json!({"branchId": "central", "name": "Central", "address": "1 Square", "city": "Springfield",
        "phone": "1", "openingHours": "always"});
    assert_eq!(post("/branches", branch).await.unwrap().status(), 201);
    let book = json!({"isbn": "0-306-40615-2", "title": "T", "author": "A", "publisher": "P", "publishYear": 1976,
        "genre": "G", "description": "D", "pageCount": 1});
    assert_eq!(post("/books", book).await.unwrap().status(), 201);
    let patron = json!({"cardNumber": "c1", "firstName": "Ada", "lastName": "L", "email": "ada@example.com", "membershipTier": "standard"});
    let patron: Value = post("/branches/central/patrons", patron)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let copy: Value = post(
        "/branches/central/copies",
        json!({"isbn": "9780306406157", "condition": "good"}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let loan: Value = post(
        "/checkouts",
        json!({"patronId": patron["patronId"], "branchId": "central", "copyId": copy["copyId"]}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let (patron_id, checkout_id) = (
        loan["patronId"].as_str().unwrap(),
        loan["checkoutId"].as_str().unwrap(),
    );

    // The loan falls due: move its due date an hour back, straight on the engine's endpoint.
    let past =
        singlet_functions::clock::iso(singlet_functions::clock::now() - time::Duration::hours(1));
    crate::harness::set_due_date(
        &singlet::serve::engine::local_client(runner.engine.as_deref().unwrap()),
        "singlet",
        patron_id,
        checkout_id,
        &past,
    )
    .await;
    for _ in 0..50 {
        let overdue =
            crate::harness::json_answer(client().get(format!("{base}/branches/central/overdue")))
                .await;
        if overdue["items"]
            .as_array()
            .is_some_and(|items| !items.is_empty())
        {
            assert_eq!(overdue["items"][0]["checkoutId"], checkout_id);
            assert_eq!(overdue["items"][0]["status"], "overdue");
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the scheduled mark-overdue did not mark the loan");
}

/// The runner binary with nothing from the calling shell at all: no AWS variable, and a `HOME`
/// with no `.aws` in it, as on a fresh machine.
fn bare_singlet(home: &std::path::Path) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_singlet"));
    command
        .env_clear()
        .env("HOME", home)
        .current_dir(ROOT)
        .arg("--key-dir")
        .arg(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-keys"));
    command
}

fn empty_home(name: &str) -> std::path::PathBuf {
    let home = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("empty-home-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).unwrap();
    home
}

/// A loopback `--endpoint` (here another runner's engine) works on a machine with no AWS
/// configuration: local credentials and region, and no credential-lookup dump on standard error.
#[tokio::test]
async fn a_loopback_endpoint_needs_no_aws_configuration() {
    let engine = start(&["--in-memory"]);
    let endpoint = engine.engine.clone().unwrap();
    let home = empty_home("endpoint");
    for args in [
        vec![
            "invoke",
            "get-vehicle",
            "--event",
            "events/get-vehicle.json",
            "--endpoint",
            &endpoint,
        ],
        vec![
            "--endpoint",
            &endpoint,
            "--table",
            "other",
            "invoke",
            "mark-overdue",
            "--event",
            "events/mark-overdue.json",
        ],
    ] {
        let output = bare_singlet(&home).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{args:?}: {stderr}");
        assert!(
            !stderr.to_lowercase().contains("credential"),
            "{args:?}: no credential lookup is told: {stderr}"
        );
        let response: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert!(response.is_object(), "{response}");
    }
    // And serving the API on it.
    let mut serving = bare_singlet(&home);
    serving.args([
        "--endpoint",
        &endpoint,
        "--table",
        "served",
        "--mark-overdue-every",
        "0",
    ]);
    let runner = process::serve(serving);
    let created = client()
        .post(format!("{}/vehicles", runner.api))
        .json(&json!({"plate": "BARE 1", "chassis": "BARE1", "depot": "north"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let tables = singlet::serve::engine::local_client(&endpoint)
        .list_tables()
        .send()
        .await
        .unwrap();
    for table in ["other", "served"] {
        assert!(tables.table_names().contains(&table.to_owned()), "{table}");
    }
}

/// A closed port and a malformed URL are each told in words, with the cause, and exit 2.
#[test]
fn a_bad_endpoint_says_what_is_wrong() {
    let home = empty_home("bad-endpoint");
    // A port nothing listens on: bound, then freed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let cases = [
        (format!("http://{closed}"), "nothing listens there"),
        ("not a url".to_owned(), "is not a URL"),
        ("ftp://127.0.0.1:8000".to_owned(), "not http or https"),
        ("127.0.0.1:8000".to_owned(), "is not a URL"),
    ];
    for (endpoint, told) in cases {
        let output = bare_singlet(&home)
            .args([
                "invoke",
                "get-vehicle",
                "--event",
                "events/get-vehicle.json",
            ])
            .args(["--endpoint", &endpoint])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{endpoint}: {stderr}");
        assert!(stderr.contains(told), "{endpoint}: {stderr}");
        assert!(
            !stderr.contains("unhandled error\n"),
            "{endpoint}: {stderr}"
        );
        if told == "nothing listens there" {
            assert!(
                stderr.to_lowercase().contains("connection refused"),
                "the cause chain: {stderr}"
            );
        }
    }
}

/// A table not on this machine is a deployed API's, whose handlers sign cursors, derive ids and
/// key owner locks under its secret: serving it, seeding it or invoking a function on it under
/// the runner's published secret (which no Lambda accepts) is refused, exit 2, before anything
/// is contacted. With `CURSOR_KEY` set the command goes on (here to an address that answers
/// nothing).
#[test]
fn a_table_elsewhere_needs_the_apis_keys() {
    let invoke = [
        "invoke",
        "get-vehicle",
        "--event",
        "events/get-vehicle.json",
    ];
    for command in [&[][..], &["seed"][..], &invoke[..]] {
        let output = process::singlet()
            .current_dir(ROOT)
            .args(command)
            .args(["--endpoint", "https://dynamodb.eu-west-1.amazonaws.com"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command:?}: {stderr}");
        assert!(
            stderr.contains("Set CURSOR_KEY") && stderr.contains("nothing was written"),
            "{command:?}: {stderr}"
        );
    }
    let output = process::singlet()
        .current_dir(ROOT)
        .env("CURSOR_KEY", "a-key-of-the-apis-own-0123456789abcdef")
        .args(invoke)
        .args(["--endpoint", "http://192.0.2.1:9"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("Set CURSOR_KEY"), "{stderr}");
}

/// `invoke --list` lists every function; a misspelt one is answered with the closest names;
/// `--event -` reads standard input; an event of another route is run, with a warning.
#[test]
fn invoke_lists_suggests_reads_stdin_and_warns() {
    let listed = process::singlet()
        .args(["invoke", "--list"])
        .output()
        .unwrap();
    assert!(listed.status.success());
    let listed = String::from_utf8(listed.stdout).unwrap();
    for route in singlet_functions::routes::ROUTES {
        assert!(
            listed
                .lines()
                .any(|l| l.starts_with(route.function) && l.contains(&route.key())),
            "{} in {listed}",
            route.function
        );
    }
    assert!(listed.contains("mark-overdue"));

    let typo = process::singlet()
        .args([
            "--in-memory",
            "invoke",
            "get-vehicel",
            "--event",
            "events/get-vehicle.json",
        ])
        .current_dir(ROOT)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&typo.stderr);
    assert_eq!(typo.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("did you mean get-vehicle?"), "{stderr}");

    let event = std::fs::read(format!("{ROOT}/events/get-vehicle.json")).unwrap();
    let mut child = process::singlet()
        .args(["--in-memory", "invoke", "get-vehicle", "--event", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&event).unwrap();
    let piped = child.wait_with_output().unwrap();
    assert!(
        piped.status.success(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
    let response: Value = serde_json::from_slice(&piped.stdout).unwrap();
    assert_eq!(response["statusCode"], 404);

    let other = process::singlet()
        .current_dir(ROOT)
        .args([
            "--in-memory",
            "invoke",
            "find-by-plate",
            "--event",
            "events/get-vehicle.json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert!(other.status.success(), "{stderr}");
    assert!(
        stderr.contains("another route") && stderr.contains("GET /vehicles/{vehicleId}"),
        "{stderr}"
    );
}

/// Each subcommand's `--help` shows its own options and the runner's, not the server's.
#[test]
fn each_command_helps_with_its_own_options() {
    let help = |args: &[&str]| {
        let output = process::singlet().args(args).output().unwrap();
        assert!(output.status.success());
        String::from_utf8(output.stdout).unwrap()
    };
    let serving = [
        "--port",
        "--engine-port",
        "--engine-host",
        "--mark-overdue-every",
        "--jwks",
        "--cors-origin",
    ];
    for (command, own) in [
        ("invoke", &["--event", "--list"][..]),
        ("token", &["--scope", "--sub", "--ttl"][..]),
        ("seed", &[][..]),
    ] {
        let text = help(&[command, "--help"]);
        for option in own.iter().chain(&["--endpoint", "--table", "--data"]) {
            assert!(
                text.contains(option),
                "{command} --help lacks {option}:\n{text}"
            );
        }
        for option in serving {
            assert!(
                !text.contains(option),
                "{command} --help shows {option}:\n{text}"
            );
        }
    }
    let top = help(&["--help"]);
    for option in serving {
        assert!(top.contains(option), "--help lacks {option}");
    }
}

/// `token` without `--scope` still prints a token, and warns that it opens no route, naming the
/// scopes there are.
#[test]
fn a_token_without_scope_is_warned_about() {
    let output = process::singlet()
        .args(["token", "--sub", "ada"])
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8(output.stdout)
            .unwrap()
            .matches('.')
            .count(),
        2,
        "a JWT"
    );
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("403"), "{stderr}");
    for scope in singlet_functions::routes::all_scopes() {
        assert!(stderr.contains(scope), "{scope}: {stderr}");
    }
    let scoped = process::singlet()
        .args(["token", "--scope", "fleet:read"])
        .output()
        .unwrap();
    assert!(
        scoped.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&scoped.stderr)
    );
}

/// A reader that closes standard output before a command prints (`singlet token | true`,
/// `singlet invoke --list | head -1`) stops the printing and nothing else: no panic, exit
/// `101` before, and the command's own exit code and work stand. Its pipe's read end is closed
/// before the command starts, so every write it makes fails as a reader gone would make it fail.
#[test]
fn a_reader_that_closes_standard_output_stops_the_printing_not_the_command() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "runner-closed-stdout-{:016x}",
        rand::random::<u64>()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("vehicles.jsonl"),
        "{\"plate\":\"CL-1\",\"chassis\":\"CLC-1\",\"depot\":\"north\"}\n{\"plate\":\"\"}\n",
    )
    .unwrap();
    let data = dir.join("data.db");
    let data = data.to_str().unwrap();
    let closed = |args: &[&str]| {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = process::singlet()
            .current_dir(&dir)
            .args(["--data", data])
            .args(args)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        (output.status.code(), stderr)
    };
    for args in [
        &["token", "--scope", "fleet:read"][..],
        &["invoke", "--list"],
    ] {
        let (code, stderr) = closed(args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
    }
    // One row created, one rejected: exit 1 as with a reader, and the row is in the table.
    let (code, stderr) = closed(&["import", "vehicles", "vehicles.jsonl", "--json"]);
    assert_eq!(code, Some(1), "{stderr}");
    let again = process::singlet()
        .current_dir(&dir)
        .args([
            "--data",
            data,
            "import",
            "vehicles",
            "vehicles.jsonl",
            "--json",
        ])
        .output()
        .unwrap();
    let summary: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(summary["alreadyImported"], 1, "{summary}");
    assert_eq!(summary["created"], 0, "{summary}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A port already taken is told with the option that moves it.
#[test]
fn a_taken_port_names_its_option() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    for (option, other) in [("--port", "--engine-port"), ("--engine-port", "--port")] {
        let output = process::singlet()
            .args([
                "--in-memory",
                "--mark-overdue-every",
                "0",
                option,
                &port,
                other,
                "0",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("in use") && stderr.contains(&format!("`{option} <port>`")),
            "{option}: {stderr}"
        );
    }
}

/// `/` tells a person where things are; logs are JSON when standard error is not a terminal,
/// and readable lines with `--log-format human`.
#[tokio::test]
async fn the_root_and_the_log_formats() {
    let runner = start(&["--in-memory"]);
    let index: Value = reqwest::get(format!("{}/", runner.api))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // Never the console's address: that carries the per-start secret.
    assert!(
        index["console"].as_str().unwrap().contains("printed"),
        "{index}"
    );
    assert_eq!(index["openapi"], "/openapi.json");
    assert!(index["authorization"].as_str().unwrap().contains("token"));

    let output = process::singlet()
        .current_dir(ROOT)
        .args([
            "--log-format",
            "human",
            "--in-memory",
            "invoke",
            "get-vehicle",
        ])
        .args(["--event", "events/get-vehicle.json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("request handled"), "{stderr}");
    assert!(
        stderr
            .lines()
            .all(|l| serde_json::from_str::<Value>(l).is_err()),
        "{stderr}"
    );
}

/// `--cors-origin` answers preflights and tells an allowed origin so, as API Gateway does with
/// the template's `CorsAllowedOrigins`; other origins, and a runner without it, get no CORS.
#[tokio::test]
async fn cors_origins_are_allowed_only_when_named() {
    let allowed = "http://localhost:5173";
    let runner = start(&["--in-memory", "--cors-origin", allowed]);
    let http = reqwest::Client::new();
    let preflight = |base: &str, origin: &str| {
        http.request(reqwest::Method::OPTIONS, format!("{base}/vehicles"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization,content-type,idempotency-key",
            )
            .send()
    };
    let answer = preflight(&runner.api, allowed).await.unwrap();
    assert!(answer.status().is_success(), "{}", answer.status());
    let headers = answer.headers();
    assert_eq!(headers["access-control-allow-origin"], allowed);
    let methods = headers["access-control-allow-methods"].to_str().unwrap();
    assert!(
        methods.contains("POST") && methods.contains("PATCH"),
        "{methods}"
    );
    let allowed_headers = headers["access-control-allow-headers"].to_str().unwrap();
    assert!(
        allowed_headers.contains("idempotency-key"),
        "{allowed_headers}"
    );

    let read = client()
        .get(format!("{}/vehicles/nope", runner.api))
        .header("origin", allowed)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 404);
    assert_eq!(read.headers()["access-control-allow-origin"], allowed);
    let exposed = read.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap();
    assert!(
        exposed.contains("etag") && exposed.contains("location"),
        "{exposed}"
    );

    let stranger = preflight(&runner.api, "https://evil.example")
        .await
        .unwrap();
    assert!(
        stranger
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );

    let plain = start(&["--in-memory"]);
    let answer = preflight(&plain.api, allowed).await.unwrap();
    assert_eq!(
        answer.status(),
        404,
        "no CORS: a preflight is an undeclared route"
    );
    assert!(
        answer
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );

    let refused = process::singlet()
        .args(["--in-memory", "--cors-origin", "localhost:5173/app"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is not an origin"));
}

/// `token --claim name=value` replaces a default claim (`exp`, `nbf` and `iat` as numbers when
/// they are, anything else as text) and `--claim scope=` leaves `scope` out, so tokens the
/// authorizer must refuse can be made on purpose; what it makes is what the authorizer judges.
#[test]
fn token_claims_replace_the_defaults_and_the_authorizer_judges_them() {
    use base64::Engine;
    let mint = |args: &[&str]| -> (String, Value) {
        let output = process::singlet().arg("token").args(args).output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let token = String::from_utf8(output.stdout).unwrap().trim().to_owned();
        let payload = token.split('.').nth(1).unwrap();
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap();
        (token, serde_json::from_slice(&payload).unwrap())
    };
    let (authorizer, _) = singlet::serve::auth::Authorizer::local(
        &std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-keys"),
    )
    .unwrap();
    let route = singlet_functions::routes::by_function("get-vehicle").unwrap();
    let judged = |token: &str| {
        let mut headers = axum::http::HeaderMap::new();
        headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
        authorizer
            .authorize(&headers, route)
            .map(|_| 200)
            .unwrap_or_else(|refusal| refusal.0.as_u16())
    };

    let (later, claims) = mint(&[
        "--scope",
        "fleet:read",
        "--claim",
        "nbf=4102444800",
        "--claim",
        "patron_id=p1",
    ]);
    assert_eq!(claims["nbf"], 4_102_444_800_i64, "{claims}");
    assert_eq!(claims["patron_id"], "p1", "{claims}");
    assert_eq!(claims["scope"], "fleet:read", "{claims}");
    assert_eq!(judged(&later), 401, "not valid before 2100");

    let (scp, claims) = mint(&["--claim", "scope=", "--claim", "scp=fleet:read audit:read"]);
    assert!(claims.get("scope").is_none(), "{claims}");
    assert_eq!(claims["scp"], "fleet:read audit:read", "{claims}");
    assert_eq!(judged(&scp), 200, "scp as a space-separated string");

    let (malformed, claims) = mint(&["--scope", "fleet:read", "--claim", "exp=soon"]);
    assert_eq!(claims["exp"], "soon", "{claims}");
    assert_eq!(judged(&malformed), 401, "a malformed exp");

    for claim in ["novalue", "=value", " =value"] {
        let refused = process::singlet()
            .args(["token", "--claim", claim])
            .output()
            .unwrap();
        assert_eq!(refused.status.code(), Some(2), "a usage error: {claim}");
        assert!(String::from_utf8_lossy(&refused.stderr).contains("name=value"));
    }
}

/// The runner turns the table's stream on and appends each published event, as an EventBridge
/// rule target receives it, to `--events-out`, or to `.singlet/events.jsonl` where it runs when
/// not told (with `--in-memory` too).
#[tokio::test]
async fn the_runner_appends_each_event_to_its_events_file() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("runner-events-{:016x}", rand::random::<u64>()));
    std::fs::create_dir_all(&dir).unwrap();
    let named = dir.join("named.jsonl");
    let default = dir.join(".singlet").join("events.jsonl");
    for (extra, file) in [
        (vec!["--events-out", named.to_str().unwrap()], &named),
        (vec![], &default),
    ] {
        let mut command = process::singlet();
        command
            .current_dir(&dir)
            .args(["--in-memory", "--mark-overdue-every", "0"])
            .args(&extra);
        let runner = process::serve(command);
        let created = client()
            .post(format!("{}/vehicles", runner.api))
            .json(&json!({"plate": "EV 1", "chassis": "EV-C1", "depot": "north"}))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 201);
        let vehicle: Value = created.json().await.unwrap();
        // The runner's poller publishes on its own time: wait for the line, up to 20 s.
        let mut lines = Vec::new();
        for _ in 0..200 {
            lines = std::fs::read_to_string(file)
                .map(|text| text.lines().map(str::to_owned).collect())
                .unwrap_or_default();
            if !lines.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(lines.len(), 1, "{}: {lines:?}", file.display());
        let event: Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(event["version"], "0", "{event}");
        assert_eq!(event["detail-type"], "VehicleRegistered", "{event}");
        assert_eq!(event["source"], "singlet.fleet", "{event}");
        assert_eq!(event["resources"], json!([]), "{event}");
        for field in ["id", "account", "time", "region"] {
            assert!(event[field].is_string(), "{field}: {event}");
        }
        let detail = &event["detail"];
        assert_eq!(detail["type"], "VehicleRegistered");
        assert_eq!(
            detail["subject"],
            json!({"type": "vehicle", "id": vehicle["vehicleId"]})
        );
        assert_eq!(detail["actor"], "tester");
        assert_eq!(detail["data"], vehicle, "the entity as the API answered it");
        // The entities whole, so the file is its user's alone wherever it is put.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(file).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", file.display());
        }
        drop(runner);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--loan-history-days` sets how long a returned loan is kept (its `expiresAt`); a value out of
/// 1..=36500 is a usage error that names the option.
#[tokio::test]
async fn loan_history_days_sets_a_returned_loans_expiry() {
    let runner = start(&["--in-memory", "--loan-history-days", "3"]);
    let (http, base) = (client(), runner.api.clone());
    let post = |path: String, body: Value| {
        let request = http.post(format!("{base}{path}")).json(&body);
        async move {
            let reply = request.send().await.unwrap();
            assert!(reply.status().is_success(), "{path}: {}", reply.status());
            reply.json::<Value>().await.unwrap()
        }
    };
    post(
        "/branches".into(),
        json!({"branchId": "central", "name": "C", "address": "1", "city": "S", "phone": "1",
               "openingHours": "always"}),
    )
    .await;
    post(
        "/books".into(),
        crate::fixtures::book_body(crate::fixtures::ISBN),
    )
    .await;
    let copy = post(
        "/branches/central/copies".into(),
        json!({"isbn": crate::fixtures::ISBN, "condition": "good"}),
    )
    .await;
    let patron = post(
        "/branches/central/patrons".into(),
        crate::fixtures::patron_body("days-card", "standard"),
    )
    .await;
    let patron_id = patron["patronId"].as_str().unwrap();
    let loan = post(
        "/checkouts".into(),
        json!({"patronId": patron_id, "branchId": "central", "copyId": copy["copyId"]}),
    )
    .await;
    let loan_id = loan["checkoutId"].as_str().unwrap();
    post(
        format!("/patrons/{patron_id}/checkouts/{loan_id}/return"),
        json!({}),
    )
    .await;
    let engine = singlet::serve::engine::local_client(runner.engine.as_deref().unwrap());
    let stored = engine
        .get_item()
        .table_name("singlet")
        .key("PK", AttributeValue::S(format!("PATRON#{patron_id}")))
        .key("SK", AttributeValue::S(format!("RETURNED#{loan_id}")))
        .send()
        .await
        .unwrap();
    let expires: i64 = stored.item().unwrap()["expiresAt"]
        .as_n()
        .unwrap()
        .parse()
        .unwrap();
    let in_days = (expires - time::OffsetDateTime::now_utc().unix_timestamp()) as f64 / 86_400.0;
    assert!(
        (2.99..=3.01).contains(&in_days),
        "expires in {in_days} days"
    );

    let refused = process::singlet()
        .args(["--in-memory", "--loan-history-days", "0"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--loan-history-days"));
}

/// A table name DynamoDB would refuse is a usage error, told before any engine is opened.
#[test]
fn a_table_name_dynamodb_refuses_is_a_usage_error() {
    for name in [
        "c",
        "my table",
        "tabl\u{e9}",
        &"t".repeat(256),
        "arn:aws:dynamodb:eu-west-1:123456789012:table/x",
        "arn:aws:s3:eu-west-1:123456789012:table/singlet",
        "arn:aws:dynamodb:eu-west-1:12345:table/singlet",
    ] {
        let refused = process::singlet()
            .args(["--in-memory", "--table", name, "fsck"])
            .output()
            .unwrap();
        assert_eq!(refused.status.code(), Some(2), "a usage error: {name}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains("is not a table name"), "{stderr}");
    }
    // A table's ARN names a table in AWS: the embedded engine has none, and nothing is made.
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("runner-arn-{:016x}", rand::random::<u64>()));
    let data = dir.join("data.db");
    let refused = process::singlet()
        .args(["--data", data.to_str().unwrap()])
        .args([
            "--table",
            "arn:aws:dynamodb:eu-west-1:123456789012:table/singlet",
            "fsck",
        ])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("name its --endpoint"), "{stderr}");
    assert!(!data.exists());
}

/// The table's tools (`import`, `fsck`, `migrate`, `export`, `load`) show their progress on
/// standard error (off a terminal, a line for each count), and with `--json` print one JSON
/// object on standard output and nothing else.
#[test]
fn long_runs_show_progress_on_standard_error_and_json_alone_on_standard_output() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("runner-progress-{:016x}", rand::random::<u64>()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("vehicles.jsonl"),
        "{\"plate\":\"PR-1\",\"chassis\":\"PRC-1\",\"depot\":\"north\"}\n\
         {\"plate\":\"PR-2\",\"chassis\":\"PRC-2\",\"depot\":\"north\"}\n",
    )
    .unwrap();
    let data = dir.join("data.db");
    let data = data.to_str().unwrap();
    for (command, progress) in [
        (
            vec!["import", "vehicles", "vehicles.jsonl"],
            "import vehicles: read 2",
        ),
        (vec!["fsck"], "fsck: read 8 items"),
        (
            vec!["migrate", "vehicles-by-depot"],
            "migrate vehicles-by-depot: scanned",
        ),
        (vec!["export", "copy"], "exported "),
        (vec!["load", "copy"], "loaded "),
    ] {
        // `load` into a table of its own: it refuses one that holds items.
        let table = if command[0] == "load" {
            "loaded"
        } else {
            "singlet"
        };
        let output = process::singlet()
            .current_dir(&dir)
            .args(["--data", data, "--table", table])
            .args(&command)
            .arg("--json")
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
        assert!(output.status.success(), "{command:?}: {stderr}");
        let printed: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!("{command:?}: stdout is not one JSON object ({e}): {stdout}")
        });
        assert!(printed.is_object(), "{command:?}: {stdout}");
        assert!(stderr.contains(progress), "{command:?}: {stderr}");
        // Not a terminal: every count on a line of its own, none rewritten in place.
        assert!(!stderr.contains('\r'), "{command:?}: {stderr:?}");
        assert!(
            stderr.lines().all(|line| !line.trim().is_empty()),
            "{command:?}: {stderr:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
