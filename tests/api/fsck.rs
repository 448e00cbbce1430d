//! `fsck` on a real engine: a table the API built (the seed data, random calls, calls running
//! while it checks) has no finding; each rule's breakage, made with raw SDK writes, is found
//! exactly, at the right key; `--repair` mends what it can and only that, and a second repair
//! writes nothing; a torn restore is flagged with exactly its missing halves; and the command's
//! exit codes and `--json`.

use crate::fixtures::{self, ISBN};
use crate::harness::{Api, Item, Mode, delete_raw, put_raw, s, str_attr, update_raw};
use crate::process;
use aws_sdk_dynamodb::types::AttributeValue;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use singlet_functions::Ctx;
use singlet_functions::cursor::CursorKeys;
use singlet_tools::fsck::{self, Options, Report};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

type Found = BTreeSet<(String, String, String)>;

async fn check(ctx: &Ctx) -> Report {
    fsck::fsck(ctx, Options::default()).await.unwrap()
}

async fn repair(ctx: &Ctx, dry_run: bool) -> Report {
    let options = Options {
        repair: true,
        dry_run,
        ..Options::default()
    };
    fsck::fsck(ctx, options).await.unwrap()
}

/// `(rule, pk, sk)` of every finding.
fn found(report: &Report) -> Found {
    report
        .findings
        .iter()
        .map(|f| (f.rule.name().to_owned(), f.pk.clone(), f.sk.clone()))
        .collect()
}

fn finding(rule: &str, pk: &str, sk: &str) -> (String, String, String) {
    (rule.to_owned(), pk.to_owned(), sk.to_owned())
}

/// Every item of the table, sorted by key: what a repair must leave unchanged.
async fn snapshot(api: &Api) -> Vec<String> {
    let mut items: Vec<String> = api
        .items()
        .await
        .iter()
        .map(|item| {
            let mut fields: Vec<String> = item.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
            fields.sort();
            fields.join(" ")
        })
        .collect();
    items.sort();
    items
}

// ---- No false positives ---------------------------------------------------------------------

/// The seed data, through the real handlers (as `cargo run -- seed` makes it).
async fn seed(api: &Api) {
    let front_door = singlet::serve::front_door::Gateway {
        ctx: api.ctx.clone(),
        authorizer: crate::harness::tokens().0.clone(),
        issuer: Some(crate::harness::tokens().1.clone()),
    };
    let console = singlet::console::api_client::ApiClient::new(front_door);
    let report = singlet::console::seed::seed(&console, "tester", &|_, _, _| {})
        .await
        .unwrap();
    assert!(report.failures.is_empty(), "{:?}", report.failures);
}

/// What the random calls have made so far, to pick their next target from.
#[derive(Default, Clone)]
struct World {
    vehicles: Vec<String>,
    accounts: Vec<String>,
    patrons: Vec<String>,
    copies: Vec<String>,
    loans: Vec<(String, String)>,
    resources: Vec<String>,
}

fn pick<T: Clone>(rng: &mut StdRng, from: &[T]) -> Option<T> {
    (!from.is_empty()).then(|| from[rng.gen_range(0..from.len())].clone())
}

/// One random call of every domain's writes, on a small pool of values so that calls collide
/// (taken plates, unavailable copies, stale versions) as they do in a busy table.
async fn random_call(api: &Api, rng: &mut StdRng, world: &mut World) {
    let n = rng.gen_range(0..40);
    match rng.gen_range(0..16) {
        0 => {
            let body =
                json!({"plate": format!("R-{n}"), "chassis": format!("RC-{n}"), "depot": "north"});
            let reply = api.post("/vehicles", body).await;
            if reply.status == 201 {
                world
                    .vehicles
                    .push(reply.body["vehicleId"].as_str().unwrap().to_owned());
            }
        }
        1 => {
            if let Some(id) = pick(rng, &world.vehicles) {
                api.put(
                    format!("/vehicles/{id}/plate"),
                    json!({"plate": format!("R-{n}")}),
                )
                .await;
            }
        }
        2 => {
            if let Some(id) = pick(rng, &world.vehicles) {
                api.delete(format!("/vehicles/{id}")).await;
            }
        }
        3 => {
            let body = json!({"email": format!("r{n}@example.com"), "username": format!("user_{}", rng.gen_range(0..40))});
            // Some sign up as themselves: their one account holds an owner lock.
            let caller = if n % 3 == 0 {
                own(api, &format!("subject-{}", n % 5))
            } else {
                api.clone()
            };
            let reply = caller.post("/accounts", body).await;
            if reply.status == 201 {
                world
                    .accounts
                    .push(reply.body["accountId"].as_str().unwrap().to_owned());
            }
        }
        4 => {
            if let Some(id) = pick(rng, &world.accounts) {
                api.put(
                    format!("/accounts/{id}/email"),
                    json!({"email": format!("r{n}@example.com")}),
                )
                .await;
            }
        }
        5 => {
            if let Some(id) = pick(rng, &world.accounts) {
                api.delete(format!("/accounts/{id}")).await;
            }
        }
        6 => {
            let reply =
                fixtures::register_patron(api, BRANCH, &format!("RC-{n}"), "standard").await;
            if reply.status == 201 {
                world
                    .patrons
                    .push(reply.body["patronId"].as_str().unwrap().to_owned());
            }
        }
        7 => {
            if let Some(id) = pick(rng, &world.patrons) {
                api.put(
                    format!("/patrons/{id}/card"),
                    json!({"cardNumber": format!("RC-{n}")}),
                )
                .await;
            }
        }
        8 => {
            if let Some(id) = pick(rng, &world.patrons) {
                let tier = if n % 2 == 0 { "premium" } else { "standard" };
                api.put(
                    format!("/patrons/{id}/tier"),
                    json!({"membershipTier": tier}),
                )
                .await;
            }
        }
        9 => {
            if let Some(id) = pick(rng, &world.patrons) {
                api.delete(format!("/patrons/{id}")).await;
            }
        }
        10 => {
            let reply = fixtures::add_copy(api, BRANCH, ISBN).await;
            if reply.status == 201 {
                world
                    .copies
                    .push(reply.body["copyId"].as_str().unwrap().to_owned());
            }
        }
        11 | 12 => {
            if let (Some(patron), Some(copy)) =
                (pick(rng, &world.patrons), pick(rng, &world.copies))
            {
                let reply = fixtures::checkout(api, &patron, BRANCH, &copy).await;
                if reply.status == 201 {
                    world.loans.push((
                        patron,
                        reply.body["checkoutId"].as_str().unwrap().to_owned(),
                    ));
                }
            }
        }
        13 => {
            if let Some((patron, loan)) = pick(rng, &world.loans) {
                api.call("POST", format!("/patrons/{patron}/checkouts/{loan}/return"))
                    .send()
                    .await;
            }
        }
        14 => {
            if let Some((patron, loan)) = pick(rng, &world.loans) {
                api.call("POST", format!("/patrons/{patron}/checkouts/{loan}/renew"))
                    .send()
                    .await;
            }
        }
        _ => {
            let id = format!("res-{}", n % 8);
            let reply = api
                .post("/resources", json!({"resourceId": id, "status": "draft"}))
                .await;
            if reply.status == 201 {
                world.resources.push(id.clone());
            }
            let current = api.get(format!("/resources/{id}")).await;
            if let Some(version) = current.body["version"].as_u64() {
                api.call("PATCH", format!("/resources/{id}"))
                    .json(json!({"status": format!("s{n}"), "action": "edit"}))
                    .header("if-match", &format!("\"{version}\""))
                    .send()
                    .await;
            }
        }
    }
}

