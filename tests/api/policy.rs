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
use singlet::console::{capture, instrument};
use singlet::invoke::invoke;
use singlet::serve::iam::{self, AccessDenied, serving};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The calls `function` made that its rendered policy refuses, one line each.
/// (A function the route table does not know is refused everything.)
fn refused(function: &str, calls: &[capture::Call]) -> Vec<String> {
    calls
        .iter()
        .flat_map(|call| {
            iam::refused(function, &call.operation, &call.request)
                .into_iter()
                .map(|what| format!("{function}: {what}"))
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
        api.ctx.table.clone(),
        singlet_functions::cursor::CursorKeys::new(singlet_functions::cursor::LOCAL_SECRET),
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

/// The runner's [`AccessDenied`] an SDK call failed with.
fn access_denied(error: impl std::error::Error + 'static) -> AccessDenied {
    singlet_functions::store::access_denied(&error)
        .cloned()
        .unwrap_or_else(|| panic!("not refused by the runner's policy check: {error:?}"))
}

/// The runner applies each function's rendered policy to its calls, as IAM would on AWS: a
/// call it refuses fails before it is sent, naming the item by entity type (never its key);
/// an operator's call, made outside any function's work, is not checked.
#[tokio::test]
async fn the_runner_refuses_a_call_the_functions_policy_would_refuse() {
    use aws_sdk_dynamodb::types::AttributeValue::S;
    use singlet_shared::keys::{EMAIL_LOCK_PREFIX, PLATE_PREFIX, VEHICLE_PREFIX};
    use std::collections::HashMap;
    let api = Api::start(Mode::Direct).await;
    let (db, table) = (&api.ctx.db, &*api.ctx.table);
    let alone =
        |pk: String| HashMap::from([("PK".to_owned(), S(pk.clone())), ("SK".to_owned(), S(pk))]);
    let vehicle = alone(format!("{VEHICLE_PREFIX}v-1"));
    let plate = alone(format!("{PLATE_PREFIX}ka19xtr"));
    let get = |key: &HashMap<_, _>| {
        db.get_item()
            .table_name(table)
            .set_key(Some(key.clone()))
            .send()
    };
    let put = |item: &HashMap<_, _>| {
        db.put_item()
            .table_name(table)
            .set_item(Some(item.clone()))
            .send()
    };

    // get-vehicle may read a vehicle, and nothing else.
    serving("get-vehicle", get(&vehicle))
        .await
        .expect("allowed");
    let refusals = [
        (
            access_denied(serving("get-vehicle", put(&vehicle)).await.unwrap_err()),
            "dynamodb:PutItem on a vehicle item",
        ),
        (
            access_denied(serving("get-vehicle", get(&plate)).await.unwrap_err()),
            "dynamodb:GetItem on a plate-lock item",
        ),
        (
            access_denied(
                serving("get-vehicle", db.scan().table_name(table).send())
                    .await
                    .unwrap_err(),
            ),
            "dynamodb:Scan",
        ),
    ];
    for (denied, what) in refusals {
        assert_eq!(denied.function, "get-vehicle");
        assert_eq!(denied.refused, [what]);
        let said = denied.to_string();
        assert!(
            said.starts_with("AccessDeniedException: get-vehicle"),
            "{said}"
        );
        assert!(!said.contains("ka19xtr") && !said.contains("v-1"), "{said}");
    }
    // Nothing refused was written.
    assert!(get(&vehicle).await.unwrap().item.is_none());

    // A transaction is judged part by part: delete-account may delete an account's email lock
    // but not a plate's.
    let delete = |key: &HashMap<_, _>| {
        aws_sdk_dynamodb::types::TransactWriteItem::builder()
            .delete(
                aws_sdk_dynamodb::types::Delete::builder()
                    .table_name(table)
                    .set_key(Some(key.clone()))
                    .build()
                    .unwrap(),
            )
            .build()
    };
    let email = alone(format!("{EMAIL_LOCK_PREFIX}ada@example.com"));
    let both = db
        .transact_write_items()
        .transact_items(delete(&email))
        .transact_items(delete(&plate));
    let denied = access_denied(serving("delete-account", both.send()).await.unwrap_err());
    assert_eq!(denied.refused, ["dynamodb:DeleteItem on a plate-lock item"]);

    // An operator's own call (fsck, import, a test's setup) is not a function's: not checked.
    put(&vehicle).await.expect("an operator's put");
    assert!(get(&vehicle).await.unwrap().item.is_some());
}

/// A handler that touches more than its route declares, as a forgotten declaration would leave
/// it: `register-vehicle`'s handler run as `get-vehicle`, whose policy reads vehicles and nothing
/// else. The runner refuses its first write before it is sent and the request is answered as AWS
/// answers `AccessDeniedException`: `500`, no `retry-after` (it is no outage, and a retry would
/// be refused again), and nothing written.
#[tokio::test]
async fn a_handler_beyond_its_policy_is_answered_500_and_writes_nothing() {
    let api = Api::start(Mode::Direct).await;
    let ctx = singlet_functions::Ctx::new(
        api.ctx.db.clone(),
        api.ctx.table.clone(),
        singlet_functions::cursor::CursorKeys::new(singlet_functions::cursor::LOCAL_SECRET),
    );
    let event = std::fs::read_to_string(format!("{ROOT}/events/register-vehicle.json")).unwrap();
    let request = lambda_http::request::from_str(&event).unwrap();
    let route = singlet_functions::routes::by_function("register-vehicle").unwrap();
    let response = serving(
        "get-vehicle",
        singlet_functions::request::respond(&ctx, route, request),
    )
    .await;
    assert_eq!(response.status(), 500);
    assert!(response.headers().get("retry-after").is_none());
    assert!(api.items().await.is_empty(), "nothing written");
    // The same request served as its own function is allowed: the refusal was the policy's.
    let request = lambda_http::request::from_str(&event).unwrap();
    let response = serving(
        "register-vehicle",
        singlet_functions::request::respond(&ctx, route, request),
    )
    .await;
    assert_eq!(response.status(), 201);
    assert!(!api.items().await.is_empty());
}

/// Every grant of every rendered policy is one some test used: CI runs the whole suite with
/// `SINGLET_IAM_USED` naming a file, where the runner's check notes each grant a function's call
/// went through, then runs this (`cargo test --test api -- --ignored every_grant`). A declaration
/// wider than its handler, or a path no test takes, is named here.
#[test]
#[ignore = "reads what the whole suite used: run after it, as .ci/run does"]
fn every_grant_of_every_policy_is_used_by_some_test() {
    use singlet_functions::routes::{ROUTES, SCHEDULED, STREAMED};
    let path = std::env::var(iam::USED_GRANTS_VAR)
        .unwrap_or_else(|_| panic!("{} names the file the suite wrote", iam::USED_GRANTS_VAR));
    let used = iam::read_used(&std::fs::read_to_string(&path).unwrap());
    let functions = ROUTES
        .iter()
        .map(|r| r.function)
        .chain(SCHEDULED.iter().map(|s| s.function))
        .chain(STREAMED.iter().map(|s| s.function));
    let unused: Vec<String> = functions
        .flat_map(|function| {
            iam::grants(function)
                .into_iter()
                .filter(|grant| !used.contains(&(function.to_owned(), grant.clone())))
                .map(|(action, resource)| format!("{function}: {action} on {resource}"))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        unused.is_empty(),
        "grants no test used (narrow the declaration in the route table, or test the path):\n{}",
        unused.join("\n")
    );
}
