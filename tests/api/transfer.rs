//! `export` and `load` (docs/API.md, "Import and export"): the table in DynamoDB's export format
//! and back, item for item, on a real engine; and the CLI's refusals with their exit codes.

use crate::fixtures::{self, ISBN};
use crate::harness::{Api, Item, Mode, s};
use crate::process::singlet;
use serde_json::{Value, json};
use singlet::serve::engine;
use singlet::serve::event_source::{EventSource, Faults};
use singlet::serve::local_bus::LocalBus;
use singlet_tools::transfer;
use std::path::PathBuf;
use std::process::{Command, Output};

/// A table with every domain in it, written through the API.
pub(crate) async fn filled() -> Api {
    let api = Api::start(Mode::Direct).await;
    fixtures::library(&api).await;
    let patron = fixtures::patron(&api, "central", "C-0001", "standard").await;
    let loan = fixtures::lend(&api, &patron, "central").await;
    let reply = api
        .post(
            format!(
                "/patrons/{patron}/checkouts/{}/return",
                loan["checkoutId"].as_str().unwrap()
            ),
            json!({}),
        )
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    fixtures::lend(&api, &patron, "east").await;
    let reply = api
        .post(
            "/vehicles",
            json!({"plate": "MH12 AB 1234", "chassis": "WVWZZZ1JZXW000001", "depot": "north"}),
        )
        .await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let reply = api
        .post(
            "/accounts",
            json!({"email": "grace@example.com", "username": "grace", "displayName": "Grace"}),
        )
        .await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let reply = api
        .post(
            "/resources",
            json!({"resourceId": "gate-3", "status": "closed"}),
        )
        .await;
    assert_eq!(reply.status, 201, "{reply:?}");
    api
}

/// Every item, sorted by key, as comparable JSON.
pub(crate) fn dump(items: Vec<Item>) -> Vec<Value> {
    let mut items = items;
    items.sort_by(|a, b| (s(a, "PK"), s(a, "SK")).cmp(&(s(b, "PK"), s(b, "SK"))));
    items.iter().map(transfer::item_to_json).collect()
}

/// Whether an item, as [`dump`] gives it, is an outbox item, which `load` leaves out.
pub(crate) fn is_outbox(item: &Value) -> bool {
    item["_et"]["S"] == "outbox"
}

/// What a loaded copy of `original` holds: every item but the outbox's.
pub(crate) fn loadable(original: &[Value]) -> Vec<Value> {
    original.iter().filter(|i| !is_outbox(i)).cloned().collect()
}

/// What `load` says it did with an export of `original`.
fn loaded_from(original: &[Value]) -> transfer::Loaded {
    let left_out = original.iter().filter(|i| is_outbox(i)).count() as u64;
    transfer::Loaded {
        items: original.len() as u64 - left_out,
        outbox_left_out: left_out,
        owner_locks_moved: 0,
        hottest_key: None,
    }
}

/// The API over `table` on `client`, checked to be a copy of `api`'s table: item for item
/// (`original`, as [`dump`] gives it) but its outbox items, and answering as the original does
/// through its indexes, which were written with its items.
pub(crate) async fn a_copy_of(
    api: &Api,
    original: &[Value],
    client: aws_sdk_dynamodb::Client,
    table: &str,
) -> Api {
    let copy = Api::start(Mode::Direct)
        .await
        .with_ctx(singlet_functions::Ctx::new(
            client,
            table,
            singlet_functions::cursor::CursorKeys::random(),
        ));
    assert_eq!(dump(copy.all_items().await), loadable(original));
    let reply = copy.get(format!("/books/{ISBN}/availability")).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        reply.body,
        api.get(format!("/books/{ISBN}/availability")).await.body
    );
    copy
}

/// The key `cargo run` keys owner locks under without `CURSOR_KEY` (its published local secret),
/// which `load` re-keys an export's owner locks to.
fn runner_owner_key() -> singlet_functions::ids::IdKey {
    singlet_functions::ids::IdKey::derived_from(singlet_functions::cursor::LOCAL_SECRET.as_bytes())
}

/// Owner locks rekeyed under [`runner_owner_key`], as `load` on this machine does.
fn runner_rekeys() -> transfer::OwnerLockKeys<'static> {
    static KEY: std::sync::LazyLock<singlet_functions::ids::IdKey> =
        std::sync::LazyLock::new(runner_owner_key);
    transfer::OwnerLockKeys::Under(&KEY)
}

/// `api`'s table exported as it is (two scan segments) into a fresh scratch directory `name`.
async fn exported(api: &Api, name: &str) -> PathBuf {
    let dir = scratch(name);
    transfer::export(&api.ctx.db, &api.ctx.table, &dir, 2, &|item| item)
        .await
        .unwrap();
    dir
}

pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("transfer")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A fresh table `copy` whose stream is read as its publisher's mapping reads it, from before
/// anything is written, publishing to an events file beside `dir`: its context, the mapping, and
/// the events file.
async fn a_table_whose_stream_is_read(
    dir: &std::path::Path,
) -> (singlet_functions::Ctx, EventSource, PathBuf) {
    let (client, endpoint) = engine::start_in_memory("copy").await;
    let events = dir.with_extension("events.jsonl");
    let ctx = singlet_functions::Ctx::new(
        client.clone(),
        "copy",
        singlet_functions::cursor::CursorKeys::random(),
    )
    .with_bus(std::sync::Arc::new(LocalBus::open(&events).unwrap()));
    let mapping = EventSource::start(
        ctx.clone(),
        engine::streams_client(&client, &endpoint).await,
        dir.with_extension("failed.jsonl"),
        Faults::default(),
    )
    .await
    .unwrap();
    (ctx, mapping, events)
}

/// The export in `dir` checked and loaded into `table` through the API, as into any engine but
/// the embedded one.
async fn load_through_the_api(
    db: &aws_sdk_dynamodb::Client,
    table: &str,
    dir: &std::path::Path,
    outbox: transfer::Outbox,
) -> Result<transfer::Loaded, String> {
    transfer::load(
        db,
        table,
        &transfer::check(dir)?,
        transfer::Target::Api(&singlet_tools::throttle::Throttle::new(None)),
        outbox,
        runner_rekeys(),
    )
    .await
    // Which key it wrote most into is the capacity tests' subject, not these.
    .map(|loaded| transfer::Loaded {
        hottest_key: None,
        ..loaded
    })
}

