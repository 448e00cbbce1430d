//! `Idempotency-Key` on every creating `POST`: docs/API.md, "Conventions".

use crate::both;
use crate::fixtures;
use crate::harness::{Api, Mode, Reply, all_scopes, s, token};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};

const VEHICLE: &str = "/vehicles";
const ACCOUNT: &str = "/accounts";

fn vehicle(plate: &str) -> Value {
    json!({"plate": plate, "chassis": format!("chassis-{plate}"), "depot": "north"})
}

fn account(name: &str) -> Value {
    json!({"email": format!("{name}@example.com"), "username": name})
}

async fn post(api: &Api, path: &str, key: &str, body: Value) -> Reply {
    api.call("POST", path)
        .header("idempotency-key", key)
        .json(body)
        .send()
        .await
}

both!(
    a_forgotten_key_is_a_new_request,
    a_retry_returns_the_same_response_and_writes_nothing,
    the_same_key_with_another_body_is_422,
    keys_are_validated_and_scoped_to_their_route,
    a_failed_request_is_not_remembered,
    a_spent_key_is_422,
    a_key_belongs_to_its_caller,
    a_key_used_first_by_another_subject_blocks_nothing,
    a_body_where_the_first_request_had_none_is_422,
    a_replay_after_the_entity_is_deleted_is_410_and_keeps_no_personal_data,
);

/// The same key and body from another subject: its own request, never the first caller's answer.
async fn a_key_belongs_to_its_caller(api: Api) {
    let first = post(&api, ACCOUNT, "shared-key", account("ada")).await;
    assert_eq!(first.status, 201, "{first:?}");
    assert_eq!(first.header("idempotent-replayed"), None);
    let again = post(&api, ACCOUNT, "shared-key", account("ada")).await;
    assert_eq!((again.status, &again.body), (201, &first.body));
    assert_eq!(again.header("idempotent-replayed"), Some("true"));

    let mallory = api.as_token(token("mallory", &all_scopes(), &[]));
    let theirs = post(&mallory, ACCOUNT, "shared-key", account("ada")).await;
    theirs.assert_problem(409, &[("email", "taken"), ("username", "taken")]);
    assert_eq!(theirs.header("idempotent-replayed"), None);
    // The same subject of another issuer is another caller too.
    let mut foreign = serde_json::Map::new();
    for (name, value) in [
        ("iss", "https://other.example"),
        ("aud", singlet::serve::auth::LOCAL_AUDIENCE),
        ("sub", "tester"),
    ] {
        foreign.insert(name.into(), value.into());
    }
    let idempotency = singlet_functions::ids::IdKey::derived_from(b"k");
    let caller = |issuer| singlet_functions::ids::Caller {
        issuer,
        subject: "tester",
    };
    let key = singlet_shared::Id::parse("shared-key").unwrap();
    assert_ne!(
        idempotency.uuid(
            "create-account",
            caller(singlet::serve::auth::LOCAL_ISSUER),
            &key
        ),
        idempotency.uuid("create-account", caller("https://other.example"), &key)
    );
    // Two records: each caller's key is its own.
    let mine = post(&mallory, ACCOUNT, "shared-key", account("mallory")).await;
    assert_eq!(mine.status, 201, "{mine:?}");
    assert_ne!(mine.body["accountId"], first.body["accountId"]);
    assert_eq!(api.items_with_pk_prefix("IDEMPOTENCY#").await.len(), 2);
}

/// A predictable key used up by another subject first: the rightful caller's request runs.
async fn a_key_used_first_by_another_subject_blocks_nothing(api: Api) {
    let squatter = api.as_token(token("squatter", &all_scopes(), &[]));
    assert_eq!(
        post(&squatter, VEHICLE, "order-1", vehicle("KA-20"))
            .await
            .status,
        201
    );
    let mine = post(&api, VEHICLE, "order-1", vehicle("KA-21")).await;
    assert_eq!(mine.status, 201, "not 422: {mine:?}");
    assert_eq!(mine.body["plate"], "ka-21");
}

