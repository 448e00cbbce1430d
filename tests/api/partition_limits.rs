//! DynamoDB's per-key limits on the embedded engine (API.md, "Partition limits on the laptop"):
//! through the engine's endpoint with the SDK (its retries off, so each refusal is seen as the
//! engine answered it), through the runner's door, and through the API. Every engine here runs on
//! a frozen clock: "one second" is the clock's, never the test's speed.

use crate::harness::{Api, Mode};
use crate::process;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, PutRequest, TransactWriteItem, WriteRequest};
use serde_json::json;
use singlet_functions::Ctx;
use singlet_functions::clock::Clock;
use singlet_functions::cursor::CursorKeys;
use time::macros::datetime;

const TABLE: &str = "singlet";

/// An engine on a frozen clock, and a client of it that does not retry.
async fn engine() -> (Client, String, Clock) {
    let clock = Clock::frozen(datetime!(2026-12-03 12:00:00 UTC));
    let (client, endpoint, _) =
        singlet::serve::engine::start_in_memory_with_clock(TABLE, &clock).await;
    (no_retries(&client), endpoint, clock)
}

fn no_retries(client: &Client) -> Client {
    Client::from_conf(
        client
            .config()
            .to_builder()
            .retry_config(RetryConfig::disabled())
            .build(),
    )
}

/// An item at `pk`/`sk` of about `bytes` (a 10,000-byte one is 10 write units), with `extra`
/// string attributes.
fn item(pk: &str, sk: &str, bytes: usize, extra: &[(&str, &str)]) -> Vec<(String, AttributeValue)> {
    let mut item = vec![
        ("PK".to_owned(), AttributeValue::S(pk.into())),
        ("SK".to_owned(), AttributeValue::S(sk.into())),
        ("blob".to_owned(), AttributeValue::S("x".repeat(bytes))),
    ];
    item.extend(
        extra
            .iter()
            .map(|(n, v)| ((*n).to_owned(), AttributeValue::S((*v).into()))),
    );
    item
}

async fn put(
    client: &Client,
    item: Vec<(String, AttributeValue)>,
) -> Result<(), aws_sdk_dynamodb::error::SdkError<PutItemError>> {
    client
        .put_item()
        .table_name(TABLE)
        .set_item(Some(item.into_iter().collect()))
        .send()
        .await
        .map(drop)
}

async fn exists(client: &Client, pk: &str, sk: &str) -> bool {
    crate::harness::item_at(client, TABLE, pk, sk)
        .await
        .is_some()
}

async fn table_arn(client: &Client) -> String {
    crate::s3_layout::table_arn(client, TABLE).await
}

/// The reason and resource of a refused put, or why it was not the refusal it should be.
fn throttled(error: aws_sdk_dynamodb::error::SdkError<PutItemError>) -> (String, String) {
    match error.into_service_error() {
        PutItemError::ProvisionedThroughputExceededException(refused) => {
            let reason = &refused.throttling_reasons()[0];
            (
                reason.reason().unwrap().to_owned(),
                reason.resource().unwrap().to_owned(),
            )
        }
        other => panic!("not throttled: {other:?}"),
    }
}

/// A key's heat as the console reads it: its peak write units in a second.
fn peak_wcu(endpoint: &str, clock: &Clock, index: Option<&str>, pk: &str) -> f64 {
    let limiter = singlet::serve::partition_limits::at(endpoint).expect("the engine is limited");
    let report = limiter.meter.report(clock.now().unix_timestamp());
    report
        .families
        .iter()
        .filter(|f| f.index.as_deref() == index)
        .flat_map(|f| &f.keys)
        .find(|k| k.pk == pk)
        .map_or(0.0, |k| k.peak_wcu_per_second)
}

