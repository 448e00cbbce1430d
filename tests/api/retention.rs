//! Retention (docs/guide/retention.md): returned loans expire `LoanHistoryDays` after their return,
//! no read shows an expired item even before TTL deletes it, the engine's TTL sweep deletes it to
//! the table's stream as DynamoDB's TTL does, and the publisher archives what TTL deleted, and
//! nothing the API deleted, once per stream record.
//!
//! The runner's clock and the engine's are one settable clock ([`Retained::clock`]): the tests
//! move it 400 days in a statement and sweep when they choose, and never sleep.

use crate::fixtures::{self, ISBN};
use crate::harness::{Api, Item, Mode};
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::Value;
use singlet::serve::engine::{start_in_memory_with_clock, streams_client};
use singlet::serve::event_source::{EventSource, Faults};
use singlet::serve::local_bus::LocalBus;
use singlet::serve::retention::{DirArchive, sweep};
use singlet_functions::Ctx;
use singlet_functions::clock::Clock;
use singlet_functions::cursor::CursorKeys;
use singlet_functions::model::{self, must_never_expire};
use singlet_tools::fsck::{self, Options};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use time::{Duration, OffsetDateTime};

/// An API on an engine whose clock is the test's, its changes published and its TTL deletions
/// archived by the runner's event-source mapping.
struct Retained {
    api: Api,
    clock: Clock,
    engine: dynoxide::Database,
    source: EventSource,
    archive: PathBuf,
    /// The events file the mapping's local bus appends to.
    events: PathBuf,
}

impl Retained {
    async fn start(name: &str, faults: Faults) -> Self {
        let clock = Clock::reading(OffsetDateTime::now_utc());
        let (client, endpoint, engine) = start_in_memory_with_clock("singlet", &clock).await;
        let mut ctx = Ctx::new(client, "singlet", CursorKeys::random());
        ctx.clock = clock.clone();
        let mut api = Api::start_on(Mode::Direct, ctx).await;
        api.engine = endpoint;
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("retention-{name}-{:016x}", rand::random::<u64>()));
        let archive = dir.join("archive");
        let events = dir.join("events.jsonl");
        let published = api
            .ctx
            .clone()
            .with_bus(Arc::new(LocalBus::open(&events).unwrap()))
            .with_archive(Arc::new(DirArchive::open(&archive).unwrap()));
        let streams = streams_client(&api.ctx.db, &api.engine).await;
        let source = EventSource::start(published, streams, dir.join("failed.jsonl"), faults)
            .await
            .unwrap();
        Self {
            api,
            clock,
            engine,
            source,
            archive,
            events,
        }
    }

    /// The keys (`PK`, `SK`) of every item in the archive, once per object, and how many
    /// objects hold each.
    fn archived(&self) -> (BTreeSet<(String, String)>, usize) {
        let mut keys = BTreeSet::new();
        let mut objects = 0;
        for entry in std::fs::read_dir(&self.archive).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            objects += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 1, "one item per object: {}", path.display());
            let line: Value = serde_json::from_str(lines[0]).unwrap();
            let key = |name: &str| line["Item"][name]["S"].as_str().unwrap().to_owned();
            keys.insert((key("PK"), key("SK")));
        }
        (keys, objects)
    }

    /// Every page of a patron's history, following `nextCursor`: the items of all of them.
    async fn whole_history(&self, patron_id: &str) -> Vec<Value> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let path = match &cursor {
                Some(c) => format!("/patrons/{patron_id}/history?limit=100&cursor={c}"),
                None => format!("/patrons/{patron_id}/history?limit=100"),
            };
            let reply = self.api.get(path).await;
            assert_eq!(reply.status, 200, "{reply:?}");
            items.extend(reply.body["items"].as_array().unwrap().iter().cloned());
            match reply.body["nextCursor"].as_str() {
                Some(next) => cursor = Some(percent_encode(next)),
                None => return items,
            }
        }
    }
}

fn percent_encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Checks out `copy_id` to `patron_id` and returns it: the returned loan's id.
async fn lend_and_return(api: &Api, patron_id: &str, branch_id: &str, copy_id: &str) -> String {
    let lent = fixtures::checkout(api, patron_id, branch_id, copy_id).await;
    assert_eq!(lent.status, 201, "{lent:?}");
    let checkout_id = lent.body["checkoutId"].as_str().unwrap().to_owned();
    let returned = api
        .call(
            "POST",
            format!("/patrons/{patron_id}/checkouts/{checkout_id}/return"),
        )
        .send()
        .await;
    assert_eq!(returned.status, 200, "{returned:?}");
    assert!(
        returned.body.get("expiresAt").is_none(),
        "the expiry is the table's, not the contract's: {returned:?}"
    );
    checkout_id
}

