//! Every file in `events/` replayed through its handler, as `sam local invoke` would hand it over
//! (`lambda_http::request::from_str`), in an order where each finds what it needs.

use crate::harness::{Api, Mode};
use lambda_http::Body;
use singlet_functions::routes::{by_function, respond};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Each event and the status it must get, in replay order.
const REPLAY: &[(&str, u16)] = &[
    ("register-vehicle", 201),
    ("register-vehicle", 201), // the same Idempotency-Key: the same answer, nothing new
    ("get-vehicle", 200),
    ("find-by-plate", 200),
    ("find-by-chassis", 200),
    ("change-plate", 200),
    ("retire-vehicle", 204),
    // Library catalogue
    ("create-branch", 201),
    ("create-branch", 201), // the same Idempotency-Key: the same answer, nothing new
    ("get-branch", 200),
    ("register-patron", 201),
    ("register-patron", 201), // the same Idempotency-Key: the same patron
    ("list-patrons", 200),
    ("get-patron", 200),
    ("find-by-card", 200),
    ("create-book", 201),
    ("get-book", 200),
    ("add-copy", 201),
    ("list-copies", 200),
    ("book-availability", 200),
];

#[tokio::test]
async fn every_event_replays_through_its_handler() {
    let api = Api::start(Mode::Direct).await;
    let mut first_body = None;
    for (function, status) in REPLAY {
        let text = std::fs::read_to_string(format!("{ROOT}/events/{function}.json")).unwrap();
        let request = lambda_http::request::from_str(&text).unwrap();
        let route = by_function(function).unwrap();
        let response = respond(&api.ctx, route.handler, request).await;
        let body = match response.body() {
            Body::Text(text) => text.clone(),
            _ => String::new(),
        };
        assert_eq!(response.status().as_u16(), *status, "{function}: {body}");
        if *function == "register-vehicle" {
            assert_eq!(
                first_body.get_or_insert(body.clone()),
                &body,
                "a replay is byte for byte"
            );
        }
    }
    let mut files: Vec<String> = std::fs::read_dir(format!("{ROOT}/events"))
        .unwrap()
        .map(|e| {
            e.unwrap()
                .path()
                .file_stem()
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    files.sort();
    for file in files {
        assert!(
            REPLAY.iter().any(|(f, _)| *f == file),
            "events/{file}.json is never replayed"
        );
    }
}