#[tokio::test]
async fn a_hot_key_is_throttled_with_the_tables_reason_and_arn_until_the_next_second() {
    let (client, endpoint, clock) = engine().await;
    for i in 0..100 {
        put(&client, item("HOT#1", &format!("S#{i}"), 10_000, &[]))
            .await
            .unwrap_or_else(|e| panic!("put {i}: {e:?}"));
    }
    let refused = put(&client, item("HOT#1", "S#100", 10_000, &[]))
        .await
        .unwrap_err();
    let (reason, resource) = throttled(refused);
    assert_eq!(reason, "TableWriteKeyRangeThroughputExceeded");
    assert_eq!(resource, table_arn(&client).await);
    assert!(
        !exists(&client, "HOT#1", "S#100").await,
        "a refused put wrote"
    );
    assert_eq!(peak_wcu(&endpoint, &clock, None, "HOT#1"), 1000.0);
    // Another key is served meanwhile, and the hot one again in the next second.
    put(&client, item("COLD#1", "S", 10_000, &[]))
        .await
        .unwrap();
    clock.advance(time::Duration::seconds(1));
    put(&client, item("HOT#1", "S#100", 10_000, &[]))
        .await
        .unwrap();
}

#[tokio::test]
async fn the_same_units_spread_over_many_keys_pass() {
    let (client, _, _) = engine().await;
    // 3,000 write units in one second, 10 on each of 300 keys.
    for i in 0..300 {
        put(&client, item(&format!("SPREAD#{i}"), "S", 10_000, &[]))
            .await
            .unwrap_or_else(|e| panic!("put {i}: {e:?}"));
    }
}

#[tokio::test]
async fn writes_over_many_table_keys_landing_on_one_index_key_are_throttled_at_the_index() {
    let (client, endpoint, clock) = engine().await;
    for i in 0..100 {
        let sk = format!("{i:04}");
        put(
            &client,
            item(
                &format!("LOAN#{i}"),
                "L",
                10_000,
                &[("GSI4PK", "OVERDUE"), ("GSI4SK", &sk)],
            ),
        )
        .await
        .unwrap_or_else(|e| panic!("put {i}: {e:?}"));
    }
    let refused = put(
        &client,
        item(
            "LOAN#100",
            "L",
            10_000,
            &[("GSI4PK", "OVERDUE"), ("GSI4SK", "0100")],
        ),
    )
    .await
    .unwrap_err();
    let (reason, resource) = throttled(refused);
    assert_eq!(reason, "IndexWriteKeyRangeThroughputExceeded");
    assert_eq!(resource, format!("{}/index/GSI4", table_arn(&client).await));
    assert!(!exists(&client, "LOAN#100", "L").await);
    // The same table key with no entry in the index is served.
    put(&client, item("LOAN#100", "L", 10_000, &[]))
        .await
        .unwrap();
    assert_eq!(peak_wcu(&endpoint, &clock, Some("GSI4"), "OVERDUE"), 1000.0);
}

