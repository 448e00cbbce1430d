//! `docs/openapi.yaml`: a valid OpenAPI 3.1 document (checked against the OpenAPI Initiative's
//! own JSON Schema for 3.1), equal to the route table (every path, method and scope, no more and
//! no fewer), its links and examples true to its operations and schemas; and the runner serves
//! it at `GET /openapi.json`. Every response the other tests receive is checked against it too
//! (`contract`).

use crate::contract::{document, escape, resolve, schema_errors};
use crate::harness::{Api, Mode};
use jsonschema::{Registry, Validator};
use serde_json::{Value, json};
use singlet_functions::routes::ROUTES;
use std::collections::BTreeSet;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// The OpenAPI Initiative's JSON Schema for OpenAPI 3.1 documents whose Schema Objects use the
/// 3.1 dialect (`schema-base`), vendored with the schemas it refers to (tests/openapi-3.1/README.md
/// names their source); JSON Schema 2020-12's meta-schemas are built into `jsonschema`.
fn openapi_31() -> Validator {
    let schemas: Vec<Value> = [
        include_str!("../openapi-3.1/schema.json"),
        include_str!("../openapi-3.1/schema-base.json"),
        include_str!("../openapi-3.1/dialect/base.schema.json"),
        include_str!("../openapi-3.1/meta/base.schema.json"),
    ]
    .iter()
    .map(|text| serde_json::from_str(text).unwrap())
    .collect();
    let registry = Registry::new()
        .extend(
            schemas
                .iter()
                .map(|schema| (schema["$id"].as_str().unwrap().to_owned(), schema.clone())),
        )
        .unwrap()
        .prepare()
        .unwrap();
    jsonschema::options()
        .with_registry(&registry)
        .should_validate_formats(true)
        .build(&schemas[1])
        .unwrap()
}

fn errors(validator: &Validator, doc: &Value) -> Vec<String> {
    validator
        .iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path().as_str()))
        .collect()
}

#[test]
fn the_document_is_valid_openapi_3_1() {
    let validator = openapi_31();
    let doc = document();
    let found = errors(&validator, &doc);
    assert!(found.is_empty(), "docs/openapi.yaml:\n{}", found.join("\n"));

    // The validator is a real one: a schema of an unknown type, a status that is not one and a
    // parameter nowhere are each refused.
    let mut broken = doc.clone();
    broken["components"]["schemas"]["Id"]["type"] = json!("text");
    assert!(!errors(&validator, &broken).is_empty());
    let mut broken = doc.clone();
    broken["paths"]["/vehicles"]["post"]["responses"]["601"] = json!({"description": "no"});
    assert!(!errors(&validator, &broken).is_empty());
    let mut broken = doc;
    broken["components"]["parameters"]["Limit"]["in"] = json!("body");
    assert!(!errors(&validator, &broken).is_empty());
}

/// Every operation of the document: `(path, method, operation)`.
fn operations(doc: &Value) -> Vec<(&str, &str, &Value)> {
    doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .iter()
                .filter(|(method, _)| METHODS.contains(&method.as_str()))
                .map(move |(method, operation)| (path.as_str(), method.as_str(), operation))
        })
        .collect()
}