/// Return and renew take no body: a retry that sends one is another request.
async fn a_body_where_the_first_request_had_none_is_422(api: Api) {
    fixtures::library(&api).await;
    let patron_id = fixtures::patron(&api, "central", "card-1", "standard").await;
    let loan = fixtures::lend(&api, &patron_id, "central").await;
    let loan = loan["checkoutId"].as_str().unwrap();
    // Renew first (the loan must be open), then return: each with a key of its own.
    for (action, key) in [("renew", "renew-1"), ("return", "return-1")] {
        let path = format!("/patrons/{patron_id}/checkouts/{loan}/{action}");
        let first = api
            .call("POST", path.clone())
            .header("idempotency-key", key)
            .send()
            .await;
        assert_eq!(first.status, 200, "{action}: {first:?}");
        let again = api
            .call("POST", path.clone())
            .header("idempotency-key", key)
            .send()
            .await;
        assert_eq!((again.status, &again.body), (200, &first.body), "{action}");
        assert_eq!(again.header("idempotent-replayed"), Some("true"));
        api.call("POST", path)
            .header("idempotency-key", key)
            .json(json!({"note": "late"}))
            .send()
            .await
            .assert_problem(422, &[]);
    }
    // One renewal, then the return (a returned loan moves to `RETURNED#`): the late bodies
    // changed nothing.
    let stored = api
        .item(&format!("PATRON#{patron_id}"), &format!("RETURNED#{loan}"))
        .await
        .unwrap();
    assert_eq!(crate::harness::n(&stored, "renewalCount"), 1, "{stored:?}");
    assert_eq!(
        crate::harness::s(&stored, "status"),
        "returned",
        "{stored:?}"
    );
}

/// Deleting what a key created leaves its record a tombstone: `410`, and nothing personal kept.
async fn a_replay_after_the_entity_is_deleted_is_410_and_keeps_no_personal_data(api: Api) {
    fixtures::branch(&api, "central").await;
    let created = [
        (ACCOUNT.to_owned(), account("ada"), "accountId", "/accounts"),
        (
            VEHICLE.to_owned(),
            vehicle("KA-30"),
            "vehicleId",
            "/vehicles",
        ),
        (
            "/branches/central/patrons".to_owned(),
            fixtures::patron_body("card-30", "standard"),
            "patronId",
            "/patrons",
        ),
    ];
    for (path, body, id, collection) in created {
        let first = post(&api, &path, "gone-1", body.clone()).await;
        assert_eq!(first.status, 201, "{first:?}");
        let entity_id = first.body[id].as_str().unwrap();
        let deleted = api.delete(format!("{collection}/{entity_id}")).await;
        assert_eq!(deleted.status, 204, "{deleted:?}");
        // Within the same second the transaction would be DynamoDB's to answer by its
        // `ClientRequestToken` (see `a_forgotten_key_is_a_new_request`): a real retry comes later.
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        let replay = post(&api, &path, "gone-1", body).await;
        replay.assert_problem(410, &[]);
        assert_eq!(replay.body["type"], "/problems/gone");
    }
    let records = api.items_with_pk_prefix("IDEMPOTENCY#").await;
    assert_eq!(records.len(), 3);
    for record in records {
        let text = format!("{record:?}");
        for personal in ["ada@example.com", "ka-30", "Lovelace", "card-30"] {
            assert!(!text.contains(personal), "{personal} stays in {text}");
        }
        assert!(record.contains_key("expiresAt"), "a tombstone expires too");
        assert!(!s(&record, "PK").is_empty());
    }
    // An entity made without a key has no record to clear: its delete writes none.
    let plain = api.post(VEHICLE, vehicle("KA-31")).await;
    let plain_id = plain.body["vehicleId"].as_str().unwrap();
    assert_eq!(
        api.delete(format!("/vehicles/{plain_id}")).await.status,
        204
    );
    assert_eq!(api.items_with_pk_prefix("IDEMPOTENCY#").await.len(), 3);
}

