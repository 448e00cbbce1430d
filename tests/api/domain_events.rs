//! Domain events end to end: the routes write their outbox items, the table's stream carries
//! them, the runner's event-source mapping (`singlet::serve::event_source`) hands them to the real
//! `publish-events`, and the local bus appends them to an events file, which is what these tests
//! read. Every committed change is exactly one event; refusals and idempotent replays are none;
//! under faults (failing `PutEvents` entries, publisher errors, duplicated batches, an
//! undecodable outbox item) every event is still published, at least once and with its one
//! `eventId`, and the bad item alone lands in the on-failure file.

use crate::fixtures::{self, ISBN};
use crate::harness::mark_overdue;
use crate::harness::{Api, Mode, Reply};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::{Value, json};
use singlet::serve::engine::streams_client;
use singlet::serve::event_source::{EventSource, Faults, write_undecodable_outbox_item};
use singlet::serve::local_bus::LocalBus;
use singlet_functions::clock;
use singlet_functions::events::outbox::OutboxItem;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

/// An API whose changes are published: the mapping started (so the stream is on) before any
/// write, publishing to a fresh events file.
struct Published {
    api: Api,
    source: EventSource,
    events: PathBuf,
    failed: PathBuf,
}

impl Published {
    async fn start(name: &str, bus_failure_rate: f64, faults: Faults) -> Self {
        let api = Api::start(Mode::Direct).await;
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("domain-events-{name}-{}", uuid_like()));
        let (events, failed) = (dir.join("events.jsonl"), dir.join("events-failed.jsonl"));
        let mut bus = LocalBus::open(&events).unwrap();
        if bus_failure_rate > 0.0 {
            bus = bus.failing(bus_failure_rate, 7);
        }
        let ctx = api.ctx.clone().with_bus(Arc::new(bus));
        let streams = streams_client(&api.ctx.db, &api.engine).await;
        let source = EventSource::start(ctx, streams, failed.clone(), faults)
            .await
            .unwrap();
        Self {
            api,
            source,
            events,
            failed,
        }
    }

    /// Every line of the events file, in order.
    async fn drain(&mut self) -> Vec<Value> {
        self.source.drain().await.unwrap();
        lines(&self.events)
    }

    /// Every outbox item in the table: its event's `eventId` (`None` for one that does not
    /// decode).
    async fn outbox(&self) -> Vec<Option<String>> {
        crate::harness::outbox_items(&self.api.ctx.db, &self.api.ctx.table)
            .await
            .into_iter()
            .map(|item| {
                let item: Option<OutboxItem> = serde_dynamo::from_item(item).ok();
                item.and_then(|item| item.entry())
                    .map(|entry| entry.event_id)
            })
            .collect()
    }
}

fn uuid_like() -> String {
    format!("{:016x}", rand::random::<u64>())
}

fn lines(path: &PathBuf) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// What a change must have emitted: its detail type and subject id.
#[derive(Debug, Default)]
struct Expected {
    events: Vec<(String, String)>,
}

impl Expected {
    /// Records `reply` as a change of `kind` about `id` when it is a `2xx` (the caller knows it
    /// is not a replay).
    fn change(&mut self, reply: &Reply, kind: &str, id: impl Into<String>) {
        if (200..300).contains(&reply.status) {
            self.events.push((kind.to_owned(), id.into()));
        }
    }
}

fn str_of<'v>(value: &'v Value, field: &str) -> &'v str {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("no {field} in {value}"))
}

/// Everything a published event must be: the contract's envelope and detail.
fn assert_well_formed(event: &Value) {
    assert_eq!(event["version"], "0");
    // The envelope an EventBridge rule target receives.
    for field in ["id", "account", "time", "region"] {
        assert!(!str_of(event, field).is_empty(), "{field}: {event}");
    }
    assert_eq!(event["resources"], json!([]), "{event}");
    let detail = &event["detail"];
    assert_eq!(detail["type"], event["detail-type"], "{event}");
    let source = str_of(event, "source");
    let subject = str_of(&detail["subject"], "type");
    let expected_source = match subject {
        "vehicle" => "singlet.fleet",
        "account" => "singlet.accounts",
        "resource" => "singlet.audit",
        "branch" | "book" | "copy" | "patron" => "singlet.library",
        "loan" => "singlet.loans",
        other => panic!("unknown subject type {other}"),
    };
    assert_eq!(source, expected_source, "{event}");
    assert!(str_of(detail, "occurredAt").ends_with('Z'));
    assert_eq!(str_of(detail, "occurredAt").len(), 24, "{event}");
    let actor = str_of(detail, "actor");
    if detail["type"] == "LoanOverdue" {
        assert_eq!(actor, "mark-overdue");
    } else {
        assert_eq!(actor, "tester");
    }
    if ["VehicleRetired", "AccountDeleted", "PatronRemoved"].contains(&str_of(detail, "type")) {
        let field = format!("{subject}Id");
        assert_eq!(
            detail["data"],
            json!({ field: detail["subject"]["id"] }),
            "{event}"
        );
    }
}

