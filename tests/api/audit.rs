//! The change & audit log: docs/API.md, "Change & audit log".

use crate::both;
use crate::harness::{Api, Item, Mode, Reply, s};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};
use singlet_shared::keys::MAX_VERSION;

async fn create(api: &Api, id: &str, status: &str) -> Reply {
    api.post(
        "/resources",
        json!({"resourceId": id, "status": status, "actor": "ada"}),
    )
    .await
}

/// `PATCH` with `if-match: "<version>"`.
async fn change(api: &Api, id: &str, version: u64, status: &str, action: &str) -> Reply {
    api.call("PATCH", format!("/resources/{id}"))
        .header("if-match", &format!("\"{version}\""))
        .json(json!({"status": status, "action": action, "actor": "grace"}))
        .send()
        .await
}

fn current_key(id: &str) -> (String, String) {
    (format!("RESOURCE#{id}"), "CURRENT".into())
}

fn event_key(id: &str, sequence: u64) -> (String, String) {
    (format!("RESOURCE#{id}"), format!("EVENT#{sequence:012}"))
}

async fn item(api: &Api, (pk, sk): (String, String)) -> Option<Item> {
    api.item(&pk, &sk).await
}

/// A number attribute of an item.
fn num(item: &Item, name: &str) -> i64 {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{name} is not a number in {item:?}"))
}

/// Every item of a resource's partition.
async fn partition(api: &Api, id: &str) -> Vec<Item> {
    let pk = format!("RESOURCE#{id}");
    let mut items: Vec<Item> = api
        .items()
        .await
        .into_iter()
        .filter(|i| s(i, "PK") == pk)
        .collect();
    items.sort_by(|a, b| s(a, "SK").cmp(s(b, "SK")));
    items
}

/// Every page of a resource's history: the events in the order served, and each page's
/// `current`.
async fn read_history(api: &Api, id: &str, limit: Option<u32>) -> (Vec<Value>, Vec<Value>) {
    let mut events = Vec::new();
    let mut currents = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = Vec::new();
        if let Some(limit) = limit {
            query.push(format!("limit={limit}"));
        }
        if let Some(cursor) = &cursor {
            query.push(format!("cursor={cursor}"));
        }
        let page = api
            .get(format!("/resources/{id}/history?{}", query.join("&")))
            .await;
        assert_eq!(page.status, 200, "{page:?}");
        let items = page.body["items"].as_array().unwrap().clone();
        assert!(
            items.len() <= limit.unwrap_or(25) as usize,
            "a page holds at most `limit` events"
        );
        assert!(!items.is_empty(), "no empty page: {page:?}");
        events.extend(items);
        currents.push(page.body["current"].clone());
        match page.body["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => {
                assert_eq!(page.body["nextCursor"], Value::Null);
                return (events, currents);
            }
        }
    }
}

/// The history is 1..=`last` in order, with no gap and no duplicate, each event starting from the
/// status the one before it left.
#[track_caller]
fn assert_gapless(events: &[Value], last: u64) {
    let sequences: Vec<u64> = events
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(sequences, (1..=last).collect::<Vec<_>>());
    assert_eq!(events[0]["fromStatus"], Value::Null);
    assert_eq!(events[0]["action"], "create");
    for pair in events.windows(2) {
        assert_eq!(pair[1]["fromStatus"], pair[0]["toStatus"], "{pair:?}");
        assert!(pair[1]["at"].as_i64() >= pair[0]["at"].as_i64());
    }
}

both!(
    create_writes_current_and_the_first_event,
    create_names_every_bad_field,
    create_of_an_existing_resource_is_409,
    create_is_idempotent_with_a_key,
    get_returns_the_state_with_its_etag,
    missing_and_malformed_resources,
    change_appends_the_event_numbered_by_the_new_version,
    change_needs_the_current_version,
    change_names_every_bad_field,
    a_resource_at_the_last_version_takes_no_more_changes,
    a_failed_append_is_not_a_412,
    history_lists_current_then_events_oldest_first,
    history_cursors_are_bound_to_their_resource,
    long_histories_page_through_every_event_once,
    history_newest_first_pages_down_from_the_current_version,
);

