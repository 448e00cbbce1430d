//! Every DynamoDB call a function makes is one its rendered policy allows. Each event in
//! `events/` is replayed through its handler (in `tests/api/events.rs`'s order), every call it
//! makes is recorded as it goes over the wire, and each item the call touches is checked against
//! the function's statements as IAM checks them: `dynamodb:LeadingKeys` on the partition key of
//! every item, a transaction item by item, an index query against that index's own statement.
//! A declaration in the route table that leaves out an entity its handler touches, or an index it
//! queries, on the paths the events take, fails here. (A declaration wider than its handler is
//! not caught: `active-checkouts` queries GSI1 only for a patron with no active loan, a path no
//! event takes.)

use crate::events::REPLAY;
use crate::harness::{Api, Mode, token};
use serde_json::Value;
use singlet::console::{capture, instrument};
use singlet::invoke::invoke;
use singlet::render::{Statement, TABLE_ARN, index_arn, policy};
use singlet_functions::access::Access;
use singlet_functions::routes::{ROUTES, SCHEDULED};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// What IAM authorises one part of a call by.
#[derive(Debug)]
enum Touch {
    /// An action on the table's item whose partition key is `pk`.
    Item { action: String, pk: String },
    /// A `Query` on an index.
    Index(String),
}

/// The partition key of a key or an item, in DynamoDB JSON.
fn pk(key: &Value) -> String {
    key["PK"]["S"]
        .as_str()
        .unwrap_or_else(|| panic!("no PK in {key}"))
        .to_owned()
}

fn item(action: &str, key: &Value) -> Touch {
    Touch::Item {
        action: action.to_owned(),
        pk: pk(key),
    }
}

/// What a call touches, from its request body (the store's `Query` names its partition `:pk`).
fn touches(function: &str, operation: &str, request: &Value) -> Vec<Touch> {
    match operation {
        "GetItem" | "UpdateItem" | "DeleteItem" => vec![item(operation, &request["Key"])],
        "PutItem" => vec![item(operation, &request["Item"])],
        "Query" => match request["IndexName"].as_str() {
            Some(index) => vec![Touch::Index(index.to_owned())],
            None => vec![item(
                operation,
                &serde_json::json!({"PK": request["ExpressionAttributeValues"][":pk"]}),
            )],
        },
        "TransactWriteItems" => request["TransactItems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|part| {
                let (kind, body) = part.as_object().unwrap().iter().next().unwrap();
                match kind.as_str() {
                    "Put" => item("PutItem", &body["Item"]),
                    "Update" => item("UpdateItem", &body["Key"]),
                    "Delete" => item("DeleteItem", &body["Key"]),
                    "ConditionCheck" => item("ConditionCheckItem", &body["Key"]),
                    other => panic!("{function}: a transaction part {other}"),
                }
            })
            .collect(),
        "TransactGetItems" => request["TransactItems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|part| item("GetItem", &part["Get"]["Key"]))
            .collect(),
        other => panic!("{function} calls {other}, which no policy allows"),
    }
}

fn allowed(statements: &[Statement], touch: &Touch) -> bool {
    match touch {
        Touch::Item { action, pk } => statements.iter().any(|s| {
            s.resource == TABLE_ARN
                && s.actions.contains(&format!("dynamodb:{action}"))
                && s.leading_keys
                    .iter()
                    .any(|prefix| pk.starts_with(prefix.trim_end_matches('*')))
        }),
        Touch::Index(index) => statements
            .iter()
            .any(|s| s.resource == index_arn(index) && s.actions == ["dynamodb:Query"]),
    }
}

/// The function's declaration and whether its route takes an `Idempotency-Key`.
fn declared(function: &str) -> (&'static Access, bool) {
    if let Some(route) = ROUTES.iter().find(|r| r.function == function) {
        return (&route.access, route.idempotent);
    }
    let scheduled = SCHEDULED
        .iter()
        .find(|s| s.function == function)
        .unwrap_or_else(|| panic!("{function} is declared"));
    (&scheduled.access, false)
}

/// The calls `function` made that its rendered policy refuses, one line each.
fn refused(function: &str, calls: &[capture::Call]) -> Vec<String> {
    let (access, idempotent) = declared(function);
    let statements = policy(function, idempotent, access);
    calls
        .iter()
        .flat_map(|call| {
            touches(function, &call.operation, &call.request)
                .into_iter()
                .filter(|touch| !allowed(&statements, touch))
                .map(|touch| format!("{function}: {} {touch:?}", call.operation))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test]
async fn every_call_a_function_makes_is_one_its_rendered_policy_allows() {
    let api = Api::start(Mode::Direct).await;
    // The events' ids are derived under the runner's local secret (as in `events.rs`).
    let ctx = instrument(singlet_functions::Ctx::new(
        api.ctx.db.clone(),
        "singlet",
        singlet_functions::cursor::CursorKeys::new(singlet::LOCAL_SECRET),
    ));
    let mut refusals = Vec::new();
    for (function, _) in REPLAY {
        let text = std::fs::read_to_string(format!("{ROOT}/events/{function}.json")).unwrap();
        let (reply, calls) = capture::recording(invoke(&ctx, function, &text)).await;
        reply.unwrap();
        refusals.extend(refused(function, &calls));
    }
    // The events act as an administrator; an account made by its own subject also claims the
    // subject's owner lock (`UNIQ#OWNER#`), and deleting it frees the lock.
    let own = api
        .with_ctx(ctx.clone())
        .as_token(token("grace", "accounts:self", &[]));
    let (created, calls) = capture::recording(own.post(
        "/accounts",
        serde_json::json!({"email": "grace@example.com", "username": "grace", "displayName": "Grace"}),
    ))
    .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    refusals.extend(refused("create-account", &calls));
    let id = created.body["accountId"].as_str().unwrap().to_owned();
    let (deleted, calls) = capture::recording(own.delete(format!("/accounts/{id}"))).await;
    assert_eq!(deleted.status, 204, "{:?}", deleted.body);
    refusals.extend(refused("delete-account", &calls));
    assert!(
        refusals.is_empty(),
        "calls the rendered policies refuse (declare what these touch in the route table):\n{}",
        refusals.join("\n")
    );
}