/// Every write route once, the races of the other tests (64 registrations of one plate, 32
/// checkouts of one copy, 8 audit writers), refusals and replays, the marker, and `calls` random
/// calls: the changes they made, as the test expects their events.
async fn workload(api: &Api, calls: usize, mut between: impl AsyncFnMut(usize)) -> Expected {
    let mut expected = Expected::default();

    // The library, a patron with loans, every library change.
    for branch in ["central", "east"] {
        let reply = api.post("/branches", fixtures::branch_body(branch)).await;
        expected.change(&reply, "BranchCreated", branch);
    }
    let reply = fixtures::create_book(api, ISBN).await;
    expected.change(&reply, "BookAdded", ISBN);
    let refused = fixtures::create_book(api, ISBN).await;
    assert_eq!(refused.status, 409);
    let reply = api
        .call("PATCH", format!("/books/{ISBN}"))
        .json(json!({"pageCount": 565}))
        .send()
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.body["pageCount"], 565);
    expected.change(&reply, "BookCorrected", ISBN);
    let mut patrons = Vec::new();
    for i in 0..33 {
        let reply = fixtures::register_patron(api, "central", &format!("C-{i}"), "standard").await;
        let id = str_of(&reply.body, "patronId").to_owned();
        expected.change(&reply, "PatronRegistered", &id);
        patrons.push(id);
    }
    let reply = api
        .put(
            format!("/patrons/{}/tier", patrons[0]),
            json!({"membershipTier": "premium"}),
        )
        .await;
    expected.change(&reply, "PatronTierChanged", &patrons[0]);
    let reply = api
        .put(
            format!("/patrons/{}/card", patrons[0]),
            json!({"cardNumber": "C-100"}),
        )
        .await;
    expected.change(&reply, "PatronCardReissued", &patrons[0]);
    let same = api
        .put(
            format!("/patrons/{}/card", patrons[0]),
            json!({"cardNumber": "C-100"}),
        )
        .await;
    assert_eq!(same.status, 200, "reissuing the card held changes nothing");

    // 32 checkouts of one copy: one loan.
    let copy = fixtures::add_copy(api, "central", ISBN).await;
    let copy_id = str_of(&copy.body, "copyId").to_owned();
    expected.change(&copy, "CopyAdded", &copy_id);
    let replies = futures::future::join_all(
        patrons[1..]
            .iter()
            .map(|patron| fixtures::checkout(api, patron, "central", &copy_id)),
    )
    .await;
    let lent: Vec<&Reply> = replies.iter().filter(|r| r.status == 201).collect();
    assert_eq!(lent.len(), 1, "one of 32 checkouts of one copy");
    let loan = lent[0].body.clone();
    expected.change(lent[0], "LoanCheckedOut", str_of(&loan, "checkoutId"));
    let (patron, checkout) = (str_of(&loan, "patronId"), str_of(&loan, "checkoutId"));
    let loan_path = format!("/patrons/{patron}/checkouts/{checkout}");
    let reply = api
        .call("POST", format!("{loan_path}/renew"))
        .header("idempotency-key", "renew-1")
        .send()
        .await;
    expected.change(&reply, "LoanRenewed", checkout);
    let replay = api
        .call("POST", format!("{loan_path}/renew"))
        .header("idempotency-key", "renew-1")
        .send()
        .await;
    assert_eq!(
        replay.body, reply.body,
        "the first answer again, and no second renewal"
    );
    let reply = api.call("POST", format!("{loan_path}/return")).send().await;
    expected.change(&reply, "LoanReturned", checkout);
    let again = api.call("POST", format!("{loan_path}/return")).send().await;
    assert_eq!(again.status, 409);
    let reply = api.delete(format!("/patrons/{}", patrons[2])).await;
    expected.change(&reply, "PatronRemoved", &patrons[2]);

    // Loans the marker moves: one event each, from the loan's own stream record.
    let mut open = Vec::new();
    for patron in &patrons[3..6] {
        let loan = fixtures::lend(api, patron, "east").await;
        expected
            .events
            .push(("CopyAdded".into(), str_of(&loan, "copyId").into()));
        expected
            .events
            .push(("LoanCheckedOut".into(), str_of(&loan, "checkoutId").into()));
        open.push(str_of(&loan, "checkoutId").to_owned());
    }
    let report = mark_overdue(&api.ctx, clock::now() + clock::days(60), 100, || true)
        .await
        .unwrap();
    assert_eq!(report.marked, 3);
    let again = mark_overdue(&api.ctx, clock::now() + clock::days(60), 100, || true)
        .await
        .unwrap();
    assert_eq!(
        again.marked, 0,
        "a second run moves nothing, and emits nothing"
    );
    for checkout in open {
        expected.events.push(("LoanOverdue".into(), checkout));
    }

    // 64 registrations of one plate: one vehicle.
    let replies = futures::future::join_all((0..64).map(|i| {
        api.post(
            "/vehicles",
            json!({"plate": "KA19 XTR", "chassis": format!("RACE{i}"), "depot": "north"}),
        )
    }))
    .await;
    let won: Vec<&Reply> = replies.iter().filter(|r| r.status == 201).collect();
    assert_eq!(won.len(), 1);
    expected.change(
        won[0],
        "VehicleRegistered",
        str_of(&won[0].body, "vehicleId"),
    );

    // 8 audit writers, each changing the resource until it has made 4 changes.
    let reply = api
        .post(
            "/resources",
            json!({"resourceId": "door-7", "status": "closed"}),
        )
        .await;
    expected.change(&reply, "ResourceCreated", "door-7");
    let changes = futures::future::join_all((0..8).map(|writer| async move {
        let mut made = 0;
        while made < 4 {
            let current = api.get("/resources/door-7").await;
            let version = current.body["version"].as_u64().unwrap();
            let reply = api
                .call("PATCH", "/resources/door-7")
                .header("if-match", &format!("\"{version}\""))
                .json(json!({"status": format!("s{writer}"), "action": "move"}))
                .send()
                .await;
            match reply.status {
                200 => made += 1,
                412 => {}
                other => panic!("{other}: {reply:?}"),
            }
        }
        made
    }))
    .await;
    for _ in 0..changes.iter().sum::<i32>() {
        expected
            .events
            .push(("ResourceChanged".into(), "door-7".into()));
    }

    // Random calls, one at a time, over a small pool of plates, accounts and resources, so that
    // many collide (409), miss (404), go stale (412) or replay.
    let mut rng = StdRng::seed_from_u64(22);
    // Each vehicle's id, its plate, and the key and body that registered it.
    let mut vehicles: Vec<(String, String, String, Value)> = Vec::new();
    let mut accounts: Vec<(String, String)> = Vec::new();
    let mut versions: BTreeMap<String, u64> = BTreeMap::new();
    for call in 0..calls {
        between(call).await;
        let plate = format!("P{}", rng.gen_range(0..30));
        match rng.gen_range(0..9) {
            0 | 1 => {
                let body = json!({"plate": plate, "chassis": format!("C{call}"), "depot": "north"});
                let key = format!("k{call}");
                let reply = api
                    .call("POST", "/vehicles")
                    .header("idempotency-key", &key)
                    .json(body.clone())
                    .send()
                    .await;
                if reply.status == 201 {
                    let id = str_of(&reply.body, "vehicleId").to_owned();
                    vehicles.push((id, plate.to_lowercase(), key, body));
                }
                expected.change(
                    &reply,
                    "VehicleRegistered",
                    reply.body["vehicleId"].as_str().unwrap_or(""),
                );
            }
            // A retry of a registration whose vehicle is still there: the first answer again.
            2 if !vehicles.is_empty() => {
                let (id, _, key, body) = vehicles[rng.gen_range(0..vehicles.len())].clone();
                let reply = api
                    .call("POST", "/vehicles")
                    .header("idempotency-key", &key)
                    .json(body)
                    .send()
                    .await;
                assert_eq!(reply.status, 201, "{reply:?}");
                assert_eq!(
                    reply.body["vehicleId"],
                    id.as_str(),
                    "the first answer again"
                );
            }
            3 if !vehicles.is_empty() => {
                let i = rng.gen_range(0..vehicles.len());
                let (id, current, _, _) = vehicles[i].clone();
                let reply = api
                    .put(format!("/vehicles/{id}/plate"), json!({"plate": plate}))
                    .await;
                if reply.status == 200 && current != plate.to_lowercase() {
                    vehicles[i].1 = plate.to_lowercase();
                    expected.change(&reply, "VehiclePlateChanged", id);
                }
            }
            4 if !vehicles.is_empty() => {
                let (id, _, _, _) = vehicles.swap_remove(rng.gen_range(0..vehicles.len()));
                let reply = api.delete(format!("/vehicles/{id}")).await;
                expected.change(&reply, "VehicleRetired", id);
            }
            5 => {
                let name = format!("user{}", rng.gen_range(0..20));
                let reply = api
                    .post(
                        "/accounts",
                        json!({"email": format!("{name}@example.com"), "username": name}),
                    )
                    .await;
                if reply.status == 201 {
                    accounts.push((str_of(&reply.body, "accountId").into(), name));
                }
                expected.change(
                    &reply,
                    "AccountCreated",
                    reply.body["accountId"].as_str().unwrap_or(""),
                );
            }
            6 if !accounts.is_empty() => {
                let i = rng.gen_range(0..accounts.len());
                let (id, current) = accounts[i].clone();
                let name = format!("user{}", rng.gen_range(0..20));
                let reply = api
                    .put(
                        format!("/accounts/{id}/username"),
                        json!({"username": name}),
                    )
                    .await;
                if reply.status == 200 && current != name {
                    accounts[i].1 = name;
                    expected.change(&reply, "AccountUsernameChanged", id);
                }
            }
            7 if !accounts.is_empty() => {
                let (id, _) = accounts.swap_remove(rng.gen_range(0..accounts.len()));
                let reply = api.delete(format!("/accounts/{id}")).await;
                expected.change(&reply, "AccountDeleted", id);
            }
            _ => {
                let id = format!("r{}", rng.gen_range(0..10));
                let reply = match versions.get(&id).copied() {
                    None => {
                        let reply = api
                            .post("/resources", json!({"resourceId": id, "status": "new"}))
                            .await;
                        expected.change(&reply, "ResourceCreated", &id);
                        reply
                    }
                    Some(version) => {
                        // Now and then a stale version: 412, no event.
                        let sent = if rng.gen_bool(0.2) {
                            version.saturating_sub(1)
                        } else {
                            version
                        };
                        let reply = api
                            .call("PATCH", format!("/resources/{id}"))
                            .header("if-match", &format!("\"{sent}\""))
                            .json(json!({"status": "moved", "action": "move"}))
                            .send()
                            .await;
                        expected.change(&reply, "ResourceChanged", &id);
                        reply
                    }
                };
                if let Some(version) = reply.body["version"].as_u64() {
                    versions.insert(id, version);
                }
            }
        }
    }
    expected
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_committed_change_is_exactly_one_event() {
    if crate::harness::skip_on_external_engine(crate::harness::SLOWER_AS_THE_TABLE_GROWS) {
        return;
    }
    let mut published = Published::start("exact", 0.0, Faults::default()).await;
    let api = published.api.clone();
    let expected = workload(&api, 600, async |_| {}).await;
    let events = published.drain().await;

    for event in &events {
        assert_well_formed(event);
    }
    let ids: Vec<&str> = events
        .iter()
        .map(|e| str_of(&e["detail"], "eventId"))
        .collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(
        unique.len(),
        ids.len(),
        "no event published twice without faults"
    );

    let mut seen: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                str_of(e, "detail-type").to_owned(),
                str_of(&e["detail"]["subject"], "id").to_owned(),
            )
        })
        .collect();
    let mut wanted = expected.events.clone();
    seen.sort();
    wanted.sort();
    assert_eq!(
        seen, wanted,
        "one event per committed change, none for refusals or replays"
    );

    // Every outbox item was published, and nothing else but the marker's events and the events
    // of entities deleted since, whose outbox items went with them.
    let outbox: BTreeSet<String> = published
        .outbox()
        .await
        .into_iter()
        .map(Option::unwrap)
        .collect();
    let overdue = events
        .iter()
        .filter(|e| e["detail-type"] == "LoanOverdue")
        .count();
    let forgotten = forgotten(&events);
    assert!(!forgotten.is_empty(), "the workload deletes some entities");
    assert!(
        outbox.is_disjoint(&forgotten),
        "a deleted entity's outbox items go"
    );
    assert_eq!(outbox.len() + overdue + forgotten.len(), events.len());

    // An audited resource's ResourceChanged events: strictly increasing, with no gap.
    let mut sequences: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for event in events
        .iter()
        .filter(|e| e["detail-type"] == "ResourceChanged")
    {
        let detail = &event["detail"];
        sequences
            .entry(str_of(&detail["subject"], "id").to_owned())
            .or_default()
            .push(detail["sequence"].as_u64().unwrap());
        assert_eq!(detail["sequence"], detail["data"]["version"]);
    }
    for (resource, sequence) in &sequences {
        let wanted: Vec<u64> = (2..2 + sequence.len() as u64).collect();
        assert_eq!(sequence, &wanted, "{resource}'s ResourceChanged, in order");
    }
    assert_eq!(sequences["door-7"].len(), 32);
    assert_eq!(published.source.report.records_failed, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_faults_every_event_is_published_and_the_bad_item_fails_alone() {
    if crate::harness::skip_on_external_engine(crate::harness::SLOWER_AS_THE_TABLE_GROWS) {
        return;
    }
    let faults = Faults {
        publisher_error_every: 13,
        duplicate_batch_every: 50,
    };
    let mut published = Published::start("faults", 0.05, faults).await;
    let api = published.api.clone();
    let ctx = api.ctx.clone();
    let source = &mut published.source;
    let mut bad = None;
    // The mapping reads the stream every few calls, so it runs many small batches, as it does
    // behind a live API; the undecodable item is written halfway.
    workload(&api, 600, async |call| {
        if call == 300 {
            bad = Some(write_undecodable_outbox_item(&ctx).await.unwrap());
        }
        if call % 4 == 0 {
            source.poll().await.unwrap();
        }
    })
    .await;
    let events = published.drain().await;
    let report = published.source.report;
    assert!(report.duplicated_batches > 0, "{report:?}");
    assert!(report.failed_invocations > 0, "{report:?}");

    // Every outbox item but the bad one, published; a duplicate carries its one eventId and is
    // the same event.
    let outbox = published.outbox().await;
    assert_eq!(outbox.iter().filter(|id| id.is_none()).count(), 1);
    let written: BTreeSet<String> = outbox.into_iter().flatten().collect();
    let mut by_id: BTreeMap<String, Value> = BTreeMap::new();
    for event in &events {
        assert_well_formed(event);
        let id = str_of(&event["detail"], "eventId").to_owned();
        if let Some(first) = by_id.insert(id, event["detail"].clone()) {
            assert_eq!(first, event["detail"], "a duplicate is the same event");
        }
    }
    let published_ids: BTreeSet<String> = by_id
        .iter()
        .filter(|(_, detail)| detail["type"] != "LoanOverdue")
        .map(|(id, _)| id.clone())
        .collect();
    let forgotten = forgotten(&events);
    assert!(
        written.is_disjoint(&forgotten),
        "a deleted entity's outbox items go"
    );
    assert_eq!(
        published_ids
            .difference(&forgotten)
            .cloned()
            .collect::<BTreeSet<_>>(),
        written,
        "every outbox item but the bad one (and those deleted with their entity)"
    );
    assert!(
        events.len() > by_id.len(),
        "duplicated batches published events twice"
    );

    // The bad item alone, in the on-failure file, after the template's retries.
    let failed = lines(&published.failed);
    assert_eq!(failed.len(), 1, "{failed:#?}");
    let info = &failed[0]["DDBStreamBatchInfo"];
    assert_eq!(info["batchSize"], 1);
    assert_eq!(
        failed[0]["requestContext"]["condition"],
        "RetryAttemptsExhausted"
    );
    assert_eq!(report.records_failed, 1);
    let bad = bad.unwrap();
    let record = stream_record(&api, str_of(info, "startSequenceNumber")).await;
    assert_eq!(record["dynamodb"]["Keys"]["PK"]["S"], bad.as_str());
}

/// A streams client on `api`'s engine, the table's stream and its one shard (dynoxide keeps one).
async fn the_stream(api: &Api) -> (aws_sdk_dynamodbstreams::Client, String, String) {
    stream_of(&api.ctx.db, &api.engine, &api.ctx.table).await
}

/// A streams client on the engine at `engine`, `table`'s stream and its one shard.
pub(crate) async fn stream_of(
    db: &aws_sdk_dynamodb::Client,
    engine: &str,
    table: &str,
) -> (aws_sdk_dynamodbstreams::Client, String, String) {
    let streams = streams_client(db, engine).await;
    let arn = streams
        .list_streams()
        .table_name(table)
        .send()
        .await
        .unwrap()
        .streams()[0]
        .stream_arn()
        .unwrap()
        .to_owned();
    let shard = streams
        .describe_stream()
        .stream_arn(&arn)
        .send()
        .await
        .unwrap()
        .stream_description()
        .unwrap()
        .shards()[0]
        .shard_id()
        .unwrap()
        .to_owned();
    (streams, arn, shard)
}

/// The stream record with sequence number `sequence`, as the mapping hands it over.
async fn stream_record(api: &Api, sequence: &str) -> Value {
    use aws_sdk_dynamodbstreams::types::ShardIteratorType;
    let (streams, arn, shard) = the_stream(api).await;
    let iterator = streams
        .get_shard_iterator()
        .stream_arn(&arn)
        .shard_id(shard)
        .shard_iterator_type(ShardIteratorType::AtSequenceNumber)
        .sequence_number(sequence)
        .send()
        .await
        .unwrap()
        .shard_iterator
        .unwrap();
    let records = streams
        .get_records()
        .shard_iterator(iterator)
        .limit(1)
        .send()
        .await
        .unwrap()
        .records
        .unwrap();
    singlet::serve::event_source::lambda_record(&records[0], &arn)
}

/// Like Lambda's poller, the mapping seeks in the shard once and then reads on with the
/// iterator each read hands back, rather than asking for a new one before every read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mapping_seeks_once_and_follows_its_iterator() {
    let mut published = Published::start("iterator", 0.0, Faults::default()).await;
    for round in 0..3 {
        for n in 0..3 {
            let n = round * 3 + n;
            let body =
                json!({"plate": format!("IT {n}"), "chassis": format!("ITC{n}"), "depot": "north"});
            let reply = published.api.post("/vehicles", body).await;
            assert_eq!(reply.status, 201, "{reply:?}");
        }
        assert_eq!(published.drain().await.len(), (round + 1) * 3);
    }
    assert_eq!(
        published.source.report.seeks, 1,
        "{:?}",
        published.source.report
    );
}

