//! `docs/openapi.yaml` as the judge of every response the end-to-end tests receive: its status is
//! one the operation documents, the headers the document requires are there and fit their
//! schemas, its content type is one the response documents, and its body validates against that
//! content's schema. [`check`] runs on every [`Call::send`](crate::harness::Call::send), so the
//! document cannot drift from what the API answers.
//!
//! Schemas are validated with the `jsonschema` crate (JSON Schema 2020-12, OpenAPI 3.1's
//! dialect) against the document itself, registered whole, so a `$ref` to `#/components/...`
//! resolves to the document's own component. Nothing is fetched.

use crate::harness::Reply;
use jsonschema::{Registry, Validator};
use serde_json::Value;
use singlet::serve::front_door::{OPENAPI_YAML, segments};
use singlet_functions::routes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The URI the document is registered under; `#/components/...` references are made absolute
/// against it. `.invalid` is reserved: nothing is ever fetched from it.
const DOCUMENT_URI: &str = "https://singlet.invalid/openapi.json";

struct Contract {
    document: Value,
    registry: Registry<'static>,
    /// Compiled schemas by their place in the document (a JSON pointer).
    validators: Mutex<HashMap<String, Arc<Validator>>>,
}

fn contract() -> &'static Contract {
    static CONTRACT: OnceLock<Contract> = OnceLock::new();
    CONTRACT.get_or_init(|| {
        let document = document();
        let registry = Registry::new()
            .add(DOCUMENT_URI, document.clone())
            .and_then(|builder| builder.prepare())
            .unwrap_or_else(|e| panic!("docs/openapi.yaml as a schema registry: {e}"));
        Contract {
            document,
            registry,
            validators: Mutex::default(),
        }
    })
}

/// `docs/openapi.yaml`, parsed.
pub fn document() -> Value {
    serde_norway::from_str(OPENAPI_YAML).expect("docs/openapi.yaml parses")
}

/// The response's place in the document, for messages: `register-vehicle 201`.
struct Operation<'a> {
    id: &'a str,
    status: u16,
}

impl std::fmt::Display for Operation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.id, self.status)
    }
}

/// Panics, naming the operation, the status and what is wrong, unless `reply` is a response
/// the document allows `method path` to give. A method and path no route declares is API
/// Gateway's own `404`, which no operation describes: there is nothing to check it against.
#[track_caller]
pub fn check(method: &str, path: &str, reply: &Reply) {
    let path = path.split('?').next().unwrap_or_default();
    let Some((route, _)) = routes::find(method, &segments(path)) else {
        return;
    };
    let contract = contract();
    let operation = &contract.document["paths"][route.path][method.to_lowercase()];
    let at = Operation {
        id: route.function,
        status: reply.status,
    };
    let responses = &operation["responses"];
    // Where a response, header or schema is in the document: it names the compiled schema.
    let here = |key: &str, (pointer, value): (String, &'static Value)| {
        if pointer.is_empty() {
            let operation = format!("/paths/{}/{}", escape(route.path), method.to_lowercase());
            (format!("{operation}/responses/{key}"), value)
        } else {
            (pointer, value)
        }
    };
    let Some((pointer, response)) = [reply.status.to_string(), "default".to_owned()]
        .into_iter()
        .find_map(|key| {
            let response = responses.get(&key)?;
            Some(here(&key, contract.resolve(response)))
        })
    else {
        let documented: Vec<&String> = responses
            .as_object()
            .into_iter()
            .flatten()
            .map(|(s, _)| s)
            .collect();
        panic!(
            "{at}: the document gives {} no {} response (it documents {documented:?}): {reply:?}",
            route.function, reply.status
        );
    };

    for (name, header) in response["headers"].as_object().into_iter().flatten() {
        let (header_pointer, header) = match contract.resolve(header) {
            (pointer_to_header, header) if pointer_to_header.is_empty() => {
                (format!("{pointer}/headers/{}", escape(name)), header)
            }
            resolved => resolved,
        };
        let value = reply.header(&name.to_ascii_lowercase());
        let Some(value) = value else {
            assert!(
                header["required"] != true,
                "{at}: the required header {name} is missing: {reply:?}"
            );
            continue;
        };
        let schema = &header["schema"];
        let value = match serde_json::from_str::<Value>(value) {
            Ok(number @ Value::Number(_)) if schema["type"] == "integer" => number,
            _ => Value::String(value.to_owned()),
        };
        contract.validate(
            &format!("{header_pointer}/schema"),
            schema,
            &value,
            &at,
            name,
        );
    }

    let content_type = reply
        .header("content-type")
        .map(|value| value.split(';').next().unwrap_or_default().trim());
    match response["content"].as_object() {
        None => assert!(
            reply.body.is_null(),
            "{at}: the document gives this response no body: {reply:?}"
        ),
        Some(content) => {
            let media_type = content_type.unwrap_or_else(|| {
                panic!("{at}: the response has a body but no content-type: {reply:?}")
            });
            let Some(media) = content.get(media_type) else {
                let documented: Vec<&String> = content.keys().collect();
                panic!(
                    "{at}: content-type {media_type} is not documented ({documented:?}): {reply:?}"
                );
            };
            let pointer = format!("{pointer}/content/{}/schema", escape(media_type));
            contract.validate(&pointer, &media["schema"], &reply.body, &at, "body");
        }
    }
}

