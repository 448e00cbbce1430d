//! The model's registry against a table the API filled: every item the API writes carries `_et`
//! and `_v`, decodes as the entity it is, sits under the key its entity makes, and reads the same
//! without `_et`/`_v` (as an item written before they existed does).

use crate::both;
use crate::fixtures::{self, ISBN};
use crate::harness::mark_overdue;
use crate::harness::{Api, s};
use serde_json::json;
use singlet_functions::clock;
use singlet_functions::model::{self, ENTITY_TYPE, ENTITY_TYPES, VERSION};
use std::collections::BTreeSet;

both!(every_item_the_api_writes_decodes_through_the_registry);

/// Calls that write every entity type, in every state a loan takes.
async fn fill(api: &Api) {
    let vehicle = api
        .call("POST", "/vehicles")
        .header("idempotency-key", "model-vehicle")
        .json(json!({"plate": "KA 19 M", "chassis": "WVW-M", "depot": "north"}))
        .send()
        .await;
    assert_eq!(vehicle.status, 201, "{vehicle:?}");
    let vehicle_id = vehicle.body["vehicleId"].as_str().unwrap();
    let changed = api
        .put(
            format!("/vehicles/{vehicle_id}/plate"),
            json!({"plate": "KA 19 N"}),
        )
        .await;
    assert_eq!(changed.status, 200, "{changed:?}");

    let account = api
        .post(
            "/accounts",
            json!({"email": "model@example.com", "username": "model"}),
        )
        .await;
    assert_eq!(account.status, 201, "{account:?}");

    fixtures::library(api).await;
    let patron_id = fixtures::patron(api, "central", "M-1", "standard").await;
    let returned = fixtures::lend(api, &patron_id, "central").await;
    let reply = api
        .post(
            format!(
                "/patrons/{patron_id}/checkouts/{}/return",
                returned["checkoutId"].as_str().unwrap()
            ),
            json!({}),
        )
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    fixtures::lend(api, &patron_id, "central").await;
    // The second loan falls due and is marked: an overdue loan and the marker's record.
    let report = mark_overdue(&api.ctx, clock::now() + clock::days(30), 100, || true)
        .await
        .unwrap();
    assert_eq!(report.marked, 1, "{report:?}");
    fixtures::lend(api, &patron_id, "central").await;
    fixtures::copy(api, "east").await;
    let corrected = api
        .call("PATCH", format!("/books/{ISBN}"))
        .json(json!({"title": "Corrected"}))
        .send()
        .await;
    assert_eq!(corrected.status, 200, "{corrected:?}");

    let resource = api
        .post(
            "/resources",
            json!({"resourceId": "doc-m", "status": "draft"}),
        )
        .await;
    assert_eq!(resource.status, 201, "{resource:?}");
    let change = api
        .call("PATCH", "/resources/doc-m")
        .header("if-match", "\"1\"")
        .json(json!({"status": "review", "action": "submit"}))
        .send()
        .await;
    assert_eq!(change.status, 200, "{change:?}");
    // A subject without `accounts:admin` owns one account, held by an owner lock.
    let own = api
        .as_token(crate::harness::token("model-owner", "accounts:self", &[]))
        .post(
            "/accounts",
            json!({"email": "own@example.org", "username": "own-m"}),
        )
        .await;
    assert_eq!(own.status, 201, "{own:?}");
    // The operator's tools write their own bookkeeping: a migration's checkpoints.
    let migration = singlet_functions::migrations::by_name("vehicles-by-depot").unwrap();
    let report = singlet_tools::migrate::run(
        &api.ctx,
        migration,
        &singlet_tools::migrate::Options::default(),
    )
    .await
    .unwrap();
    assert!(report.complete, "{report:?}");
}

async fn every_item_the_api_writes_decodes_through_the_registry(api: Api) {
    fill(&api).await;

    let mut seen = BTreeSet::new();
    let mut loan_states = BTreeSet::new();
    for item in api.all_items().await {
        let (pk, sk) = (s(&item, "PK"), s(&item, "SK"));
        let decoded =
            model::decode(&item).unwrap_or_else(|e| panic!("undecodable: {e} in {item:?}"));
        let entity_type = decoded.entity_type();
        assert_eq!(s(&item, ENTITY_TYPE), entity_type.name, "{pk} / {sk}");
        assert_eq!(
            item.get(VERSION)
                .and_then(|v| v.as_n().ok())
                .map(String::as_str),
            Some(entity_type.version.to_string().as_str()),
            "{pk} / {sk}"
        );
        // The entity makes the key it is stored under, its index keys and every attribute: the
        // item is exactly what the model writes for it.
        assert_eq!(decoded.key().pk, pk);
        assert_eq!(decoded.key().sk, sk);
        assert_eq!(decoded.to_item(), item, "{pk} / {sk}");
        if !entity_type.may_expire() {
            assert!(!item.contains_key("expiresAt"), "{pk} / {sk}");
        }
        // Written before `_et` and `_v` existed (version 1), the same item reads as the same
        // entity, while version 1 is still the current or the one before; a vehicle (version 3)
        // of version 1 waits for `vehicles-by-depot`.
        let mut legacy = item.clone();
        legacy.remove(ENTITY_TYPE);
        legacy.remove(VERSION);
        if entity_type.version <= 2 {
            let read = model::decode(&legacy).unwrap_or_else(|e| panic!("legacy undecodable: {e}"));
            assert_eq!(read.entity_type().name, entity_type.name, "{pk} / {sk}");
            assert_eq!(read.to_item(), item, "{pk} / {sk}");
        } else {
            assert!(model::decode(&legacy).is_err(), "{pk} / {sk}");
        }

        if let model::TableEntity::Loan(loan) = &decoded {
            loan_states.insert(format!("{:?}", loan.status));
        }
        seen.insert(entity_type.name);
    }
    let every: BTreeSet<_> = ENTITY_TYPES.iter().map(|t| t.name).collect();
    assert_eq!(seen, every, "the calls above write every entity type");
    assert_eq!(
        loan_states,
        BTreeSet::from(["Open".into(), "Overdue".into(), "Returned".into()])
    );
}

#[test]
fn an_item_of_no_known_entity_is_undecodable() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let item = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), AttributeValue::S((*v).to_owned())))
            .collect::<crate::harness::Item>()
    };
    let unknown_key = model::decode(&item(&[("PK", "NOPE#1"), ("SK", "NOPE#1")])).unwrap_err();
    assert_eq!(unknown_key.pk, "NOPE#1");
    let unknown_type = item(&[
        ("PK", "VEHICLE#v"),
        ("SK", "VEHICLE#v"),
        ("_et", "spaceship"),
    ]);
    assert!(model::decode(&unknown_type).is_err());
    let wrong_key = item(&[("PK", "PLATE#x"), ("SK", "PLATE#x"), ("_et", "vehicle")]);
    assert!(model::decode(&wrong_key).is_err());
    let mut future = item(&[("PK", "ID#x"), ("SK", "ID#x"), ("route", "r")]);
    assert!(model::decode(&future).is_ok());
    future.insert("_v".into(), AttributeValue::N("3".into()));
    assert!(model::decode(&future).is_err(), "a version no reader reads");
}