/// A library to call on: the branch `fsck-lib` (the seed has its own), the book (which the seed
/// may have made), some patrons and copies.
async fn library(api: &Api, world: &mut World) {
    fixtures::branch(api, BRANCH).await;
    let book = fixtures::create_book(api, ISBN).await;
    assert!([201, 409].contains(&book.status), "{book:?}");
    for i in 0..6 {
        world
            .patrons
            .push(fixtures::patron(api, BRANCH, &format!("LIB-{i}"), "premium").await);
    }
    for _ in 0..10 {
        world.copies.push(fixtures::copy(api, BRANCH).await);
    }
}

/// The branch of the random calls.
const BRANCH: &str = "fsck-lib";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_built_through_the_api_has_no_finding() {
    let api = Api::start(Mode::Direct).await;
    seed(&api).await;
    let seeded = check(&api.ctx).await;
    assert!(seeded.scanned > 150, "{}", seeded.scanned);
    assert_eq!(found(&seeded), Found::new(), "{:?}", seeded.findings);

    let mut world = World::default();
    library(&api, &mut world).await;
    let mut rng = StdRng::seed_from_u64(23);
    for _ in 0..600 {
        random_call(&api, &mut rng, &mut world).await;
    }
    // The marker moves every loan due by now (the seed made some due in the past).
    singlet::invoke::invoke(
        &api.ctx,
        "mark-overdue",
        &json!({"time": singlet_functions::clock::iso(singlet_functions::clock::now())})
            .to_string(),
    )
    .await
    .unwrap();
    // Some of the accounts are their subjects' one account, with an owner lock.
    assert!(!api.items_with_pk_prefix("UNIQ#OWNER#").await.is_empty());
    let report = check(&api.ctx).await;
    assert_eq!(found(&report), Found::new(), "{:?}", report.findings);
    assert_eq!(report.repaired, 0);
}

/// How many clients call the API while `fsck` reads the table (the load).
const CLIENTS: u64 = 32;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_running_during_the_check_raise_nothing() {
    if crate::harness::skip_on_external_engine(crate::harness::ONE_REQUEST_AT_A_TIME) {
        return;
    }
    let api = Api::start(Mode::Direct).await;
    let mut world = World::default();
    library(&api, &mut world).await;
    let mut rng = StdRng::seed_from_u64(7);
    for _ in 0..200 {
        random_call(&api, &mut rng, &mut world).await;
    }
    let world = Arc::new(tokio::sync::Mutex::new(world));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (api, world, stop) = (api.clone(), world.clone(), stop.clone());
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(100 + client);
                let mut calls = 0;
                while !stop.load(Ordering::Relaxed) {
                    // Each client works on a copy of what exists, merged back after.
                    let mut mine = world.lock().await.clone();
                    random_call(&api, &mut rng, &mut mine).await;
                    merge(&mut *world.lock().await, mine);
                    calls += 1;
                }
                calls
            })
        })
        .collect();
    for _ in 0..5 {
        let report = check(&api.ctx).await;
        assert_eq!(found(&report), Found::new(), "{:?}", report.findings);
    }
    stop.store(true, Ordering::Relaxed);
    let mut calls = 0;
    for client in clients {
        calls += client.await.unwrap();
    }
    assert!(calls > 50, "only {calls} calls ran during the checks");
    let report = check(&api.ctx).await;
    assert_eq!(found(&report), Found::new(), "{:?}", report.findings);
}

fn merge(into: &mut World, from: World) {
    into.vehicles.extend(from.vehicles);
    into.accounts.extend(from.accounts);
    into.patrons.extend(from.patrons);
    into.copies.extend(from.copies);
    into.loans.extend(from.loans);
    into.resources.extend(from.resources);
    for list in [
        &mut into.vehicles,
        &mut into.accounts,
        &mut into.patrons,
        &mut into.copies,
        &mut into.resources,
    ] {
        list.sort();
        list.dedup();
    }
    into.loans.sort();
    into.loans.dedup();
}

// ---- Writes racing the confirmation ------------------------------------------------------------

/// Lends `copy` to `patron` at `central`: the loan's id.
async fn lend_copy(api: &Api, patron: &str, copy: &str) -> String {
    let reply = fixtures::checkout(api, patron, "central", copy).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    reply.body["checkoutId"].as_str().unwrap().to_owned()
}

/// The table as a scan that read the loan's partition before `loan` was made sees it.
async fn scanned_without_loan(api: &Api, loan: &str) -> Vec<Item> {
    api.items()
        .await
        .into_iter()
        .filter(|item| s(item, "SK") != format!("CHECKOUT#{loan}"))
        .collect()
}

async fn give_back(api: &Api, patron: &str, loan: &str) {
    let reply = api
        .call("POST", format!("/patrons/{patron}/checkouts/{loan}/return"))
        .send()
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
}