/// What is wrong with `instance` as the schema at `pointer` in the document sees it (nothing
/// when it validates).
pub fn schema_errors(pointer: &str, instance: &Value) -> Vec<String> {
    let contract = contract();
    let schema = contract
        .document
        .pointer(pointer)
        .unwrap_or_else(|| panic!("no schema at {pointer}"));
    contract.errors(pointer, schema, instance)
}

impl Contract {
    fn resolve<'a>(&'a self, value: &'a Value) -> (String, &'a Value) {
        resolve(&self.document, value)
    }

    #[track_caller]
    fn validate(
        &self,
        pointer: &str,
        schema: &Value,
        instance: &Value,
        at: &Operation,
        what: &str,
    ) {
        let errors = self.errors(pointer, schema, instance);
        assert!(
            errors.is_empty(),
            "{at}: the {what} does not match the document ({pointer}):\n  {}\n{}",
            errors.join("\n  "),
            serde_json::to_string_pretty(instance).unwrap_or_default()
        );
    }

    fn errors(&self, pointer: &str, schema: &Value, instance: &Value) -> Vec<String> {
        self.validator(pointer, schema)
            .iter_errors(instance)
            .map(|error| format!("at {:?}: {error}", error.instance_path().as_str()))
            .collect()
    }

    /// The schema at `pointer` compiled once, its references into the document made absolute.
    fn validator(&self, pointer: &str, schema: &Value) -> Arc<Validator> {
        let mut validators = self.validators.lock().unwrap();
        validators
            .entry(pointer.to_owned())
            .or_insert_with(|| {
                let schema = absolute_refs(schema.clone());
                let validator = jsonschema::options()
                    .with_draft(jsonschema::Draft::Draft202012)
                    .with_registry(&self.registry)
                    .should_validate_formats(true)
                    .build(&schema)
                    .unwrap_or_else(|e| panic!("the schema at {pointer} does not compile: {e}"));
                Arc::new(validator)
            })
            .clone()
    }
}

/// Every `$ref` into the document (`#/components/...`) made absolute, so that a schema taken
/// out of the document still finds its components in the registry.
fn absolute_refs(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, value)| match (key.as_str(), value) {
                    ("$ref", Value::String(reference)) if reference.starts_with('#') => {
                        (key, Value::String(format!("{DOCUMENT_URI}{reference}")))
                    }
                    (_, value) => (key, absolute_refs(value)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(absolute_refs).collect()),
        other => other,
    }
}

/// A `$ref` to a place in `document` followed to what it names, with its JSON pointer (empty
/// when `value` is no reference).
pub fn resolve<'a>(document: &'a Value, value: &'a Value) -> (String, &'a Value) {
    let mut value = value;
    let mut pointer = String::new();
    while let Some(reference) = value["$ref"].as_str() {
        let fragment = reference
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("{reference} is not a reference into the document"));
        value = document
            .pointer(fragment)
            .unwrap_or_else(|| panic!("{reference} names nothing in the document"));
        pointer = fragment.to_owned();
    }
    (pointer, value)
}

/// A JSON pointer segment: `~` and `/` escaped.
pub fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}
