//! `cargo lambda watch` serves the API's real paths: the router in the workspace's Cargo metadata
//! (`[workspace.metadata.lambda.watch.router]` in Cargo.toml) routes every route of the route
//! table, by method and path, to the one Lambda binary, and nothing else. Run without
//! `SINGLET_FUNCTION`, the binary answers each request with the route its method and path match.

use singlet_functions::routes::ROUTES;
use std::collections::BTreeSet;

/// The workspace metadata as cargo-lambda reads it: from `cargo metadata`.
fn workspace_metadata() -> serde_json::Value {
    let output = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(output.status.success(), "cargo metadata: {output:?}");
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // `[workspace.metadata]`, which the `cargo_metadata` crate cargo-lambda uses calls
    // `workspace_metadata`.
    metadata["metadata"].clone()
}

#[test]
fn the_watch_router_routes_every_route_to_the_one_binary_and_nothing_else() {
    let router = workspace_metadata()["lambda"]["watch"]["router"]
        .as_object()
        .expect("a [workspace.metadata.lambda.watch.router] table")
        .clone();
    let mut routed = BTreeSet::new();
    for (path, functions) in &router {
        // A bare function name would take every method; each route names its own.
        let functions = functions
            .as_array()
            .unwrap_or_else(|| panic!("{path}: a list of {{ method, function }}, one per route"));
        for entry in functions {
            let method = entry["method"].as_str().unwrap().to_owned();
            let function = entry["function"].as_str().unwrap().to_owned();
            assert!(
                routed.insert((function.clone(), method.clone(), path.clone())),
                "{method} {path} → {function} twice"
            );
        }
    }
    // cargo-lambda matches paths with `matchit`, whose `{param}` is API Gateway's: the paths are
    // the route table's as they are.
    let expected: BTreeSet<(String, String, String)> = ROUTES
        .iter()
        .map(|r| {
            (
                "singlet-lambda".to_owned(),
                r.method.to_owned(),
                r.path.to_owned(),
            )
        })
        .collect();
    assert_eq!(routed, expected);
}

/// `matchit` refuses two routes that name one path segment's parameter differently
/// (`/books/{isbn}` and `/books/{bookId}/copies`), and cargo-lambda would not start.
#[test]
fn the_watch_router_names_each_parameter_once_per_position() {
    let mut names = std::collections::BTreeMap::new();
    for route in ROUTES {
        let segments: Vec<&str> = route.path.split('/').collect();
        for (i, segment) in segments.iter().enumerate() {
            if segment.starts_with('{') {
                let prefix = segments[..i].join("/");
                let name = names.entry(prefix.clone()).or_insert(*segment);
                assert_eq!(
                    name, segment,
                    "{}: {prefix}/ takes one parameter",
                    route.path
                );
            }
        }
    }
}

/// `events/watch.env` gives every function what its cold start requires (`Ctx::from_lambda_env`)
/// and points it at the local runner's engine.
#[test]
fn the_watch_env_file_points_the_functions_at_the_local_engine() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/events/watch.env")).unwrap();
    let variables: std::collections::BTreeMap<&str, &str> = text
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .map(|line| line.split_once('=').expect("KEY=VALUE"))
        .collect();
    assert_eq!(
        variables["AWS_ENDPOINT_URL_DYNAMODB"],
        "http://127.0.0.1:8000"
    );
    assert_eq!(variables["TABLE_NAME"], "singlet");
    assert_eq!(
        variables["CURSOR_KEY"],
        singlet::LOCAL_SECRET,
        "the runner's key: the ids the events name are the ones `cargo run` derives"
    );
    for name in ["AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
        assert!(!variables[name].is_empty(), "{name}");
    }
}