async fn create_writes_current_and_the_first_event(api: Api) {
    let reply = api
        .post(
            "/resources",
            json!({"resourceId": "door-7", "status": "closed", "actor": " ada ", "colour": "red"}),
        )
        .await;
    assert_eq!(reply.status, 201, "{reply:?}");
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.header("etag"), Some("\"1\""));
    assert_eq!(reply.header("location"), Some("/resources/door-7"));
    let updated_at = reply.body["updatedAt"].as_i64().unwrap();
    assert!(updated_at > 1_700_000_000_000);
    assert_eq!(
        reply.body,
        json!({"resourceId": "door-7", "status": "closed", "version": 1, "updatedAt": updated_at})
    );

    let items = partition(&api, "door-7").await;
    assert_eq!(items.len(), 2, "{items:?}");
    let current = item(&api, current_key("door-7")).await.unwrap();
    assert_eq!(s(&current, "status"), "closed");
    assert_eq!(num(&current, "version"), 1);
    assert_eq!(num(&current, "updatedAt"), updated_at);
    let event = item(&api, event_key("door-7", 1)).await.unwrap();
    assert_eq!(s(&event, "SK"), "EVENT#000000000001");
    assert_eq!(num(&event, "sequence"), 1);
    assert_eq!(s(&event, "action"), "create");
    assert_eq!(
        s(&event, "actor"),
        "tester",
        "the token's subject, not the body's actor"
    );
    assert_eq!(num(&event, "at"), updated_at);
    assert_eq!(s(&event, "toStatus"), "closed");
    assert!(matches!(
        event.get("fromStatus"),
        None | Some(AttributeValue::Null(true))
    ));
    assert_eq!(api.items().await.len(), 2, "nothing else is written");
}

async fn create_names_every_bad_field(api: Api) {
    api.post("/resources", json!({}))
        .await
        .assert_problem(400, &[("resourceId", "required"), ("status", "required")]);
    api.post(
        "/resources",
        json!({"resourceId": "a#b", "status": "in review", "actor": "x".repeat(201)}),
    )
    .await
    .assert_problem(400, &[("resourceId", "invalid"), ("status", "invalid")]);
    api.post(
        "/resources",
        json!({"resourceId": "r".repeat(65), "status": "s".repeat(65), "actor": "   "}),
    )
    .await
    .assert_problem(400, &[("resourceId", "too_long"), ("status", "too_long")]);
    api.post(
        "/resources",
        json!({"resourceId": 7, "status": "", "actor": "a"}),
    )
    .await
    .assert_problem(400, &[("resourceId", "invalid"), ("status", "required")]);
    assert!(api.items().await.is_empty(), "nothing is written");
}

async fn create_of_an_existing_resource_is_409(api: Api) {
    assert_eq!(create(&api, "r1", "open").await.status, 201);
    assert_eq!(change(&api, "r1", 1, "closed", "close").await.status, 200);
    let again = create(&api, "r1", "new").await;
    again.assert_problem(409, &[("resourceId", "taken")]);
    assert_eq!(again.body["type"], "/problems/conflict");
    let current = item(&api, current_key("r1")).await.unwrap();
    assert_eq!(num(&current, "version"), 2, "the resource is untouched");
    assert_eq!(s(&current, "status"), "closed");
    assert_eq!(
        s(&item(&api, event_key("r1", 1)).await.unwrap(), "toStatus"),
        "open",
        "the first event is not overwritten"
    );
    assert_eq!(api.items().await.len(), 3);
}

async fn create_is_idempotent_with_a_key(api: Api) {
    let post = |body: Value| {
        let api = api.clone();
        async move {
            api.call("POST", "/resources")
                .header("idempotency-key", "key-1")
                .json(body)
                .send()
                .await
        }
    };
    let body = json!({"resourceId": "r1", "status": "open", "actor": "ada"});
    let first = post(body.clone()).await;
    assert_eq!(first.status, 201, "{first:?}");
    let retry = post(body).await;
    assert_eq!(retry.status, 201, "{retry:?}");
    assert_eq!(retry.body, first.body, "the same answer");
    assert_eq!(retry.header("etag"), Some("\"1\""));
    assert_eq!(retry.header("location"), Some("/resources/r1"));
    post(json!({"resourceId": "r1", "status": "closed", "actor": "ada"}))
        .await
        .assert_problem(422, &[]);
    assert_eq!(partition(&api, "r1").await.len(), 2, "nothing new");
    // Without the key, the same request is a second creation: 409.
    create(&api, "r1", "open")
        .await
        .assert_problem(409, &[("resourceId", "taken")]);
}