/// The one account of the subject `grace-hopper-7` (with `scopes`), whose owner lock is keyed by
/// a keyed hash of the subject under `api`'s key: the API as that subject, and the account's id.
async fn a_subjects_own_account(api: &Api, scopes: &str) -> (Api, String) {
    let subject = api.as_token(crate::harness::token("grace-hopper-7", scopes, &[]));
    let own = subject
        .post(
            "/accounts",
            json!({"email": "amazing@example.com", "username": "amazing"}),
        )
        .await;
    assert_eq!(own.status, 201, "{own:?}");
    let id = own.body["accountId"].as_str().unwrap().to_owned();
    (subject, id)
}

/// The export in `dir` checked and loaded into `table` of the embedded engine `db` (through its
/// bulk path), the owner locks where `owner_locks` says.
async fn load_into_the_engine(
    db: &dynoxide::Database,
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    dir: &std::path::Path,
    owner_locks: transfer::OwnerLockKeys<'_>,
) -> Result<transfer::Loaded, String> {
    transfer::load(
        client,
        table,
        &transfer::check(dir)?,
        transfer::Target::Bulk(&engine::Bulk(db.clone())),
        transfer::Outbox::LeaveOut,
        owner_locks,
    )
    .await
}

#[tokio::test]
async fn an_export_loads_into_a_fresh_table_item_for_item() {
    let api = filled().await;
    let original = dump(api.all_items().await);
    assert!(original.len() > 10, "{original:?}");

    let dir = scratch("round-trip");
    let exported = transfer::export(&api.ctx.db, &api.ctx.table, &dir, 3, &|item| item)
        .await
        .unwrap();
    assert_eq!(exported.items, original.len() as u64);
    assert_eq!(exported.files.len(), 3);
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest-summary.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["itemCount"], original.len());
    assert_eq!(manifest["outputFormat"], "DYNAMODB_JSON");
    // Each line is `{"Item": {...}}` in the wire form, gzipped.
    let first = transfer::read_items(&exported.files[0]).unwrap().count()
        + transfer::read_items(&exported.files[1]).unwrap().count()
        + transfer::read_items(&exported.files[2]).unwrap().count();
    assert_eq!(first, original.len());

    // The copy's stream on, read as its publisher's mapping reads it, from before the load.
    let (copy_table, mut mapping, events) = a_table_whose_stream_is_read(&dir).await;
    let fresh = copy_table.db.clone();
    let loaded = load_through_the_api(
        &copy_table.db,
        &copy_table.table,
        &dir,
        transfer::Outbox::LeaveOut,
    )
    .await
    .unwrap();
    assert_eq!(loaded, loaded_from(&original));
    assert!(loaded.outbox_left_out > 0, "the API's changes wrote events");
    let copy = a_copy_of(&api, &original, fresh.clone(), "copy").await;
    // Every loaded item is a stream record (and the load's mark, put first and deleted last,
    // two more), and none of them is an event to publish again.
    let report = mapping.drain().await.unwrap();
    assert_eq!(report.records_read, loaded.items + 2);
    assert_eq!(report.records_delivered, 0, "{report:?}");
    assert_eq!(std::fs::read_to_string(&events).unwrap(), "");

    // A table that holds items is refused, and nothing is written to it.
    let refused = load_through_the_api(&fresh, "copy", &dir, transfer::Outbox::LeaveOut)
        .await
        .unwrap_err();
    assert!(refused.contains("already holds items"), "{refused}");
    assert_eq!(dump(copy.all_items().await), loadable(&original));
    // An export is never written over another.
    let refused = transfer::export(&api.ctx.db, &api.ctx.table, &dir, 1, &|item| item)
        .await
        .unwrap_err();
    assert!(refused.contains("already holds an export"), "{refused}");
}

/// `--keep-outbox`, for a restore whose table is gone with events it never published: the copy
/// holds every item, and its publisher publishes each outbox item's event, with its own id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_that_keeps_the_outbox_publishes_its_events() {
    let api = filled().await;
    let original = dump(api.all_items().await);
    let dir = exported(&api, "keep-outbox").await;
    let (ctx, mut mapping, events) = a_table_whose_stream_is_read(&dir).await;
    let loaded = load_through_the_api(&ctx.db, &ctx.table, &dir, transfer::Outbox::Keep)
        .await
        .unwrap();
    let outbox = loaded_from(&original).outbox_left_out;
    assert_eq!(
        loaded,
        transfer::Loaded {
            items: original.len() as u64,
            outbox_left_out: 0,
            owner_locks_moved: 0,
            hottest_key: None,
        }
    );
    assert_eq!(dump(api.with_ctx(ctx).all_items().await), original);
    let report = mapping.drain().await.unwrap();
    assert_eq!(report.records_delivered, outbox, "{report:?}");
    let mut published: Vec<String> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line).unwrap();
            event["detail"]["eventId"].as_str().unwrap().to_owned()
        })
        .collect();
    let mut held: Vec<String> = original
        .iter()
        .filter(|i| is_outbox(i))
        .map(|i| {
            let detail: Value = serde_json::from_str(i["detail"]["S"].as_str().unwrap()).unwrap();
            detail["eventId"].as_str().unwrap().to_owned()
        })
        .collect();
    published.sort();
    held.sort();
    assert_eq!(published, held);
}

/// An outbox item is known by its `_et` whatever its key (the stream's filter looks at `_et`
/// alone), and by its key's shape when it has no `_et` (written before `_et` existed).
#[tokio::test]
async fn load_knows_an_outbox_item_by_its_type_or_by_its_key() {
    let dir = scratch("outbox-shapes");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("manifest-summary.json"), r#"{"itemCount": 3}"#).unwrap();
    let lines = [
        json!({"Item": {"PK": {"S": "ODD#1"}, "SK": {"S": "ODD#1"}, "_et": {"S": "outbox"}}}),
        json!({"Item": {"PK": {"S": "OUTBOX#vehicle#v1"}, "SK": {"S": "EVENT#e1"},
            "source": {"S": "singlet.fleet"}, "detailType": {"S": "VehicleRetired"},
            "detail": {"S": "{}"}, "expiresAt": {"N": "1"}}}),
        json!({"Item": {"PK": {"S": "BRANCH#central"}, "SK": {"S": "BRANCH#central"},
            "_et": {"S": "branch"}, "_v": {"N": "1"}, "branchId": {"S": "central"}}}),
    ];
    std::fs::write(
        dir.join("data/00000000.json"),
        lines.map(|l| l.to_string()).join("\n"),
    )
    .unwrap();
    let (fresh, _) = engine::start_in_memory("copy").await;
    let loaded = load_through_the_api(&fresh, "copy", &dir, transfer::Outbox::LeaveOut)
        .await
        .unwrap();
    assert_eq!(
        loaded,
        transfer::Loaded {
            items: 1,
            outbox_left_out: 2,
            owner_locks_moved: 0,
            hottest_key: None,
        }
    );
}

