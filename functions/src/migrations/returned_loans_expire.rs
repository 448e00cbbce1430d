//! `returned-loans-expire`: `expiresAt` on loans returned before retention existed. A return
//! now writes it (`LoanHistoryDays` after the return, the table's TTL attribute); a loan
//! returned before kept no end, so its patron's history would keep it for ever. This writes
//! the same end the return would have written, from the loan's own `returnedDate` and the
//! runner's `--loan-history-days` (the deployment's `LoanHistoryDays`), and takes the loan to
//! version 2. A loan whose end has already passed then expires at once: reads stop showing it
//! and TTL deletes (and the publisher archives) it, as for any other. A returned loan at version
//! 2 without an end (which `fsck` reports) gets it back the same way, its version unchanged.

use super::{Migration, Plan, Settings, Survey};
use crate::clock;
use crate::model::loans::Checkout;
use crate::model::{KeyOf, key_of};
use crate::store::migration::Change;
use crate::store::{Condition, Item, Update};
use singlet_shared::keys;

pub const MIGRATION: Migration = Migration {
    name: "returned-loans-expire",
    summary: "write expiresAt (LoanHistoryDays after the return) on loans returned before retention",
    after: None,
    claims: None,
    plan,
};

fn plan(item: &Item, _: &Survey, settings: &Settings) -> Plan {
    // A returned loan's key (`PATRON#…`/`RETURNED#…`), not an active one's.
    let Some(key) = key_of(item)
        .filter(|key| key.sk.starts_with(keys::RETURNED_PREFIX))
        .and_then(KeyOf::<Checkout>::checked)
    else {
        return Plan::Skip;
    };
    if item.contains_key(Checkout::EXPIRES_AT.name()) {
        return Plan::Skip;
    }
    let Ok(loan) = serde_dynamo::from_item::<_, Checkout>(item.clone()) else {
        return Plan::Conflict("the returned loan does not decode".into());
    };
    let Some(returned) = loan.returned_date.as_deref().and_then(clock::parse_iso) else {
        return Plan::Conflict("the returned loan has no valid returnedDate".into());
    };
    // A loan at the version already that lost its end (`fsck`'s `expiry` finds it) gets it back
    // and keeps its version.
    Plan::Change(Change::update(
        Update::<Checkout>::at(key)
            .set(
                Checkout::EXPIRES_AT,
                Checkout::history_ends(returned, settings.loan_history_days),
            )
            .to_version_from(item, Checkout::EXPIRES_SINCE)
            .when(Condition::exists().and_missing(Checkout::EXPIRES_AT)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::s;

    fn returned_loan(returned_date: Option<&str>) -> Item {
        let mut item = Item::from([
            ("PK".into(), s("PATRON#p1")),
            ("SK".into(), s("RETURNED#c1")),
            ("checkoutId".into(), s("c1")),
            ("patronId".into(), s("p1")),
            ("patronBranchId".into(), s("central")),
            ("branchId".into(), s("central")),
            ("copyId".into(), s("k1")),
            ("isbn".into(), s("9780132350884")),
            ("title".into(), s("Clean Code")),
            ("status".into(), s("returned")),
            ("checkedOutAt".into(), s("2025-01-01T10:00:00Z")),
            ("dueDate".into(), s("2025-01-22T10:00:00Z")),
            (
                "renewalCount".into(),
                aws_sdk_dynamodb::types::AttributeValue::N("0".into()),
            ),
            (
                "loanPeriodDays".into(),
                aws_sdk_dynamodb::types::AttributeValue::N("21".into()),
            ),
        ]);
        if let Some(date) = returned_date {
            item.insert("returnedDate".into(), s(date));
        }
        item
    }

    #[test]
    fn a_loan_returned_before_retention_gets_the_end_its_return_would_have_written() {
        let settings = Settings {
            loan_history_days: 30,
        };
        let item = returned_loan(Some("2025-01-10T10:00:00Z"));
        let Plan::Change(change) = plan(&item, &Survey::default(), &settings) else {
            panic!("a change")
        };
        let returned = clock::parse_iso("2025-01-10T10:00:00Z").unwrap();
        let text = format!("{change:?}");
        let end = Checkout::history_ends(returned, 30);
        assert_eq!(end, returned.unix_timestamp() + 30 * 86_400);
        assert!(text.contains(&end.to_string()), "{text}");
    }

    #[test]
    fn active_loans_loans_with_an_end_and_other_items_are_left_alone() {
        let settings = Settings::default();
        let mut done = returned_loan(Some("2025-01-10T10:00:00Z"));
        done.insert(
            "expiresAt".into(),
            aws_sdk_dynamodb::types::AttributeValue::N("1".into()),
        );
        assert!(matches!(
            plan(&done, &Survey::default(), &settings),
            Plan::Skip
        ));
        let mut active = returned_loan(None);
        active.insert("SK".into(), s("CHECKOUT#c1"));
        assert!(matches!(
            plan(&active, &Survey::default(), &settings),
            Plan::Skip
        ));
        assert!(matches!(
            plan(&returned_loan(None), &Survey::default(), &settings),
            Plan::Conflict(_)
        ));
    }
}