async fn get_returns_the_state_with_its_etag(api: Api) {
    let created = create(&api, "r1", "open").await;
    let read = api.get("/resources/r1").await;
    assert_eq!(read.status, 200, "{read:?}");
    assert_eq!(read.header("etag"), Some("\"1\""));
    assert_eq!(read.body, created.body);
    let changed = change(&api, "r1", 1, "closed", "close").await;
    let read = api.get("/resources/r1").await;
    assert_eq!(read.header("etag"), Some("\"2\""));
    assert_eq!(read.body, changed.body);
    assert_eq!(read.body["version"], 2);
}

async fn missing_and_malformed_resources(api: Api) {
    create(&api, "other", "open").await;
    api.get("/resources/nope").await.assert_problem(404, &[]);
    api.get("/resources/nope/history")
        .await
        .assert_problem(404, &[]);
    change(&api, "nope", 1, "open", "open")
        .await
        .assert_problem(404, &[]);
    api.get("/resources/bad%23id")
        .await
        .assert_problem(400, &[("resourceId", "invalid")]);
    api.get(format!("/resources/{}/history", "a".repeat(65)))
        .await
        .assert_problem(400, &[("resourceId", "too_long")]);
    change(&api, "RESOURCE%23other", 1, "x", "y")
        .await
        .assert_problem(400, &[("resourceId", "invalid")]);
    assert_eq!(api.items().await.len(), 2, "nothing is written");
}

async fn change_appends_the_event_numbered_by_the_new_version(api: Api) {
    let created = create(&api, "r1", "open").await;
    let reply = change(&api, "r1", 1, "in_review", "submit").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.header("etag"), Some("\"2\""));
    let at = reply.body["updatedAt"].as_i64().unwrap();
    assert!(at >= created.body["updatedAt"].as_i64().unwrap());
    assert_eq!(
        reply.body,
        json!({"resourceId": "r1", "status": "in_review", "version": 2, "updatedAt": at})
    );
    // A weak validator never matches (RFC 9110's strong comparison): `412`, nothing written.
    let weak = api
        .call("PATCH", "/resources/r1")
        .header("if-match", "W/\"2\"")
        .json(json!({"status": "in_review", "action": "comment: looks fine", "actor": "alan"}))
        .send()
        .await;
    weak.assert_problem(412, &[]);
    assert_eq!(weak.body["currentVersion"], 2);
    assert_eq!(weak.header("etag"), Some("\"2\""));
    assert!(item(&api, event_key("r1", 3)).await.is_none());
    // The status may stay as it is.
    let same = api
        .call("PATCH", "/resources/r1")
        .header("if-match", "\"2\"")
        .json(json!({"status": "in_review", "action": "comment: looks fine", "actor": "alan"}))
        .send()
        .await;
    assert_eq!(same.status, 200, "{same:?}");
    assert_eq!(same.header("etag"), Some("\"3\""));

    let current = item(&api, current_key("r1")).await.unwrap();
    assert_eq!(num(&current, "version"), 3);
    assert_eq!(s(&current, "status"), "in_review");
    let event = item(&api, event_key("r1", 2)).await.unwrap();
    assert_eq!(num(&event, "sequence"), 2);
    assert_eq!(s(&event, "action"), "submit");
    assert_eq!(s(&event, "actor"), "tester");
    assert_eq!(s(&event, "fromStatus"), "open");
    assert_eq!(s(&event, "toStatus"), "in_review");
    assert_eq!(num(&event, "at"), at);
    let event = item(&api, event_key("r1", 3)).await.unwrap();
    assert_eq!(s(&event, "fromStatus"), "in_review");
    assert_eq!(s(&event, "actor"), "tester");
    let keys: Vec<String> = partition(&api, "r1")
        .await
        .iter()
        .map(|i| s(i, "SK").to_owned())
        .collect();
    assert_eq!(
        keys,
        [
            "CURRENT",
            "EVENT#000000000001",
            "EVENT#000000000002",
            "EVENT#000000000003"
        ]
    );
}