/// An update whose index key the request does not say plainly (`if_not_exists`) is charged to
/// the index key once the engine has run it: the next write to that index key is refused.
#[tokio::test]
async fn an_index_key_an_update_wrote_is_learned_from_the_engine_and_throttles_later_writes() {
    let (client, endpoint, clock) = engine().await;
    for i in 0..100 {
        put(&client, item(&format!("LOAN#{i}"), "L", 10_000, &[]))
            .await
            .unwrap();
    }
    clock.advance(time::Duration::seconds(1));
    for i in 0..100 {
        client
            .update_item()
            .table_name(TABLE)
            .key("PK", AttributeValue::S(format!("LOAN#{i}")))
            .key("SK", AttributeValue::S("L".into()))
            .update_expression("SET GSI4PK = if_not_exists(GSI4PK, :o), GSI4SK = :sk")
            .expression_attribute_values(":o", AttributeValue::S("OVERDUE".into()))
            .expression_attribute_values(":sk", AttributeValue::S(format!("{i:04}")))
            .send()
            .await
            .unwrap_or_else(|e| panic!("update {i}: {e:?}"));
    }
    assert_eq!(peak_wcu(&endpoint, &clock, Some("GSI4"), "OVERDUE"), 1000.0);
    let refused = put(
        &client,
        item(
            "LOAN#200",
            "L",
            10,
            &[("GSI4PK", "OVERDUE"), ("GSI4SK", "0200")],
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(throttled(refused).0, "IndexWriteKeyRangeThroughputExceeded");
}

#[tokio::test]
async fn a_transaction_is_cancelled_with_throttling_error_at_the_hot_part_only() {
    let (client, endpoint, clock) = engine().await;
    // Twice the units of a plain write: 2 write units for a small item.
    let one = |pk: &str| {
        TransactWriteItem::builder()
            .put(
                Put::builder()
                    .table_name(TABLE)
                    .set_item(Some(item(pk, "S", 10, &[]).into_iter().collect()))
                    .build()
                    .unwrap(),
            )
            .build()
    };
    client
        .transact_write_items()
        .transact_items(one("TX#1"))
        .send()
        .await
        .unwrap();
    assert_eq!(peak_wcu(&endpoint, &clock, None, "TX#1"), 2.0);
    for i in 0..100 {
        put(&client, item("HOT#TX", &format!("S#{i}"), 10_000, &[]))
            .await
            .unwrap();
    }
    let cancelled = client
        .transact_write_items()
        .transact_items(one("COLD#TX"))
        .transact_items(one("HOT#TX"))
        .send()
        .await
        .unwrap_err();
    let cancelled = cancelled.into_service_error();
    assert_eq!(cancelled.code(), Some("TransactionCanceledException"));
    let aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(cancelled) = cancelled else {
        panic!("not cancelled");
    };
    let codes: Vec<&str> = cancelled
        .cancellation_reasons()
        .iter()
        .map(|r| r.code().unwrap())
        .collect();
    assert_eq!(codes, ["None", "ThrottlingError"]);
    assert!(
        !exists(&client, "COLD#TX", "S").await,
        "a cancelled transaction wrote"
    );
}

#[tokio::test]
async fn a_write_its_condition_refused_still_consumes_the_keys_units() {
    let (client, endpoint, clock) = engine().await;
    put(&client, item("COND#1", "S", 10_000, &[]))
        .await
        .unwrap();
    for i in 0..99 {
        let refused = client
            .put_item()
            .table_name(TABLE)
            .set_item(Some(item("COND#1", "S", 10_000, &[]).into_iter().collect()))
            .condition_expression("attribute_not_exists(PK)")
            .send()
            .await
            .unwrap_err();
        assert_eq!(
            refused.into_service_error().code(),
            Some("ConditionalCheckFailedException"),
            "write {i}"
        );
    }
    assert_eq!(peak_wcu(&endpoint, &clock, None, "COND#1"), 1000.0);
    let refused = put(&client, item("COND#1", "T", 10, &[]))
        .await
        .unwrap_err();
    assert_eq!(throttled(refused).0, "TableWriteKeyRangeThroughputExceeded");
}

#[tokio::test]
async fn a_batch_is_judged_item_by_item_and_answers_the_rest_unprocessed() {
    let (client, _, _) = engine().await;
    // 98 write units each: ten fit in the hot key's second, ten do not; the cold ones all do.
    let request = |pk: &str, sk: String| {
        WriteRequest::builder()
            .put_request(
                PutRequest::builder()
                    .set_item(Some(item(pk, &sk, 100_000, &[]).into_iter().collect()))
                    .build()
                    .unwrap(),
            )
            .build()
    };
    let mut writes: Vec<WriteRequest> = (0..20)
        .map(|i| request("BATCH#HOT", format!("{i:02}")))
        .collect();
    writes.extend((0..5).map(|i| request(&format!("BATCH#{i}"), "S".into())));
    let answer = client
        .batch_write_item()
        .request_items(TABLE, writes)
        .send()
        .await
        .unwrap();
    let unprocessed = answer.unprocessed_items().unwrap()[TABLE].len();
    assert_eq!(unprocessed, 10);
    assert!(exists(&client, "BATCH#HOT", "09").await);
    assert!(!exists(&client, "BATCH#HOT", "10").await);
    assert!(exists(&client, "BATCH#4", "S").await);
    // Nothing of it can go: the whole batch is refused as DynamoDB refuses it.
    let refused = client
        .batch_write_item()
        .request_items(TABLE, vec![request("BATCH#HOT", "20".into())])
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        refused.into_service_error().code(),
        Some("ProvisionedThroughputExceededException")
    );
}

/// A throttled API request is a `503` `/problems/throttled` with `retry-after`, and wrote
/// nothing: no vehicle, no lock, no outbox event.
#[tokio::test]
async fn a_throttled_api_request_is_a_503_that_wrote_nothing() {
    let clock = Clock::frozen(datetime!(2026-12-03 12:00:00 UTC));
    let (engine_client, _, _) =
        singlet::serve::engine::start_in_memory_with_clock(TABLE, &clock).await;
    let mut ctx = Ctx::new(engine_client.clone(), TABLE, CursorKeys::random());
    ctx.clock = clock.clone();
    let api = Api::start_on(Mode::Http, ctx).await;
    let client = no_retries(&engine_client);
    for i in 0..100 {
        put(
            &client,
            item("PLATE#ka19xtr", &format!("HEAT#{i}"), 10_000, &[]),
        )
        .await
        .unwrap();
    }
    let reply = api
        .post(
            "/vehicles",
            json!({"plate": "KA19 XTR", "chassis": "WVW1", "depot": "north"}),
        )
        .await;
    reply.assert_problem(503, &[]);
    assert_eq!(reply.body["type"], "/problems/throttled", "{reply:?}");
    assert_eq!(reply.header("retry-after"), Some("1"));
    let items = client
        .scan()
        .table_name(TABLE)
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .items
        .unwrap_or_default();
    let others: Vec<_> = items
        .iter()
        .filter(|item| !item["SK"].as_s().unwrap().starts_with("HEAT#"))
        .collect();
    assert!(others.is_empty(), "a throttled request wrote {others:?}");

    // A read kept over its key's limit through the SDK's retries is the same 503.
    clock.advance(time::Duration::seconds(1));
    put(&client, item("PLATE#ka19xtr", "BIG", 390_000, &[]))
        .await
        .unwrap();
    clock.advance(time::Duration::seconds(1));
    let read = |sk: &'static str| {
        client
            .get_item()
            .table_name(TABLE)
            .key("PK", AttributeValue::S("PLATE#ka19xtr".into()))
            .key("SK", AttributeValue::S(sk.into()))
            .consistent_read(true)
            .send()
    };
    while read("BIG").await.is_ok() {}
    while read("NOTHING").await.is_ok() {}
    let reply = api.get("/plates/KA19%20XTR").await;
    reply.assert_problem(503, &[]);
    assert_eq!(reply.body["type"], "/problems/throttled", "{reply:?}");
}