async fn a_retry_returns_the_same_response_and_writes_nothing(api: Api) {
    for (path, body) in [(VEHICLE, vehicle("KA-1")), (ACCOUNT, account("ada"))] {
        let first = post(&api, path, "retry-1", body.clone()).await;
        assert_eq!(first.status, 201, "{first:?}");
        let before = api.items().await.len();
        // The same body with other white space and the fields in reverse order.
        let fields = body.as_object().unwrap().iter().rev();
        let reordered: Vec<String> = fields.map(|(k, v)| format!("\n  {k:?} :  {v}")).collect();
        let reordered = format!("{{{}\n}}", reordered.join(" ,"));
        assert_ne!(
            reordered.replace([' ', '\n'], ""),
            body.to_string(),
            "not byte-identical"
        );
        let again = api
            .call("POST", path)
            .header("idempotency-key", "retry-1")
            .raw("application/json", reordered)
            .send()
            .await;
        assert_eq!(again.status, 201);
        assert_eq!(again.body, first.body, "the identical body");
        assert_eq!(again.header("location"), first.header("location"));
        assert_eq!(api.items().await.len(), before, "nothing new is written");
    }
    // One vehicle, two vehicle locks, one account, two account locks, two records, and the two
    // ids' locks.
    assert_eq!(api.items().await.len(), 10);
    assert_eq!(api.items_with_pk_prefix("IDEMPOTENCY#").await.len(), 2);
}

async fn the_same_key_with_another_body_is_422(api: Api) {
    assert_eq!(
        post(&api, VEHICLE, "k-2", vehicle("KA-2")).await.status,
        201
    );
    let before = api.items().await;
    let other = post(&api, VEHICLE, "k-2", vehicle("KA-3")).await;
    other.assert_problem(422, &[]);
    assert_eq!(other.body["type"], "/problems/unprocessable");
    assert_eq!(api.items().await.len(), before.len());
    assert!(api.item("PLATE#ka3", "PLATE#ka3").await.is_none());
}

async fn keys_are_validated_and_scoped_to_their_route(api: Api) {
    for bad in [
        "x".repeat(37),
        "has space".into(),
        "semi;colon".into(),
        "é".into(),
    ] {
        post(&api, VEHICLE, &bad, vehicle("KA-4"))
            .await
            .assert_problem(400, &[("Idempotency-Key", "invalid")]);
    }
    assert!(api.items().await.is_empty());
    let key = "k".repeat(36);
    assert_eq!(post(&api, VEHICLE, &key, vehicle("KA-4")).await.status, 201);
    assert_eq!(
        post(&api, ACCOUNT, &key, account("grace")).await.status,
        201,
        "keys are per route"
    );
}

async fn a_failed_request_is_not_remembered(api: Api) {
    let holder = api.post(VEHICLE, vehicle("KA-5")).await.body["vehicleId"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut taken = vehicle("KA-5");
    taken["chassis"] = "other-chassis".into();
    post(&api, VEHICLE, "k-5", taken.clone())
        .await
        .assert_problem(409, &[("plate", "taken")]);
    assert_eq!(api.delete(format!("/vehicles/{holder}")).await.status, 204);
    let retried = post(&api, VEHICLE, "k-5", taken).await;
    assert_eq!(
        retried.status, 201,
        "a retry of a refused request runs again: {retried:?}"
    );
}

async fn a_spent_key_is_422(api: Api) {
    let first = post(&api, ACCOUNT, "k-6", account("lin")).await;
    assert_eq!(first.status, 201);
    // Age the record past its 10 minutes, as if the retry came late.
    let record = api
        .items_with_pk_prefix("IDEMPOTENCY#")
        .await
        .pop()
        .unwrap();
    api.ctx
        .db
        .update_item()
        .table_name(&*api.ctx.table)
        .key("PK", record["PK"].clone())
        .key("SK", record["SK"].clone())
        .update_expression("SET replayUntil = :past")
        .expression_attribute_values(":past", AttributeValue::N("1".into()))
        .send()
        .await
        .unwrap();
    let late = post(&api, ACCOUNT, "k-6", account("lin")).await;
    late.assert_problem(422, &[]);
    assert!(late.body["detail"].as_str().unwrap().contains("10 minutes"));
}

/// 20 concurrent identical requests with one key: one entity, twenty identical answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_retries_create_one_entity() {
    let api = Api::start(Mode::Http).await;
    for (path, body, prefix) in [
        (VEHICLE, vehicle("KA-7"), "VEHICLE#"),
        (ACCOUNT, account("ken"), "ACCT#"),
    ] {
        let replies = futures::future::join_all((0..20).map(|_| {
            let (api, body) = (api.clone(), body.clone());
            async move { post(&api, path, "same-key", body).await }
        }))
        .await;
        for reply in &replies {
            assert_eq!(reply.status, 201, "{reply:?}");
            assert_eq!(reply.body, replies[0].body);
        }
        assert_eq!(api.items_with_pk_prefix(prefix).await.len(), 1);
    }
    // Each entity, its two locks, its record and its id's lock.
    assert_eq!(api.items().await.len(), 10);
}