async fn change_needs_the_current_version(api: Api) {
    create(&api, "r1", "open").await;
    let body = json!({"status": "closed", "action": "close", "actor": "grace"});
    let without = api
        .call("PATCH", "/resources/r1")
        .json(body.clone())
        .send()
        .await;
    without.assert_problem(428, &[]);
    assert_eq!(without.body["type"], "/problems/precondition-required");
    assert_eq!(change(&api, "r1", 1, "closed", "close").await.status, 200);

    for stale in [1, 3, 99] {
        let reply = change(&api, "r1", stale, "open", "reopen").await;
        reply.assert_problem(412, &[]);
        assert_eq!(reply.body["type"], "/problems/precondition-failed");
        assert_eq!(reply.body["currentVersion"], 2, "{reply:?}");
        assert_eq!(reply.header("etag"), Some("\"2\""));
    }
    for bad in [
        "",
        "abc",
        "\"0\"",
        "\"-1\"",
        "*",
        "\"1.5\"",
        "\"1000000000000\"",
        "\"02\"",
        "\"+2\"",
        " \"2 \"",
    ] {
        api.call("PATCH", "/resources/r1")
            .header("if-match", bad)
            .json(body.clone())
            .send()
            .await
            .assert_problem(400, &[("if-match", "invalid")]);
    }
    assert_eq!(
        partition(&api, "r1").await.len(),
        3,
        "only the one change was written"
    );
    assert_eq!(api.get("/resources/r1").await.body["version"], 2);
}

async fn change_names_every_bad_field(api: Api) {
    create(&api, "r1", "open").await;
    api.call("PATCH", "/resources/r1")
        .header("if-match", "nope")
        .json(json!({}))
        .send()
        .await
        .assert_problem(
            400,
            &[
                ("action", "required"),
                ("if-match", "invalid"),
                ("status", "required"),
            ],
        );
    api.call("PATCH", "/resources/r1")
        .header("if-match", "\"1\"")
        .json(json!({"status": "x y", "action": "a".repeat(201), "actor": ["ada"]}))
        .send()
        .await
        .assert_problem(400, &[("action", "too_long"), ("status", "invalid")]);
    // A bad body is refused before a missing if-match is.
    api.call("PATCH", "/resources/r1")
        .json(json!({"status": "closed"}))
        .send()
        .await
        .assert_problem(400, &[("action", "required")]);
    api.call("PATCH", "/resources/r1")
        .header("if-match", "\"1\"")
        .raw("text/plain", "status=closed")
        .send()
        .await
        .assert_problem(415, &[]);
    assert_eq!(partition(&api, "r1").await.len(), 2, "nothing is written");
}

async fn a_resource_at_the_last_version_takes_no_more_changes(api: Api) {
    let (pk, sk) = current_key("old");
    api.ctx
        .db
        .put_item()
        .table_name(&*api.ctx.table)
        .item("PK", AttributeValue::S(pk))
        .item("SK", AttributeValue::S(sk))
        .item("resourceId", AttributeValue::S("old".into()))
        .item("status", AttributeValue::S("open".into()))
        .item("version", AttributeValue::N(MAX_VERSION.to_string()))
        .item("updatedAt", AttributeValue::N("1795975200000".into()))
        .send()
        .await
        .unwrap();
    let read = api.get("/resources/old").await;
    assert_eq!(read.header("etag"), Some("\"999999999999\""));
    change(&api, "old", MAX_VERSION, "closed", "close")
        .await
        .assert_problem(409, &[("resourceId", "limit_reached")]);
    change(&api, "old", MAX_VERSION + 1, "closed", "close")
        .await
        .assert_problem(400, &[("if-match", "invalid")]);
    let items = partition(&api, "old").await;
    assert_eq!(items.len(), 1, "no event past the last version");
    assert_eq!(num(&items[0], "version"), MAX_VERSION as i64);
}

/// The guard on `CURRENT` passes but the event's number is taken: a cancellation on another part
/// is never read as a stale version.
async fn a_failed_append_is_not_a_412(api: Api) {
    create(&api, "r1", "open").await;
    // Another writer's event 2, whole (a copy of event 1 under the next sequence), already there.
    let mut planted = item(&api, event_key("r1", 1)).await.unwrap();
    let (_, sk) = event_key("r1", 2);
    planted.insert("SK".into(), AttributeValue::S(sk));
    planted.insert("sequence".into(), AttributeValue::N("2".into()));
    api.ctx
        .db
        .put_item()
        .table_name(&*api.ctx.table)
        .set_item(Some(planted))
        .send()
        .await
        .unwrap();
    change(&api, "r1", 1, "closed", "close")
        .await
        .assert_problem(500, &[]);
    let current = item(&api, current_key("r1")).await.unwrap();
    assert_eq!(num(&current, "version"), 1, "nothing was half written");
    assert_eq!(s(&current, "status"), "open");
}