/// A copy is returned and lent again while `fsck` runs, at the two moments where a confirmation
/// could mistake the copy's new loan for none: the check reports nothing. A copy broken by hand
/// at the same time is still reported, and only it; so is a card lock of no patron, and not the
/// card lock of a patron the scan missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_lent_again_while_a_finding_is_confirmed_raises_nothing() {
    let api = Api::start(Mode::Direct).await;
    fixtures::library(&api).await;
    let first = fixtures::patron(&api, "central", "RACE-1", "standard").await;
    let second = fixtures::patron(&api, "central", "RACE-2", "standard").await;

    // The scan read the loan before its return and the copy after it (`available` under an
    // open loan); before the confirmation reads them, the copy is lent to another patron, so the
    // re-read shows it `checked_out` under no loan it knows of.
    let copy = fixtures::copy(&api, "central").await;
    let loan = lend_copy(&api, &first, &copy).await;
    let open = api
        .item(&format!("PATRON#{first}"), &format!("CHECKOUT#{loan}"))
        .await
        .unwrap();
    give_back(&api, &first, &loan).await;
    let mut scanned = api.items().await;
    scanned.push(open);
    lend_copy(&api, &second, &copy).await;
    let report = fsck::judge_items(&api.ctx, scanned, Options::default())
        .await
        .unwrap();
    assert_eq!(found(&report), Found::new(), "{:?}", report.findings);

    // The scan read the copy after a checkout and the loan's partition before it (`checked_out`
    // under no loan); the scan that looks for the copy's loans finds it, and then, before the
    // snapshot, that loan is returned and the copy lent again.
    let copy = fixtures::copy(&api, "central").await;
    let loan = lend_copy(&api, &first, &copy).await;
    let scanned = scanned_without_loan(&api, &loan).await;
    let report = fsck::judge_items_racing(&api.ctx, scanned, Options::default(), async {
        give_back(&api, &first, &loan).await;
        lend_copy(&api, &second, &copy).await;
    })
    .await
    .unwrap();
    assert_eq!(found(&report), Found::new(), "{:?}", report.findings);

    // A copy set `checked_out` by hand, with no loan, while the same race runs on another copy.
    let broken = fixtures::copy(&api, "central").await;
    update_raw(
        &api.ctx,
        "BRANCH#central",
        &format!("COPY#{broken}"),
        "SET #s = :s",
        &[(":s", str_attr("checked_out"))],
    )
    .await;
    // What every check below finds: the broken copy alone.
    let broken_copy = Found::from([finding(
        "copy-status",
        "BRANCH#central",
        &format!("COPY#{broken}"),
    )]);
    let copy = fixtures::copy(&api, "central").await;
    let third = fixtures::patron(&api, "central", "RACE-3", "standard").await;
    let loan = lend_copy(&api, &third, &copy).await;
    let scanned = scanned_without_loan(&api, &loan).await;
    let report = fsck::judge_items_racing(&api.ctx, scanned, Options::default(), async {
        give_back(&api, &third, &loan).await;
        lend_copy(&api, &first, &copy).await;
    })
    .await
    .unwrap();
    assert_eq!(found(&report), broken_copy, "{:?}", report.findings);
    assert_eq!(found(&check(&api.ctx).await), broken_copy);

    // A patron registered while the scan ran: it read the card's lock, and the branch before the
    // patron was in it. The lock's holder is looked for by a scan, not by an index that may
    // not show it yet: nothing. A card lock whose patron never existed is still an orphan.
    let late = fixtures::patron(&api, "central", "RACE-4", "standard").await;
    let scanned: Vec<Item> = api
        .items()
        .await
        .into_iter()
        .filter(|item| s(item, "SK") != format!("PATRON#{late}"))
        .collect();
    let report = fsck::judge_items(&api.ctx, scanned, Options::default())
        .await
        .unwrap();
    assert_eq!(found(&report), broken_copy, "{:?}", report.findings);
    let late_card = api
        .items_with_pk_prefix("CARD#")
        .await
        .into_iter()
        .find(|item| s(item, "patronId") == late)
        .unwrap();
    let card = s(&late_card, "cardNumber").to_owned();
    let mut ghost_card = late_card.clone();
    let ghost_key = s(&late_card, "PK").replace(&card, "ghost-9");
    ghost_card.insert("PK".into(), str_attr(&ghost_key));
    ghost_card.insert("SK".into(), str_attr(&ghost_key));
    ghost_card.insert("cardNumber".into(), str_attr("ghost-9"));
    ghost_card.insert("patronId".into(), str_attr("nobody"));
    put_raw(&api.ctx, ghost_card).await;
    assert_eq!(
        found(&check(&api.ctx).await),
        Found::from([
            finding("copy-status", "BRANCH#central", &format!("COPY#{broken}")),
            finding("lock-orphan", &ghost_key, &ghost_key),
        ])
    );
}

// ---- Detection and repair -------------------------------------------------------------------

async fn vehicle(api: &Api, plate: &str, chassis: &str) -> String {
    let body = json!({"plate": plate, "chassis": chassis, "depot": "north"});
    let reply = api.post("/vehicles", body).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    reply.body["vehicleId"].as_str().unwrap().to_owned()
}