/// Every creating `POST` takes the key: a retry replays, another body is `422`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_creating_post_takes_an_idempotency_key() {
    let api = Api::start(Mode::Direct).await;
    let branch = json!({"branchId": "central", "name": "Central", "address": "1 Square", "city": "Springfield",
        "phone": "+44 20 7946 0000", "openingHours": "Mon-Sat 09:00-20:00"});
    let book = json!({"isbn": "0-306-40615-2", "title": "Fundamentals of Data Structures", "author": "Ellis Horowitz",
        "publisher": "Computer Science Press", "publishYear": 1976, "genre": "Computer science",
        "description": "Arrays, stacks, queues, lists, trees and graphs.", "pageCount": 564});
    let patron = json!({"cardNumber": "card-1", "firstName": "Ada", "lastName": "Lovelace",
        "email": "ada@example.com", "membershipTier": "standard"});
    let mut creating: Vec<(String, Value, Value)> = vec![
        (VEHICLE.into(), vehicle("KA-9"), vehicle("KA-10")),
        (ACCOUNT.into(), account("ada"), account("grace")),
        (
            "/resources".into(),
            json!({"resourceId": "r1", "status": "open", "actor": "a"}),
            json!({"resourceId": "r2", "status": "open", "actor": "a"}),
        ),
        (
            "/branches".into(),
            branch.clone(),
            json!({"branchId": "east", "name": "East", "address": "2 Road", "city": "Springfield", "phone": "1", "openingHours": "-"}),
        ),
        (
            "/books".into(),
            book.clone(),
            json!({"isbn": "080442957X", "title": "T", "author": "A", "publisher": "P", "publishYear": 2000, "genre": "G", "description": "D", "pageCount": 10}),
        ),
        (
            "/branches/central/patrons".into(),
            patron.clone(),
            json!({"cardNumber": "card-2", "firstName": "Grace", "lastName": "Hopper", "email": "grace@example.com", "membershipTier": "premium"}),
        ),
        (
            "/branches/central/copies".into(),
            json!({"isbn": "9780306406157", "condition": "good"}),
            json!({"isbn": "9780306406157", "condition": "fair"}),
        ),
    ];
    let mut ids = Vec::new();
    for (path, body, other) in &creating {
        let first = post(&api, path, "same-key", body.clone()).await;
        assert_eq!(first.status, 201, "{path}: {first:?}");
        let before = api.items().await.len();
        let again = post(&api, path, "same-key", body.clone()).await;
        assert_eq!((again.status, &again.body), (201, &first.body), "{path}");
        post(&api, path, "same-key", other.clone())
            .await
            .assert_problem(422, &[]);
        assert_eq!(
            api.items().await.len(),
            before,
            "{path}: nothing new is written"
        );
        ids.push(first.body);
    }
    // The checkout, with the patron and the copy made above.
    let loan =
        json!({"patronId": ids[5]["patronId"], "branchId": "central", "copyId": ids[6]["copyId"]});
    creating.push(("/checkouts".into(), loan.clone(), json!({})));
    let first = post(&api, "/checkouts", "same-key", loan.clone()).await;
    assert_eq!(first.status, 201, "{first:?}");
    let again = post(&api, "/checkouts", "same-key", loan).await;
    assert_eq!((again.status, &again.body), (201, &first.body));
    let spare = api
        .post(
            "/branches/central/copies",
            json!({"isbn": "9780306406157", "condition": "new"}),
        )
        .await;
    let other = json!({"patronId": ids[5]["patronId"], "branchId": "central", "copyId": spare.body["copyId"]});
    post(&api, "/checkouts", "same-key", other)
        .await
        .assert_problem(422, &[]);

    // Every creating POST of the route table is covered here.
    let covered: std::collections::BTreeSet<String> = creating
        .iter()
        .map(|(path, _, _)| path.replace("central", "{branchId}"))
        .collect();
    let declared: std::collections::BTreeSet<String> = singlet_functions::routes::ROUTES
        .iter()
        .filter(|r| {
            r.method == "POST" && !r.path.ends_with("/return") && !r.path.ends_with("/renew")
        })
        .map(|r| r.path.to_owned())
        .collect();
    assert_eq!(covered, declared);
}