/// The runner's door: a program's requests are limited too, unless `--partition-limits off`.
/// 390 KB puts are 381 write units each: with the limits on no more than two of them go in any
/// one second of the runner's (system) clock, so of ten sent at once most are refused; off, every
/// one goes in.
#[tokio::test]
async fn the_runners_engine_endpoint_is_limited_unless_the_limits_are_off() {
    for (switch, all_pass) in [("off", true), ("on", false)] {
        let mut command = process::singlet();
        command.args([
            "--in-memory",
            "--mark-overdue-every",
            "0",
            "--partition-limits",
            switch,
        ]);
        let runner = process::serve(command);
        let client = no_retries(&singlet::serve::engine::local_client(
            runner.engine.as_deref().unwrap(),
        ));
        let puts = (0..10).map(|i| put(&client, item("DOOR#1", &format!("S#{i}"), 390_000, &[])));
        let mut refused = 0;
        for outcome in futures::future::join_all(puts).await {
            if let Err(error) = outcome {
                assert_eq!(throttled(error).0, "TableWriteKeyRangeThroughputExceeded");
                refused += 1;
            }
        }
        assert_eq!(
            refused == 0,
            all_pass,
            "--partition-limits {switch}: {refused} refused"
        );
    }
}

#[test]
fn partition_limits_takes_on_or_off_only() {
    let refused = process::singlet()
        .args(["--in-memory", "--partition-limits", "maybe", "token"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
}