fn returned_key(patron_id: &str, checkout_id: &str) -> (String, String) {
    (
        format!("PATRON#{patron_id}"),
        format!("RETURNED#{checkout_id}"),
    )
}

/// A library with one patron (card `card`, `tier`) who borrowed one copy at `central` and
/// returned it `count` times: the patron's id, and the keys of the returned loans.
async fn returned_loans(
    api: &Api,
    card: &str,
    tier: &str,
    count: usize,
) -> (String, BTreeSet<(String, String)>) {
    fixtures::library(api).await;
    let patron_id = fixtures::patron(api, "central", card, tier).await;
    let copy_id = fixtures::copy(api, "central").await;
    let mut returned = BTreeSet::new();
    for _ in 0..count {
        let checkout_id = lend_and_return(api, &patron_id, "central", &copy_id).await;
        returned.insert(returned_key(&patron_id, &checkout_id));
    }
    (patron_id, returned)
}

/// The done-when test: 1,000 loans returned, the clock moved past their history; before any
/// sweep no page of the history shows one (nor the one-loan route); one sweep deletes them, and
/// the archive then holds exactly those 1,000 items, and none of what the API deleted meanwhile
/// (the 1,000 active loans a return deletes, a removed patron and its card lock).
#[tokio::test]
async fn a_thousand_returned_loans_expire_unseen_and_are_archived_once_swept() {
    let mut retained = Retained::start("thousand", Faults::default()).await;
    let api = retained.api.clone();
    let (patron_id, returned) = returned_loans(&api, "CARD-0001", "premium", 1_000).await;
    // Deleted through the API: never archived.
    let leaving = fixtures::patron(&api, "east", "CARD-0002", "standard").await;
    assert_eq!(api.delete(format!("/patrons/{leaving}")).await.status, 204);
    retained.source.drain().await.unwrap();

    let history = retained.whole_history(&patron_id).await;
    assert_eq!(history.len(), 1_000, "kept for LoanHistoryDays");
    let (_, some_loan) = returned.iter().next().unwrap().clone();
    let some_loan = some_loan.strip_prefix("RETURNED#").unwrap().to_owned();
    let one = format!("/patrons/{patron_id}/checkouts/{some_loan}");
    assert_eq!(api.get(&one).await.status, 200);

    // The default 400 days: still shown (and kept) a day before they end, gone a day after.
    retained.clock.advance(Duration::days(399));
    assert_eq!(retained.whole_history(&patron_id).await.len(), 1_000);
    assert_eq!(api.get(&one).await.status, 200);
    // A sweep then takes what expires sooner (a day's idempotency records and outbox items),
    // and no loan.
    sweep(&retained.engine).await.unwrap();
    let kept = api
        .items_with_pk_prefix(&format!("PATRON#{patron_id}"))
        .await;
    assert_eq!(
        kept.len(),
        1_000,
        "no returned loan deleted before its 400 days"
    );
    retained.clock.advance(Duration::days(2));
    assert!(
        retained.whole_history(&patron_id).await.is_empty(),
        "expired loans are never shown, though TTL has not deleted them"
    );
    assert_eq!(api.get(&one).await.status, 404);
    let stored = api
        .items_with_pk_prefix(&format!("PATRON#{patron_id}"))
        .await;
    assert_eq!(stored.len(), 1_000, "nothing deleted before the sweep");
    let (before, _) = retained.archived();
    assert!(before.is_empty(), "nothing archived before the sweep");

    let deleted = sweep(&retained.engine).await.unwrap();
    assert!(deleted >= 1_000, "the sweep deleted {deleted}");
    retained.source.drain().await.unwrap();
    let (archived, objects) = retained.archived();
    assert_eq!(objects, 1_000);
    assert_eq!(archived, returned, "exactly the returned loans, by key");
    let left: Vec<Item> = api
        .items_with_pk_prefix(&format!("PATRON#{patron_id}"))
        .await
        .into_iter()
        .filter(|item| {
            item["SK"]
                .as_s()
                .is_ok_and(|sk| sk.starts_with("RETURNED#"))
        })
        .collect();
    assert!(left.is_empty(), "the sweep deleted every returned loan");
    assert_no_findings(&api.ctx).await;
}

