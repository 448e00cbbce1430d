//! `template.yaml`, `functions/src/bin/`, `events/` and the README against the code's route
//! table and table schema, so that none of them can drift.

use serde_norway::Value;
use singlet_functions::routes::{ROUTES, SCHEDULED};
use singlet_shared::schema::{self, INDEXES, Projection};
use std::collections::BTreeSet;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn template() -> Value {
    let text = std::fs::read_to_string(format!("{ROOT}/template.yaml")).unwrap();
    serde_norway::from_str(&text).unwrap()
}

fn resources(template: &Value, kind: &str) -> Vec<(String, Value)> {
    template["Resources"]
        .as_mapping()
        .unwrap()
        .iter()
        .filter(|(_, r)| r["Type"] == kind)
        .map(|(name, r)| (name.as_str().unwrap().to_owned(), r.clone()))
        .collect()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_sequence()
        .map(|s| {
            s.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_table_is_the_schema() {
    let template = template();
    let tables = resources(&template, "AWS::DynamoDB::Table");
    assert_eq!(tables.len(), 1, "one table");
    let table = &tables[0].1["Properties"];
    assert_eq!(table["BillingMode"], "PAY_PER_REQUEST");
    assert_eq!(
        table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"],
        true
    );
    assert_eq!(
        table["TimeToLiveSpecification"]["AttributeName"],
        schema::TTL_ATTRIBUTE
    );
    let declared: BTreeSet<(String, String)> = table["AttributeDefinitions"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["AttributeName"].as_str().unwrap().into(),
                a["AttributeType"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expected: BTreeSet<(String, String)> = schema::key_attributes()
        .into_iter()
        .map(|a| (a.to_owned(), "S".to_owned()))
        .collect();
    assert_eq!(declared, expected);
    let key = |ks: &Value| -> Vec<(String, String)> {
        ks.as_sequence()
            .unwrap()
            .iter()
            .map(|k| {
                (
                    k["AttributeName"].as_str().unwrap().into(),
                    k["KeyType"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    let pair = |pk: &str, sk: &str| {
        vec![
            (pk.to_owned(), "HASH".to_owned()),
            (sk.to_owned(), "RANGE".to_owned()),
        ]
    };
    assert_eq!(key(&table["KeySchema"]), pair(schema::PK, schema::SK));
    let indexes = table["GlobalSecondaryIndexes"].as_sequence().unwrap();
    assert_eq!(indexes.len(), INDEXES.len());
    for (declared, index) in indexes.iter().zip(INDEXES) {
        assert_eq!(declared["IndexName"], index.name);
        assert_eq!(key(&declared["KeySchema"]), pair(index.pk, index.sk));
        let projection = match index.projection {
            Projection::All => "ALL",
            Projection::KeysOnly => "KEYS_ONLY",
        };
        assert_eq!(
            declared["Projection"]["ProjectionType"], projection,
            "{}",
            index.name
        );
    }
}

#[test]
fn every_route_is_one_function_with_its_route_and_least_privilege() {
    let template = template();
    let functions = resources(&template, "AWS::Serverless::Function");
    let mut seen = BTreeSet::new();
    for (name, function) in &functions {
        assert_eq!(
            function["Metadata"]["BuildMethod"], "rust-cargolambda",
            "{name}"
        );
        let binary = function["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(seen.insert(binary.clone()), "{binary} is declared twice");
        let events = function["Properties"]["Events"]
            .as_mapping()
            .cloned()
            .unwrap_or_default();
        let http: Vec<(String, String)> = events
            .values()
            .filter(|e| e["Type"] == "HttpApi")
            .map(|e| {
                (
                    e["Properties"]["Method"].as_str().unwrap().into(),
                    e["Properties"]["Path"].as_str().unwrap().into(),
                )
            })
            .collect();
        let statements = function["Properties"]["Policies"][0]["Statement"]
            .as_sequence()
            .unwrap();
        let mut actions: Vec<String> = statements
            .iter()
            .flat_map(|s| strings(&s["Action"]))
            .collect();
        actions.sort();
        if let Some(scheduled) = SCHEDULED.iter().find(|s| s.function == binary) {
            assert!(http.is_empty(), "{binary} has no route");
            let schedules = events.values().filter(|e| e["Type"] == "Schedule").count();
            assert_eq!(schedules, 1, "{binary} runs on one schedule");
            let mut expected: Vec<String> = scheduled
                .permissions
                .iter()
                .map(|p| (*p).to_owned())
                .collect();
            expected.sort();
            assert_eq!(actions, expected, "{binary}'s policy");
            continue;
        }
        let route = ROUTES
            .iter()
            .find(|r| r.function == binary)
            .unwrap_or_else(|| panic!("{binary} is not in the route table"));
        assert_eq!(
            http,
            vec![(route.method.to_owned(), route.path.to_owned())],
            "{binary}"
        );
        let mut expected: Vec<String> = route.permissions.iter().map(|p| (*p).to_owned()).collect();
        expected.sort();
        assert_eq!(actions, expected, "{binary}'s policy");
    }
    let expected: BTreeSet<String> = ROUTES
        .iter()
        .map(|r| r.function.to_owned())
        .chain(SCHEDULED.iter().map(|s| s.function.to_owned()))
        .collect();
    assert_eq!(
        seen, expected,
        "template functions = routes + scheduled functions"
    );
}

#[test]
fn every_function_has_a_binary_an_event_and_a_line_in_the_readme() {
    let readme = std::fs::read_to_string(format!("{ROOT}/README.md")).unwrap();
    let bins: BTreeSet<String> = std::fs::read_dir(format!("{ROOT}/functions/src/bin"))
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
    let functions: BTreeSet<String> = ROUTES
        .iter()
        .map(|r| r.function.to_owned())
        .chain(SCHEDULED.iter().map(|s| s.function.to_owned()))
        .collect();
    assert_eq!(bins, functions, "one binary per function");
    for route in ROUTES {
        let event = std::fs::read_to_string(format!("{ROOT}/events/{}.json", route.function))
            .unwrap_or_else(|_| panic!("events/{}.json is missing", route.function));
        let event: serde_json::Value = serde_json::from_str(&event).unwrap();
        assert_eq!(
            event["routeKey"],
            route.key(),
            "events/{}.json",
            route.function
        );
        assert_eq!(event["requestContext"]["http"]["method"], route.method);
        assert!(
            readme.contains(&format!("`{}`", route.key())),
            "the README does not list `{}`",
            route.key()
        );
    }
}