/// An export goes into an empty or new directory only, and one that fails takes away what it
/// wrote: half an export is never left for `load` to take as a whole table.
#[tokio::test]
async fn an_export_writes_whole_into_an_empty_directory_or_nothing() {
    let (client, _) = engine::start_in_memory("singlet").await;
    let dir = scratch("not-empty");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let refused = transfer::export(&client, "singlet", &dir, 1, &|item| item)
        .await
        .unwrap_err();
    assert!(refused.contains("is not empty"), "{refused}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "nothing added");

    let dir = scratch("failed");
    let failed = transfer::export(&client, "no-such-table", &dir, 3, &|item| item)
        .await
        .unwrap_err();
    assert!(!failed.is_empty());
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "what the failed export wrote is gone"
    );
    transfer::export(&client, "singlet", &dir, 3, &|item| item)
        .await
        .unwrap();

    // Stopped part way (the command drops it on Ctrl-C), it removes what it wrote too: here
    // after its files are made and before their first page is read.
    let dir = scratch("stopped");
    {
        let mut export =
            std::pin::pin!(transfer::export(&client, "singlet", &dir, 3, &|item| item));
        let polled = futures::poll!(export.as_mut());
        assert!(polled.is_pending(), "{polled:?}");
        assert!(
            std::fs::read_dir(dir.join("data")).unwrap().count() > 0,
            "the export has begun"
        );
    } // Dropped here, unfinished.
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "what the stopped export wrote is gone"
    );
}

