//! The console (`/_console`): its endpoints against a real engine, and its page in a real browser.
//!
//! The endpoint tests run the runner's real front door in-process over dynoxide: a run shows
//! every DynamoDB call and the table's changes, a cancelled transaction's reasons sit next to the
//! field errors they became, each race has exactly one winner, the seed's loans already due are
//! what `mark-overdue` moves, and the console answers no other origin.
//!
//! The browser test drives headless Chromium (Debian's `chromium` and `chromium-driver`) through
//! chromedriver's WebDriver protocol: it seeds, runs one pattern per domain and one race through
//! the page, and checks what the page shows against the table. Without Chromium it skips, saying
//! so, unless `SINGLET_REQUIRE_BROWSER=1` (as `.ci/run` sets it) makes that a failure.
//! `CONSOLE_SCREENSHOTS=docs` writes each domain's screenshot to `docs/console-<domain>.png`.

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};
use singlet::console::table::{self, Domain};
use singlet::serve::{engine, front_door};
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The runner's front door (the API and the console) on a loopback port over a fresh engine.
async fn start() -> (Ctx, String) {
    let (client, _) = engine::start_in_memory("singlet").await;
    let ctx = Ctx::new(client, "singlet", CursorKeys::random());
    let (authorizer, issuer) = singlet::serve::auth::Authorizer::local(
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-keys"),
    )
    .unwrap();
    let gateway = front_door::Gateway {
        ctx: ctx.clone(),
        authorizer: std::sync::Arc::new(authorizer),
        issuer: Some(std::sync::Arc::new(issuer)),
    };
    // As `main.rs` serves it: the API with the console mounted beside it.
    let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = singlet::console::mount(gateway, &[], Some(&events_file()));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (ctx, base)
}

/// The events file the test's console reads: no stream publishes to it here, so a test writes
/// to it what the local bus would.
fn events_file() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-events.jsonl")
}

/// Appends the event `event_id` to the events file as the local bus writes it.
fn publish(event_id: &Value) {
    use std::io::Write;
    let line = json!({"detail-type": "VehicleRegistered", "source": "singlet.fleet",
                      "detail": {"eventId": event_id}});
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(events_file())
        .unwrap();
    writeln!(file, "{line}").unwrap();
}

/// A console endpoint, as the page calls it: its answer, which must be a `200`.
async fn console(base: &str, path: &str, body: Value) -> Value {
    let (status, body) = answered(base, path, body).await;
    assert_eq!(status, 200, "{path}: {body}");
    body
}

async fn run(base: &str, method: &str, path: &str, body: Option<Value>) -> Value {
    let mut request = json!({"method": method, "path": path, "headers": []});
    if let Some(body) = body {
        request["body"] = body.to_string().into();
        request["headers"] = json!([["content-type", "application/json"]]);
    }
    console(base, "run", json!({"request": request})).await
}

