//! A request's example is written once, in `events/<function>.json` (the event `invoke`, `sam
//! local invoke` and the console start from), and the OpenAPI document's example of the same
//! request body, which Swagger UI and the client generators show, is held equal to it here.

use crate::contract::document;
use serde_json::Value;
use singlet_functions::routes::ROUTES;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The request body of the sample event of `function`, if it has one.
fn sample_body(function: &str) -> Option<Value> {
    let event = std::fs::read_to_string(format!("{ROOT}/events/{function}.json")).unwrap();
    let event: Value = serde_json::from_str(&event).unwrap();
    let body = event["body"].as_str().filter(|body| !body.is_empty())?;
    Some(serde_json::from_str(body).unwrap())
}

/// Every route whose sample event has a body has that body as an example of its OpenAPI request
/// body, its summary naming the event file; and every route with a request body has a sample with one.
#[test]
fn each_request_bodys_example_is_its_sample_events_body() {
    let doc = document();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for route in ROUTES {
        let operation = &doc["paths"][route.path][route.method.to_lowercase()];
        let content = &operation["requestBody"]["content"]["application/json"];
        let examples = content["examples"].as_object();
        match (sample_body(route.function), examples) {
            (None, None) => continue,
            (None, Some(_)) => wrong.push(format!(
                "{}: an OpenAPI request example, but events/{}.json has no body",
                route.function, route.function
            )),
            (Some(_), None) => wrong.push(format!(
                "{}: events/{}.json has a body, but the OpenAPI document gives no example of it",
                route.function, route.function
            )),
            (Some(body), Some(examples)) => {
                checked += 1;
                let source = format!("events/{}.json", route.function);
                let same = examples.values().any(|example| {
                    let summary = example["summary"].as_str().unwrap_or_default();
                    summary.starts_with(&source) && example["value"] == body
                });
                if !same {
                    wrong.push(format!(
                        "{}: no example summarised {source} with its body {body}",
                        route.function
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked >= 15, "only {checked} request bodies checked");
}
