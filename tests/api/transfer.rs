//! `export` and `load` (docs/API.md, "Import and export"): the table in DynamoDB's export format
//! and back, item for item, on a real engine; and the CLI's refusals with their exit codes.

use crate::fixtures::{self, ISBN};
use crate::harness::{Api, Item, Mode, s};
use crate::process::singlet;
use serde_json::{Value, json};
use singlet::{engine, transfer};
use std::path::PathBuf;

/// A table with every domain in it, written through the API.
async fn filled() -> Api {
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
fn dump(items: Vec<Item>) -> Vec<Value> {
    let mut items = items;
    items.sort_by(|a, b| (s(a, "PK"), s(a, "SK")).cmp(&(s(b, "PK"), s(b, "SK"))));
    items.iter().map(transfer::item_to_json).collect()
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("transfer")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
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

    let (fresh, _) = engine::start_in_memory("copy").await;
    let loaded = transfer::load(&fresh, "copy", &dir, transfer::Target::Api)
        .await
        .unwrap();
    assert_eq!(loaded, original.len() as u64);
    let copy = Api::start(Mode::Direct)
        .await
        .with_ctx(singlet_functions::Ctx::new(
            fresh.clone(),
            "copy",
            singlet_functions::cursor::CursorKeys::random(),
        ));
    assert_eq!(dump(copy.all_items().await), original);

    // The copy answers as the original did: its indexes were written with its items.
    let reply = copy.get(format!("/books/{ISBN}/availability")).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        reply.body,
        api.get(format!("/books/{ISBN}/availability")).await.body
    );

    // A table that holds items is refused, and nothing is written to it.
    let refused = transfer::load(&fresh, "copy", &dir, transfer::Target::Api)
        .await
        .unwrap_err();
    assert!(refused.contains("already holds items"), "{refused}");
    assert_eq!(dump(copy.all_items().await), original);
    // An export is never written over another.
    let refused = transfer::export(&api.ctx.db, &api.ctx.table, &dir, 1, &|item| item)
        .await
        .unwrap_err();
    assert!(refused.contains("already holds an export"), "{refused}");
}

#[test]
fn the_cli_refuses_what_is_not_an_export_with_exit_2() {
    let dir = scratch("not-an-export");
    std::fs::create_dir_all(&dir).unwrap();
    let output = singlet()
        .args(["--in-memory", "load"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("is not an export"), "{stderr}");

    // A data line that is not DynamoDB JSON names its file and line.
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("manifest-summary.json"), r#"{"itemCount": 1}"#).unwrap();
    std::fs::write(
        dir.join("data/00000000.json"),
        "{\"Item\": {\"PK\": {\"Q\": \"x\"}}}\n",
    )
    .unwrap();
    let output = singlet()
        .args(["--in-memory", "load"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("00000000.json:1"), "{stderr}");
}

#[test]
fn the_cli_exports_and_loads_with_a_json_summary() {
    let dir = scratch("cli");
    let data = scratch("cli-data").with_extension("db");
    let seeded = singlet()
        .arg("--data")
        .arg(&data)
        .args(["export", "--json"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(seeded.status.code(), Some(0), "{seeded:?}");
    let summary: Value = serde_json::from_slice(&seeded.stdout).unwrap();
    assert_eq!(summary, json!({"exported": 0, "files": 4}));

    let loaded = singlet()
        .args(["--in-memory", "load", "--json"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(loaded.status.code(), Some(0), "{loaded:?}");
    let summary: Value = serde_json::from_slice(&loaded.stdout).unwrap();
    assert_eq!(summary, json!({"loaded": 0}));
}