/// Once DynamoDB's TTL has deleted a record, its key is forgotten: a reuse is a new request.
async fn a_forgotten_key_is_a_new_request(api: Api) {
    let branch = json!({"branchId": "central", "name": "Central", "address": "1 Square", "city": "Springfield",
        "phone": "1", "openingHours": "always"});
    assert_eq!(
        post(&api, VEHICLE, "old-key", vehicle("KA-11"))
            .await
            .status,
        201
    );
    assert_eq!(
        post(&api, "/branches", "old-key", branch.clone())
            .await
            .status,
        201
    );
    api.forget_idempotency_keys().await;
    // The id derived from the key is still taken by the vehicle it made: the key is spent.
    post(&api, VEHICLE, "old-key", vehicle("KA-11"))
        .await
        .assert_problem(422, &[]);
    // A route that derives no id (a branch) runs the request again. Its record carries the time
    // (`replayUntil`, `expiresAt`) to the second, so within the same second the transaction would
    // be DynamoDB's to replay by its `ClientRequestToken`, and a second later it is another
    // request: wait for the next second, as a real reuse (a day later, when the record has
    // expired) always is. The branch is there: `409`, nothing written.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let before = api.items().await.len();
    post(&api, "/branches", "old-key", branch.clone())
        .await
        .assert_problem(409, &[("branchId", "taken")]);
    assert_eq!(api.items().await.len(), before, "nothing new is written");
    // With another body, the forgotten key makes another branch.
    let mut east = branch;
    east["branchId"] = "east".into();
    assert_eq!(post(&api, "/branches", "old-key", east).await.status, 201);
    assert_eq!(api.items_with_pk_prefix("VEHICLE#").await.len(), 1);
}

/// The window is 10 minutes by the function's clock: the record says when it closes
/// (`replayUntil`), a retry 9 minutes on is replayed, one 11 minutes on is `422`.
#[tokio::test]
async fn a_key_replays_for_ten_minutes_by_the_functions_clock() {
    use singlet_functions::clock::Clock;
    for mode in [Mode::Direct, Mode::Http] {
        let (client, endpoint) = singlet::serve::engine::start_in_memory("singlet").await;
        let mut ctx = singlet_functions::Ctx::new(
            client,
            "singlet",
            singlet_functions::cursor::CursorKeys::random(),
        );
        let start = time::OffsetDateTime::now_utc();
        ctx.clock = Clock::reading(start);
        let mut api = Api::start_on(mode, ctx).await;
        api.engine = endpoint;
        let first = post(&api, ACCOUNT, "k-window", account("win")).await;
        assert_eq!(first.status, 201, "{first:?}");
        let record = api
            .items_with_pk_prefix("IDEMPOTENCY#")
            .await
            .pop()
            .unwrap();
        let until = crate::harness::n(&record, "replayUntil");
        assert!(
            (start.unix_timestamp() + 600..=start.unix_timestamp() + 601).contains(&until),
            "{mode:?}: replayUntil {until}, started {start}"
        );
        api.ctx.clock.advance(time::Duration::minutes(9));
        let again = post(&api, ACCOUNT, "k-window", account("win")).await;
        assert_eq!((again.status, &again.body), (201, &first.body), "{mode:?}");
        assert_eq!(again.header("idempotent-replayed"), Some("true"));
        api.ctx.clock.advance(time::Duration::minutes(2));
        let late = post(&api, ACCOUNT, "k-window", account("win")).await;
        late.assert_problem(422, &[]);
        assert_eq!(api.items_with_pk_prefix("ACCT#").await.len(), 1, "{mode:?}");
    }
}