/// A delivery that fails (here the on-failure destination cannot be written) leaves the
/// checkpoint where it was and no iterator: the next poll seeks from the checkpoint and delivers
/// the same records again, with the same `eventId`s, as Lambda does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delivery_is_read_again_from_the_checkpoint() {
    let mut published = Published::start("redeliver", 0.0, Faults::default()).await;
    let register = |n: usize| json!({"plate": format!("RD {n}"), "chassis": format!("RDC{n}"), "depot": "north"});
    let reply = published.api.post("/vehicles", register(0)).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    write_undecodable_outbox_item(&published.api.ctx)
        .await
        .unwrap();
    let reply = published.api.post("/vehicles", register(1)).await;
    assert_eq!(reply.status, 201, "{reply:?}");

    // A directory where the on-failure file goes: the bad item cannot be sent there.
    std::fs::create_dir_all(&published.failed).unwrap();
    let error = published.source.poll().await.unwrap_err();
    assert!(error.contains("cannot open"), "{error}");
    assert_eq!(published.source.report.seeks, 1);

    std::fs::remove_dir(&published.failed).unwrap();
    let events = published.drain().await;
    assert_eq!(
        published.source.report.seeks, 2,
        "{:?}",
        published.source.report
    );
    let ids: BTreeSet<&str> = events
        .iter()
        .map(|e| str_of(&e["detail"], "eventId"))
        .collect();
    assert_eq!(ids.len(), 2, "{events:#?}");
    assert!(
        events.len() > 2,
        "the records read before the failure came again"
    );
    assert_eq!(lines(&published.failed).len(), 1);
}