/// A bad export is refused whole, before any item is written, so that once fixed it loads: a bad
/// line at the end of the last file, an item without a key, a key twice, a count the manifest
/// does not match.
#[tokio::test]
async fn a_bad_export_is_refused_before_anything_is_written() {
    let branch = |id: &str| {
        json!({"Item": {"PK": {"S": format!("BRANCH#{id}")}, "SK": {"S": format!("BRANCH#{id}")},
            "_et": {"S": "branch"}, "_v": {"N": "1"}, "branchId": {"S": id}}})
        .to_string()
    };
    let good = [branch("central"), branch("east"), branch("west")];
    let export = |name: &str, count: usize, lines: &[String]| {
        let dir = scratch(name);
        std::fs::create_dir_all(dir.join("data")).unwrap();
        std::fs::write(
            dir.join("manifest-summary.json"),
            json!({"itemCount": count}).to_string(),
        )
        .unwrap();
        std::fs::write(dir.join("data/00000000.json"), lines.join("\n")).unwrap();
        dir
    };
    let (fresh, _) = engine::start_in_memory("copy").await;
    let load = |dir: PathBuf| {
        let fresh = fresh.clone();
        async move { load_through_the_api(&fresh, "copy", &dir, transfer::Outbox::LeaveOut).await }
    };
    let mut keyless = good.to_vec();
    keyless.push(json!({"Item": {"PK": {"S": "BRANCH#north"}}}).to_string());
    let mut twice = good.to_vec();
    twice.push(branch("east"));
    let mut bad_last = good.to_vec();
    bad_last.push(r#"{"Item": {"PK": {"Q": "x"}}}"#.into());
    let with = |extra: &str| {
        let mut lines = good.to_vec();
        lines.push(format!(
            r#"{{"Item": {{"PK": {{"S": "X#1"}}, "SK": {{"S": "X#1"}}, {extra}}}}}"#
        ));
        lines
    };
    let mut empty_key = good.to_vec();
    empty_key.push(json!({"Item": {"PK": {"S": ""}, "SK": {"S": "x"}}}).to_string());
    for (dir, says) in [
        (export("bad-last", 4, &bad_last), "00000000.json:4"),
        (export("keyless", 4, &keyless), "item 4 has no key"),
        (export("empty-key", 4, &empty_key), "item 4 has no key"),
        (
            export("not-a-number", 4, &with(r#""n": {"N": "abc"}"#)),
            "n is the number \"abc\"",
        ),
        (
            export(
                "set-twice",
                4,
                &with(r#""s": {"M": {"t": {"SS": ["a", "a"]}}}"#),
            ),
            "s is a string set that is empty or holds a value twice",
        ),
        (
            export("out-of-range", 4, &with(r#""n": {"N": "1e200"}"#)),
            "n is the number \"1e200\"",
        ),
        (
            export("spaced", 4, &with(r#""n": {"N": " 12"}"#)),
            "n is the number \" 12\"",
        ),
        (
            export("index-key-number", 4, &with(r#""GSI1PK": {"N": "1"}"#)),
            "GSI1PK, a key attribute, is not a string",
        ),
        (
            export(
                "long-key",
                4,
                &with(&format!(r#""GSI2SK": {{"S": "{}"}}"#, "k".repeat(1025))),
            ),
            "GSI2SK is 1025 bytes, more than a key's 1024",
        ),
        (export("twice", 4, &twice), "the key of an item before it"),
        (
            export("miscounted", 4, &good),
            "the manifest counts 4 items",
        ),
    ] {
        let refused = load(dir).await.unwrap_err();
        assert!(refused.contains(says), "{refused}");
        assert!(refused.contains("nothing was written"), "{refused}");
        let held = fresh.scan().table_name("copy").send().await.unwrap();
        assert_eq!(held.count(), 0, "{says}: the table is untouched");
    }
    let loaded = load(export("fixed", 3, &good)).await.unwrap();
    assert_eq!(
        loaded,
        transfer::Loaded {
            items: 3,
            outbox_left_out: 0,
            owner_locks_moved: 0,
            hottest_key: None,
        }
    );
}

#[test]
fn the_cli_refuses_what_is_not_an_export_with_exit_2() {
    let dir = scratch("not-an-export");
    std::fs::create_dir_all(&dir).unwrap();
    let output = exited(singlet().args(["--in-memory", "load"]).arg(&dir), 2);
    let stderr = stderr_of(&output);
    assert!(stderr.contains("is not an export"), "{stderr}");

    // A data line that is not DynamoDB JSON names its file and line.
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("manifest-summary.json"), r#"{"itemCount": 1}"#).unwrap();
    std::fs::write(
        dir.join("data/00000000.json"),
        "{\"Item\": {\"PK\": {\"Q\": \"x\"}}}\n",
    )
    .unwrap();
    let output = exited(singlet().args(["--in-memory", "load"]).arg(&dir), 2);
    let stderr = stderr_of(&output);
    assert!(stderr.contains("00000000.json:1"), "{stderr}");
}

#[test]
fn the_cli_exports_and_loads_with_a_json_summary() {
    let dir = scratch("cli");
    let data = scratch("cli-data").with_extension("db");
    // A data file that is not there is not made up and exported empty: a typo is told.
    let export = || {
        let mut command = singlet();
        command
            .arg("--data")
            .arg(&data)
            .args(["export", "--json"])
            .arg(&dir);
        command
    };
    let refused = exited(&mut export(), 2);
    assert!(
        stderr_of(&refused).contains("there is no data file"),
        "{refused:?}"
    );
    assert!(!data.exists() && !dir.exists(), "nothing made");
    // Nor is an in-memory engine, empty and gone when the command ends.
    let refused = exited(
        singlet()
            .args(["--in-memory", "export", "--json"])
            .arg(&dir),
        2,
    );
    assert!(
        stderr_of(&refused).contains("--in-memory is an empty table"),
        "{refused:?}"
    );
    assert!(!dir.exists(), "nothing made");
    crate::process::an_empty_table(&data);
    let summary = summary_of(&export().output().unwrap());
    assert_eq!(
        summary,
        json!({"exported": 0, "files": 4, "consistent": true})
    );

    let loaded = singlet()
        .args(["--in-memory", "load", "--json"])
        .arg(&dir)
        .output()
        .unwrap();
    let summary = summary_of(&loaded);
    assert_eq!(
        summary,
        json!({"loaded": 0, "outboxLeftOut": 0, "ownerLocksMoved": 0, "hottestKey": null})
    );
}

/// An embedded engine of the test's own, kept for its bulk path, and a client on its endpoint.
async fn embedded(table: &str) -> (dynoxide::Database, aws_sdk_dynamodb::Client) {
    let db = engine::open(None).unwrap();
    let endpoint = engine::serve(db.clone(), ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let client = engine::local_client(&endpoint);
    singlet_functions::table::ensure_table(&client, table)
        .await
        .unwrap();
    (db, client)
}

/// Every line of every data file of an export, sorted: what two exports of equal tables share.
fn export_lines(dir: &std::path::Path) -> Vec<String> {
    let mut lines: Vec<String> = transfer::data_files(dir)
        .unwrap()
        .iter()
        .flat_map(|file| transfer::read_items(file).unwrap())
        .map(|item| transfer::item_to_json(&item.unwrap()).to_string())
        .collect();
    lines.sort();
    lines
}

#[tokio::test]
async fn an_export_loads_through_the_engines_bulk_path_item_for_item() {
    let api = filled().await;
    let original = dump(api.all_items().await);
    let dir = exported(&api, "bulk").await;

    let (db, client) = embedded("copy").await;
    let loaded = load_into_the_engine(&db, &client, "copy", &dir, runner_rekeys())
        .await
        .unwrap();
    assert_eq!(loaded, loaded_from(&original));
    let copy = api.with_ctx(singlet_functions::Ctx::new(
        client.clone(),
        "copy",
        singlet_functions::cursor::CursorKeys::random(),
    ));
    assert_eq!(dump(copy.all_items().await), loadable(&original));
    // Its indexes were written with its items: the copy answers as the original does.
    let reply = copy.get(format!("/books/{ISBN}/availability")).await;
    assert_eq!(
        reply.body,
        api.get(format!("/books/{ISBN}/availability")).await.body
    );
    let refused = load_into_the_engine(&db, &client, "copy", &dir, runner_rekeys())
        .await
        .unwrap_err();
    assert!(refused.contains("already holds items"), "{refused}");
}

#[tokio::test]
async fn an_anonymised_export_holds_no_personal_data_and_keeps_every_rule() {
    let api = filled().await;
    // A creation with an Idempotency-Key: its record keeps the response and a fingerprint of the
    // caller and the body, which a guess could be tested against.
    let reply = api
        .call("POST", "/accounts")
        .header("idempotency-key", "sign-up-1")
        .json(json!({"email": "ada@example.com", "username": "ada"}))
        .send()
        .await;
    assert_eq!(reply.status, 201, "{reply:?}");
    // A subject's one account, whose owner lock is keyed by a hash of the subject, and an audit
    // change that names the subject as its actor.
    let (subject, _) = a_subjects_own_account(&api, "accounts:self audit:write").await;
    let audited = subject
        .post(
            "/resources",
            json!({"resourceId": "doc-9", "status": "open"}),
        )
        .await;
    assert_eq!(audited.status, 201, "{audited:?}");
    let original = api.all_items().await;
    let fingerprints: Vec<String> = original
        .iter()
        .filter_map(|item| item.get("fingerprint"))
        .map(|f| f.as_s().unwrap().clone())
        .collect();
    assert_eq!(fingerprints.len(), 1, "one idempotency record");
    let dir = scratch("anonymised");
    let anonymiser = singlet_tools::anonymise::Anonymiser::random()
        .with_owners_of(&api.ctx.db, &api.ctx.table)
        .await
        .unwrap();
    transfer::export(&api.ctx.db, &api.ctx.table, &dir, 2, &|item| {
        anonymiser.item(item)
    })
    .await
    .unwrap();

    // Nothing personal anywhere in the output, in any spelling the table holds it in.
    let mut text = String::new();
    for file in transfer::data_files(&dir).unwrap() {
        use std::io::Read;
        flate2::read::GzDecoder::new(std::fs::File::open(file).unwrap())
            .read_to_string(&mut text)
            .unwrap();
    }
    for personal in [
        "grace@example.com",
        "Grace",
        "ada@example.com",
        "Lovelace",
        "Ada",
        "c-0001",
        "mh12 ab 1234",
        "mh12ab1234",
        "wvwzzz1jzxw000001",
        "+44 20 7946 0000",
        "1 Library Square",
        "grace-hopper-7",
        "amazing",
    ] {
        assert!(!text.contains(personal), "{personal} is in the export");
    }
    for fingerprint in &fingerprints {
        assert!(
            !text.contains(fingerprint.as_str()),
            "the fingerprint is kept"
        );
    }

    // Loaded, the copy holds as many items but the outbox's, answers by the new values, and fsck
    // finds nothing: with the runner's published secret (`cargo run` without `CURSOR_KEY`),
    // under which the copy's owner locks are keyed, though the table's were under another.
    let (db, client) = embedded("copy").await;
    load_into_the_engine(&db, &client, "copy", &dir, runner_rekeys())
        .await
        .unwrap();
    let ctx = singlet_functions::Ctx::new(
        client,
        "copy",
        singlet_functions::cursor::CursorKeys::new(singlet_functions::cursor::LOCAL_SECRET),
    );
    let copy = api.with_ctx(ctx.clone());
    assert_eq!(
        copy.items_with_pk_prefix("UNIQ#OWNER#").await.len(),
        1,
        "the subject's owner lock is in the copy"
    );
    let items = copy.all_items().await;
    assert_eq!(items.len(), loadable(&dump(original)).len());
    let patron = items.iter().find(|i| s(i, "_et") == "patron").unwrap();
    let reply = copy
        .get(format!("/cards/{}", s(patron, "cardNumber")))
        .await;
    assert_eq!(reply.body["patronId"], s(patron, "patronId"));
    let vehicle = items.iter().find(|i| s(i, "_et") == "vehicle").unwrap();
    // The plate keeps its spaces around its replacement, percent-encoded in the path.
    let plate = s(vehicle, "plate").replace(' ', "%20");
    let reply = copy.get(format!("/plates/{plate}")).await;
    assert_eq!(reply.body["vehicleId"], s(vehicle, "vehicleId"));
    let report = singlet_tools::fsck::fsck(&ctx, singlet_tools::fsck::Options::default())
        .await
        .unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

/// A plain export keeps each subject's one-account lock at the key its API's `OWNER_KEY` made.
/// Loaded under another key (the runner's, another stack's), `load` writes the lock where the
/// loading run's key puts it, so the copy's API finds it: the subject's second account is
/// refused, the account's delete releases it (it was a `500`, finding no lock to release), and
/// `fsck` finds nothing (it refused the copy as keyed elsewhere). Under the export's own key,
/// nothing moves.
#[tokio::test]
async fn a_plain_export_loaded_under_another_key_keeps_each_subjects_one_account() {
    let api = Api::start(Mode::Direct).await;
    let (subject, account_id) = a_subjects_own_account(&api, "accounts:self").await;
    let exported_lock = api.items_with_pk_prefix("UNIQ#OWNER#").await;
    assert_eq!(exported_lock.len(), 1);
    let dir = exported(&api, "plain-other-key").await;

    let (db, client) = embedded("copy").await;
    let loaded = load_into_the_engine(&db, &client, "copy", &dir, runner_rekeys())
        .await
        .unwrap();
    assert_eq!(loaded.owner_locks_moved, 1, "{loaded:?}");
    let ctx = singlet_functions::Ctx::new(
        client,
        "copy",
        singlet_functions::cursor::CursorKeys::new(singlet_functions::cursor::LOCAL_SECRET),
    );
    let copy = subject.with_ctx(ctx.clone());
    let lock = copy.items_with_pk_prefix("UNIQ#OWNER#").await;
    assert_eq!(lock.len(), 1);
    assert_ne!(s(&lock[0], "PK"), s(&exported_lock[0], "PK"), "re-keyed");
    assert_eq!(s(&lock[0], "accountId"), account_id);
    let report = singlet_tools::fsck::fsck(&ctx, singlet_tools::fsck::Options::default())
        .await
        .unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);

    let another = json!({"email": "other@example.com", "username": "other"});
    copy.post("/accounts", another.clone())
        .await
        .assert_problem(409, &[("owner", "limit_reached")]);
    let deleted = copy.delete(format!("/accounts/{account_id}")).await;
    assert_eq!(deleted.status, 204, "{deleted:?}");
    assert!(copy.items_with_pk_prefix("UNIQ#OWNER#").await.is_empty());
    let made = copy.post("/accounts", another).await;
    assert_eq!(made.status, 201, "the subject may make another: {made:?}");

    // Under the key it was exported with, or kept as exported, every lock stays where it was.
    for (table, owner_locks) in [
        ("same", transfer::OwnerLockKeys::Under(&api.ctx.owners)),
        ("kept", transfer::OwnerLockKeys::AsExported),
    ] {
        let (db, client) = embedded(table).await;
        let loaded = load_into_the_engine(&db, &client, table, &dir, owner_locks)
            .await
            .unwrap();
        assert_eq!(loaded.owner_locks_moved, 0, "{table}");
        let same = api.with_ctx(singlet_functions::Ctx::new(
            client,
            table,
            singlet_functions::cursor::CursorKeys::random(),
        ));
        assert_eq!(
            same.items_with_pk_prefix("UNIQ#OWNER#").await,
            exported_lock,
            "{table}"
        );
    }

    // The command: on this machine the locks are rekeyed unless `--owner-locks as-exported`.
    for (choice, moved) in [(None, 1), (Some("as-exported"), 0), (Some("rekeyed"), 1)] {
        let data = scratch(&format!(
            "owner-locks-{moved}-{}",
            choice.unwrap_or("default")
        ));
        let mut command = singlet();
        command.arg("--data").arg(data.with_extension("db"));
        command.args(["load", "--json"]).arg(&dir);
        if let Some(choice) = choice {
            command.args(["--owner-locks", choice]);
        }
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{choice:?}: {output:?}");
        let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(summary["ownerLocksMoved"], moved, "{choice:?}: {summary}");
    }
    // Into a table elsewhere (AWS) they are kept as exported by default, as for a restore into
    // the table's own stack (`transfer::rekeys_by_default`); rekeyed there under the runner's
    // published secret, which no Lambda accepts, they would move where that table's API never
    // looks: refused before anything is contacted, as is an accounts import, whose rows may
    // name owners.
    let aws = "https://dynamodb.eu-west-1.amazonaws.com";
    let rows = dir.with_extension("accounts.jsonl");
    std::fs::write(
        &rows,
        json!({"email": "x@example.com", "username": "xx", "owner": "s-1"}).to_string(),
    )
    .unwrap();
    for args in [
        vec![
            PathBuf::from("load"),
            dir.clone(),
            "--owner-locks".into(),
            "rekeyed".into(),
        ],
        vec!["import".into(), "accounts".into(), rows.clone()],
    ] {
        let output = singlet()
            .args(["--endpoint", aws, "--table", "singlet-prod"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("Set CURSOR_KEY") && stderr.contains("nothing was written"),
            "{stderr}"
        );
    }
}

#[test]
fn the_cli_copies_a_table_that_holds_items() {
    let dir = scratch("cli-copy");
    std::fs::create_dir_all(&dir).unwrap();
    let (original, copy) = (dir.join("original.db"), dir.join("copy.db"));
    let rows = branch_rows(&dir);
    let run = |data: &std::path::Path, args: &[&str], path: &std::path::Path| {
        let output = singlet()
            .arg("--data")
            .arg(data)
            .args(args)
            .arg(path)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    run(&original, &["import", "branches", "--json"], &rows);
    let first = dir.join("first");
    assert_eq!(
        run(&original, &["export", "--json"], &first),
        json!({"exported": 4, "files": 4, "consistent": true})
    );
    // Two branches and the outbox items of their `BranchCreated` events, which stay behind.
    let loaded = singlet()
        .arg("--data")
        .arg(&copy)
        .args(["load", "--json"])
        .arg(&first)
        .output()
        .unwrap();
    assert_eq!(loaded.status.code(), Some(0), "{loaded:?}");
    assert_eq!(
        serde_json::from_slice::<Value>(&loaded.stdout).unwrap(),
        json!({"loaded": 2, "outboxLeftOut": 2, "ownerLocksMoved": 0, "hottestKey": null})
    );
    // Before its first write it says how long the export takes to load on AWS.
    let said = String::from_utf8_lossy(&loaded.stderr);
    assert!(
        said.contains("load: about") && said.contains("on AWS about"),
        "{said}"
    );
    let second = dir.join("second");
    run(&copy, &["export", "--json"], &second);
    let mut kept = export_lines(&first);
    kept.retain(|line| !line.contains(r#""_et":{"S":"outbox"}"#));
    assert_eq!(kept.len(), 2);
    assert_eq!(export_lines(&second), kept);

    // Anonymised: no phone number or address of the original, the same number of items. (The
    // number is looked for with its spacing: four digits alone can turn up in an id or a time.)
    let anonymised = dir.join("anonymised");
    assert_eq!(
        run(&original, &["export", "--anonymise", "--json"], &anonymised),
        json!({"exported": 4, "files": 4, "consistent": true})
    );
    let lines = export_lines(&anonymised).join("\n");
    assert!(
        !lines.contains("7946 0000") && !lines.contains("Library Square"),
        "{lines}"
    );
}

/// `load --endpoint` into an engine that has no such table yet creates it, with the key design's
/// indexes, as `cargo run` does, and loads the export into it through the API (an external
/// engine has no bulk path): item for item, and the copy answers through its indexes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_creates_the_table_on_an_external_engine_that_lacks_it() {
    let api = filled().await;
    let original = dump(api.all_items().await);
    let dir = exported(&api, "external").await;

    // An engine with no table at all.
    let (client, endpoint) = engine::start(None, ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    assert!(
        client
            .list_tables()
            .send()
            .await
            .unwrap()
            .table_names()
            .is_empty(),
        "the engine starts empty"
    );
    let mut load = singlet();
    load.args([
        "--endpoint",
        &endpoint,
        "--table",
        "elsewhere",
        "load",
        "--json",
    ])
    .arg(&dir);
    let mut summary = summary_of(&output_of(load).await);
    let loaded = loaded_from(&original);
    // Through an endpoint the load is paced per key, and names its hottest (a table key here).
    let hottest = summary
        .as_object_mut()
        .and_then(|summary| summary.remove("hottestKey"))
        .unwrap_or_default();
    assert!(
        hottest["peakWcuPerSecond"].as_f64() > Some(0.0),
        "{hottest}"
    );
    assert_eq!(
        summary,
        json!({"loaded": loaded.items, "outboxLeftOut": loaded.outbox_left_out, "ownerLocksMoved": 0})
    );

    let index_names = |client: aws_sdk_dynamodb::Client, table: String| async move {
        let described = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .unwrap();
        let mut names: Vec<String> = described
            .table()
            .unwrap()
            .global_secondary_indexes()
            .iter()
            .map(|index| index.index_name().unwrap().to_owned())
            .collect();
        names.sort();
        names
    };
    let made = index_names(client.clone(), "elsewhere".into()).await;
    assert!(!made.is_empty());
    assert_eq!(
        made,
        index_names(api.ctx.db.clone(), api.ctx.table.to_string()).await
    );
    a_copy_of(&api, &original, client, "elsewhere").await;
}

// ---- What a kill, a live writer and a bad file leave (issue 45) ----------------------------

/// `singlet --data <data> <args> <path>`: its output, whatever its exit.
fn on_data(data: &std::path::Path, args: &[&str], path: &std::path::Path) -> std::process::Output {
    singlet()
        .arg("--data")
        .arg(data)
        .args(args)
        .arg(path)
        .output()
        .unwrap()
}

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `command` run to its end, having exited with `code`.
fn exited(command: &mut Command, code: i32) -> Output {
    let output = command.output().unwrap();
    assert_eq!(output.status.code(), Some(code), "{output:?}");
    output
}

/// `command` run to its end off the test's runtime, which serves the engine it calls.
async fn output_of(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

/// The JSON summary a command printed, having exited `0`.
fn summary_of(output: &Output) -> Value {
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

/// `branches.jsonl` in `dir`: two branches' rows, as `import branches` takes them.
fn branch_rows(dir: &std::path::Path) -> PathBuf {
    let rows = dir.join("branches.jsonl");
    std::fs::write(
        &rows,
        [
            fixtures::branch_body("central"),
            fixtures::branch_body("east"),
        ]
        .map(|b| b.to_string())
        .join("\n"),
    )
    .unwrap();
    rows
}

/// A data file `table.db` in `dir` holding two branches (and their events' outbox items),
/// imported by the CLI.
fn two_branches(dir: &std::path::Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let data = dir.join("table.db");
    let rows = branch_rows(dir);
    let imported = on_data(&data, &["import", "branches"], &rows);
    assert_eq!(imported.status.code(), Some(0), "{imported:?}");
    data
}

/// An export directory `dir` of `members`, each a gzip member of its own, one after the other in
/// one data file, the manifest counting every line.
fn gzip_export(dir: &std::path::Path, members: &[Vec<String>]) {
    use std::io::Write;
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let mut bytes = Vec::new();
    for lines in members {
        let mut member = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        for line in lines {
            writeln!(member, "{line}").unwrap();
        }
        bytes.extend(member.finish().unwrap());
    }
    std::fs::write(dir.join("data/00000000.json.gz"), bytes).unwrap();
    let count: usize = members.iter().map(Vec::len).sum();
    std::fs::write(
        dir.join("manifest-summary.json"),
        json!({"itemCount": count}).to_string(),
    )
    .unwrap();
}

/// An export line of a branch item.
fn branch_line(id: &str) -> String {
    json!({"Item": {"PK": {"S": format!("BRANCH#{id}")}, "SK": {"S": format!("BRANCH#{id}")},
        "_et": {"S": "branch"}, "_v": {"N": "1"}, "branchId": {"S": id}}})
    .to_string()
}

/// A gzip file may hold several members one after the other (RFC 1952, 2.2), as a file written in
/// parts or joined with `cat` does: `load` reads every one of them, not the first alone.
#[test]
fn load_reads_every_member_of_a_gzip_file() {
    let dir = scratch("two-members");
    gzip_export(
        &dir.join("export"),
        &[
            vec![branch_line("central"), branch_line("east")],
            vec![
                branch_line("west"),
                branch_line("north"),
                branch_line("south"),
            ],
        ],
    );
    let data = dir.join("copy.db");
    let loaded = on_data(&data, &["load", "--json"], &dir.join("export"));
    assert_eq!(loaded.status.code(), Some(0), "{loaded:?}");
    let summary: Value = serde_json::from_slice(&loaded.stdout).unwrap();
    assert_eq!(summary["loaded"], 5, "{summary}");
    // Exported again, the copy holds the five branches.
    let again = dir.join("again");
    let exported = on_data(&data, &["export", "--json"], &again);
    assert_eq!(exported.status.code(), Some(0), "{exported:?}");
    let mut ids: Vec<String> = export_lines(&again)
        .iter()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["branchId"]["S"].to_string())
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            "\"central\"",
            "\"east\"",
            "\"north\"",
            "\"south\"",
            "\"west\""
        ]
    );
}

/// A line is read with a bound: one longer than any item DynamoDB takes could hold is refused as
/// soon as the bound is passed, never held whole (a small gzip member unpacks to a huge line),
/// and an item over DynamoDB's 400 KB is refused by its size; both before anything is written.
#[test]
fn load_refuses_a_line_or_an_item_larger_than_dynamodb_takes() {
    let dir = scratch("too-large");
    // About 5 MB of one repeated byte: a few KB of gzip.
    let huge = json!({"Item": {"PK": {"S": "X#1"}, "SK": {"S": "X#1"},
        "blob": {"S": "a".repeat(5_000_000)}}})
    .to_string();
    gzip_export(&dir.join("huge"), &[vec![huge]]);
    assert!(
        std::fs::metadata(dir.join("huge/data/00000000.json.gz"))
            .unwrap()
            .len()
            < 100_000
    );
    let data = dir.join("copy.db");
    let refused = on_data(&data, &["load"], &dir.join("huge"));
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        stderr_of(&refused).contains("00000000.json.gz:1: the line is longer than 4096000 bytes"),
        "{}",
        stderr_of(&refused)
    );
    assert!(!data.exists(), "nothing made");

    // Within the line's bound, but over DynamoDB's item size as it counts it.
    let large = json!({"Item": {"PK": {"S": "X#1"}, "SK": {"S": "X#1"},
        "blob": {"S": "a".repeat(410_000)}}})
    .to_string();
    let fits = json!({"Item": {"PK": {"S": "X#2"}, "SK": {"S": "X#2"},
        "blob": {"S": "a".repeat(400_000)}}})
    .to_string();
    gzip_export(&dir.join("large"), &[vec![fits.clone(), large]]);
    let refused = on_data(&data, &["load"], &dir.join("large"));
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        stderr_of(&refused).contains("item 2: the item is 410014 bytes as DynamoDB counts them"),
        "{}",
        stderr_of(&refused)
    );
    assert!(!data.exists(), "nothing made");
    // An item just under the limit loads.
    gzip_export(&dir.join("fits"), &[vec![fits]]);
    let loaded = on_data(&data, &["load"], &dir.join("fits"));
    assert_eq!(loaded.status.code(), Some(0), "{loaded:?}");
}

/// An export killed part way leaves `data/` and no manifest: the next export (and `load`) say it
/// is a partial export, not "an export", and what to do; done, the export runs.
#[test]
fn a_killed_export_is_named_a_partial_export() {
    let dir = scratch("killed-export");
    let data = two_branches(&dir);
    let out = dir.join("export");
    let killed = on_data(
        &data,
        &["export", "--segments", "1", "--stop-after", "1"],
        &out,
    );
    assert_ne!(killed.status.code(), Some(0), "{killed:?}");
    assert!(out.join("data").is_dir(), "{killed:?}");
    assert!(!out.join("manifest-summary.json").exists());

    let again = on_data(&data, &["export"], &out);
    assert_eq!(again.status.code(), Some(2), "{again:?}");
    let said = stderr_of(&again);
    assert!(said.contains("holds a partial export"), "{said}");
    assert!(!said.contains("already holds an export"), "{said}");
    assert!(said.contains("Remove"), "{said}");
    let load = singlet()
        .args(["--in-memory", "load"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(load.status.code(), Some(2), "{load:?}");
    assert!(
        stderr_of(&load).contains("holds a partial export"),
        "{}",
        stderr_of(&load)
    );

    std::fs::remove_dir_all(out.join("data")).unwrap();
    let done = on_data(&data, &["export", "--json"], &out);
    assert_eq!(done.status.code(), Some(0), "{done:?}");
}

/// A load killed part way leaves the mark it wrote first: a load run again and `fsck` say the
/// table holds part of an export, rather than "already holds items" and a check of a table that
/// is not one. A load that finishes leaves no mark.
#[test]
fn a_killed_load_leaves_a_table_marked_partial() {
    let dir = scratch("killed-load");
    let data = two_branches(&dir);
    let export = dir.join("export");
    let exported = on_data(&data, &["export"], &export);
    assert_eq!(exported.status.code(), Some(0), "{exported:?}");

    let copy = dir.join("copy.db");
    let killed = on_data(&copy, &["load", "--stop-after", "1"], &export);
    assert_ne!(killed.status.code(), Some(0), "{killed:?}");

    let again = on_data(&copy, &["load"], &export);
    assert_eq!(again.status.code(), Some(2), "{again:?}");
    let said = stderr_of(&again);
    assert!(said.contains("holds part of an export"), "{said}");
    assert!(said.contains("stopped before it finished"), "{said}");
    let checked = singlet()
        .arg("--data")
        .arg(&copy)
        .args(["fsck", "--repair"])
        .output()
        .unwrap();
    assert_eq!(checked.status.code(), Some(2), "{checked:?}");
    assert!(
        stderr_of(&checked).contains("holds part of an export"),
        "{}",
        stderr_of(&checked)
    );

    let whole = dir.join("whole.db");
    let loaded = on_data(&whole, &["load"], &export);
    assert_eq!(loaded.status.code(), Some(0), "{loaded:?}");
    let checked = singlet()
        .arg("--data")
        .arg(&whole)
        .args(["fsck", "--json"])
        .output()
        .unwrap();
    assert_eq!(checked.status.code(), Some(0), "{checked:?}");
    let report: Value = serde_json::from_slice(&checked.stdout).unwrap();
    assert_eq!(report["scanned"], 2, "the branches, and no mark: {report}");
}

/// An export of the runner's table while the API writes to it: each scan segment would be read at
/// its own moment, and a vehicle registered in between be exported without its locks, or its
/// locks without it. The export reads a copy of the engine's file taken in one read, so the copy
/// loaded from it holds nothing `fsck` finds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_export_taken_while_the_api_writes_loads_into_a_table_fsck_finds_clean() {
    const PREFILLED: usize = 600;
    const WRITERS: usize = 2;
    let dir = scratch("live");
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("live.db");
    let rows = dir.join("vehicles.jsonl");
    std::fs::write(
        &rows,
        (0..PREFILLED)
            .map(|i| {
                json!({"plate": format!("PF {i:05}"), "chassis": format!("PFCH{i:06}"), "depot": "north"})
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    let imported = on_data(&data, &["import", "vehicles"], &rows);
    assert_eq!(imported.status.code(), Some(0), "{imported:?}");

    let mut serving = singlet();
    serving
        .arg("--data")
        .arg(&data)
        .args(["--mark-overdue-every", "0", "--no-console"]);
    let runner = crate::process::serve(serving);
    let token = crate::harness::token("tester", &crate::harness::all_scopes(), &[]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (api, token, stop) = (runner.api.clone(), token.clone(), stop.clone());
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let mut written = 0u64;
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    i += 1;
                    let created = http
                        .post(format!("{api}/vehicles"))
                        .bearer_auth(&token)
                        .json(&json!({"plate": format!("W{w} {i:05}"),
                            "chassis": format!("W{w}CH{i:06}"), "depot": "south"}))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(created.status(), 201);
                    let vehicle: Value = created.json().await.unwrap();
                    let id = vehicle["vehicleId"].as_str().unwrap();
                    // A plate change: one lock released, another claimed, the vehicle changed.
                    let moved = http
                        .put(format!("{api}/vehicles/{id}/plate"))
                        .bearer_auth(&token)
                        .json(&json!({"plate": format!("M{w} {i:05}")}))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(moved.status(), 200);
                    written += 2;
                }
                written
            })
        })
        .collect();
    // The writers under way first.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;

    let export = dir.join("export");
    let exported = tokio::task::spawn_blocking({
        let (data, export) = (data.clone(), export.clone());
        move || on_data(&data, &["export", "--segments", "8", "--json"], &export)
    })
    .await
    .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut written = 0;
    for writer in writers {
        written += writer.await.unwrap();
    }
    drop(runner);
    let summary = summary_of(&exported);
    assert_eq!(summary["consistent"], true, "{summary}");
    assert!(written > 0, "the API wrote while the export ran");

    let copy = dir.join("copy.db");
    let loaded = on_data(&copy, &["load"], &export);
    assert_eq!(loaded.status.code(), Some(0), "{loaded:?}");
    let checked = singlet()
        .arg("--data")
        .arg(&copy)
        .args(["fsck", "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&checked.stdout).unwrap();
    assert_eq!(report["findings"], json!([]), "{report}");
    assert_eq!(checked.status.code(), Some(0), "{checked:?}");
    // Every vehicle of the copy with its two locks: the prefilled ones at least.
    assert!(
        report["scanned"].as_u64().unwrap() >= 3 * PREFILLED as u64,
        "{report}"
    );
}

/// Through an endpoint, the export cannot be taken from a copy: it says so, on standard error
/// and in its summary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_through_an_endpoint_says_it_may_be_torn() {
    let (_, endpoint) = engine::start_in_memory("singlet").await;
    let dir = scratch("through-endpoint");
    let mut export = singlet();
    export
        .args(["--endpoint", &endpoint, "export", "--json"])
        .arg(&dir);
    let output = output_of(export).await;
    let summary = summary_of(&output);
    assert_eq!(summary["consistent"], false, "{summary}");
    assert!(
        stderr_of(&output).contains("can leave the export torn"),
        "{}",
        stderr_of(&output)
    );
}