#[test]
fn the_document_describes_every_route_and_its_scopes() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut described = BTreeSet::new();
    for (path, method, operation) in operations(&doc) {
        let mut scopes: Vec<String> = operation["security"][0]["bearer"]
            .as_array()
            .unwrap_or_else(|| panic!("{method} {path} names no bearer scopes"))
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect();
        scopes.sort();
        described.insert((
            method.to_uppercase(),
            path.to_owned(),
            operation["operationId"].as_str().unwrap().to_owned(),
            scopes,
        ));
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

/// The names of an operation's parameters, the path item's included.
fn parameter_names(doc: &Value, path: &str, operation: &Value) -> BTreeSet<String> {
    let item = &doc["paths"][path];
    item["parameters"]
        .as_array()
        .into_iter()
        .chain(operation["parameters"].as_array())
        .flatten()
        .map(|p| {
            let (_, p) = resolve(doc, p);
            p["name"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// Schemathesis's stateful mode follows these: each must name an operation and only its
/// parameters, taken from a response field that the response's schema has.
#[test]
fn every_link_names_an_operation_and_its_parameters() {
    let doc = document();
    let operations = operations(&doc);
    let mut links = 0;
    for (path, method, operation) in &operations {
        for (status, response) in operation["responses"].as_object().unwrap() {
            let (_, response) = resolve(&doc, response);
            for (name, link) in response["links"].as_object().into_iter().flatten() {
                links += 1;
                let at = format!("{method} {path} {status} link {name}");
                let target = link["operationId"].as_str().unwrap();
                let (target_path, _, target_op) = operations
                    .iter()
                    .find(|(_, _, op)| op["operationId"] == target)
                    .unwrap_or_else(|| panic!("{at}: no operation {target}"));
                let names = parameter_names(&doc, target_path, target_op);
                for (parameter, expression) in link["parameters"].as_object().into_iter().flatten()
                {
                    // A name may be qualified by where the parameter is (`header.if-match`).
                    let unqualified = ["path.", "query.", "header.", "cookie."]
                        .iter()
                        .find_map(|place| parameter.strip_prefix(place))
                        .unwrap_or(parameter);
                    assert!(
                        names.contains(unqualified),
                        "{at}: {target} has no parameter {parameter}"
                    );
                    let expression = expression.as_str().unwrap();
                    if let Some(field) = expression.strip_prefix("$response.body#/") {
                        let schema = &response["content"]["application/json"]["schema"];
                        let (_, schema) = resolve(&doc, schema);
                        // The schema's own `required`, or one of its `allOf` parts'.
                        let parts = std::iter::once(schema).chain(
                            schema["allOf"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .map(|part| resolve(&doc, part).1),
                        );
                        let required = parts
                            .filter_map(|part| part["required"].as_array())
                            .flatten()
                            .any(|f| f == field);
                        assert!(required, "{at}: the response has no required field {field}");
                    } else {
                        assert!(
                            expression.starts_with("$response.header."),
                            "{at}: {expression}"
                        );
                    }
                }
            }
        }
    }
    assert!(links > 0, "the document has no links");
}

/// Every example, of a request body or a response, validates against its schema.
#[test]
fn every_example_matches_its_schema() {
    let doc = document();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (path, method, operation) in operations(&doc) {
        let at = format!("/paths/{}/{method}", escape(path));
        let mut contents = vec![(
            format!("{at}/requestBody/content"),
            &operation["requestBody"]["content"],
        )];
        for (status, response) in operation["responses"].as_object().unwrap() {
            let (pointer, response) = match resolve(&doc, response) {
                (pointer, response) if pointer.is_empty() => {
                    (format!("{at}/responses/{status}"), response)
                }
                resolved => resolved,
            };
            contents.push((format!("{pointer}/content"), &response["content"]));
        }
        for (pointer, content) in contents {
            for (media_type, media) in content.as_object().into_iter().flatten() {
                let schema = format!("{pointer}/{}/schema", escape(media_type));
                let examples = media["examples"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(_, example)| &example["value"])
                    .chain(media.get("example"));
                for example in examples {
                    checked += 1;
                    for error in schema_errors(&schema, example) {
                        wrong.push(format!("{schema}: {error}"));
                    }
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "examples that break their schema:\n{}",
        wrong.join("\n")
    );
    assert!(checked > 50, "only {checked} examples");
}

#[tokio::test]
async fn the_runner_serves_the_document_as_json() {
    let api = Api::start(Mode::Http).await;
    let response = reqwest::get(format!("{}/openapi.json", api.base))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut served: Value = response.json().await.unwrap();

    // Its one server is this runner, at the address it bound.
    assert_eq!(served["servers"].as_array().unwrap().len(), 1);
    assert_eq!(served["servers"][0]["url"], api.base.as_str());
    // A host that is not a loopback name (a rebound DNS name) is not echoed: the file's stays.
    let rebound = crate::harness::json_answer(
        reqwest::Client::new()
            .get(format!("{}/openapi.json", api.base))
            .header("host", "evil.example:80"),
    )
    .await;
    assert_eq!(rebound["servers"], document()["servers"]);
    // Every response declares the runner's own capacity header.
    let consumed = json!({"$ref": "#/components/headers/ConsumedCapacity"});
    let mut declared = 0;
    for (path, method, _) in operations(&document()) {
        let responses = served["paths"][path][method]["responses"]
            .as_object()
            .unwrap()
            .clone();
        for (status, response) in responses {
            let (_, response) = resolve(&served, &response);
            assert_eq!(
                response["headers"]["x-consumed-capacity"], consumed,
                "{method} {path} {status}"
            );
            declared += 1;
        }
    }
    assert!(declared > 300, "{declared}");

    // Otherwise it is docs/openapi.yaml.
    let mut expected = document();
    served["servers"] = expected["servers"].clone();
    strip_consumed_everywhere(&mut served);
    strip_consumed_everywhere(&mut expected);
    assert_eq!(served, expected);
}

fn strip_consumed_everywhere(document: &mut Value) {
    for response in document["components"]["responses"]
        .as_object_mut()
        .unwrap()
        .values_mut()
    {
        strip_consumed(response);
    }
    for item in document["paths"].as_object_mut().unwrap().values_mut() {
        for (method, operation) in item.as_object_mut().unwrap() {
            if METHODS.contains(&method.as_str()) {
                for response in operation["responses"].as_object_mut().unwrap().values_mut() {
                    strip_consumed(response);
                }
            }
        }
    }
}

/// Takes the runner's `x-consumed-capacity` out of a response, and `headers` if it was alone.
fn strip_consumed(response: &mut Value) {
    let Some(response) = response.as_object_mut() else {
        return;
    };
    if let Some(headers) = response.get_mut("headers").and_then(Value::as_object_mut) {
        headers.remove("x-consumed-capacity");
        if headers.is_empty() {
            response.remove("headers");
        }
    }
}
