//! Stream records into events. Two kinds of record carry one:
//! - an outbox item's `INSERT` (every route's change): the event is in the item, whole;
//! - a loan's (`_et` `loan`) `MODIFY` from `open` to `overdue`: the marker moving it, which is
//!   one item's single write, so the loan's own record is the event (`LoanOverdue`, actor
//!   `mark-overdue`) and marking a loan costs no second write.
//!
//! Every other record (locks, entities, an outbox item's TTL deletion, ...) is skipped. The
//! event-source mapping's filter (`mapping::FILTERS`) lets only these two kinds through on AWS;
//! the checks here are the same, so a record the filter let through by mistake is still skipped.

use super::outbox::{ENTITY_TYPE, OutboxItem, VERSION};
use super::{Detail, Entry, EventType, Subject, timestamp};
use crate::model::ENTITY_TYPE as ENTITY_TYPE_ATTRIBUTE;
use crate::model::Entity;
use crate::model::loans::{Checkout, LoanStatus};
use aws_lambda_events::event::dynamodb::EventRecord;
use serde_dynamo::AttributeValue;
use time::OffsetDateTime;

/// The marker's `actor`.
pub const MARKER: &str = "mark-overdue";

/// What one stream record is to the publisher.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    Publish(Entry),
    /// A record that carries no event.
    Skip,
    /// An outbox item (or a marked loan) that does not decode: it cannot be published, and is
    /// reported as a failure so that it ends in the on-failure destination, never silently lost.
    Undecodable(String),
}

pub fn decode(record: &EventRecord) -> Decoded {
    let new = &record.change.new_image;
    if text(new, ENTITY_TYPE_ATTRIBUTE) == Some(ENTITY_TYPE) {
        if record.event_name != "INSERT" {
            return Decoded::Skip;
        }
        if !matches!(new.get("_v"), Some(AttributeValue::N(v)) if v.parse() == Ok(VERSION)) {
            return Decoded::Undecodable(
                "an outbox item of a version this code does not read".into(),
            );
        }
        return match serde_dynamo::from_item::<_, OutboxItem>(new.clone()) {
            Ok(item) => match item.entry() {
                Some(entry) => Decoded::Publish(entry),
                None => Decoded::Undecodable("an outbox item whose event does not decode".into()),
            },
            Err(_) => Decoded::Undecodable("an outbox item that does not decode".into()),
        };
    }
    if is_marked_overdue(record) {
        return match serde_dynamo::from_item::<_, Checkout>(new.clone()) {
            Ok(loan) => Decoded::Publish(loan_overdue(loan, record)),
            Err(_) => Decoded::Undecodable("a marked loan that does not decode".into()),
        };
    }
    Decoded::Skip
}

/// A loan's `MODIFY` from `open` to `overdue`: only the marker makes it (a renewal keeps a loan
/// open, a return deletes it). A loan by its entity type (`_et`, which the marker's update
/// stamps), not by its status alone: a resource's status is whatever its writers say, and a
/// resource flipped from `open` to `overdue` is its own change, published from its outbox item,
/// never a loan that fails to decode.
fn is_marked_overdue(record: &EventRecord) -> bool {
    let status = |item| {
        let status = text(item, Checkout::STATUS.name())?;
        serde_json::from_value::<LoanStatus>(status.into()).ok()
    };
    record.event_name == "MODIFY"
        && text(&record.change.new_image, ENTITY_TYPE_ATTRIBUTE) == Some(Checkout::TYPE.name)
        && status(&record.change.old_image) == Some(LoanStatus::Open)
        && status(&record.change.new_image) == Some(LoanStatus::Overdue)
}

/// The marker's event for `loan`. Its id is derived from the loan and its due date, which is
/// marked once: a record delivered again, or the same mark seen twice, is the same event.
fn loan_overdue(loan: Checkout, record: &EventRecord) -> Entry {
    let kind = EventType::LoanOverdue;
    let name = format!("{}/{}/{}", kind.name(), loan.checkout_id, loan.due_date);
    let event_id = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, name.as_bytes());
    let at = record.change.approximate_creation_date_time;
    let occurred_at =
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(at.timestamp_millis()) * 1_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let loan = Checkout {
        status: LoanStatus::Overdue,
        ..loan
    };
    Detail {
        event_id: event_id.hyphenated().to_string(),
        kind: kind.name().to_owned(),
        subject: Subject {
            kind: kind.subject_type().to_owned(),
            id: loan.checkout_id.to_string(),
        },
        actor: MARKER.to_owned(),
        occurred_at: timestamp(occurred_at),
        data: serde_json::to_value(&loan).expect("a loan serialises"),
        sequence: None,
    }
    .entry(kind)
}

fn text<'i>(item: &'i serde_dynamo::Item, name: &str) -> Option<&'i str> {
    match item.get(name) {
        Some(AttributeValue::S(value)) => Some(value),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn modified(et: &str) -> EventRecord {
        serde_json::from_value(json!({
            "eventID": "e-1",
            "eventName": "MODIFY",
            "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1",
            "dynamodb": {
                "Keys": {"PK": {"S": "RESOURCE#r"}, "SK": {"S": "CURRENT"}},
                "OldImage": {"_et": {"S": et}, "status": {"S": "open"}},
                "NewImage": {"_et": {"S": et}, "status": {"S": "overdue"}},
                "SequenceNumber": "1", "SizeBytes": 1, "StreamViewType": "NEW_AND_OLD_IMAGES"
            }
        }))
        .unwrap()
    }

    #[test]
    fn only_a_loan_is_read_as_a_marked_loan() {
        assert_eq!(decode(&modified("resource")), Decoded::Skip);
        // A loan's record that does not decode is still reported, never skipped.
        assert!(matches!(decode(&modified("loan")), Decoded::Undecodable(_)));
    }
}