/// The mapping's checkpoint outlives it, as Lambda's does: a mapping started again with the
/// same position file publishes only what changed since, never the whole stream again; a
/// position file that names another stream (another engine's, another table's) is not trusted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_mapping_goes_on_from_its_kept_position() {
    let mut published = Published::start("position", 0.0, Faults::default()).await;
    let position = published.events.with_file_name("stream-position.json");
    let restart = |published: &Published, position: Option<PathBuf>| {
        let bus = LocalBus::open(&published.events).unwrap();
        let ctx = published.api.ctx.clone().with_bus(Arc::new(bus));
        let (db, engine, failed) = (
            published.api.ctx.db.clone(),
            published.api.engine.clone(),
            published.failed.clone(),
        );
        async move {
            let streams = streams_client(&db, &engine).await;
            let source = EventSource::start(ctx, streams, failed, Faults::default())
                .await
                .unwrap();
            match position {
                Some(file) => source.remember_in(file),
                None => source,
            }
        }
    };
    published.source = restart(&published, Some(position.clone())).await;
    let register = |n: usize| json!({"plate": format!("POS {n}"), "chassis": format!("POSC{n}"), "depot": "north"});
    for n in 0..3 {
        let reply = published.api.post("/vehicles", register(n)).await;
        assert_eq!(reply.status, 201, "{reply:?}");
    }
    assert_eq!(published.drain().await.len(), 3);
    let kept: Value = serde_json::from_slice(&std::fs::read(&position).unwrap()).unwrap();
    assert!(kept["sequenceNumber"].is_string(), "{kept}");

    // Started again: the three are not published twice; the next change is.
    published.source = restart(&published, Some(position.clone())).await;
    let reply = published.api.post("/vehicles", register(3)).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let events = published.drain().await;
    assert_eq!(events.len(), 4, "{events:#?}");
    let ids: BTreeSet<String> = events
        .iter()
        .map(|e| e["detail"]["eventId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 4, "no event twice");

    // A position for another stream: read from the start (at least once, same eventIds).
    let mut foreign = kept.clone();
    foreign["streamArn"] = json!("arn:aws:dynamodb:local:000000000000:table/other/stream/x");
    std::fs::write(&position, foreign.to_string()).unwrap();
    published.source = restart(&published, Some(position.clone())).await;
    let events = published.drain().await;
    assert_eq!(events.len(), 8, "the whole stream again");
    let ids: BTreeSet<String> = events
        .iter()
        .map(|e| e["detail"]["eventId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 4, "redelivered events keep their eventId");
}

/// The stream is read in the table's region (DynamoDB Local keeps each region's tables and
/// streams apart, so a streams client of the default region would find none there): the client
/// takes the region of the DynamoDB client it is made beside, and reaches the same engine.
#[tokio::test]
async fn the_streams_client_reads_in_the_tables_region() {
    use aws_sdk_dynamodb::config::Region;
    let (client, endpoint) = singlet::serve::engine::start_in_memory("singlet").await;
    let db = aws_sdk_dynamodb::Client::from_conf(
        client
            .config()
            .to_builder()
            .region(Region::new("ap-southeast-2"))
            .build(),
    );
    let streams = streams_client(&db, &endpoint).await;
    assert_eq!(
        streams.config().region().map(|r| r.as_ref()),
        Some("ap-southeast-2")
    );
    singlet::serve::event_source::enable_stream(&db, "singlet")
        .await
        .unwrap();
    let listed = streams
        .list_streams()
        .table_name("singlet")
        .send()
        .await
        .unwrap();
    assert_eq!(listed.streams().len(), 1, "{listed:?}");
}

/// The engine's stream records are indexed for the two statements dynoxide reads them with
/// (`engine::index_the_stream`): without the indexes every write and every `GetRecords` read the
/// whole stream, and the event lag grew with it. Both engines have them (the in-memory one is
/// copied out with `VACUUM INTO` to be looked at), and SQLite's plan for each statement, as
/// dynoxide 3.2 spells it, uses one rather than scanning the table.
#[tokio::test]
async fn the_engines_stream_records_are_indexed() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("engine-{}", uuid_like()));
    let file = dir.join("engine.db");
    drop(singlet::serve::engine::open(Some(&file)).unwrap());
    let copy = dir.join("memory-copy.db");
    singlet::serve::engine::open(None)
        .unwrap()
        .vacuum_into(copy.to_str().unwrap())
        .unwrap();
    // Opened again, a file keeps its indexes and gains none twice.
    drop(singlet::serve::engine::open(Some(&file)).unwrap());

    for path in [&file, &copy] {
        let sqlite = rusqlite::Connection::open(path).unwrap();
        let plan = |statement: &str| -> String {
            let mut explained = sqlite
                .prepare(&format!("EXPLAIN QUERY PLAN {statement}"))
                .unwrap();
            let details: Vec<String> = explained
                .query_map([], |row| row.get::<_, String>(3))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            details.join("; ")
        };
        let next = plan(
            "SELECT COALESCE(MAX(CAST(sequence_number AS INTEGER)), 0) + 1 \
             FROM _stream_records WHERE table_name = 't'",
        );
        assert!(next.contains("singlet_stream_next"), "{path:?}: {next}");
        let read = plan(
            "SELECT event_name FROM _stream_records \
             WHERE table_name = 't' AND shard_id = 's' AND CAST(sequence_number AS INTEGER) > 7 \
             ORDER BY CAST(sequence_number AS INTEGER) ASC LIMIT 1000",
        );
        assert!(read.contains("singlet_stream_read"), "{path:?}: {read}");
        assert!(!read.contains("TEMP B-TREE"), "no sort: {read}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stream whose shard ends and splits, as AWS's do every few hours (dynoxide keeps one shard
/// for ever, so a proxy on a real socket shows the engine's one shard as two): a parent that
/// ends after the first three registrations, and a child that carries the rest and is listed
/// only once the parent has been read to its end twice. The mapping reads the parent to its end,
/// finds no child yet and says so, looks again at the next poll, then reads the child from its
/// start: every event once, the parent's before the child's, and a seek per shard it entered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_that_ends_hands_over_to_its_child() {
    use axum::http::HeaderMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const PARENT: &str = "shardId-parent";
    const CHILD: &str = "shardId-child";
    let api = Api::start(Mode::Direct).await;
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("split-{}", uuid_like()));
    let (events, failed) = (dir.join("events.jsonl"), dir.join("events-failed.jsonl"));
    let register = |n: usize| json!({"plate": format!("SPL {n}"), "chassis": format!("SPLC{n}"), "depot": "north"});

    // The engine's stream on, and its one shard's id.
    singlet::serve::event_source::enable_stream(&api.ctx.db, &api.ctx.table)
        .await
        .unwrap();
    for n in 0..3 {
        assert_eq!(api.post("/vehicles", register(n)).await.status, 201);
    }
    let (direct, arn, engine_shard) = the_stream(&api).await;
    // The parent ends at the last record the first three registrations wrote.
    let split: u128 = {
        let mut iterator = direct
            .get_shard_iterator()
            .stream_arn(&arn)
            .shard_id(&engine_shard)
            .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
            .send()
            .await
            .unwrap()
            .shard_iterator
            .unwrap();
        let mut last = 0;
        loop {
            let read = direct
                .get_records()
                .shard_iterator(&iterator)
                .send()
                .await
                .unwrap();
            let Some(record) = read.records().last() else {
                break last;
            };
            last = record
                .dynamodb()
                .unwrap()
                .sequence_number()
                .unwrap()
                .parse()
                .unwrap();
            iterator = read.next_shard_iterator.unwrap();
        }
    };
    for n in 3..6 {
        assert_eq!(api.post("/vehicles", register(n)).await.status, 201);
    }

    // The proxy: the engine's answers, its one shard shown as a parent and a child.
    let parent_ended = Arc::new(AtomicUsize::new(0));
    let engine = api.engine.clone();
    let ended = parent_ended.clone();
    let proxy = axum::Router::new().fallback(move |headers: HeaderMap, body: String| {
        let (engine, ended, engine_shard) = (engine.clone(), ended.clone(), engine_shard.clone());
        async move {
            let target = headers["x-amz-target"].to_str().unwrap().to_owned();
            let operation = target.rsplit('.').next().unwrap().to_owned();
            let mut request: Value = serde_json::from_str(&body).unwrap();
            let mut shard = None;
            match operation.as_str() {
                "GetShardIterator" => {
                    let asked = request["ShardId"].as_str().unwrap().to_owned();
                    request["ShardId"] = json!(engine_shard);
                    if asked == CHILD && request["ShardIteratorType"] == "TRIM_HORIZON" {
                        request["ShardIteratorType"] = json!("AFTER_SEQUENCE_NUMBER");
                        request["SequenceNumber"] = json!(split.to_string());
                    }
                    shard = Some(asked);
                }
                "GetRecords" => {
                    let (tag, iterator) = request["ShardIterator"]
                        .as_str()
                        .unwrap()
                        .split_once('|')
                        .map(|(t, i)| (t.to_owned(), i.to_owned()))
                        .unwrap();
                    request["ShardIterator"] = json!(iterator);
                    shard = Some(tag);
                }
                _ => {}
            }
            let forwarded = reqwest::Client::new()
                .post(&engine)
                .header("x-amz-target", &target)
                .header("content-type", headers["content-type"].to_str().unwrap())
                .header("authorization", headers["authorization"].to_str().unwrap())
                .header("x-amz-date", headers["x-amz-date"].to_str().unwrap())
                .body(request.to_string())
                .send()
                .await
                .unwrap();
            let status = forwarded.status();
            let mut answer: Value = forwarded.json().await.unwrap();
            if status.is_success() {
                match operation.as_str() {
                    "DescribeStream" => {
                        let mut shards = vec![json!({
                            "ShardId": PARENT,
                            "SequenceNumberRange": {"StartingSequenceNumber": "1", "EndingSequenceNumber": split.to_string()}
                        })];
                        if ended.load(Ordering::SeqCst) >= 2 {
                            shards.push(json!({
                                "ShardId": CHILD, "ParentShardId": PARENT,
                                "SequenceNumberRange": {"StartingSequenceNumber": (split + 1).to_string()}
                            }));
                        }
                        answer["StreamDescription"]["Shards"] = json!(shards);
                    }
                    "GetShardIterator" => {
                        let iterator = answer["ShardIterator"].as_str().unwrap();
                        answer["ShardIterator"] = json!(format!("{}|{iterator}", shard.unwrap()));
                    }
                    "GetRecords" => {
                        let shard = shard.unwrap();
                        let records = answer["Records"].as_array().cloned().unwrap_or_default();
                        let sequence = |r: &Value| -> u128 {
                            r["dynamodb"]["SequenceNumber"].as_str().unwrap().parse().unwrap()
                        };
                        let past_the_end = records.iter().any(|r| sequence(r) > split);
                        if shard == PARENT {
                            let kept: Vec<Value> =
                                records.into_iter().filter(|r| sequence(r) <= split).collect();
                            answer["Records"] = json!(kept);
                        }
                        match answer["NextShardIterator"].as_str() {
                            _ if shard == PARENT && past_the_end => {
                                ended.fetch_add(1, Ordering::SeqCst);
                                answer.as_object_mut().unwrap().remove("NextShardIterator");
                            }
                            Some(next) => answer["NextShardIterator"] = json!(format!("{shard}|{next}")),
                            None => {}
                        }
                    }
                    _ => {}
                }
            }
            (
                axum::http::StatusCode::from_u16(status.as_u16()).unwrap(),
                [("content-type", "application/x-amz-json-1.0")],
                answer.to_string(),
            )
        }
    });
    let (proxied, _proxy) = crate::harness::serve_on_loopback(proxy).await;

    let bus = LocalBus::open(&events).unwrap();
    let ctx = api.ctx.clone().with_bus(Arc::new(bus));
    let streams = streams_client(&api.ctx.db, &proxied).await;
    let mut source = EventSource::start(ctx, streams, failed, Faults::default())
        .await
        .unwrap();
    source.drain().await.unwrap();

    let published = lines(&events);
    let plates: Vec<&str> = published
        .iter()
        .map(|event| str_of(&event["detail"]["data"], "plate"))
        .collect();
    assert_eq!(
        plates,
        ["spl 0", "spl 1", "spl 2", "spl 3", "spl 4", "spl 5"],
        "{published:#?}"
    );
    let ids: BTreeSet<&str> = published
        .iter()
        .map(|e| str_of(&e["detail"], "eventId"))
        .collect();
    assert_eq!(ids.len(), 6, "every event once");
    assert_eq!(
        parent_ended.load(Ordering::SeqCst),
        2,
        "read to its end, then again once no child was listed"
    );
    // The parent from its start, the parent again after the checkpoint, the child from its start.
    assert_eq!(source.report.seeks, 3, "{:?}", source.report);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each event's `detail.data` is the entity as the API answered the change that made it, for
/// every event type a route makes (the deletions carry the id alone: `assert_well_formed`), and
/// `ResourceCreated` carries `detail.sequence = 1`.
#[tokio::test]
async fn each_events_data_is_the_entity_as_the_api_answered() {
    let mut published = Published::start("data", 0.0, Faults::default()).await;
    let api = published.api.clone();
    // (detail type, subject id, the answer) for each change.
    let mut answered: Vec<(&str, String, Value)> = Vec::new();
    let mut answer = |kind: &'static str, id_field: &str, reply: Reply| {
        assert!(
            reply.status == 200 || reply.status == 201,
            "{kind}: {reply:?}"
        );
        let id = reply.body[id_field].as_str().unwrap().to_owned();
        answered.push((kind, id, reply.body));
    };

    let vehicle = api
        .post(
            "/vehicles",
            json!({"plate": "EVD 1", "chassis": "EVD-C1", "depot": "north"}),
        )
        .await;
    let vehicle_id = vehicle.body["vehicleId"].as_str().unwrap().to_owned();
    answer("VehicleRegistered", "vehicleId", vehicle);
    let plate = api
        .put(
            format!("/vehicles/{vehicle_id}/plate"),
            json!({"plate": "EVD 2"}),
        )
        .await;
    answer("VehiclePlateChanged", "vehicleId", plate);

    let account = api
        .post(
            "/accounts",
            json!({"email": "evd@example.com", "username": "evd", "displayName": "E"}),
        )
        .await;
    let account_id = account.body["accountId"].as_str().unwrap().to_owned();
    answer("AccountCreated", "accountId", account);
    let email = api
        .put(
            format!("/accounts/{account_id}/email"),
            json!({"email": "evd2@example.com"}),
        )
        .await;
    answer("AccountEmailChanged", "accountId", email);
    let username = api
        .put(
            format!("/accounts/{account_id}/username"),
            json!({"username": "evd2"}),
        )
        .await;
    answer("AccountUsernameChanged", "accountId", username);

    let resource = api
        .post(
            "/resources",
            json!({"resourceId": "evd-r", "status": "open"}),
        )
        .await;
    answer("ResourceCreated", "resourceId", resource);
    let changed = api
        .call("PATCH", "/resources/evd-r")
        .json(json!({"status": "shut", "action": "close"}))
        .header("if-match", "\"1\"")
        .send()
        .await;
    answer("ResourceChanged", "resourceId", changed);

    let branch = api
        .post(
            "/branches",
            json!({"branchId": "central", "name": "Central", "address": "1 Road",
                   "city": "Springfield", "phone": "1", "openingHours": "always"}),
        )
        .await;
    answer("BranchCreated", "branchId", branch);
    answer("BookAdded", "isbn", fixtures::create_book(&api, ISBN).await);
    let corrected = api
        .call("PATCH", format!("/books/{ISBN}"))
        .json(json!({"title": "Corrected"}))
        .send()
        .await;
    answer("BookCorrected", "isbn", corrected);
    let copy = api
        .post(
            "/branches/central/copies",
            json!({"isbn": ISBN, "condition": "good"}),
        )
        .await;
    let copy_id = copy.body["copyId"].as_str().unwrap().to_owned();
    answer("CopyAdded", "copyId", copy);
    let patron = api
        .post(
            "/branches/central/patrons",
            fixtures::patron_body("evd-card", "standard"),
        )
        .await;
    let patron_id = patron.body["patronId"].as_str().unwrap().to_owned();
    answer("PatronRegistered", "patronId", patron);
    let card = api
        .put(
            format!("/patrons/{patron_id}/card"),
            json!({"cardNumber": "evd-card-2"}),
        )
        .await;
    answer("PatronCardReissued", "patronId", card);
    let tier = api
        .put(
            format!("/patrons/{patron_id}/tier"),
            json!({"membershipTier": "premium"}),
        )
        .await;
    answer("PatronTierChanged", "patronId", tier);
    let loan = api
        .post(
            "/checkouts",
            json!({"patronId": patron_id, "branchId": "central", "copyId": copy_id}),
        )
        .await;
    let loan_id = loan.body["checkoutId"].as_str().unwrap().to_owned();
    answer("LoanCheckedOut", "checkoutId", loan);
    let loan_path = format!("/patrons/{patron_id}/checkouts/{loan_id}");
    let renewed = api.call("POST", format!("{loan_path}/renew")).send().await;
    answer("LoanRenewed", "checkoutId", renewed);
    let returned = api.call("POST", format!("{loan_path}/return")).send().await;
    answer("LoanReturned", "checkoutId", returned);

    let events = published.drain().await;
    assert_eq!(events.len(), answered.len(), "one event per change");
    for (kind, id, body) in &answered {
        let event = events
            .iter()
            .find(|e| e["detail-type"] == *kind && e["detail"]["subject"]["id"] == id.as_str())
            .unwrap_or_else(|| panic!("no {kind} for {id}"));
        assert_well_formed(event);
        assert_eq!(&event["detail"]["data"], body, "{kind}");
        if *kind == "ResourceCreated" {
            assert_eq!(event["detail"]["sequence"], 1, "{event}");
        }
    }
}

/// The ids of the events whose subject was deleted later (a vehicle retired, an account deleted,
/// a patron removed), but for the deletion's own: their outbox items were deleted with the entity
/// (`recording::forgetting`), after they were published from the stream.
fn forgotten(events: &[Value]) -> BTreeSet<String> {
    let subject = |e: &Value| {
        (
            str_of(&e["detail"]["subject"], "type").to_owned(),
            str_of(&e["detail"]["subject"], "id").to_owned(),
        )
    };
    let deletion = |e: &Value| {
        ["VehicleRetired", "AccountDeleted", "PatronRemoved"].contains(&str_of(e, "detail-type"))
    };
    let deleted: BTreeSet<(String, String)> =
        events.iter().filter(|e| deletion(e)).map(subject).collect();
    events
        .iter()
        .filter(|e| !deletion(e) && deleted.contains(&subject(e)))
        .map(|e| str_of(&e["detail"], "eventId").to_owned())
        .collect()
}