/// The same TTL batch delivered twice (the mapping redelivers every batch) leaves one object
/// per deleted item: the object's key is the stream record's `eventID`.
#[tokio::test]
async fn a_ttl_batch_delivered_twice_leaves_no_duplicate() {
    let faults = Faults {
        duplicate_batch_every: 1,
        ..Faults::default()
    };
    let mut retained = Retained::start("twice", faults).await;
    let api = retained.api.clone();
    let (_, returned) = returned_loans(&api, "CARD-0003", "standard", 20).await;
    retained.source.drain().await.unwrap();
    retained.clock.advance(Duration::days(401));
    sweep(&retained.engine).await.unwrap();
    let report = retained.source.drain().await.unwrap();
    assert_eq!(report.failed_invocations, 0, "{report:?}");
    assert!(report.duplicated_batches > 0, "{report:?}");
    let (archived, objects) = retained.archived();
    assert_eq!(objects, 20, "one object per deleted item");
    assert_eq!(archived, returned);
}

async fn assert_no_findings(ctx: &Ctx) {
    let report = fsck::fsck(ctx, Options::default()).await.unwrap();
    assert!(
        report.findings.is_empty(),
        "fsck found {:#?}",
        report.findings
    );
}

/// The keys of every lock, and every entity that owns one, in the table.
async fn locks_and_owners(api: &Api) -> BTreeSet<(String, String)> {
    api.all_items()
        .await
        .iter()
        .filter(|item| {
            model::decode(item).is_ok_and(|entity| must_never_expire(entity.entity_type()))
        })
        .map(|item| {
            (
                item["PK"].as_s().unwrap().clone(),
                item["SK"].as_s().unwrap().clone(),
            )
        })
        .collect()
}

/// A seeded run of 2,000 random operations (patrons registered and removed, loans lent, renewed
/// and returned, with and without `Idempotency-Key`, replays, the clock moved by up to 500 days,
/// TTL sweeps): no lock, and no entity that owns one, ever disappears in a sweep, and `fsck`
/// finds nothing at the end.
#[tokio::test]
async fn random_operations_clock_moves_and_sweeps_never_break_a_lock() {
    let mut retained = Retained::start("random", Faults::default()).await;
    let api = retained.api.clone();
    fixtures::library(&api).await;
    let mut rng = StdRng::seed_from_u64(26);
    let mut patrons: Vec<String> = Vec::new();
    let mut copies: Vec<String> = Vec::new();
    // Active loans: (patron, checkout).
    let mut active: Vec<(String, String)> = Vec::new();
    let mut cards = 0;
    let mut sweeps = 0;
    for step in 0..2_000 {
        match rng.gen_range(0..100) {
            // A sweep now and then; a step whose operation cannot be made (no patron yet, no
            // loan to return) does nothing.
            0..=9 => {
                cards += 1;
                let reply = fixtures::register_patron(
                    &api,
                    "central",
                    &format!("CARD-{cards:05}"),
                    "standard",
                )
                .await;
                assert_eq!(reply.status, 201, "{reply:?}");
                patrons.push(reply.body["patronId"].as_str().unwrap().to_owned());
            }
            10..=14 if !patrons.is_empty() => {
                let patron = patrons.swap_remove(rng.gen_range(0..patrons.len()));
                let reply = api.delete(format!("/patrons/{patron}")).await;
                match reply.status {
                    204 => {}
                    // Still lending: keep it.
                    409 => patrons.push(patron),
                    other => panic!("removing a patron: {other} {reply:?}"),
                }
            }
            15..=24 => {
                let reply = fixtures::add_copy(&api, "central", ISBN).await;
                assert_eq!(reply.status, 201, "{reply:?}");
                copies.push(reply.body["copyId"].as_str().unwrap().to_owned());
            }
            25..=54 if !patrons.is_empty() && !copies.is_empty() => {
                let patron = &patrons[rng.gen_range(0..patrons.len())];
                let copy = &copies[rng.gen_range(0..copies.len())];
                let reply = fixtures::checkout(&api, patron, "central", copy).await;
                match reply.status {
                    201 => active.push((
                        patron.clone(),
                        reply.body["checkoutId"].as_str().unwrap().to_owned(),
                    )),
                    409 => {}
                    other => panic!("checkout: {other} {reply:?}"),
                }
            }
            55..=79 if !active.is_empty() => {
                let (patron, checkout) = active.swap_remove(rng.gen_range(0..active.len()));
                let path = format!("/patrons/{patron}/checkouts/{checkout}/return");
                let key = format!("return-{step}");
                let call = || {
                    api.call("POST", path.clone())
                        .header("idempotency-key", &key)
                };
                let reply = call().send().await;
                assert_eq!(reply.status, 200, "{reply:?}");
                if rng.gen_bool(0.3) {
                    // A retry after a lost answer: the first answer again, nothing written.
                    let again = call().send().await;
                    assert_eq!(again.status, 200, "{again:?}");
                    assert_eq!(again.header("idempotent-replayed"), Some("true"));
                }
            }
            80..=84 if !active.is_empty() => {
                let (patron, checkout) = &active[rng.gen_range(0..active.len())];
                let path = format!("/patrons/{patron}/checkouts/{checkout}/renew");
                let reply = api.call("POST", path).send().await;
                assert!(matches!(reply.status, 200 | 409), "{reply:?}");
            }
            85..=94 => {
                let days = rng.gen_range(0..=500);
                retained.clock.advance(Duration::days(days));
            }
            95..=99 => {
                let before = locks_and_owners(&api).await;
                sweep(&retained.engine).await.unwrap();
                sweeps += 1;
                let after = locks_and_owners(&api).await;
                assert_eq!(before, after, "a sweep deleted a lock or a lock's owner");
            }
            _ => {}
        }
    }
    assert!(sweeps > 0);
    retained.source.drain().await.unwrap();
    assert_no_findings(&api.ctx).await;
}

