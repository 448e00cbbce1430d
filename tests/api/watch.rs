//! `cargo lambda watch` serves the API's real paths: the router in the workspace's Cargo metadata
//! (`[workspace.metadata.lambda.watch.router]` in Cargo.toml) is rendered from the route table by
//! `cargo run -- render` (`tests/api/template.rs` checks it is its rendering), every route by
//! method and path to the one Lambda binary. Run without `SINGLET_FUNCTION`, the binary answers
//! each request with the route its method and path match. What is left here is what the
//! rendering cannot say: that cargo-lambda can route the table's paths at all, and where the
//! functions it runs find their engine.

use singlet_functions::routes::ROUTES;

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
        singlet_functions::cursor::LOCAL_SECRET,
        "the runner's key: the ids the events name are the ones `cargo run` derives"
    );
    for name in ["AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
        assert!(!variables[name].is_empty(), "{name}");
    }
}