/// Every item the console's table view marks with `change`, as `(PK, SK, entity)`.
fn marked(answer: &Value, change: &str) -> Vec<(String, String, String)> {
    let mut items: Vec<_> = answer["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["items"].as_array().unwrap())
        .filter(|i| i["change"] == change)
        .map(|i| {
            (
                i["pk"].as_str().unwrap().to_owned(),
                i["sk"].as_str().unwrap().to_owned(),
                i["entity"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    items.sort();
    items
}

fn entities(items: &[(String, String, String)]) -> Vec<&str> {
    let mut names: Vec<&str> = items.iter().map(|i| i.2.as_str()).collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_shows_every_dynamodb_call_and_what_it_did_to_the_table() {
    let (ctx, base) = start().await;
    let answer = run(
        &base,
        "POST",
        "/vehicles",
        Some(json!({"plate": "KA19 XTR", "chassis": "WVW1", "depot": "north"})),
    )
    .await;
    assert_eq!(answer["answer"]["status"], 201, "{answer}");
    let vehicle_id = answer["answer"]["body"]["vehicleId"].as_str().unwrap();

    let operations = answer["operations"].as_array().unwrap();
    let transaction = operations
        .iter()
        .find(|o| o["operation"] == "TransactWriteItems")
        .expect("the registration's transaction");
    let parts = transaction["parts"].as_array().unwrap();
    let keys: Vec<&str> = parts
        .iter()
        .map(|p| p["key"]["pk"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            format!("VEHICLE#{vehicle_id}").as_str(),
            "PLATE#ka19xtr",
            // The key the old rule made of this spelling, checked free until plates-compact.
            "PLATE#ka19 xtr",
            "CHASSIS#wvw1",
            format!("OUTBOX#vehicle#{vehicle_id}").as_str(),
        ]
    );
    let actions: Vec<&str> = parts
        .iter()
        .map(|p| p["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["Put", "Put", "ConditionCheck", "Put", "Put"]);
    assert_eq!(
        parts[1]["expressions"][0]["resolved"],
        "attribute_not_exists(PK)"
    );
    assert!(
        !transaction["capacity"].as_array().unwrap().is_empty(),
        "the capacity the transaction consumed: {transaction}"
    );
    assert!(transaction["raw"]["request"]["TransactItems"].is_array());

    let added = marked(&answer, "added");
    assert_eq!(
        entities(&added),
        ["ChassisLock", "DomainEvent", "PlateLock", "Vehicle"]
    );
    // The event it emitted: its outbox item, as the stream will publish it.
    let events = answer["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{answer}");
    assert_eq!(events[0]["detailType"], "VehicleRegistered");
    assert_eq!(events[0]["source"], "singlet.fleet");
    assert_eq!(events[0]["detail"]["subject"]["id"], vehicle_id);
    // The bus's side: what the events file holds, newest first.
    publish(&events[0]["detail"]["eventId"]);
    let published = reqwest::Client::new()
        .get(format!("{base}/_console/api/published"))
        .header("x-singlet-console", singlet::console::secret())
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(
        published["events"][0]["detail"]["eventId"],
        events[0]["detail"]["eventId"]
    );
    // What the console shows is what the table holds.
    let snapshot = table::scan(&ctx).await.unwrap();
    let held: Vec<(String, String)> = snapshot.keys().cloned().collect();
    let shown: Vec<(String, String)> = added.iter().map(|i| (i.0.clone(), i.1.clone())).collect();
    assert_eq!(shown, held);

    // A read changes nothing and says so.
    let read = run(&base, "GET", &format!("/vehicles/{vehicle_id}"), None).await;
    assert_eq!(read["answer"]["status"], 200);
    assert_eq!(read["operations"][0]["operation"], "GetItem");
    assert_eq!(read["operations"][0]["found"], true);
    assert_eq!(read["operations"][0]["consistent"], true);
    assert_eq!(read["changes"]["added"], 0);
    assert_eq!(read["changes"]["changed"], 0);

    // Retiring removes the vehicle, its locks and its registration's event (an outbox item that
    // holds its plate), shown as removed.
    let retired = run(&base, "DELETE", &format!("/vehicles/{vehicle_id}"), None).await;
    assert_eq!(retired["answer"]["status"], 204);
    assert_eq!(
        entities(&marked(&retired, "removed")),
        ["ChassisLock", "DomainEvent", "PlateLock", "Vehicle"]
    );
    // What stays is the retirement's event alone (an outbox item, expiring in a day).
    let left = table::scan(&ctx).await.unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        left.keys().all(|(pk, _)| pk.starts_with("OUTBOX#")),
        "{left:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_transaction_shows_its_reasons_next_to_the_field_errors() {
    let (_ctx, base) = start().await;
    let first = run(
        &base,
        "POST",
        "/vehicles",
        Some(json!({"plate": "KA19 XTR", "chassis": "WVW1", "depot": "north"})),
    )
    .await;
    assert_eq!(first["answer"]["status"], 201);
    let second = run(
        &base,
        "POST",
        "/vehicles",
        Some(json!({"plate": "ka19  xtr", "chassis": "WVW1", "depot": "south"})),
    )
    .await;
    assert_eq!(second["answer"]["status"], 409, "{second}");
    let transaction = second["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["operation"] == "TransactWriteItems")
        .unwrap();
    assert_eq!(transaction["error"], "TransactionCanceledException");
    let parts = transaction["parts"].as_array().unwrap();
    assert!(
        parts[0]["reason"].is_null(),
        "the vehicle part was not at fault"
    );
    // The plate's lock and the chassis number's (parts 1 and 3); part 2, the key the old rule
    // made of this spelling, checked free until plates-compact, was free.
    assert_eq!(parts[2]["action"], "ConditionCheck");
    assert!(parts[2]["reason"].is_null(), "{}", parts[2]);
    for (part, field) in [(1, "plate"), (3, "chassis")] {
        assert_eq!(parts[part]["reason"], "ConditionalCheckFailed");
        assert_eq!(parts[part]["became"], format!("409 {field}: taken"));
    }
    assert_eq!(second["changes"]["added"], 0);

    // A stale version: the guarded update's reason became the 412.
    run(
        &base,
        "POST",
        "/resources",
        Some(json!({"resourceId": "door-7", "status": "closed"})),
    )
    .await;
    let change = |status: &str| {
        json!({"method": "PATCH", "path": "/resources/door-7",
               "headers": [["content-type", "application/json"], ["if-match", "\"1\""]],
               "body": json!({"status": status, "action": "edit"}).to_string()})
    };
    let won = console(&base, "run", json!({"request": change("open")})).await;
    assert_eq!(won["answer"]["status"], 200);
    assert_eq!(
        entities(&marked(&won, "added")),
        ["ChangeEvent", "DomainEvent"]
    );
    assert_eq!(entities(&marked(&won, "changed")), ["CurrentState"]);
    let stale = console(&base, "run", json!({"request": change("closed")})).await;
    assert_eq!(stale["answer"]["status"], 412);
}

/// A console endpoint, as the page calls it: its status and answer (the error, for one that
/// refuses).
async fn answered(base: &str, path: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}/_console/api/{path}"))
        .header("content-type", "application/json")
        .header("x-singlet-console", singlet::console::secret())
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_query_or_scan_answers_its_items_and_what_it_consumed() {
    let (ctx, base) = start().await;
    console(&base, "seed", json!({})).await;
    let snapshot = table::scan(&ctx).await.unwrap();

    // A branch's partition, its patrons only, newest key first, two at a time.
    let branch_partition = "BRANCH#old-town";
    let patrons: Vec<&String> = snapshot
        .keys()
        .filter(|(pk, sk)| pk == branch_partition && sk.starts_with("PATRON#"))
        .map(|(_, sk)| sk)
        .collect();
    assert!(patrons.len() > 2);
    let query = console(
        &base,
        "explore",
        json!({"mode": "query", "partition": branch_partition, "sortOp": "begins_with",
               "sort": "PATRON#", "limit": 2, "descending": true}),
    )
    .await;
    let shown: Vec<&str> = query["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["sk"].as_str().unwrap())
        .collect();
    let newest: Vec<&str> = patrons.iter().rev().take(2).map(|s| s.as_str()).collect();
    assert_eq!(shown, newest);
    assert_eq!(query["more"], true);
    let call = &query["operations"][0];
    assert_eq!(call["operation"], "Query");
    assert_eq!(call["scanForward"], false);
    assert!(!call["capacity"].as_array().unwrap().is_empty(), "{call}");

    // An index's partition: every branch.
    let branches = console(
        &base,
        "explore",
        json!({"mode": "query", "index": "GSI1", "partition": "BRANCHES"}),
    )
    .await;
    assert_eq!(branches["count"], 3);
    assert_eq!(branches["operations"][0]["index"], "GSI1");

    // A scan with a filter: it reads the page, then keeps what matches.
    let vehicles = snapshot
        .values()
        .filter(|item| table::entity(item).0 == "Vehicle")
        .count();
    let scan = console(
        &base,
        "explore",
        json!({"mode": "scan", "limit": 500, "filterAttribute": "_et", "filterOp": "=",
               "filterValue": "vehicle"}),
    )
    .await;
    assert_eq!(scan["count"], vehicles);
    assert!(scan["scanned"].as_u64().unwrap() > vehicles as u64);
    assert_eq!(scan["operations"][0]["operation"], "Scan");

    // What it cannot run, it says.
    let (status, error) = answered(
        &base,
        "explore",
        json!({"mode": "query", "index": "GSI9", "partition": "x"}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(error["error"].as_str().unwrap().contains("GSI9"), "{error}");
    let (status, _) = answered(&base, "explore", json!({"mode": "query"})).await;
    assert_eq!(status, 400);
}

/// The heat view: the sign-up race's clients all write one email lock, which is then the one
/// hot key of its family, under the per-key limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_race_lights_its_one_key_in_the_heat_view() {
    let (_, base) = start().await;
    let answer = console(&base, "race", json!({"race": "email"})).await;
    let heat = &answer["heat"];
    assert_eq!(heat["limited"], true, "{heat}");
    assert_eq!(heat["writeUnitsPerKey"], 1000);
    let family = heat["families"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["family"] == "UNIQ#EMAIL#" && f["index"].is_null())
        .unwrap_or_else(|| panic!("no email locks in {heat}"));
    let keys = family["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1, "{family}");
    let peak = keys[0]["peakWcuPerSecond"].as_f64().unwrap();
    assert!((2.0..=1000.0).contains(&peak), "{family}");
    assert_eq!(keys[0]["throttledRequests"], 0, "{family}");
    let read = reqwest::Client::new()
        .get(format!("{base}/_console/api/heat"))
        .header("x-singlet-console", singlet::console::secret())
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    let again: Value = read.json().await.unwrap();
    assert_eq!(again["limited"], true, "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_race_has_exactly_one_winner() {
    let (ctx, base) = start().await;
    for (race, racers, loser) in [
        ("plate", 16, "409 plate: taken"),
        ("email", 16, "409 email: taken"),
        ("version", 2, "412 stale version (current 2)"),
        ("copy", 32, "409 copyId: unavailable"),
    ] {
        let answer = console(&base, "race", json!({"race": race})).await;
        let outcome = &answer["race"];
        assert_eq!(outcome["winners"], 1, "{race}: {outcome}");
        // The caption says where each loser was refused, as its calls show it.
        let refused_by_handler = outcome["racers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["answer"]["status"].as_u64().unwrap() >= 400)
            .any(|r| {
                !r["operations"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|o| o["operation"] == "TransactWriteItems")
            });
        // The version race holds each reviewer's write until both have read: both reach the
        // engine, which refuses one.
        if race == "version" {
            assert!(
                !refused_by_handler,
                "both reviewers sent a transaction: {outcome}"
            );
        }
        let caption = outcome["whatHappened"].as_str().unwrap();
        assert_eq!(
            caption.contains("refused by the handler") || caption.contains("its handler refused"),
            refused_by_handler,
            "{race}: {caption}"
        );
        // The winner's events: one outbox item.
        assert_eq!(outcome["events"].as_array().unwrap().len(), 1, "{race}");
        assert_eq!(outcome["racers"].as_array().unwrap().len(), racers);
        let tally = outcome["tally"].as_array().unwrap();
        let losers = tally
            .iter()
            .find(|t| t[0] == loser)
            .unwrap_or_else(|| panic!("{race}: {tally:?}"));
        assert_eq!(losers[1], racers - 1, "{race}: {tally:?}");
        // The losers wrote nothing: only the winner's items are new.
        let added = marked(&json!({"partitions": outcome["table"]}), "added");
        match race {
            "plate" => assert_eq!(
                entities(&added),
                ["ChassisLock", "DomainEvent", "PlateLock", "Vehicle"]
            ),
            "email" => assert_eq!(
                entities(&added),
                ["Account", "DomainEvent", "EmailLock", "UsernameLock"]
            ),
            "version" => assert_eq!(entities(&added), ["ChangeEvent", "DomainEvent"]),
            _ => assert_eq!(entities(&added), ["DomainEvent", "Loan"]),
        }
    }
    let locks = table::scan(&ctx)
        .await
        .unwrap()
        .keys()
        .filter(|(pk, _)| pk.starts_with("PLATE#"))
        .count();
    assert_eq!(locks, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_fills_every_domain_and_mark_overdue_moves_its_loans_already_due() {
    let (ctx, base) = start().await;
    let seeded = console(&base, "seed", json!({})).await;
    assert_eq!(seeded["seed"]["failures"], json!([]), "{}", seeded["seed"]);
    assert_eq!(seeded["seed"]["lentInThePast"], 8);
    let snapshot = table::scan(&ctx).await.unwrap();
    let domains: BTreeSet<Domain> = snapshot
        .values()
        .filter_map(|item| table::entity(item).1)
        .collect();
    assert_eq!(domains.len(), 4, "every domain has data");
    // A second seed leaves every domain alone.
    let again = console(&base, "seed", json!({})).await;
    assert_eq!(again["seed"]["skipped"].as_array().unwrap().len(), 4);

    let now = singlet_functions::clock::iso(singlet_functions::clock::now());
    let marked_now = console(&base, "mark-overdue", json!({"time": now})).await;
    assert_eq!(
        marked_now["report"]["marked"], 6,
        "{}",
        marked_now["report"]
    );
    let moved = marked_now["moved"].as_array().unwrap();
    assert_eq!(moved.len(), 6);
    for loan in moved {
        assert!(loan["from"]["pk"].as_str().unwrap().starts_with("OPEN#"));
        assert!(loan["to"]["pk"].as_str().unwrap().starts_with("OVERDUE#"));
        let item = ctx
            .db
            .get_item()
            .table_name("singlet")
            .key("PK", AttributeValue::S(loan["pk"].as_str().unwrap().into()))
            .key("SK", AttributeValue::S(loan["sk"].as_str().unwrap().into()))
            .send()
            .await
            .unwrap()
            .item
            .unwrap();
        assert!(item.contains_key("GSI3PK") && !item.contains_key("GSI1PK"));
    }
    // Sixteen shard queries at least, one update per loan moved, and one of the marker's `asOf`.
    let operations = marked_now["operations"].as_array().unwrap();
    assert!(
        operations
            .iter()
            .filter(|o| o["operation"] == "Query" && o["index"] == "GSI1")
            .count()
            >= 16
    );
    assert_eq!(
        operations
            .iter()
            .filter(|o| o["operation"] == "UpdateItem")
            .count(),
        6 + 1
    );

    // A week on, the two loans due in the coming days move too.
    let week = singlet_functions::clock::iso(
        singlet_functions::clock::now() + singlet_functions::clock::days(7),
    );
    let later = console(&base, "mark-overdue", json!({"time": week})).await;
    assert_eq!(later["moved"].as_array().unwrap().len(), 2);

    // A returned overdue loan leaves both indexes.
    let loan = &moved[0];
    let patron = loan["pk"].as_str().unwrap().trim_start_matches("PATRON#");
    let checkout = loan["sk"].as_str().unwrap().trim_start_matches("CHECKOUT#");
    let returned = run(
        &base,
        "POST",
        &format!("/patrons/{patron}/checkouts/{checkout}/return"),
        None,
    )
    .await;
    assert_eq!(returned["answer"]["status"], 200, "{}", returned["answer"]);
    assert_eq!(entities(&marked(&returned, "removed")), ["OverdueLoan"]);
    let added = marked(&returned, "added");
    assert_eq!(entities(&added), ["DomainEvent", "ReturnedLoan"]);
    let item = returned["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["items"].as_array().unwrap())
        .find(|i| i["change"] == "added" && i["entity"] == "ReturnedLoan")
        .unwrap();
    // It has left the open-loans and the overdue index; its one index entry is the patron's
    // history (GSI1 `HISTORY#<patronId>`).
    let indexes = item["indexes"].as_array().unwrap();
    assert_eq!(indexes.len(), 1, "{indexes:?}");
    assert_eq!(indexes[0]["index"], "GSI1");
    assert!(indexes[0]["pk"].as_str().unwrap().starts_with("HISTORY#"));

    // Every pattern's example works against the seeded data, or fails only as the data says.
    let state: Value = reqwest::Client::new()
        .get(format!("{base}/_console/api/state"))
        .header("x-singlet-console", singlet::console::secret())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let patterns = state["patterns"].as_array().unwrap();
    let dead: Vec<&Value> = patterns
        .iter()
        .filter(|p| p["live"] != true)
        .map(|p| &p["function"])
        .collect();
    assert!(dead.is_empty(), "every example points at data: {dead:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_the_table_shows_fsck_findings() {
    let (ctx, base) = start().await;
    console(&base, "seed", json!({})).await;
    let clean = console(&base, "fsck", json!({})).await;
    assert_eq!(clean["fsck"]["findings"], json!([]), "{clean}");
    assert!(clean["fsck"]["scanned"].as_u64().unwrap() > 100, "{clean}");

    // A plate lock deleted by hand: its vehicle is reported.
    let vehicle = table::scan(&ctx)
        .await
        .unwrap()
        .into_keys()
        .find(|(pk, _)| pk.starts_with("VEHICLE#"))
        .unwrap();
    let plate = ctx
        .db
        .get_item()
        .table_name("singlet")
        .key("PK", AttributeValue::S(vehicle.0.clone()))
        .key("SK", AttributeValue::S(vehicle.1.clone()))
        .send()
        .await
        .unwrap()
        .item
        .unwrap()["plate"]
        .as_s()
        .unwrap()
        .clone();
    let lock = singlet_shared::keys::plate_lock(&singlet_shared::Plate::parse(&plate).unwrap());
    ctx.db
        .delete_item()
        .table_name("singlet")
        .key("PK", AttributeValue::S(lock.pk))
        .key("SK", AttributeValue::S(lock.sk))
        .send()
        .await
        .unwrap();
    let found = console(&base, "fsck", json!({})).await;
    assert_eq!(
        found["fsck"]["findings"],
        json!([{"rule": "lock-missing", "pk": vehicle.0, "sk": vehicle.1,
                "detail": "its plate has no lock", "repairable": true}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_answers_only_its_own_page() {
    let (_ctx, base) = start().await;
    let http = reqwest::Client::new();
    let post = |extra: &[(&str, &str)]| {
        let mut request = http
            .post(format!("{base}/_console/api/run"))
            .header("content-type", "application/json")
            .body(json!({"request": {"method": "GET", "path": "/vehicles/x"}}).to_string());
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        request.send()
    };
    let status = |r: reqwest::Response| r.status().as_u16();
    let secret = singlet::console::secret();
    assert_eq!(
        status(post(&[("x-singlet-console", secret)]).await.unwrap()),
        200
    );
    // A form or a simple fetch from another site cannot send the console's header, and a local
    // process that has not seen the runner's output does not know its secret.
    assert_eq!(status(post(&[]).await.unwrap()), 403);
    assert_eq!(
        status(post(&[("x-singlet-console", "1")]).await.unwrap()),
        403
    );
    let state = http
        .get(format!("{base}/_console/api/state"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        status(state),
        403,
        "the table is not dumped without the secret"
    );
    for (name, value) in [
        ("origin", "https://evil.example"),
        ("host", "evil.example:3000"),
        ("sec-fetch-site", "cross-site"),
    ] {
        let refused = post(&[("x-singlet-console", secret), (name, value)])
            .await
            .unwrap();
        assert_eq!(status(refused), 403, "{name}: {value}");
    }
    // The console never runs its own endpoints as API routes.
    let inner = console(
        &base,
        "run",
        json!({"request": {"method": "POST", "path": "/_console/api/reset"}}),
    )
    .await;
    assert!(
        inner["error"].is_string() && inner["answer"].is_null(),
        "{inner}"
    );
    // The page and its assets.
    for (path, kind) in [
        ("/_console", "text/html"),
        ("/_console/console.js", "text/javascript"),
        ("/_console/console.css", "text/css"),
    ] {
        let response = reqwest::get(format!("{base}{path}")).await.unwrap();
        assert_eq!(response.status(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with(kind)
        );
    }
    // The API is as it was: no route is reachable without a token.
    let anonymous = reqwest::get(format!("{base}/vehicles/none")).await.unwrap();
    assert_eq!(anonymous.status(), 401);
}

/// Every answer of the console, its page, its assets, its API and its refusals, carries its
/// security headers: a content security policy that lets the page run only its own script and
/// stylesheet and no site frame it, `nosniff`, and a referrer policy that keeps its secret URL on
/// its own origin. And the page is one that policy lets run: no inline script, style or handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_console_answer_carries_its_security_headers() {
    let (_ctx, base) = start().await;
    let http = reqwest::Client::new();
    let secret = singlet::console::secret();
    let answers = [
        http.get(format!("{base}/_console/")),
        http.get(format!("{base}/_console/console.js")),
        http.get(format!("{base}/_console/console.css")),
        http.get(format!("{base}/_console/api/state"))
            .header("x-singlet-console", secret),
        // Refused: no secret.
        http.get(format!("{base}/_console/api/state")),
        // Nothing there: the console's 404, with its headers too.
        http.get(format!("{base}/_console/nothing-here")),
        http.get(format!("{base}/_console/api/nothing-here"))
            .header("x-singlet-console", secret),
    ];
    for request in answers {
        let response = request.send().await.unwrap();
        let url = response.url().clone();
        let headers = response.headers();
        let csp = headers["content-security-policy"].to_str().unwrap();
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
            "base-uri 'none'",
        ] {
            assert!(csp.contains(directive), "{url}: {csp}");
        }
        assert!(!csp.contains("unsafe"), "{url}: {csp}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{url}");
        assert_eq!(headers["x-frame-options"], "DENY", "{url}");
        assert_eq!(headers["referrer-policy"], "same-origin", "{url}");
    }
    let page = include_str!("../src/console/assets/index.html");
    assert_eq!(
        page.matches("<script").count(),
        page.matches("<script src=\"/_console/").count(),
        "every script is the console's own file"
    );
    assert!(
        !page.contains("<style") && !page.contains(" style="),
        "inline style"
    );
    let handler = inline_handler(page);
    assert!(handler.is_none(), "an inline handler: {handler:?}");
    let script = include_str!("../src/console/assets/console.js");
    for forbidden in ["eval(", "new Function", "innerHTML", "setAttribute('style'"] {
        assert!(!script.contains(forbidden), "console.js uses {forbidden}");
    }
    // The API beside the console answers as API Gateway does, with none of them.
    let anonymous = reqwest::get(format!("{base}/vehicles/none")).await.unwrap();
    assert!(anonymous.headers().get("content-security-policy").is_none());
}

/// The first inline event handler attribute (` onclick=`, ` onload=`, ...) in `html`, if any.
fn inline_handler(html: &str) -> Option<&str> {
    html.split(" on").skip(1).find_map(|rest| {
        let name = rest.len()
            - rest
                .trim_start_matches(|c: char| c.is_ascii_lowercase())
                .len();
        (name > 0 && rest[name..].starts_with('=')).then(|| &rest[..name])
    })
}

// ---- The page in a real browser ---------------------------------------------------------

/// Kills chromedriver (and with it the browser) when the test ends, however it ends.
struct Driver {
    http: reqwest::Client,
    url: String,
    session: String,
    child: Child,
    _profile: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.exists())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Driver {
    /// chromedriver and headless Chromium, or `None` when they are not installed.
    async fn start() -> Option<Driver> {
        let chromium = find(&["/usr/bin/chromium", "/usr/bin/chromium-browser"])?;
        let chromedriver = find(&["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"])?;
        let port = free_port();
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let profile =
            TempDir(std::env::temp_dir().join(format!("singlet-console-chromium-{port}")));
        let http = reqwest::Client::new();
        let url = format!("http://127.0.0.1:{port}");
        let mut driver = Driver {
            http,
            url,
            session: String::new(),
            child,
            _profile: profile,
        };
        let started = Instant::now();
        while driver
            .http
            .get(format!("{}/status", driver.url))
            .send()
            .await
            .is_err()
        {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1680,1050", "--hide-scrollbars",
                    format!("--user-data-dir={}", driver._profile.0.display()),
                ],
            },
        }}});
        let session = driver.command("POST", "/session", Some(capabilities)).await;
        driver.session = session["sessionId"].as_str().expect("a session").to_owned();
        Some(driver)
    }

    async fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = if path == "/session" {
            format!("{}{path}", self.url)
        } else {
            format!("{}/session/{}{path}", self.url, self.session)
        };
        let mut request = self.http.request(method.parse().unwrap(), url);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer: Value = request.send().await.unwrap().json().await.unwrap();
        let value = answer["value"].clone();
        assert!(
            value.get("error").is_none(),
            "WebDriver {method} {path}: {value}"
        );
        value
    }

    async fn goto(&self, url: &str) {
        self.command("POST", "/url", Some(json!({"url": url})))
            .await;
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page.
    async fn js(&self, script: &str, args: Value) -> Value {
        self.command(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    /// Waits until the page has finished what it was asked to do.
    async fn idle(&self) {
        let started = Instant::now();
        loop {
            if self
                .js("return document.body.dataset.busy === '0'", json!([]))
                .await
                == true
            {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "the page stayed busy"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn click(&self, selector: &str) {
        let found = self
            .js(
                "const el = document.querySelector(arguments[0]); if (!el) return false; \
                 const card = el.closest('details'); if (card) card.open = true; el.click(); return true;",
                json!([selector]),
            )
            .await;
        assert_eq!(found, true, "nothing to click at {selector}");
        self.idle().await;
    }

    async fn tab(&self, domain: &str) {
        self.click(&format!("#tabs button[data-domain='{domain}']"))
            .await;
    }

    async fn screenshot(&self, path: &Path) {
        use base64::Engine;
        let png = self.command("GET", "/screenshot", None).await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap())
            .unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    async fn quit(&self) {
        let _ = self
            .http
            .delete(format!("{}/session/{}", self.url, self.session))
            .send()
            .await;
    }

    /// The items the table view shows: `(PK, SK, entity, change)`.
    async fn shown_items(&self) -> Vec<(String, String, String, String)> {
        let items = self
            .js(
                "return [...document.querySelectorAll('#partitions .item')].map(e => \
                 [e.dataset.pk, e.dataset.sk, e.dataset.entity, e.dataset.change]);",
                json!([]),
            )
            .await;
        serde_json::from_value(items).unwrap()
    }

    /// The status of the answer the page shows (`"201"`).
    async fn answer_status(&self) -> Value {
        self.js(
            "return document.querySelector('.answer').dataset.status",
            json!([]),
        )
        .await
    }

    /// The entity types of the items the table view marks added by the last run.
    async fn added_entities(&self) -> BTreeSet<String> {
        self.shown_items()
            .await
            .into_iter()
            .filter(|i| i.3 == "added")
            .map(|i| i.2)
            .collect()
    }

    async fn text(&self, selector: &str) -> String {
        self.js(
            "const el = document.querySelector(arguments[0]); return el ? el.innerText : '';",
            json!([selector]),
        )
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }
}

/// What the last free query or scan returned and read: `[count, scanned]`.
async fn explored(driver: &Driver) -> Value {
    driver
        .js(
            "const r = document.querySelector('.explore-result'); \
             return r ? [r.dataset.count, r.dataset.scanned] : null;",
            json!([]),
        )
        .await
}

/// What the page shows for a domain is the table: the same items, of that domain, none missing.
async fn assert_page_matches_table(driver: &Driver, ctx: &Ctx, domain: Domain) {
    let shown: BTreeSet<(String, String, String)> = driver
        .shown_items()
        .await
        .into_iter()
        .filter(|i| i.3 != "removed")
        .map(|i| (i.0, i.1, i.2))
        .collect();
    let held: BTreeSet<(String, String, String)> = table::scan(ctx)
        .await
        .unwrap()
        .iter()
        .filter_map(|((pk, sk), item)| {
            let (entity, of) = table::entity(item);
            (of == Some(domain)).then(|| (pk.clone(), sk.clone(), entity.to_owned()))
        })
        .collect();
    assert_eq!(shown, held, "the {domain:?} page shows the table");
}

fn screenshot_path(domain: &str) -> PathBuf {
    match std::env::var("CONSOLE_SCREENSHOTS").as_deref() {
        Ok("docs") => {
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("docs/console-{domain}.png"))
        }
        Ok(dir) if !dir.is_empty() => Path::new(dir).join(format!("console-{domain}.png")),
        _ => Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("console-{domain}.png")),
    }
}

/// Whether a missing browser fails the browser test (`SINGLET_REQUIRE_BROWSER` set to anything
/// but empty or `0`, as `.ci/run` sets it) rather than skipping it.
fn browser_required() -> bool {
    std::env::var("SINGLET_REQUIRE_BROWSER").is_ok_and(|v| !v.is_empty() && v != "0")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_in_a_real_browser() {
    let Some(driver) = Driver::start().await else {
        // CI installs the browser and sets this, so a failed install fails the run there
        // instead of passing it on a skip; anywhere else the test skips.
        assert!(
            !browser_required(),
            "SINGLET_REQUIRE_BROWSER is set, but Chromium and chromedriver are not installed \
             (apt-get install -y chromium chromium-driver)"
        );
        eprintln!(
            "SKIPPED the_page_in_a_real_browser: Chromium and chromedriver are not installed \
             (apt-get install -y chromium chromium-driver)"
        );
        return;
    };
    let (ctx, base) = start().await;
    driver
        .goto(&format!(
            "{base}/_console?token={}#fleet",
            singlet::console::secret()
        ))
        .await;
    driver.idle().await;
    assert!(driver.text(".brand").await.contains("singlet"));

    // Data: the seed button fills every domain.
    driver.click("#seed").await;
    let seeded = driver.text(".seed-result").await;
    assert!(seeded.contains("register-vehicle"), "{seeded}");
    assert_page_matches_table(&driver, &ctx, Domain::Fleet).await;

    // Fleet: register a vehicle; its two locks and its event's outbox item appear with it.
    driver.click("[data-run='register-vehicle']").await;
    assert_eq!(driver.answer_status().await, "201");
    let added = driver.added_entities().await;
    assert_eq!(
        added,
        ["ChassisLock", "DomainEvent", "PlateLock", "Vehicle"]
            .map(String::from)
            .into()
    );
    let calls = driver.text(".operations").await;
    assert!(
        calls.contains("TransactWriteItems") && calls.contains("attribute_not_exists(PK)"),
        "{calls}"
    );
    // The event it emitted: one outbox item, shown with its detail type.
    assert_eq!(
        driver
            .js(
                "return document.querySelector('.box.events').dataset.events",
                json!([])
            )
            .await,
        "1"
    );
    assert!(
        driver
            .text(".box.events")
            .await
            .contains("VehicleRegistered")
    );
    // Once the local bus has it in the events file, the page says it was published.
    let event_id = driver
        .js(
            "return document.querySelector('.box.events .event').dataset.eventId",
            json!([]),
        )
        .await;
    publish(&event_id);
    driver.click(".check-published").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        driver
            .js(
                "return document.querySelector('.box.events [data-published]').dataset.published",
                json!([])
            )
            .await,
        "1"
    );
    assert_page_matches_table(&driver, &ctx, Domain::Fleet).await;
    driver.screenshot(&screenshot_path("fleet")).await;

    // An edited body is kept after Run: the person can tweak and run again.
    let edited = r#"{"plate": "ZZ01 KE1234", "chassis": "KEPT0000000000001", "depot": "south"}"#;
    driver
        .js(
            "const form = document.querySelector(\"details[data-function='register-vehicle'] form\"); \
             form.closest('details').open = true; const body = form.elements.body; \
             body.value = arguments[0]; body.dispatchEvent(new Event('input', {bubbles: true}));",
            json!([edited]),
        )
        .await;
    driver.click("[data-run='register-vehicle']").await;
    let kept = driver
        .js(
            "return document.querySelector(\"details[data-function='register-vehicle'] textarea[name=body]\").value",
            json!([]),
        )
        .await;
    assert_eq!(kept, edited, "the edit survives its run");
    assert!(driver.text(".hint.edited").await.contains("kept"));
    assert_eq!(driver.answer_status().await, "201");

    // A free query of one partition of the table, with what it consumed.
    let snapshot = table::scan(&ctx).await.unwrap();
    let (vehicle_pk, _) = snapshot
        .iter()
        .find(|(_, item)| table::entity(item).0 == "Vehicle")
        .map(|(key, _)| key.clone())
        .unwrap();
    let explore = |mode: &str, index: &str, partition: &str, limit: &str| {
        format!(
            "const f = document.querySelector('form.explore'); f.closest('details').open = true; \
             f.elements.mode.value = '{mode}'; f.elements.index.value = '{index}'; \
             f.elements.partition.value = '{partition}'; f.elements.limit.value = '{limit}'; \
             f.querySelector('button[type=submit]').click();"
        )
    };
    driver
        .js(&explore("query", "", &vehicle_pk, "25"), json!([]))
        .await;
    driver.idle().await;
    assert_eq!(explored(&driver).await, json!(["1", "1"]));
    let calls = driver.text(".operations").await;
    assert!(calls.contains("Query") && calls.contains("CU"), "{calls}");
    // A scan of an index, one page of at most three.
    let index = singlet_shared::schema::INDEXES[0].name;
    driver.js(&explore("scan", index, "", "3"), json!([])).await;
    driver.idle().await;
    let scanned = explored(&driver).await;
    assert_eq!(scanned[1], "3", "{scanned}");
    assert!(driver.text(".operations").await.contains("Scan"));

    // The table by index: the depot index holds the fleet's vehicles, regrouped by depot.
    let depot_index = singlet_shared::schema::GSI5;
    driver
        .click(&format!("button.view[data-view='{}']", depot_index.name))
        .await;
    let in_index: BTreeSet<String> = driver
        .shown_items()
        .await
        .into_iter()
        .map(|i| i.0)
        .collect();
    let held: BTreeSet<String> = table::scan(&ctx)
        .await
        .unwrap()
        .iter()
        .filter(|(_, item)| item.contains_key(depot_index.pk))
        .map(|((pk, _), _)| pk.clone())
        .collect();
    assert_eq!(in_index, held, "the depot index view shows the index");
    let partitions = driver
        .js(
            "return [...document.querySelectorAll('#partitions .partition')].map(p => p.dataset.pk)",
            json!([]),
        )
        .await;
    assert!(
        partitions
            .as_array()
            .unwrap()
            .iter()
            .all(|pk| pk.as_str().unwrap().starts_with("DEPOT#")),
        "{partitions}"
    );
    driver.click("button.view[data-view='table']").await;

    // Search: a chassis number finds its vehicle and its lock.
    let search = |text: &str| {
        format!(
            "const s = document.getElementById('search'); s.value = '{text}'; \
             s.dispatchEvent(new Event('input', {{bubbles: true}}));"
        )
    };
    driver.js(&search("wba3a5c5xdf598765"), json!([])).await;
    let found: BTreeSet<String> = driver
        .shown_items()
        .await
        .into_iter()
        .map(|i| i.2)
        .collect();
    assert!(
        found.contains("Vehicle") && found.contains("ChassisLock"),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .all(|e| ["Vehicle", "ChassisLock", "DomainEvent"].contains(&e.as_str())),
        "{found:?}"
    );
    driver.js(&search(""), json!([])).await;
    assert_page_matches_table(&driver, &ctx, Domain::Fleet).await;

    // At 820 px the outcome of a transaction's part is whole, never clipped.
    driver
        .command(
            "POST",
            "/window/rect",
            Some(json!({"width": 820, "height": 1000})),
        )
        .await;

    // A race: sixteen clients, one plate, one winner; the table holds one lock for it.
    driver.click("[data-race='plate']").await;
    let winners = driver
        .js(
            "return document.querySelector('.race-result').dataset.winners",
            json!([]),
        )
        .await;
    assert_eq!(winners, "1");
    let tally = driver.text(".tally").await;
    assert!(tally.contains("15 × 409 plate: taken"), "{tally}");
    // A loser's cancellation reason, next to the field error it became.
    let result = driver.text("#result").await;
    assert!(
        result.contains("ConditionalCheckFailed") && result.contains("→ 409 plate: taken"),
        "{result}"
    );
    // And what AWS bills for it, though the answer carries no figure.
    assert!(
        result.contains("What a cancelled transaction costs")
            && result.contains("consumed even when the transaction is cancelled"),
        "{result}"
    );
    let new_locks: Vec<_> = driver
        .shown_items()
        .await
        .into_iter()
        .filter(|i| i.3 == "added" && i.2 == "PlateLock")
        .collect();
    assert_eq!(new_locks.len(), 1);
    assert!(
        table::scan(&ctx)
            .await
            .unwrap()
            .contains_key(&(new_locks[0].0.clone(), new_locks[0].1.clone()))
    );
    let clipped = driver
        .js(
            "return [...document.querySelectorAll('table.parts td:last-child')] \
             .filter(td => td.scrollWidth > td.clientWidth + 1).length",
            json!([]),
        )
        .await;
    assert_eq!(clipped, 0, "an outcome cell is clipped at 820 px");
    driver.screenshot(&screenshot_path("race-820")).await;
    driver
        .command(
            "POST",
            "/window/rect",
            Some(json!({"width": 1400, "height": 1000})),
        )
        .await;
    assert_page_matches_table(&driver, &ctx, Domain::Fleet).await;
    driver.screenshot(&screenshot_path("race")).await;

    // Accounts: sign up; the account, its two locks and its event's outbox item. Switching
    // tabs leaves the fleet's result behind.
    driver.tab("accounts").await;
    assert_eq!(
        driver.text("#result-title").await.to_lowercase(),
        "what happened"
    );
    driver.click("[data-run='create-account']").await;
    let added = driver.added_entities().await;
    assert_eq!(
        added,
        ["Account", "DomainEvent", "EmailLock", "UsernameLock"]
            .map(String::from)
            .into()
    );
    assert_page_matches_table(&driver, &ctx, Domain::Accounts).await;
    driver.screenshot(&screenshot_path("accounts")).await;

    // Audit: a change under if-match: CURRENT changes, the next event appears.
    driver.tab("audit").await;
    driver.click("[data-run='change-resource']").await;
    assert_eq!(driver.answer_status().await, "200");
    let touched: BTreeSet<(String, String)> = driver
        .shown_items()
        .await
        .into_iter()
        .filter(|i| !i.3.is_empty())
        .map(|i| (i.2, i.3))
        .collect();
    assert_eq!(
        touched,
        [
            ("ChangeEvent".to_owned(), "added".to_owned()),
            ("CurrentState".to_owned(), "changed".to_owned()),
            ("DomainEvent".to_owned(), "added".to_owned())
        ]
        .into()
    );
    assert_page_matches_table(&driver, &ctx, Domain::Audit).await;
    driver.screenshot(&screenshot_path("audit")).await;

    // Library: a checkout, then mark-overdue now: the loans already due move to GSI3.
    driver.tab("library").await;
    driver.click("[data-run='checkout-book']").await;
    assert_eq!(driver.answer_status().await, "201");
    let added = driver.added_entities().await;
    assert_eq!(added, ["DomainEvent", "Loan"].map(String::from).into());
    driver.click("[data-run='mark-overdue']").await;
    let moved = driver
        .js(
            "return document.querySelector('.mark-result').dataset.moved",
            json!([]),
        )
        .await;
    assert_eq!(moved, "6");
    let now_overdue = driver
        .shown_items()
        .await
        .into_iter()
        .filter(|i| i.3 == "changed" && i.2 == "OverdueLoan")
        .count();
    assert_eq!(now_overdue, 6);
    let in_gsi3 = table::scan(&ctx)
        .await
        .unwrap()
        .values()
        .filter(|i| i.contains_key("GSI3PK"))
        .count();
    assert_eq!(in_gsi3, 6);
    assert_page_matches_table(&driver, &ctx, Domain::Library).await;
    driver.screenshot(&screenshot_path("library")).await;

    driver.quit().await;
}