/// `fsck`'s `expiry` rule reports an `expiresAt` on a lock's owner (a patron), on its lock (the
/// card lock) and on an active loan, and its repair takes each off.
#[tokio::test]
async fn fsck_reports_an_expiry_on_a_lock_its_owner_or_an_active_loan() {
    let api = Api::start(Mode::Direct).await;
    fixtures::library(&api).await;
    let patron_id = fixtures::patron(&api, "central", "CARD-0009", "standard").await;
    let loan = fixtures::lend(&api, &patron_id, "central").await;
    let checkout_id = loan["checkoutId"].as_str().unwrap();
    let card_lock = api
        .all_items()
        .await
        .into_iter()
        .find(|item| item["_et"].as_s().is_ok_and(|et| et == "card-lock"))
        .expect("the patron's card lock");
    let keys = [
        ("BRANCH#central".to_owned(), format!("PATRON#{patron_id}")),
        (
            card_lock["PK"].as_s().unwrap().clone(),
            card_lock["SK"].as_s().unwrap().clone(),
        ),
        (
            format!("PATRON#{patron_id}"),
            format!("CHECKOUT#{checkout_id}"),
        ),
    ];
    for (pk, sk) in &keys {
        api.ctx
            .db
            .update_item()
            .table_name(&*api.ctx.table)
            .key("PK", aws_sdk_dynamodb::types::AttributeValue::S(pk.clone()))
            .key("SK", aws_sdk_dynamodb::types::AttributeValue::S(sk.clone()))
            .update_expression("SET expiresAt = :t")
            .condition_expression("attribute_exists(PK)")
            .expression_attribute_values(
                ":t",
                aws_sdk_dynamodb::types::AttributeValue::N("1".into()),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{pk} / {sk}: {e:?}"));
    }
    let report = fsck::fsck(&api.ctx, Options::default()).await.unwrap();
    let found: BTreeSet<(String, String)> = report
        .findings
        .iter()
        .filter(|f| format!("{:?}", f.rule) == "Expiry")
        .map(|f| (f.pk.clone(), f.sk.clone()))
        .collect();
    assert_eq!(
        found,
        keys.iter().cloned().collect(),
        "{:#?}",
        report.findings
    );
    let repair = Options {
        repair: true,
        ..Options::default()
    };
    fsck::fsck(&api.ctx, repair).await.unwrap();
    assert_no_findings(&api.ctx).await;
}

/// Loans returned before retention existed kept no end, so no clock ever takes them out of the
/// history. `migrate returned-loans-expire` writes the end their return would have written
/// (`LoanHistoryDays` after `returnedDate`): once run, they are hidden, swept and archived as
/// any other, a second run changes nothing, and `fsck` finds nothing.
#[tokio::test]
async fn loans_returned_before_retention_expire_once_migrated() {
    use singlet_tools::migrate::{self, Options as MigrateOptions};
    let mut retained = Retained::start("migrated", Faults::default()).await;
    let api = retained.api.clone();
    let (patron_id, returned) = returned_loans(&api, "CARD-0001", "premium", 3).await;
    // As the release before retention wrote them: no `expiresAt`, version 1.
    let patron_items = api
        .items_with_pk_prefix(&format!("PATRON#{patron_id}"))
        .await;
    let mut old_shape = Vec::new();
    for mut item in patron_items {
        let key = (
            item["PK"].as_s().unwrap().clone(),
            item["SK"].as_s().unwrap().clone(),
        );
        if returned.contains(&key) {
            let ends = item.remove("expiresAt").expect("a return writes an end");
            item.insert(
                "_v".into(),
                aws_sdk_dynamodb::types::AttributeValue::N("1".into()),
            );
            old_shape.push((key, ends));
            crate::harness::put_raw(&api.ctx, item).await;
        }
    }
    assert_eq!(old_shape.len(), 3);
    // Version 1 without an end is a loan the migration has yet to reach, not a finding.
    assert_no_findings(&api.ctx).await;
    retained.clock.advance(Duration::days(401));
    // The history's key condition already hides loans returned more than LoanHistoryDays ago;
    // but with no end, TTL never deletes them: they stay stored, and paid for, for ever.
    assert!(retained.whole_history(&patron_id).await.is_empty());
    sweep(&retained.engine).await.unwrap();
    let stored_returned = |items: Vec<Item>| {
        items
            .into_iter()
            .filter(|item| {
                item["SK"]
                    .as_s()
                    .is_ok_and(|sk| sk.starts_with("RETURNED#"))
            })
            .count()
    };
    assert_eq!(
        stored_returned(
            api.items_with_pk_prefix(&format!("PATRON#{patron_id}"))
                .await
        ),
        3,
        "with no end, the sweep leaves them"
    );

    let migration = singlet_functions::migrations::by_name("returned-loans-expire").unwrap();
    let dry = migrate::run(
        &api.ctx,
        migration,
        &MigrateOptions {
            dry_run: true,
            ..MigrateOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(dry.changed, 3, "{dry:?}");
    let report = migrate::run(&api.ctx, migration, &MigrateOptions::default())
        .await
        .unwrap();
    assert!(report.complete && report.conflicts.is_empty(), "{report:?}");
    assert_eq!(report.changed, 3, "{report:?}");
    for ((pk, sk), ends) in &old_shape {
        let item = api
            .items_with_pk_prefix(pk)
            .await
            .into_iter()
            .find(|item| item["SK"].as_s().unwrap() == sk)
            .unwrap();
        assert_eq!(&item["expiresAt"], ends, "the end its return wrote");
        assert_eq!(item["_v"].as_n().unwrap(), "2");
    }
    let again = migrate::run(&api.ctx, migration, &MigrateOptions::default())
        .await
        .unwrap();
    assert_eq!(again.changed, 0, "{again:?}");

    sweep(&retained.engine).await.unwrap();
    retained.source.drain().await.unwrap();
    assert_eq!(
        stored_returned(
            api.items_with_pk_prefix(&format!("PATRON#{patron_id}"))
                .await
        ),
        0
    );
    let (archived, _) = retained.archived();
    assert_eq!(archived, returned, "swept and archived as any other");
    assert_no_findings(&api.ctx).await;
}

/// A returned loan at the version whose writers all put `expiresAt` (2: the return, and
/// `returned-loans-expire` for loans returned before) has no end, as a hand edit or a restore
/// could leave one: its patron's history would keep it for ever. `fsck` reports it (`expiry`),
/// report only, since its end needs the deployment's `LoanHistoryDays`, which it is not given:
/// `--repair` leaves it as it is. The migration run again sets the end its return would have.
#[tokio::test]
async fn fsck_reports_a_returned_loan_at_version_2_without_its_end() {
    use singlet_tools::migrate::{self, Options as MigrateOptions};
    let api = Api::start(Mode::Direct).await;
    let (patron_id, returned) = returned_loans(&api, "CARD-0002", "standard", 2).await;
    let (broken, kept) = {
        let mut keys = returned.iter();
        (keys.next().unwrap().clone(), keys.next().unwrap().clone())
    };
    let item_at = |items: Vec<Item>, (pk, sk): &(String, String)| {
        items
            .into_iter()
            .find(|item| item["PK"].as_s().unwrap() == pk && item["SK"].as_s().unwrap() == sk)
            .expect("the returned loan")
    };
    let partition = format!("PATRON#{patron_id}");
    let patron_items = || api.items_with_pk_prefix(&partition);
    let mut item = item_at(patron_items().await, &broken);
    let end = item.remove("expiresAt").expect("a return writes an end");
    assert_eq!(item["_v"].as_n().unwrap(), "2");
    crate::harness::put_raw(&api.ctx, item.clone()).await;

    let report = fsck::fsck(&api.ctx, Options::default()).await.unwrap();
    let [finding] = report.findings.as_slice() else {
        panic!("one finding: {:#?}", report.findings);
    };
    assert_eq!(format!("{:?}", finding.rule), "Expiry");
    assert_eq!((finding.pk.clone(), finding.sk.clone()), broken);
    assert!(
        finding
            .detail
            .contains("returned loan at version 2 has no expiresAt")
            && finding.detail.contains("returned-loans-expire"),
        "{}",
        finding.detail
    );
    assert!(!finding.repairable, "{finding:?}");

    let repair = Options {
        repair: true,
        ..Options::default()
    };
    let repaired = fsck::fsck(&api.ctx, repair).await.unwrap();
    assert_eq!((repaired.findings.len(), repaired.repaired), (1, 0));
    assert_eq!(item_at(patron_items().await, &broken), item, "report only");

    let migration = singlet_functions::migrations::by_name("returned-loans-expire").unwrap();
    let report = migrate::run(&api.ctx, migration, &MigrateOptions::default())
        .await
        .unwrap();
    assert_eq!(report.changed, 1, "{report:?}");
    let mended = item_at(patron_items().await, &broken);
    assert_eq!(
        (&mended["expiresAt"], mended["_v"].as_n().unwrap().as_str()),
        (&end, "2")
    );
    assert!(item_at(patron_items().await, &kept).contains_key("expiresAt"));
    assert_no_findings(&api.ctx).await;
}

/// An outbox item expires a day after it was written (`expiresAt`; docs/API.md: "Outbox items
/// expire … once published"): its event left with the item's own stream record, which its
/// expiry cannot take back, so the sweep that deletes it publishes nothing more and archives
/// nothing, and a sweep before the day is out leaves it.
#[tokio::test]
async fn an_outbox_item_expires_a_day_after_its_event_left_and_its_expiry_is_no_event() {
    let mut retained = Retained::start("outbox", Faults::default()).await;
    let api = retained.api.clone();
    let reply = api
        .post(
            "/vehicles",
            serde_json::json!({"plate": "OUT 1", "chassis": "OUTC1", "depot": "north"}),
        )
        .await;
    assert_eq!(reply.status, 201, "{reply:?}");
    retained.source.drain().await.unwrap();
    let published = || {
        std::fs::read_to_string(&retained.events)
            .unwrap()
            .lines()
            .count()
    };
    assert_eq!(published(), 1);
    let outbox = api.all_items().await;
    let outbox: Vec<&Item> = outbox
        .iter()
        .filter(|item| item["PK"].as_s().unwrap().starts_with("OUTBOX#"))
        .collect();
    assert_eq!(outbox.len(), 1, "one outbox item for the one change");
    let expires: i64 = outbox[0]["expiresAt"].as_n().unwrap().parse().unwrap();
    let now = retained.clock.now().unix_timestamp();
    assert!(
        (now + 86_400 - 5..=now + 86_400).contains(&expires),
        "a day after it was written: {expires} against {now}"
    );

    retained.clock.advance(Duration::hours(23));
    sweep(&retained.engine).await.unwrap();
    let outbox_left = |items: Vec<Item>| {
        items
            .iter()
            .filter(|item| item["PK"].as_s().unwrap().starts_with("OUTBOX#"))
            .count()
    };
    assert_eq!(outbox_left(api.all_items().await), 1, "kept within the day");

    retained.clock.advance(Duration::hours(2));
    assert!(sweep(&retained.engine).await.unwrap() >= 1);
    assert_eq!(outbox_left(api.all_items().await), 0, "expired after it");
    retained.source.drain().await.unwrap();
    assert_eq!(published(), 1, "its expiry is no event");
    let (archived, objects) = retained.archived();
    assert!(archived.is_empty() && objects == 0, "{archived:?}");
    // The vehicle and its locks never expire.
    assert_eq!(
        api.get(format!(
            "/vehicles/{}",
            reply.body["vehicleId"].as_str().unwrap()
        ))
        .await
        .status,
        200
    );
}
