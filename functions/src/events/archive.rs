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
//! delivered twice finds its objects already there, never makes a second copy, and never
//! replaces one (the bucket is append-only on AWS). Its body is one line in
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

/// Where TTL deletions are kept: each object put under its key whole; a put under a key already
/// there succeeds (so a put is idempotent: a key's object is always the same record's).
pub trait Archive: Send + Sync {
    fn put<'a>(&'a self, key: &'a str, body: &'a str) -> BoxFuture<'a, Result<(), String>>;
}

/// The archive on AWS: the bucket `ARCHIVE_BUCKET` names (the template's `ArchiveBucket`, which
/// the publisher may only `s3:PutObject` into). Each object is put only if its key is new
/// (`If-None-Match: *`), as the bucket's policy requires of every put: what is archived is
/// never replaced, by the publisher or anyone. A key already there (S3's `412
/// PreconditionFailed`) is a record delivered again, whose object is the one already written
/// (the same record's same old image): done.
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
            let put = self
                .client
                .put_object()
                .bucket(&self.bucket)
                .key(key)
                .content_type("application/json")
                .if_none_match("*")
                .body(aws_sdk_s3::primitives::ByteStream::from(
                    body.as_bytes().to_vec(),
                ))
                .send()
                .await;
            match put {
                Ok(_) => Ok(()),
                Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 412) => Ok(()),
                Err(e) => Err(format!(
                    "PutObject failed: {}",
                    aws_sdk_s3::error::DisplayErrorContext(e)
                )),
            }
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

    /// S3 as the SDK's HTTP client sees it: objects by key, a conditional put (`If-None-Match:
    /// *`) refused with `412` when its key is there, and every put's `If-None-Match` kept.
    #[derive(Debug, Clone, Default)]
    struct Bucket {
        objects: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, Vec<u8>>>>,
        conditions: std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>,
        /// Every put refused as the bucket's policy refuses it (`403`).
        denied: bool,
    }

    mod seam {
        use super::Bucket;
        use aws_smithy_runtime_api::client::http::{HttpConnector, HttpConnectorFuture};
        use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
        use aws_smithy_types::body::SdkBody;

        impl HttpConnector for Bucket {
            fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
                // The object's key is the path's last segment, without the SDK's `?x-id=PutObject`.
                let key = request
                    .uri()
                    .split('?')
                    .next()
                    .unwrap_or_default()
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                let condition = request.headers().get("if-none-match").map(str::to_owned);
                let body = request.body().bytes().unwrap_or_default().to_vec();
                self.conditions.lock().unwrap().push(condition.clone());
                let mut objects = self.objects.lock().unwrap();
                let (status, answer) = if self.denied {
                    (403, "<Error><Code>AccessDenied</Code></Error>")
                } else if condition.as_deref() == Some("*") && objects.contains_key(&key) {
                    (412, "<Error><Code>PreconditionFailed</Code></Error>")
                } else {
                    objects.insert(key, body);
                    (200, "")
                };
                HttpConnectorFuture::ready(Ok(HttpResponse::new(
                    status.try_into().unwrap(),
                    SdkBody::from(answer),
                )))
            }
        }
    }

    fn archive_on(bucket: &Bucket) -> S3Archive {
        use aws_smithy_runtime_api::client::http::{SharedHttpConnector, http_client_fn};
        let config = aws_sdk_s3::Config::builder()
            .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
            .region(aws_sdk_s3::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_s3::config::Credentials::new(
                "t", "t", None, None, "t",
            ))
            .endpoint_url("http://127.0.0.1:1")
            .force_path_style(true)
            .http_client(http_client_fn({
                let bucket = SharedHttpConnector::new(bucket.clone());
                move |_, _| bucket.clone()
            }))
            .build();
        S3Archive::new(aws_sdk_s3::Client::from_conf(config), "archive")
    }

    /// The bucket is append-only (its policy refuses a put without `If-None-Match: *`): the
    /// archive puts only new keys, and a record delivered again finds its object there and is
    /// done, the object unchanged.
    #[tokio::test]
    async fn the_archive_puts_only_new_keys_and_a_redelivered_record_is_done() {
        let bucket = Bucket::default();
        let archive = archive_on(&bucket);
        archive.put("e-1.json", "first\n").await.unwrap();
        let written = bucket.objects.lock().unwrap()["e-1.json"].clone();
        assert!(String::from_utf8_lossy(&written).contains("first"));
        archive.put("e-1.json", "again\n").await.unwrap();
        assert_eq!(
            bucket.objects.lock().unwrap()["e-1.json"],
            written,
            "never replaced"
        );
        assert_eq!(
            *bucket.conditions.lock().unwrap(),
            [Some("*".to_owned()), Some("*".to_owned())],
            "every put is conditional"
        );
        let denied = Bucket {
            denied: true,
            ..Bucket::default()
        };
        let refused = archive_on(&denied)
            .put("e-2.json", "x\n")
            .await
            .unwrap_err();
        assert!(refused.contains("PutObject failed"), "{refused}");
    }

    #[test]
    fn an_odd_event_id_still_makes_a_plain_file_name() {
        assert_eq!(object_key("a/../b"), "a____b.json");
    }
}