async fn history_lists_current_then_events_oldest_first(api: Api) {
    create(&api, "r1", "open").await;
    create(&api, "r0", "other").await;
    create(&api, "r2", "other").await;
    change(&api, "r1", 1, "closed", "close").await;
    let last = change(&api, "r1", 2, "archived", "archive").await;
    change(&api, "r2", 1, "x", "y").await;

    let page = api.get("/resources/r1/history").await;
    assert_eq!(page.status, 200, "{page:?}");
    assert_eq!(page.header("content-type"), Some("application/json"));
    assert_eq!(page.body["current"], last.body);
    assert_eq!(page.body["nextCursor"], Value::Null);
    let items = page.body["items"].as_array().unwrap();
    assert_eq!(items.len(), 3, "only this resource's events: {page:?}");
    let keys: Vec<&str> = items[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys.iter()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        [
            "action",
            "actor",
            "at",
            "fromStatus",
            "sequence",
            "toStatus"
        ]
        .into(),
        "events carry no key attributes"
    );
    assert_eq!(items[0]["fromStatus"], Value::Null);
    assert_eq!(items[0]["toStatus"], "open");
    assert_eq!(items[0]["actor"], "tester");
    assert_eq!(items[1]["action"], "close");
    assert_eq!(
        items[2],
        json!({"sequence": 3, "action": "archive", "actor": "tester",
               "at": last.body["updatedAt"], "fromStatus": "closed", "toStatus": "archived"})
    );
    assert_gapless(items, 3);

    // Paged: one event a page, `current` on each, no empty page after the last.
    let (events, currents) = read_history(&api, "r1", Some(1)).await;
    assert_eq!(&events, items);
    assert_eq!(currents.len(), 3);
    assert!(currents.iter().all(|c| *c == last.body));
    // Exactly `limit` events left: the page that holds them is the last.
    let (events, currents) = read_history(&api, "r1", Some(3)).await;
    assert_eq!(events.len(), 3);
    assert_eq!(currents.len(), 1);
    let (_, currents) = read_history(&api, "r1", Some(2)).await;
    assert_eq!(currents.len(), 2);
}

async fn history_cursors_are_bound_to_their_resource(api: Api) {
    for id in ["a", "b"] {
        create(&api, id, "s0").await;
        for v in 1..4 {
            change(&api, id, v, &format!("s{v}"), "step").await;
        }
    }
    let page = api.get("/resources/a/history?limit=2").await;
    let cursor = page.body["nextCursor"].as_str().unwrap().to_owned();
    let next = api
        .get(format!("/resources/a/history?limit=2&cursor={cursor}"))
        .await;
    assert_eq!(next.status, 200, "{next:?}");
    assert_eq!(next.body["items"][0]["sequence"], 3);
    // The cursor of `a` on `b`, edited, or truncated: 400, never another partition's data.
    api.get(format!("/resources/b/history?limit=2&cursor={cursor}"))
        .await
        .assert_problem(400, &[("cursor", "invalid")]);
    let mut edited = cursor.clone().into_bytes();
    edited[4] = if edited[4] == b'A' { b'B' } else { b'A' };
    let edited = String::from_utf8(edited).unwrap();
    for bad in [edited.as_str(), &cursor[..cursor.len() - 2], "x", "%23"] {
        api.get(format!("/resources/a/history?cursor={bad}"))
            .await
            .assert_problem(400, &[("cursor", "invalid")]);
    }
    for bad in ["0", "101", "-1", "ten"] {
        api.get(format!("/resources/a/history?limit={bad}"))
            .await
            .assert_problem(400, &[("limit", "invalid")]);
    }
    let hundred = api.get("/resources/a/history?limit=100").await;
    assert_eq!(hundred.body["items"].as_array().unwrap().len(), 4);
}