async fn account(api: &Api, email: &str, username: &str) -> String {
    let reply = api
        .post("/accounts", json!({"email": email, "username": username}))
        .await;
    assert_eq!(reply.status, 201, "{reply:?}");
    reply.body["accountId"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_breakage_is_found_at_its_key_and_the_repairable_ones_are_repaired() {
    let api = Api::start(Mode::Direct).await;
    let ctx = &api.ctx;
    let v1 = vehicle(&api, "V1", "VC1").await;
    let v2 = vehicle(&api, "V2", "VC2").await;
    let v3 = vehicle(&api, "V3", "VC3").await;
    let _v4 = vehicle(&api, "V4", "VC4").await;
    let v5 = vehicle(&api, "V5", "VC5").await;
    let a1 = account(&api, "one@example.com", "one").await;
    let _a2 = account(&api, "two@example.com", "two").await;
    fixtures::library(&api).await;
    let p1 = fixtures::patron(&api, "central", "CARD-1", "standard").await;
    let p2 = fixtures::patron(&api, "central", "CARD-2", "standard").await;
    let c1 = fixtures::copy(&api, "central").await;
    let c2 = fixtures::copy(&api, "central").await;
    assert_eq!(
        fixtures::checkout(&api, &p1, "central", &c1).await.status,
        201
    );
    let l2 = fixtures::lend(&api, &p2, "central").await["checkoutId"]
        .as_str()
        .unwrap()
        .to_owned();
    // A returned loan: the judge checks it as it reads it and does not hold it (`Table::take`).
    let p3 = fixtures::patron(&api, "central", "CARD-3", "standard").await;
    let l3 = fixtures::lend(&api, &p3, "central").await["checkoutId"]
        .as_str()
        .unwrap()
        .to_owned();
    let returned = api
        .post(format!("/patrons/{p3}/checkouts/{l3}/return"), json!({}))
        .await;
    assert_eq!(returned.status, 200, "{returned:?}");
    assert_eq!(
        api.post("/resources", json!({"resourceId": "r1", "status": "s0"}))
            .await
            .status,
        201
    );
    for version in 1..=6 {
        let reply = api
            .call("PATCH", "/resources/r1")
            .json(json!({"status": format!("s{version}"), "action": "edit"}))
            .header("if-match", &format!("\"{version}\""))
            .send()
            .await;
        assert_eq!(reply.status, 200, "{reply:?}");
    }
    let idempotent = api
        .call("POST", "/vehicles")
        .json(json!({"plate": "V7", "chassis": "VC7", "depot": "north"}))
        .header("idempotency-key", "fsck-key-1")
        .send()
        .await;
    assert_eq!(idempotent.status, 201, "{idempotent:?}");
    let record = api.items_with_pk_prefix("IDEMPOTENCY#").await;
    let record = (
        s(&record[0], "PK").to_owned(),
        s(&record[0], "SK").to_owned(),
    );
    // Two subjects' one accounts (no `accounts:admin`), each holding its owner lock.
    let a3 = account(&own(&api, "owner-3"), "three@example.com", "three").await;
    let a4 = account(&own(&api, "owner-4"), "four@example.com", "four").await;
    let a3_lock = owner_lock_of(&api, &a3).await;
    let a4_lock = owner_lock_of(&api, &a4).await;
    // Counts of a book's copies on the shelf, at branches of their own.
    fixtures::branch(&api, "west").await;
    for branch in ["east", "east", "west"] {
        fixtures::copy(&api, branch).await;
    }
    let count_pk = format!("BOOK#{ISBN}");
    assert_eq!(found(&check(ctx).await), Found::new());

    let copy_key = |copy: &str| ("BRANCH#central".to_owned(), format!("COPY#{copy}"));
    let (c1_pk, c1_sk) = copy_key(&c1);
    let (c2_pk, c2_sk) = copy_key(&c2);
    // Delete a lock.
    delete_raw(ctx, "PLATE#v1", "PLATE#v1").await;
    // Orphan a lock: one naming no vehicle, and two whose account is gone.
    put_ghost_chassis_lock(ctx).await;
    delete_raw(ctx, &format!("ACCT#{a1}"), "PROFILE").await;
    // Swap a lock's owner: V2's plate lock names V3.
    update_raw(
        ctx,
        "PLATE#v2",
        "PLATE#v2",
        "SET vehicleId = :v",
        &[(":v", str_attr(&v3))],
    )
    .await;
    // Two real claimants: a vehicle written by hand with V5's plate (and its own chassis lock).
    put_raw(
        ctx,
        Item::from([
            ("PK".into(), str_attr("VEHICLE#twin")),
            ("SK".into(), str_attr("VEHICLE#twin")),
            ("vehicleId".into(), str_attr("twin")),
            ("plate".into(), str_attr("v5")),
            ("chassis".into(), str_attr("twinc")),
            ("depot".into(), str_attr("north")),
            ("addedAt".into(), AttributeValue::N("1".into())),
            // Of the current version: a version-1 vehicle is two behind, undecodable.
            ("_et".into(), str_attr("vehicle")),
            ("_v".into(), AttributeValue::N("3".into())),
        ]),
    )
    .await;
    put_raw(
        ctx,
        Item::from([
            ("PK".into(), str_attr("CHASSIS#twinc")),
            ("SK".into(), str_attr("CHASSIS#twinc")),
            ("chassis".into(), str_attr("twinc")),
            ("vehicleId".into(), str_attr("twin")),
        ]),
    )
    .await;
    // Bump a patron's loan count.
    update_raw(
        ctx,
        "BRANCH#central",
        &format!("PATRON#{p2}"),
        "SET activeLoans = activeLoans + :one",
        &[(":one", AttributeValue::N("1".into()))],
    )
    .await;
    // A copy `available` under its open loan; another `checked_out` with no loan.
    update_raw(
        ctx,
        &c1_pk,
        &c1_sk,
        "SET #s = :s",
        &[(":s", str_attr("available"))],
    )
    .await;
    update_raw(
        ctx,
        &c2_pk,
        &c2_sk,
        "SET #s = :s",
        &[(":s", str_attr("checked_out"))],
    )
    .await;
    // Strip an open loan's index keys.
    update_raw(
        ctx,
        &format!("PATRON#{p2}"),
        &format!("CHECKOUT#{l2}"),
        "REMOVE GSI1PK, GSI1SK",
        &[],
    )
    .await;
    // A returned loan in the overdue index.
    update_raw(
        ctx,
        &format!("PATRON#{p3}"),
        &format!("RETURNED#{l3}"),
        "SET GSI3PK = :pk, GSI3SK = :sk",
        &[
            (":pk", str_attr("OVERDUE#central")),
            (":sk", str_attr(&format!("2026-01-01T00:00:00Z#{l3}"))),
        ],
    )
    .await;
    // Drop an audit event.
    delete_raw(ctx, "RESOURCE#r1", "EVENT#000000000005").await;
    // `expiresAt` on a lock; none on an idempotency record.
    update_raw(
        ctx,
        "CHASSIS#vc4",
        "CHASSIS#vc4",
        "SET expiresAt = :t",
        &[(":t", AttributeValue::N("1".into()))],
    )
    .await;
    update_raw(ctx, &record.0, &record.1, "REMOVE expiresAt", &[]).await;
    // None on an outbox item either; `expiresAt` on an owner lock (TTL would free its subject to
    // open a second account).
    let outbox = ("OUTBOX#vehicle#v1".to_owned(), "EVENT#e1".to_owned());
    put_raw(
        ctx,
        Item::from([
            ("PK".into(), str_attr(&outbox.0)),
            ("SK".into(), str_attr(&outbox.1)),
            ("source".into(), str_attr("singlet.fleet")),
            ("detailType".into(), str_attr("VehicleRetired")),
            ("detail".into(), str_attr("{}")),
            ("_et".into(), str_attr("outbox")),
            ("_v".into(), AttributeValue::N("1".into())),
        ]),
    )
    .await;
    update_raw(
        ctx,
        &a4_lock,
        "LOCK",
        "SET expiresAt = :t",
        &[(":t", AttributeValue::N("1".into()))],
    )
    .await;
    // An item no entity decodes.
    put_raw(
        ctx,
        Item::from([
            ("PK".into(), str_attr("JUNK#1")),
            ("SK".into(), str_attr("JUNK#1")),
        ]),
    )
    .await;
    // Delete an owner lock; orphan one (naming no account) and another (naming another
    // subject's account).
    delete_raw(ctx, &a3_lock, "LOCK").await;
    let ghost_lock = format!("UNIQ#OWNER#{}", "0".repeat(32));
    let stolen_lock = format!("UNIQ#OWNER#{}", "f".repeat(32));
    for (pk, account_id) in [
        (&ghost_lock, "no-such-account"),
        (&stolen_lock, a4.as_str()),
    ] {
        put_raw(
            ctx,
            Item::from([
                ("PK".into(), str_attr(pk)),
                ("SK".into(), str_attr("LOCK")),
                ("accountId".into(), str_attr(account_id)),
            ]),
        )
        .await;
    }
    // Two real claimants: an account written by hand for the owner of A4 (with its own email
    // and username locks), while A4 holds that owner's lock.
    put_raw(
        ctx,
        Item::from([
            ("PK".into(), str_attr("ACCT#twin-acct")),
            ("SK".into(), str_attr("PROFILE")),
            ("accountId".into(), str_attr("twin-acct")),
            ("email".into(), str_attr("twin@example.com")),
            ("username".into(), str_attr("twin")),
            ("createdAt".into(), AttributeValue::N("1".into())),
            ("owner".into(), str_attr("owner-4")),
            ("ownersOne".into(), AttributeValue::Bool(true)),
        ]),
    )
    .await;
    for (pk, value) in [
        (email_lock_pk("twin@example.com"), "twin@example.com"),
        ("UNIQ#HANDLE#twin".to_owned(), "twin"),
    ] {
        put_raw(
            ctx,
            Item::from([
                ("PK".into(), str_attr(&pk)),
                ("SK".into(), str_attr("LOCK")),
                ("accountId".into(), str_attr("twin-acct")),
                ("value".into(), str_attr(value)),
            ]),
        )
        .await;
    }
    // Bump a branch's count of available copies; delete another's.
    update_raw(
        ctx,
        &count_pk,
        "AVAILABLE#east",
        "SET availableCopies = availableCopies + :one",
        &[(":one", AttributeValue::N("1".into()))],
    )
    .await;
    delete_raw(ctx, &count_pk, "AVAILABLE#west").await;

    let repairable = Found::from([
        finding(
            "lock-missing",
            &format!("VEHICLE#{v1}"),
            &format!("VEHICLE#{v1}"),
        ),
        finding("lock-orphan", "CHASSIS#ghost", "CHASSIS#ghost"),
        finding("lock-orphan", &email_lock_pk("one@example.com"), "LOCK"),
        finding("lock-orphan", "UNIQ#HANDLE#one", "LOCK"),
        finding("lock-orphan", "PLATE#v2", "PLATE#v2"),
        finding(
            "lock-missing",
            &format!("VEHICLE#{v2}"),
            &format!("VEHICLE#{v2}"),
        ),
        finding("active-loans", "BRANCH#central", &format!("PATRON#{p2}")),
        finding("copy-status", &c1_pk, &c1_sk),
        finding("copy-status", &c2_pk, &c2_sk),
        finding(
            "loan-index",
            &format!("PATRON#{p2}"),
            &format!("CHECKOUT#{l2}"),
        ),
        finding(
            "loan-index",
            &format!("PATRON#{p3}"),
            &format!("RETURNED#{l3}"),
        ),
        finding("expiry", "CHASSIS#vc4", "CHASSIS#vc4"),
        finding("expiry", &record.0, &record.1),
        finding("expiry", &outbox.0, &outbox.1),
        finding("expiry", &a4_lock, "LOCK"),
        finding("lock-missing", &format!("ACCT#{a3}"), "PROFILE"),
        finding("lock-orphan", &ghost_lock, "LOCK"),
        finding("lock-orphan", &stolen_lock, "LOCK"),
        finding("copy-status", &count_pk, "AVAILABLE#east"),
        finding("copy-status", &count_pk, "AVAILABLE#west"),
    ]);
    let unrepairable = Found::from([
        finding("lock-missing", "VEHICLE#twin", "VEHICLE#twin"),
        finding("lock-missing", "ACCT#twin-acct", "PROFILE"),
        finding("audit-history", "RESOURCE#r1", "CURRENT"),
        finding("undecodable", "JUNK#1", "JUNK#1"),
    ]);
    let report = check(ctx).await;
    assert_eq!(
        found(&report),
        repairable.union(&unrepairable).cloned().collect::<Found>(),
        "{:#?}",
        report.findings
    );
    for f in &report.findings {
        let key = finding(f.rule.name(), &f.pk, &f.sk);
        assert_eq!(f.repairable, repairable.contains(&key), "{f:?}");
        assert!(f.repair.is_none() && f.repaired.is_none(), "{f:?}");
    }
    let missing = |detail: &str| report.findings.iter().any(|f| f.detail == detail);
    assert!(missing("sequence 5 is missing"), "{:#?}", report.findings);
    assert!(
        missing("names accountId no-such-account, which does not exist"),
        "{:#?}",
        report.findings
    );
    assert!(
        missing(&format!("names accountId {a4}, which another subject owns")),
        "{:#?}",
        report.findings
    );
    assert!(
        missing("availableCopies is 3, but the branch has 2 copies of the book, 2 available"),
        "{:#?}",
        report.findings
    );

    // A dry run says what it would write, and writes nothing.
    let before = snapshot(&api).await;
    let dry = repair(ctx, true).await;
    assert_eq!(found(&dry), found(&report));
    assert_eq!(dry.repaired, 0);
    for f in &dry.findings {
        assert_eq!(f.repair.is_some(), f.repairable, "{f:?}");
        assert_eq!(f.repaired, None, "{f:?}");
    }
    assert_eq!(snapshot(&api).await, before);

    let repaired = repair(ctx, false).await;
    assert_eq!(found(&repaired), found(&report));
    assert_eq!(
        repaired.repaired as usize,
        repairable.len(),
        "{:#?}",
        repaired.findings
    );
    assert_eq!(repaired.remaining(), unrepairable.len());

    // What the repairs wrote.
    let lock = api.item("PLATE#v1", "PLATE#v1").await.unwrap();
    assert_eq!(s(&lock, "vehicleId"), v1);
    // As the API writes a lock: through the model, with its entity type and version.
    assert_eq!(s(&lock, "_et"), "plate-lock");
    assert_eq!(lock["_v"].as_n().unwrap(), "1");
    assert_eq!(
        s(
            &api.item("PLATE#v2", "PLATE#v2").await.unwrap(),
            "vehicleId"
        ),
        v2
    );
    assert!(api.item("CHASSIS#ghost", "CHASSIS#ghost").await.is_none());
    assert!(
        api.item(&email_lock_pk("one@example.com"), "LOCK")
            .await
            .is_none()
    );
    assert!(api.item("UNIQ#HANDLE#one", "LOCK").await.is_none());
    // The real claimant keeps its lock.
    assert_eq!(
        s(
            &api.item("PLATE#v5", "PLATE#v5").await.unwrap(),
            "vehicleId"
        ),
        v5
    );
    let patron = api
        .item("BRANCH#central", &format!("PATRON#{p2}"))
        .await
        .unwrap();
    assert_eq!(crate::harness::n(&patron, "activeLoans"), 1);
    let copy = api.item(&c1_pk, &c1_sk).await.unwrap();
    assert_eq!(s(&copy, "status"), "checked_out");
    assert!(s(&copy, "GSI2SK").starts_with("checked_out#"), "{copy:?}");
    let copy = api.item(&c2_pk, &c2_sk).await.unwrap();
    assert_eq!(s(&copy, "status"), "available");
    assert!(s(&copy, "GSI2SK").starts_with("available#"), "{copy:?}");
    let loan = api
        .item(&format!("PATRON#{p2}"), &format!("CHECKOUT#{l2}"))
        .await
        .unwrap();
    assert!(s(&loan, "GSI1PK").starts_with("OPEN#"), "{loan:?}");
    assert!(
        !api.item("CHASSIS#vc4", "CHASSIS#vc4")
            .await
            .unwrap()
            .contains_key("expiresAt")
    );
    assert!(
        api.item(&record.0, &record.1)
            .await
            .unwrap()
            .contains_key("expiresAt")
    );
    let owner_lock = api.item(&a3_lock, "LOCK").await.unwrap();
    assert_eq!(s(&owner_lock, "accountId"), a3);
    assert_eq!(s(&owner_lock, "_et"), "owner-lock");
    assert!(api.item(&ghost_lock, "LOCK").await.is_none());
    assert!(api.item(&stolen_lock, "LOCK").await.is_none());
    // The real claimant keeps its owner's lock.
    let owner_lock = api.item(&a4_lock, "LOCK").await.unwrap();
    assert_eq!(s(&owner_lock, "accountId"), a4);
    assert!(!owner_lock.contains_key("expiresAt"), "{owner_lock:?}");
    let outbox_item = api.item(&outbox.0, &outbox.1).await.unwrap();
    assert!(outbox_item.contains_key("expiresAt"), "{outbox_item:?}");
    for (branch, shelved) in [("east", 2), ("west", 1)] {
        let count = api
            .item(&count_pk, &format!("AVAILABLE#{branch}"))
            .await
            .unwrap();
        assert_eq!(crate::harness::n(&count, "availableCopies"), shelved);
        let read = api.get(format!("/books/{ISBN}/availability")).await;
        assert!(
            read.body["branches"]
                .as_array()
                .unwrap()
                .contains(&json!({"branchId": branch, "availableCopies": shelved})),
            "{read:?}"
        );
    }

    // A second run finds only what a person must decide; a third repair writes nothing.
    let second = check(ctx).await;
    assert_eq!(found(&second), unrepairable, "{:#?}", second.findings);
    let before = snapshot(&api).await;
    let third = repair(ctx, false).await;
    assert_eq!(third.repaired, 0);
    assert_eq!(found(&third), unrepairable);
    assert_eq!(snapshot(&api).await, before);
}

/// Two `--repair` runs at once each write a repair only over what they judged: a loan's index
/// keys rewritten by one are not rewritten (and counted) again by the other.
#[tokio::test]
async fn two_repairs_at_once_write_each_repair_once() {
    let api = Api::start(Mode::Direct).await;
    let ctx = &api.ctx;
    fixtures::library(&api).await;
    let patron = fixtures::patron(&api, "central", "CARD-1", "standard").await;
    let loan = fixtures::lend(&api, &patron, "central").await["checkoutId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (pk, sk) = (format!("PATRON#{patron}"), format!("CHECKOUT#{loan}"));
    update_raw(ctx, &pk, &sk, "REMOVE GSI1PK, GSI1SK", &[]).await;
    let (first, second) = tokio::join!(repair(ctx, false), repair(ctx, false));
    assert_eq!(
        first.repaired + second.repaired,
        1,
        "{:#?} {:#?}",
        first.findings,
        second.findings
    );
    let repaired = api.item(&pk, &sk).await.unwrap();
    assert!(s(&repaired, "GSI1PK").starts_with("OPEN#"), "{repaired:?}");
    assert_eq!(check(ctx).await.findings.len(), 0);
}

/// An orphan lock keyed under the rule before `plates-compact` (`PLATE#ka 19 xtr`, naming a
/// vehicle that does not exist) is released where it is, not at the key its value makes now
/// (`PLATE#ka19xtr`, where nothing is): the repair used to miss it for good, and the plate stayed
/// taken. Afterwards the value registers.
#[tokio::test]
async fn an_orphan_lock_an_earlier_rule_keyed_is_released_where_it_is() {
    let api = Api::start(Mode::Direct).await;
    let ctx = &api.ctx;
    for (pk, field, value) in [
        ("PLATE#ka 19 xtr", "plate", "ka 19 xtr"),
        ("CHASSIS#wvw-1 a", "chassis", "wvw-1 a"),
    ] {
        put_raw(
            ctx,
            Item::from([
                ("PK".into(), str_attr(pk)),
                ("SK".into(), str_attr(pk)),
                (field.into(), str_attr(value)),
                ("vehicleId".into(), str_attr("v000001")),
            ]),
        )
        .await;
    }
    let orphans = Found::from([
        finding("lock-orphan", "PLATE#ka 19 xtr", "PLATE#ka 19 xtr"),
        finding("lock-orphan", "CHASSIS#wvw-1 a", "CHASSIS#wvw-1 a"),
    ]);
    assert_eq!(found(&check(ctx).await), orphans);
    let planned = repair(ctx, true).await;
    for finding in &planned.findings {
        let described = finding.repair.as_ref().unwrap();
        assert!(
            described.starts_with(&format!("delete {} / {}", finding.pk, finding.sk)),
            "{described}"
        );
    }
    let repaired = repair(ctx, false).await;
    assert_eq!(repaired.repaired, 2, "{:#?}", repaired.findings);
    assert!(
        api.item("PLATE#ka 19 xtr", "PLATE#ka 19 xtr")
            .await
            .is_none()
    );
    assert!(
        api.item("CHASSIS#wvw-1 a", "CHASSIS#wvw-1 a")
            .await
            .is_none()
    );
    assert_eq!(check(ctx).await.findings.len(), 0);
    assert_eq!(repair(ctx, false).await.repaired, 0);
    let registered = api
        .post(
            "/vehicles",
            json!({"plate": "KA 19 XTR", "chassis": "WVW-1 A", "depot": "d"}),
        )
        .await;
    assert_eq!(registered.status, 201, "{registered:?}");
}

/// The API as `subject` without `accounts:admin`: its first account is its one, holding an owner
/// lock.
fn own(api: &Api, subject: &str) -> Api {
    api.as_token(crate::harness::token(subject, "accounts:self", &[]))
}

/// The partition key of the owner lock that names `account`.
async fn owner_lock_of(api: &Api, account: &str) -> String {
    let locks = api.items_with_pk_prefix("UNIQ#OWNER#").await;
    let lock = locks.iter().find(|lock| s(lock, "accountId") == account);
    s(lock.expect("the account holds an owner lock"), "PK").to_owned()
}

/// An owner lock's key is a keyed hash of its subject under the server's secret: `fsck` run with
/// another secret refuses (every owner lock would look orphaned) rather than release them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_locks_keyed_under_another_secret_stop_the_check() {
    let api = Api::start(Mode::Direct).await;
    account(&own(&api, "owner-1"), "own@example.com", "own").await;
    assert_eq!(found(&check(&api.ctx).await), Found::new());
    let other = Ctx::new(api.ctx.db.clone(), &*api.ctx.table, CursorKeys::random());
    let refused = fsck::fsck(&other, Options::default()).await.unwrap_err();
    assert!(refused.contains("server secret"), "{refused}");
    assert_eq!(api.items_with_pk_prefix("UNIQ#OWNER#").await.len(), 1);
}

/// `fsck --repair` under another key than the API's, in a table where one owner lock is where
/// the run's key puts it (which once disarmed an all-or-nothing guard): each lock is judged
/// alone. The five locks the API keyed are neither released nor moved, only reported for a person
/// (as their accounts are), and a subject who has an account still cannot open a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repair_under_another_key_moves_no_owner_lock() {
    const API_KEY: &str = "the-api-s-own-server-secret-aaaaaaaaaaaaaaaa";
    const OTHER_KEY: &str = "another-stack-s-server-secret-bbbbbbbbbbbbbb";
    let (client, endpoint) = singlet::serve::engine::start_in_memory("singlet").await;
    let under = |key: &str| Ctx::new(client.clone(), "singlet", CursorKeys::new(key));
    let api = Api::start_on(Mode::Direct, under(API_KEY)).await;
    let mut accounts = Vec::new();
    for i in 0..5 {
        let subject = own(&api, &format!("subject-{i}"));
        accounts.push(
            account(
                &subject,
                &format!("s{i}@example.com"),
                &format!("subject{i}"),
            )
            .await,
        );
    }
    // One account made by an API under the other key: its lock is where that key puts it.
    let other = Api::start_on(Mode::Direct, under(OTHER_KEY)).await;
    account(
        &own(&other, "subject-other"),
        "other@example.com",
        "othersubject",
    )
    .await;
    let locks = api.items_with_pk_prefix("UNIQ#OWNER#").await;
    assert_eq!(locks.len(), 6);

    let output = tokio::task::spawn_blocking(move || {
        process::singlet()
            .args(["--endpoint", &endpoint, "fsck", "--repair", "--json"])
            .env("CURSOR_KEY", OTHER_KEY)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["repaired"], 0, "{report:#}");
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 10, "{report:#}");
    for finding in findings {
        assert_eq!(finding["repairable"], false, "{finding}");
        assert!(
            finding["detail"]
                .as_str()
                .unwrap()
                .contains("keyed under another secret"),
            "{finding}"
        );
    }
    let orphans: BTreeSet<&str> = findings
        .iter()
        .filter(|f| f["rule"] == "lock-orphan")
        .map(|f| f["pk"].as_str().unwrap())
        .collect();
    let api_keyed: BTreeSet<&str> = locks
        .iter()
        .filter(|lock| accounts.iter().any(|a| s(lock, "accountId") == a))
        .map(|lock| s(lock, "PK"))
        .collect();
    assert_eq!(orphans, api_keyed);
    assert_eq!(
        api.items_with_pk_prefix("UNIQ#OWNER#").await,
        locks,
        "no owner lock released or moved"
    );
    let again = own(&api, "subject-0")
        .post(
            "/accounts",
            json!({"email": "second@example.com", "username": "secondone"}),
        )
        .await;
    assert_eq!(again.status, 409, "{again:?}");
}

// ---- A torn restore -------------------------------------------------------------------------

/// The items `change` wrote (new or changed), and the table as it was before it.
async fn around<F: std::future::Future<Output = ()>>(
    api: &Api,
    change: F,
) -> (Vec<Item>, Vec<Item>) {
    let before = api.items().await;
    change.await;
    let after = api.items().await;
    let written = after
        .into_iter()
        .filter(|item| !before.contains(item))
        .collect();
    (before, written)
}

/// fsck's judgement of `kept`, read by a scan while a write committed: the confirmation re-reads
/// what looks torn, sees the table whole, and raises nothing.
async fn judged_in_flight(api: &Api, kept: &[Item]) -> Report {
    let report = fsck::judge_items(&api.ctx, kept.to_vec(), Options::default())
        .await
        .unwrap();
    assert_eq!(found(&report), Found::new(), "{:?}", report.findings);
    report
}

fn at(item: &Item) -> (String, String) {
    (s(item, "PK").to_owned(), s(item, "SK").to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_restore_is_flagged_with_exactly_its_missing_halves() {
    let api = Api::start(Mode::Direct).await;
    fixtures::library(&api).await;
    let patron = fixtures::patron(&api, "central", "CARD-9", "standard").await;
    let copy = fixtures::copy(&api, "central").await;
    let vehicle_id = vehicle(&api, "T1", "TC1").await;

    // A checkout writes the loan, the copy and the patron: the restore kept only the loan.
    let (before, written) = around(&api, async {
        assert_eq!(
            fixtures::checkout(&api, &patron, "central", &copy)
                .await
                .status,
            201
        );
    })
    .await;
    // The loan, the copy, the patron, and the branch's count of the book's copies on the shelf.
    assert_eq!(written.len(), 4, "{written:?}");
    let loan = written
        .iter()
        .find(|i| s(i, "SK").starts_with("CHECKOUT#"))
        .unwrap();
    // What a check finds of a restore that kept part of the checkout: the patron's count of open
    // loans and the copy's status disagree with the loans there are.
    let torn_checkout = Found::from([
        finding(
            "active-loans",
            "BRANCH#central",
            &format!("PATRON#{patron}"),
        ),
        finding("copy-status", "BRANCH#central", &format!("COPY#{copy}")),
    ]);
    let mut kept = before.clone();
    kept.push(loan.clone());
    let torn = api.table_holding("torn-checkout", &kept).await;
    // A scan that read these items while the checkout committed (the loan after it, the copy and
    // the patron before) raises nothing: the re-read sees the table whole.
    let in_flight = judged_in_flight(&api, &kept).await;
    assert_eq!(in_flight.scanned as usize, kept.len());
    assert_eq!(found(&check(&torn).await), torn_checkout);
    // ... or everything but the loan.
    let mut kept = before.clone();
    kept.retain(|i| !written.iter().any(|w| at(w) == at(i)));
    kept.extend(
        written
            .iter()
            .filter(|i| !s(i, "SK").starts_with("CHECKOUT#"))
            .cloned(),
    );
    let torn = api.table_holding("torn-checkout-2", &kept).await;
    // The copy `checked_out` with no loan in the scan: its loan is found by the second scan.
    judged_in_flight(&api, &kept).await;
    assert_eq!(found(&check(&torn).await), torn_checkout);

    // Repaired, the copy goes back on the shelf, which makes its branch's count of copies on the
    // shelf one short: the same `--repair` checks again and repairs that too, so nothing is
    // left, and a second `--repair` writes nothing.
    let repaired = repair(&torn, false).await;
    assert_eq!(repaired.remaining(), 0, "{:?}", repaired.findings);
    assert_eq!(
        found(&repaired),
        Found::from([
            finding(
                "active-loans",
                "BRANCH#central",
                &format!("PATRON#{patron}")
            ),
            finding("copy-status", "BRANCH#central", &format!("COPY#{copy}")),
            finding("copy-status", &format!("BOOK#{ISBN}"), "AVAILABLE#central"),
        ])
    );
    assert_eq!(repaired.repaired, 3);
    assert_eq!(found(&check(&torn).await), Found::new());
    assert_eq!(repair(&torn, false).await.repaired, 0);

    // ... or everything but the change to the branch's count of the book's copies on the shelf.
    let count = written
        .iter()
        .find(|i| s(i, "SK").starts_with("AVAILABLE#"))
        .unwrap();
    let mut kept = before.clone();
    kept.retain(|i| at(i) == at(count) || !written.iter().any(|w| at(w) == at(i)));
    kept.extend(written.iter().filter(|i| at(i) != at(count)).cloned());
    let torn = api.table_holding("torn-checkout-3", &kept).await;
    judged_in_flight(&api, &kept).await;
    assert_eq!(
        found(&check(&torn).await),
        Found::from([finding("copy-status", s(count, "PK"), "AVAILABLE#central")])
    );
    let torn_count = torn
        .db
        .get_item()
        .table_name(&*torn.table)
        .key("PK", str_attr(s(count, "PK")))
        .key("SK", str_attr("AVAILABLE#central"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        crate::harness::n(torn_count.item().unwrap(), "availableCopies"),
        1
    );
    assert_eq!(repair(&torn, false).await.repaired, 1);
    assert_eq!(found(&check(&torn).await), Found::new());

    // A plate change claims the new lock, releases the old one and updates the vehicle: the
    // restore kept only the new lock.
    let (before, written) = around(&api, async {
        let reply = api
            .put(
                format!("/vehicles/{vehicle_id}/plate"),
                json!({"plate": "T2"}),
            )
            .await;
        assert_eq!(reply.status, 200, "{reply:?}");
    })
    .await;
    let new_lock = written.iter().find(|i| s(i, "PK") == "PLATE#t2").unwrap();
    let mut kept = before.clone();
    kept.push(new_lock.clone());
    let torn = api.table_holding("torn-plate", &kept).await;
    assert_eq!(
        found(&check(&torn).await),
        Found::from([finding("lock-orphan", "PLATE#t2", "PLATE#t2")])
    );
    // ... or only the vehicle's update: its new plate has no lock, its old lock an orphan.
    let mut kept: Vec<Item> = before
        .iter()
        .filter(|i| {
            at(i)
                != (
                    format!("VEHICLE#{vehicle_id}"),
                    format!("VEHICLE#{vehicle_id}"),
                )
        })
        .cloned()
        .collect();
    kept.push(
        written
            .iter()
            .find(|i| s(i, "PK").starts_with("VEHICLE#"))
            .unwrap()
            .clone(),
    );
    let torn = api.table_holding("torn-plate-2", &kept).await;
    judged_in_flight(&api, &kept).await;
    let vehicle_key = format!("VEHICLE#{vehicle_id}");
    assert_eq!(
        found(&check(&torn).await),
        Found::from([
            finding("lock-missing", &vehicle_key, &vehicle_key),
            finding("lock-orphan", "PLATE#t1", "PLATE#t1"),
        ])
    );
    // The repair of that restore hands the value over and a second check finds nothing.
    assert_eq!(repair(&torn, false).await.repaired, 2);
    assert_eq!(found(&check(&torn).await), Found::new());
}

// ---- The command ----------------------------------------------------------------------------

/// `singlet fsck <args>` on the engine at `endpoint`: exit code, standard output, standard error.
fn run(endpoint: &str, args: &[&str]) -> (i32, String, String) {
    let output = process::singlet()
        .arg("fsck")
        .args(args)
        .args(["--endpoint", endpoint])
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_exits_0_clean_1_with_findings_2_when_it_cannot_run() {
    let (client, endpoint) = singlet::serve::engine::start_in_memory("singlet").await;
    let ctx = Ctx::new(client, "singlet", CursorKeys::random());

    let (code, out, _) = run(&endpoint, &["--json"]);
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report, json!({"scanned": 0, "findings": [], "repaired": 0}));

    put_raw(
        &ctx,
        Item::from([
            ("PK".into(), str_attr("PLATE#gone")),
            ("SK".into(), str_attr("PLATE#gone")),
            ("plate".into(), str_attr("gone")),
            ("vehicleId".into(), str_attr("nobody")),
        ]),
    )
    .await;
    // Options of the runner before the subcommand work too.
    let output = process::singlet()
        .args([
            "--endpoint",
            &endpoint,
            "--table",
            "singlet",
            "fsck",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        report,
        json!({"scanned": 1, "repaired": 0, "findings": [{
            "rule": "lock-orphan", "pk": "PLATE#gone", "sk": "PLATE#gone",
            "detail": "names vehicleId nobody, which does not exist", "repairable": true}]})
    );

    let (code, out, _) = run(&endpoint, &["--repair", "--dry-run"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("would delete PLATE#gone / PLATE#gone"),
        "{out}"
    );
    let (code, out, _) = run(&endpoint, &["--repair", "--json"]);
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["repaired"], 1);
    assert_eq!(report["findings"][0]["repaired"], true);
    let (code, out, _) = run(&endpoint, &[]);
    assert_eq!(code, 0);
    assert_eq!(out, "scanned 0 items: 0 findings\n");

    // It cannot run: no engine there, or options that do not go together.
    let (code, out, err) = run("http://127.0.0.1:1", &["--json"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(out, "");
    assert!(err.contains("fsck: cannot run"), "{err}");
    let (code, _, err) = run(&endpoint, &["--dry-run"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(&endpoint, &["--segments", "0"]);
    assert_eq!(code, 2, "{err}");

    // A table or a data file that is not there is a typo, told as one: not an empty table made
    // up and found clean.
    let (code, out, err) = run(&endpoint, &["--table", "singelt", "--json"]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("there is no table singelt"), "{err}");
    let tables = ctx.db.list_tables().send().await.unwrap();
    assert_eq!(tables.table_names(), ["singlet"], "no table made");
    let missing = std::env::temp_dir().join(format!("singlet-fsck-{}/x.db", std::process::id()));
    let output = process::singlet()
        .arg("--data")
        .arg(&missing)
        .arg("fsck")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("there is no data file"),
        "{output:?}"
    );
    assert!(!missing.parent().unwrap().exists(), "nothing made");
}

/// An email lock's partition key: the address's confusable skeleton (docs/API.md, "Accounts").
fn email_lock_pk(email: &str) -> String {
    singlet_shared::keys::email_lock(&singlet_shared::Email::parse(email).unwrap()).pk
}

/// A chassis lock naming no vehicle (`CHASSIS#ghost`), put as it is: an orphan lock.
pub(crate) async fn put_ghost_chassis_lock(ctx: &singlet_functions::Ctx) {
    put_raw(
        ctx,
        Item::from([
            ("PK".into(), str_attr("CHASSIS#ghost")),
            ("SK".into(), str_attr("CHASSIS#ghost")),
            ("chassis".into(), str_attr("ghost")),
            ("vehicleId".into(), str_attr("no-such-vehicle")),
        ]),
    )
    .await;
}
