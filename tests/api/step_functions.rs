//! The tools on AWS as a Step Functions distributed map (docs/guide/tools-on-step-functions.md):
//! the stack's tools function (`table-tools`) run through the runner's `invoke`, one segment an
//! invocation, against the embedded engine; template.yaml's state machine against the function
//! it names; `migrate --on-aws` against a Step Functions endpoint of the test's own.

use crate::harness::{Api, Mode};
use crate::migrate::{migration, vehicles, write_old_vehicles};
use serde_json::{Value, json};
use singlet_tools::migrate::{self, Options};

const COUNT: usize = 600;
const SEGMENTS: u32 = 4;

/// The event the state machine hands the tools function for `segment`.
fn segment_event(segment: u32, stop_after: Option<u64>) -> String {
    let mut event = json!({
        "tool": "migrate",
        "migration": "vehicles-by-depot",
        "segment": segment,
        "segments": SEGMENTS,
        "maxWcu": 1000,
        "maxKeyWcu": 100,
        "pageSize": 50,
    });
    if let Some(stop_after) = stop_after {
        event["stopAfter"] = json!(stop_after);
    }
    event.to_string()
}

async fn invoke_segment(api: &Api, segment: u32, stop_after: Option<u64>) -> Value {
    singlet::invoke::invoke(&api.ctx, "table-tools", &segment_event(segment, stop_after))
        .await
        .unwrap()
}

/// Every item but the migration's checkpoints, as text, in key order.
async fn migrated_items(api: &Api) -> Vec<String> {
    let mut items: Vec<String> = api
        .items()
        .await
        .iter()
        .filter(|item| !crate::harness::s(item, "PK").starts_with("MIGRATION#"))
        .map(|item| format!("{:?}", std::collections::BTreeMap::from_iter(item.iter())))
        .collect();
    items.sort();
    items
}

/// Each segment invoked on its own migrates the table as the laptop's run of the same segments
/// does; a segment killed part way and invoked again resumes from its checkpoint and writes no
/// vehicle twice; a segment invoked once it is done reads nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_segments_invoked_one_by_one_migrate_as_the_laptop_does_and_resume() {
    let laptop = Api::start(Mode::Direct).await;
    let aws = Api::start(Mode::Direct).await;
    write_old_vehicles(&laptop, COUNT).await;
    write_old_vehicles(&aws, COUNT).await;

    let ran = migrate::run(
        &laptop.ctx,
        migration(),
        &Options {
            segments: SEGMENTS,
            page_size: Some(50),
            ..Options::default()
        },
    )
    .await
    .unwrap();
    assert!(ran.complete, "{ran:?}");
    assert_eq!(ran.changed, COUNT as u64);

    // Segment 1 killed after 30 writes, before its page's checkpoint.
    let killed = invoke_segment(&aws, 1, Some(30)).await;
    assert_eq!(killed["complete"], false, "{killed}");
    assert_eq!(killed["changed"], 30, "{killed}");
    assert_eq!(killed["segment"], 1);
    let states = migrate::states(&aws.ctx).await.unwrap();
    let state = states
        .iter()
        .find(|s| s.migration == "vehicles-by-depot")
        .unwrap();
    assert_eq!(state.state, "in progress", "{state:?}");

    let mut changed = killed["changed"].as_u64().unwrap();
    let mut already = 0;
    for segment in 0..SEGMENTS {
        let report = invoke_segment(&aws, segment, None).await;
        assert_eq!(report["complete"], true, "{report}");
        assert_eq!(report["migration"], "vehicles-by-depot");
        assert_eq!(report["segment"], segment);
        assert_eq!(report["segments"], SEGMENTS);
        assert_eq!(report["conflictCount"], 0);
        assert!(report["peakWcuPerSecond"].as_f64().unwrap() <= 1000.0);
        changed += report["changed"].as_u64().unwrap();
        already += report["alreadyChanged"].as_u64().unwrap();
    }
    // Every vehicle written once: the killed segment's page read again found the 30 already
    // changed, whose conditions refused a second write.
    assert_eq!(changed, COUNT as u64);
    assert!(
        already <= 50,
        "at most the killed page read again: {already}"
    );
    assert_eq!(migrated_items(&aws).await, migrated_items(&laptop).await);
    assert_eq!(vehicles(&aws.items().await).len(), COUNT);
    let states = migrate::states(&aws.ctx).await.unwrap();
    assert_eq!(states[0].state, "complete", "{:?}", states[0]);

    // A segment done and invoked again (a retried map item) reads nothing and is complete.
    let again = invoke_segment(&aws, 2, None).await;
    assert_eq!(again["complete"], true);
    assert_eq!(
        (again["scanned"].as_u64(), again["changed"].as_u64()),
        (Some(0), Some(0))
    );
}

/// What the tools function refuses, and why: a bad event, a segment outside the run, another
/// segment count than a stopped run's, a migration that must survey the whole table first, and
/// fsck (not per segment yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_segment_refusals_say_why() {
    let api = Api::start(Mode::Direct).await;
    write_old_vehicles(&api, 20).await;
    let refused = |event: Value| {
        let ctx = api.ctx.clone();
        async move {
            singlet::invoke::invoke(&ctx, "table-tools", &event.to_string())
                .await
                .unwrap_err()
        }
    };
    let base =
        json!({"tool": "migrate", "migration": "vehicles-by-depot", "segment": 0, "segments": 2});
    let with = |field: &str, value: Value| {
        let mut event = base.clone();
        event[field] = value;
        event
    };
    assert!(
        refused(with("segment", json!(2)))
            .await
            .contains("not one of the run's 2")
    );
    assert!(
        refused(with("segments", json!(0)))
            .await
            .contains("at least 1")
    );
    assert!(refused(with("maxWcu", json!(0))).await.contains("maxWcu"));
    assert!(
        refused(with("migration", json!("nope")))
            .await
            .contains("no migration named nope")
    );
    assert!(
        refused(with("tool", json!("fsck")))
            .await
            .contains("fsck does not run per segment")
    );
    assert!(
        refused(with("bogus", json!(1)))
            .await
            .contains("unknown field")
    );
    let plates = refused(with("migration", json!("plates-compact"))).await;
    assert!(plates.contains("from a machine"), "{plates}");

    // Segment 0 of 2 started (and stopped): segment 1 of 4 is another run's.
    let stopped = singlet::invoke::invoke(
        &api.ctx,
        "table-tools",
        &with("stopAfter", json!(1)).to_string(),
    )
    .await
    .unwrap();
    assert_eq!(stopped["complete"], false);
    let mut other = with("segments", json!(4));
    other["segment"] = json!(1);
    assert!(refused(other).await.contains("resume it with 2 segments"));
}

/// `singlet invoke table-tools --event events/tools/migrate-segment.json`: the event file the
/// guide gives, through the runner's command, on a table with nothing to migrate.
#[test]
fn invoke_runs_the_tools_function_on_its_event_file() {
    let root = env!("CARGO_MANIFEST_DIR");
    let output = crate::process::singlet()
        .current_dir(root)
        .args(["--in-memory", "invoke", "table-tools"])
        .args(["--event", "events/tools/migrate-segment.json"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["migration"], "vehicles-by-depot", "{report}");
    assert_eq!(report["complete"], true, "{report}");
    assert_eq!(
        (report["segment"].as_u64(), report["segments"].as_u64()),
        (Some(0), Some(1))
    );
    let listed = crate::process::singlet()
        .args(["invoke", "--list"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains("table-tools"));
}
