//! `docs/openapi.yaml` against the route table: every path, method and scope, no more and no
//! fewer; and the runner serves it at `GET /openapi.json`.

use crate::harness::{Api, Mode};
use serde_json::Value;
use singlet_functions::routes::ROUTES;
use std::collections::BTreeSet;

fn document() -> Value {
    serde_norway::from_str(singlet::front_door::OPENAPI_YAML).unwrap()
}

#[test]
fn the_document_describes_every_route_and_its_scopes() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut described = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            if !["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                continue;
            }
            let mut scopes: Vec<String> = operation["security"][0]["bearer"]
                .as_array()
                .unwrap_or_else(|| panic!("{method} {path} names no bearer scopes"))
                .iter()
                .map(|s| s.as_str().unwrap().to_owned())
                .collect();
            scopes.sort();
            described.insert((
                method.to_uppercase(),
                path.clone(),
                operation["operationId"].as_str().unwrap().to_owned(),
                scopes,
            ));
        }
    }
    let declared: BTreeSet<_> = ROUTES
        .iter()
        .map(|route| {
            let mut scopes: Vec<String> = route.scopes.iter().map(|s| (*s).to_owned()).collect();
            scopes.sort();
            (
                route.method.to_owned(),
                route.path.to_owned(),
                route.function.to_owned(),
                scopes,
            )
        })
        .collect();
    assert_eq!(described, declared);
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
}

#[tokio::test]
async fn the_runner_serves_the_document_as_json() {
    let api = Api::start(Mode::Http).await;
    let response = reqwest::get(format!("{}/openapi.json", api.base))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let served: Value = response.json().await.unwrap();
    assert_eq!(served, document());
}
