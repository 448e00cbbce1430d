//! The archive of what TTL deleted: retention's other half (docs/guide/retention.md).
//!
//! DynamoDB's TTL deletes an expired item some time after it expired, and writes a `REMOVE`
//! record to the table's stream whose `userIdentity` is the DynamoDB service
//! (`{"type": "Service", "principalId": "dynamodb.amazonaws.com"}`); a `DeleteItem` or a
//! transaction's delete made by a route has no `userIdentity` at all. `publish-events` reads the
//! stream already, so it is the one that recognises those records ([`archived`]) and writes the
//! deleted item, its old image, to the [`Archive`]: S3 on AWS, `.singlet/archive/` on a
//! developer's machine. Only the history that expires by policy ([`RETAINED`], returned loans) is
//! archived: the records that expire as plumbing (idempotency records, outbox items) hold nothing
//! worth keeping, and an idempotency record may hold a response with personal data.
//!
//! The object's key is the record's `eventID`, which a redelivered record keeps: the same batch
//! delivered twice writes the same objects again, never a second copy. Its body is one line in
//! the format `export` writes (`{"Item": {…}}`, each attribute in DynamoDB's wire form), so
//! `cat .singlet/archive/*.json` is an export's data file.

use crate::model::{ENTITY_TYPE, Entity, EntityType};
use aws_lambda_events::event::dynamodb::EventRecord;
use futures::future::BoxFuture;
use serde_dynamo::AttributeValue;

/// The `userIdentity` of a deletion made by DynamoDB's TTL.
pub const TTL_PRINCIPAL: &str = "dynamodb.amazonaws.com";

/// The entity types whose expiry is the retention policy, and whose TTL deletions are archived.
pub const RETAINED: &[&EntityType] = &[crate::model::loans::Checkout::TYPE];

/// Where TTL deletions are kept: each object put under its key whole, replacing one already
/// there (so a put is idempotent).
pub trait Archive: Send + Sync {
    fn put<'a>(&'a self, key: &'a str, body: &'a str) -> BoxFuture<'a, Result<(), String>>;
}

/// The archive on AWS: the bucket `ARCHIVE_BUCKET` names (the template's `ArchiveBucket`, which
/// the publisher may only `s3:PutObject` into). S3 replaces an object put again under its key,
/// and the bucket's versioning keeps the one before: a record delivered twice is still one
/// current object.
pub struct S3Archive {
    client: aws_sdk_s3::Client,
    bucket: String,
}

impl S3Archive {
    pub fn new(client: aws_sdk_s3::Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
        }
    }
}

impl Archive for S3Archive {
    fn put<'a>(&'a self, key: &'a str, body: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            self.client
                .put_object()
                .bucket(&self.bucket)
                .key(key)
                .content_type("application/json")
                .body(aws_sdk_s3::primitives::ByteStream::from(
                    body.as_bytes().to_vec(),
                ))
                .send()
                .await
                .map(drop)
                .map_err(|e| {
                    format!(
                        "PutObject failed: {}",
                        aws_sdk_s3::error::DisplayErrorContext(e)
                    )
                })
        })
    }
}

/// One object of the archive: its key and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archived {
    pub key: String,
    pub body: String,
}

/// Whether `record` is a deletion made by TTL (not through the API).
pub fn is_ttl_deletion(record: &EventRecord) -> bool {
    record.event_name == "REMOVE"
        && record
            .user_identity
            .as_ref()
            .is_some_and(|who| who.type_ == "Service" && who.principal_id == TTL_PRINCIPAL)
}

/// The archive object for `record`: `Some` for a TTL deletion of a retained entity type, keyed
/// by the record's `eventID`, holding its old image as one export line.
pub fn archived(record: &EventRecord) -> Option<Archived> {
    if !is_ttl_deletion(record) {
        return None;
    }
    let old = &record.change.old_image;
    let retained = match old.get(ENTITY_TYPE) {
        Some(AttributeValue::S(name)) => RETAINED.iter().any(|t| t.name == name),
        _ => false,
    };
    if !retained || record.event_id.is_empty() {
        return None;
    }
    let line = serde_json::json!({ "Item": old });
    Some(Archived {
        key: object_key(&record.event_id),
        body: format!("{line}\n"),
    })
}

/// The object key of a record's archive: its `eventID` (made of letters, digits and `-` by
/// DynamoDB and dynoxide alike; anything else is replaced, so a key is always a plain file name).
pub fn object_key(event_id: &str) -> String {
    let safe: String = event_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.json")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(name: &str, identity: Option<(&str, &str)>, et: &str) -> EventRecord {
        let mut value = json!({
            "eventID": "e-1",
            "eventName": name,
            "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1",
            "dynamodb": {
                "Keys": {"PK": {"S": "PATRON#p"}, "SK": {"S": "RETURNED#c"}},
                "OldImage": {"PK": {"S": "PATRON#p"}, "SK": {"S": "RETURNED#c"},
                             "_et": {"S": et}, "expiresAt": {"N": "1"}},
                "SequenceNumber": "1", "SizeBytes": 1, "StreamViewType": "NEW_AND_OLD_IMAGES"
            }
        });
        if let Some((kind, principal)) = identity {
            value["userIdentity"] = json!({"type": kind, "principalId": principal});
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_ttl_deletion_of_a_returned_loan_is_archived_under_its_event_id() {
        let archived =
            archived(&record("REMOVE", Some(("Service", TTL_PRINCIPAL)), "loan")).unwrap();
        assert_eq!(archived.key, "e-1.json");
        let line: serde_json::Value = serde_json::from_str(&archived.body).unwrap();
        assert_eq!(line["Item"]["PK"], json!({"S": "PATRON#p"}));
        assert_eq!(line["Item"]["expiresAt"], json!({"N": "1"}));
    }

    #[test]
    fn deletions_through_the_api_and_expired_plumbing_are_not() {
        assert_eq!(archived(&record("REMOVE", None, "loan")), None);
        assert_eq!(
            archived(&record("REMOVE", Some(("User", "someone")), "loan")),
            None
        );
        assert_eq!(
            archived(&record(
                "REMOVE",
                Some(("Service", TTL_PRINCIPAL)),
                "outbox"
            )),
            None
        );
        assert_eq!(
            archived(&record("MODIFY", Some(("Service", TTL_PRINCIPAL)), "loan")),
            None
        );
    }

    #[test]
    fn an_odd_event_id_still_makes_a_plain_file_name() {
        assert_eq!(object_key("a/../b"), "a____b.json");
    }
}