/// More than 10 and more than 100 events: every event once, in order, `current` right on every
/// page, at every page size.
async fn long_histories_page_through_every_event_once(api: Api) {
    const EVENTS: u64 = 150;
    create(&api, "long", "s1").await;
    for version in 1..EVENTS {
        let reply = change(
            &api,
            "long",
            version,
            &format!("s{}", version + 1),
            &format!("step {version}"),
        )
        .await;
        assert_eq!(reply.status, 200, "{reply:?}");
    }
    create(&api, "neighbour", "s").await;
    let current = api.get("/resources/long").await.body;
    assert_eq!(current["version"], EVENTS);
    for (limit, pages) in [(Some(10), 15), (None, 6), (Some(100), 2), (Some(7), 22)] {
        let (events, currents) = read_history(&api, "long", limit).await;
        assert_eq!(currents.len(), pages, "limit {limit:?}");
        assert!(currents.iter().all(|c| *c == current), "limit {limit:?}");
        assert_gapless(&events, EVENTS);
        assert_eq!(events.last().unwrap()["toStatus"], current["status"]);
    }
    assert_eq!(partition(&api, "long").await.len(), EVENTS as usize + 1);
}

/// `?order=desc`: the same events, newest first, `current` on every page, paged down to event
/// 1 with no empty page after it; cursors are bound to their order.
async fn history_newest_first_pages_down_from_the_current_version(api: Api) {
    create(&api, "r", "s1").await;
    for version in 1..12 {
        change(&api, "r", version, &format!("s{}", version + 1), "step").await;
    }
    create(&api, "q", "other").await;
    let current = api.get("/resources/r").await.body;
    let (oldest_first, _) = read_history(&api, "r", None).await;
    let mut newest_first = Vec::new();
    let mut pages = 0;
    let mut path = "/resources/r/history?order=desc&limit=5".to_owned();
    loop {
        let page = api.get(&path).await;
        assert_eq!(page.status, 200, "{page:?}");
        assert_eq!(page.body["current"], current);
        let items = page.body["items"].as_array().unwrap();
        assert!(!items.is_empty() && items.len() <= 5, "{page:?}");
        newest_first.extend(items.iter().cloned());
        pages += 1;
        match page.body["nextCursor"].as_str() {
            Some(cursor) => {
                // An oldest-first cursor is not a newest-first one, nor the other way round.
                api.get(format!("/resources/r/history?cursor={cursor}"))
                    .await
                    .assert_problem(400, &[("cursor", "invalid")]);
                path = format!("/resources/r/history?order=desc&limit=5&cursor={cursor}");
            }
            None => break,
        }
    }
    assert_eq!(pages, 3, "12 events, 5 a page");
    let mut reversed = oldest_first.clone();
    reversed.reverse();
    assert_eq!(newest_first, reversed);
    assert_eq!(newest_first[0]["sequence"], 12);
    assert_eq!(
        api.get("/resources/r/history?order=asc").await.body["items"],
        json!(oldest_first)
    );
    api.get("/resources/r/history?order=newest")
        .await
        .assert_problem(400, &[("order", "invalid")]);
    api.get("/resources/missing/history?order=desc")
        .await
        .assert_problem(404, &[]);
}

/// 30 concurrent changes carrying the same `if-match`: exactly one commits; every other one is a
/// `412` naming the version it produced, and the table holds exactly one new event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_changes_of_one_version_have_one_winner() {
    let api = Api::start(Mode::Http).await;
    assert_eq!(create(&api, "r1", "open").await.status, 201);
    let replies = futures::future::join_all((0..30).map(|i| {
        let api = api.clone();
        async move { change(&api, "r1", 1, &format!("s{i}"), "race").await }
    }))
    .await;
    let winners: Vec<&Reply> = replies.iter().filter(|r| r.status == 200).collect();
    assert_eq!(winners.len(), 1, "{replies:?}");
    for reply in replies.iter().filter(|r| r.status != 200) {
        reply.assert_problem(412, &[]);
        assert_eq!(reply.body["currentVersion"], 2, "{reply:?}");
        assert_eq!(reply.header("etag"), Some("\"2\""));
    }
    let winner = &winners[0].body;
    assert_eq!(winner["version"], 2);
    let items = partition(&api, "r1").await;
    assert_eq!(items.len(), 3, "CURRENT and two events: {items:?}");
    let event = item(&api, event_key("r1", 2)).await.unwrap();
    assert_eq!(s(&event, "toStatus"), winner["status"].as_str().unwrap());
    assert_eq!(s(&event, "fromStatus"), "open");
    let current = item(&api, current_key("r1")).await.unwrap();
    assert_eq!(num(&current, "version"), 2);
    assert_eq!(s(&current, "status"), winner["status"].as_str().unwrap());
}

