//! Every file in `events/` replayed through its handler, as `sam local invoke` would hand it over
//! (`lambda_http::request::from_str`), in an order where each finds what it needs.

use crate::harness::{Api, Mode};
use singlet::invoke::invoke;
use singlet_functions::routes::{SCHEDULED, by_function};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Each event and the status it must get, in replay order.
pub(crate) const REPLAY: &[(&str, u16)] = &[
    ("register-vehicle", 201),
    ("register-vehicle", 201), // the same Idempotency-Key: the same answer, nothing new
    ("get-vehicle", 200),
    ("find-by-plate", 200),
    ("find-by-chassis", 200),
    ("depot-vehicles", 200),
    ("change-plate", 200),
    ("retire-vehicle", 204),
    ("create-account", 201),
    ("create-account", 201),
    ("get-account", 200),
    ("change-email", 200),
    ("change-username", 200),
    ("delete-account", 204),
    ("check-email", 200),
    ("check-username", 200),
    // Change & audit log
    ("create-resource", 201),
    ("create-resource", 201), // the same Idempotency-Key: the same answer, nothing new
    ("get-resource", 200),
    ("change-resource", 200),
    ("change-resource", 412), // the same if-match again: the version has moved on
    ("resource-history", 200),
    // Library catalogue
    ("create-branch", 201),
    ("create-branch", 201), // the same Idempotency-Key: the same answer, nothing new
    ("get-branch", 200),
    ("list-branches", 200),
    ("register-patron", 201),
    ("register-patron", 201), // the same Idempotency-Key: the same patron
    ("list-patrons", 200),
    ("get-patron", 200),
    ("find-by-card", 200),
    ("reissue-card", 200),
    ("change-tier", 200),
    ("create-book", 201),
    ("get-book", 200),
    ("correct-book", 200),
    ("add-copy", 201),
    ("list-copies", 200),
    ("book-availability", 200),
    ("available-copies", 200),
    // Library loans
    ("checkout-book", 201),
    ("checkout-book", 201), // the same Idempotency-Key: the same loan
    ("active-checkouts", 200),
    ("get-checkout", 200),
    ("renew-checkout", 200),
    ("mark-overdue", 200), // a complete run (its event's time is before any loan here falls due)
    ("find-overdue", 200),
    ("find-all-overdue", 200),
    ("return-book", 200),
    ("loan-history", 200),
    ("remove-patron", 204), // its one loan returned: the patron and its card go
];

#[tokio::test]
async fn every_event_replays_through_its_handler() {
    let mut api = Api::start(Mode::Direct).await;
    // The ids in the events are derived from their Idempotency-Keys under the runner's local
    // secret, as `cargo run -- invoke` derives them.
    api.ctx = singlet_functions::Ctx::new(
        api.ctx.db.clone(),
        api.ctx.table.clone(),
        singlet_functions::cursor::CursorKeys::new(singlet_functions::cursor::LOCAL_SECRET),
    );
    let mut first_bodies = std::collections::HashMap::new();
    for (function, status) in REPLAY {
        let text = std::fs::read_to_string(format!("{ROOT}/events/{function}.json")).unwrap();
        // The path `cargo run -- invoke` takes: `lambda_http::request::from_str` for HTTP events.
        let reply = invoke(&api.ctx, function, &text).await.unwrap();
        if SCHEDULED.iter().any(|s| s.function == *function) {
            // Its event's time comes before any loan made here falls due.
            assert_eq!(reply["complete"], true, "{function}: {reply}");
            assert_eq!(reply["marked"], 0, "{function}: {reply}");
            continue;
        }
        assert_eq!(reply["statusCode"], *status, "{function}: {reply}");
        let body = reply["body"].as_str().unwrap().to_owned();
        let route = by_function(function).unwrap();
        if route.method == "POST" && *status == 201 {
            let first = first_bodies
                .entry(*function)
                .or_insert_with(|| body.clone());
            assert_eq!(
                first, &body,
                "a replay with the same Idempotency-Key is byte for byte"
            );
        }
    }
    // Events are the `.json` files; `watch.env` is `cargo lambda watch`'s environment.
    let mut files: Vec<String> = std::fs::read_dir(format!("{ROOT}/events"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .map(|path| path.file_stem().unwrap().to_str().unwrap().to_owned())
        .collect();
    files.sort();
    // `env.json` is `sam local invoke --env-vars`'s file of environment variables, not an event.
    for file in files.into_iter().filter(|f| f != "env") {
        assert!(
            REPLAY.iter().any(|(f, _)| *f == file),
            "events/{file}.json is never replayed"
        );
    }
}