/// 10 writers, each applying 20 changes, re-reading and retrying on `412`: no change is lost,
/// none is applied twice, and the history is 1..=201 with no gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_writers_retrying_on_412_leave_a_gapless_history() {
    if crate::harness::skip_on_external_engine(crate::harness::NO_RETRIED_TRANSACTIONS) {
        return;
    }
    const WRITERS: usize = 10;
    const CHANGES: usize = 20;
    let api = Api::start(Mode::Http).await;
    assert_eq!(create(&api, "r1", "s").await.status, 201);
    let retries = futures::future::join_all((0..WRITERS).map(|w| {
        let api = api.clone();
        async move {
            let mut retries = 0;
            for c in 0..CHANGES {
                loop {
                    let read = api.get("/resources/r1").await;
                    if read.status == 503 && read.body["type"] == "/problems/throttled" {
                        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                        continue;
                    }
                    assert_eq!(read.status, 200, "{read:?}");
                    let version: u64 = read
                        .header("etag")
                        .unwrap()
                        .trim_matches('"')
                        .parse()
                        .unwrap();
                    let reply = change(&api, "r1", version, &format!("w{w}-{c}"), "step").await;
                    match reply.status {
                        200 => {
                            assert!(reply.body["version"].as_u64().unwrap() > version);
                            break;
                        }
                        412 => {
                            assert!(reply.body["currentVersion"].as_u64().unwrap() > version);
                            retries += 1;
                        }
                        // Ten writers on one resource are one hot partition key: every refused
                        // conditional write consumes its units too, and on a fast machine the
                        // engine's per-key limit (1,000 WCU a second, as DynamoDB's) is reached.
                        // The API then answers as AWS would have it answer, 503 throttled with
                        // nothing written, and a client waits and retries.
                        503 if reply.body["type"] == "/problems/throttled" => {
                            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                        }
                        _ => panic!("{reply:?}"),
                    }
                }
            }
            retries
        }
    }))
    .await;
    let last = (WRITERS * CHANGES + 1) as u64;
    let current = api.get("/resources/r1").await;
    assert_eq!(current.body["version"], last);
    assert_eq!(current.header("etag"), Some(format!("\"{last}\"").as_str()));
    let (events, currents) = read_history(&api, "r1", Some(100)).await;
    assert_eq!(currents.len(), 3);
    assert_gapless(&events, last);
    let mut statuses: Vec<&str> = events[1..]
        .iter()
        .map(|e| e["toStatus"].as_str().unwrap())
        .collect();
    statuses.sort();
    let mut expected: Vec<String> = (0..WRITERS)
        .flat_map(|w| (0..CHANGES).map(move |c| format!("w{w}-{c}")))
        .collect();
    expected.sort();
    assert_eq!(statuses, expected, "every change applied exactly once");
    assert_eq!(partition(&api, "r1").await.len(), last as usize + 1);
    assert!(retries.iter().sum::<usize>() > 0, "the writers did race");
}

/// The narrowest race: the read sees version 1 and the `if-match` agrees, then another change
/// commits before this transaction. The guard's cancellation carries `CURRENT` as it stood
/// (`ALL_OLD`), and the `412` names that version without another read. The engine is canned,
/// since a real one cannot be paused between the read and the write.
#[tokio::test]
async fn a_change_that_loses_between_its_read_and_its_write_is_412_naming_the_winner() {
    let current = |version: u64| {
        json!({
            "PK": {"S": "RESOURCE#r1"}, "SK": {"S": "CURRENT"}, "resourceId": {"S": "r1"},
            "status": {"S": "open"}, "version": {"N": version.to_string()}, "updatedAt": {"N": "1"}
        })
    };
    let api = crate::harness::Api::on_canned_engine(move |operation| match operation {
        "GetItem" => (200, json!({"Item": current(1)})),
        "TransactWriteItems" => (
            400,
            json!({
                "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                "Message": "Transaction cancelled, please refer cancellation reasons for specific reasons [ConditionalCheckFailed, None]",
                "CancellationReasons": [
                    {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed", "Item": current(5)},
                    {"Code": "None"}
                ]
            }),
        ),
        other => panic!("unexpected {other}"),
    })
    .await;
    let reply = api
        .call("PATCH", "/resources/r1")
        .header("if-match", "\"1\"")
        .json(json!({"status": "closed", "action": "close", "actor": "ada"}))
        .send()
        .await;
    reply.assert_problem(412, &[]);
    assert_eq!(reply.body["currentVersion"], 5);
    assert_eq!(reply.header("etag"), Some("\"5\""));
}
