//! The event-source mapping from the table's stream to `publish-events`, as `template.yaml`
//! declares it. The local runner plays it with these same values (`src/serve/event_source.rs`), and a
//! test keeps them equal to the template's.

/// Records per invocation at most.
pub const BATCH_SIZE: usize = 100;
/// How often a batch that keeps failing is tried again before it goes to the on-failure
/// destination.
pub const MAXIMUM_RETRY_ATTEMPTS: u32 = 3;
/// A batch whose invocation fails is split in two, each half tried on its own, so one bad
/// record ends alone in the on-failure destination and the others are delivered.
pub const BISECT_BATCH_ON_FUNCTION_ERROR: bool = true;
/// A record older than this goes to the on-failure destination unread: a day, the stream's own
/// retention.
pub const MAXIMUM_RECORD_AGE_SECONDS: i64 = 86_400;
/// Where a new mapping starts reading: the oldest record the stream holds.
pub const STARTING_POSITION: &str = "TRIM_HORIZON";
/// The stream's view: the loan's old image tells the marker's `open` → `overdue` apart, and
/// retention's archive of TTL deletions reads the old image.
pub const STREAM_VIEW_TYPE: &str = "NEW_AND_OLD_IMAGES";

/// The filter patterns (Lambda's event filtering sees only the record's `dynamodb` key): an
/// outbox item's image, a loan moved from `open` to `overdue`, or a returned loan's old image
/// (which only its deletion has: nothing changes a returned loan, and only TTL deletes one; the
/// publisher checks `userIdentity` itself, which no filter can see). Everything else is never
/// delivered to the function, and costs no invocation.
///
/// Each pattern names the entity type (`_et`) it is about: other entities have a `status` too
/// (a resource's is whatever its writers say, `open` and `overdue` included), and a resource
/// flipped from `open` to `overdue` let through as a loan was a poison record, failed and sent to
/// the on-failure destination (issue 45). The marker's update stamps `_et` on the loan it moves
/// (`if_not_exists`), so the new image names it even for a loan written before `_et` existed.
pub const FILTERS: &[&str] = &[
    r#"{"dynamodb":{"NewImage":{"_et":{"S":["outbox"]}}}}"#,
    r#"{"dynamodb":{"OldImage":{"status":{"S":["open"]}},"NewImage":{"_et":{"S":["loan"]},"status":{"S":["overdue"]}}}}"#,
    r#"{"dynamodb":{"OldImage":{"_et":{"S":["loan"]},"status":{"S":["returned"]}}}}"#,
];

/// Whether a record (as the Lambda event holds it, JSON) matches one of [`FILTERS`]. Only the
/// subset of EventBridge patterns those use: nested objects, and arrays of exact values.
pub fn passes_filters(record: &serde_json::Value) -> bool {
    FILTERS.iter().any(|filter| {
        let pattern: serde_json::Value = serde_json::from_str(filter).expect("a filter is JSON");
        matches(&pattern, record)
    })
}

fn matches(pattern: &serde_json::Value, value: &serde_json::Value) -> bool {
    use serde_json::Value;
    match pattern {
        Value::Object(fields) => fields
            .iter()
            .all(|(name, inner)| value.get(name).is_some_and(|v| matches(inner, v))),
        Value::Array(allowed) => allowed.contains(value),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outbox_items_and_marked_loans_pass_the_filters() {
        let outbox = json!({"eventName": "INSERT", "dynamodb": {"NewImage": {"_et": {"S": "outbox"}, "detail": {"S": "{}"}}}});
        let marked = json!({"dynamodb": {"OldImage": {"status": {"S": "open"}}, "NewImage": {"_et": {"S": "loan"}, "status": {"S": "overdue"}}}});
        let renewed = json!({"dynamodb": {"OldImage": {"status": {"S": "open"}}, "NewImage": {"_et": {"S": "loan"}, "status": {"S": "open"}}}});
        // A resource's status is its writers' word: `open` to `overdue` is no loan's mark.
        let resource = json!({"dynamodb": {"OldImage": {"_et": {"S": "resource"}, "status": {"S": "open"}}, "NewImage": {"_et": {"S": "resource"}, "status": {"S": "overdue"}}}});
        let untyped = json!({"dynamodb": {"OldImage": {"status": {"S": "open"}}, "NewImage": {"status": {"S": "overdue"}}}});
        let vehicle = json!({"dynamodb": {"NewImage": {"plate": {"S": "ka19 xtr"}}}});
        let expired =
            json!({"eventName": "REMOVE", "dynamodb": {"OldImage": {"_et": {"S": "outbox"}}}});
        assert!(passes_filters(&outbox));
        assert!(passes_filters(&marked));
        assert!(!passes_filters(&renewed));
        assert!(!passes_filters(&resource));
        assert!(!passes_filters(&untyped));
        assert!(!passes_filters(&vehicle));
        assert!(!passes_filters(&expired));
        let returned_deleted = json!({"eventName": "REMOVE", "dynamodb": {"OldImage": {"_et": {"S": "loan"}, "status": {"S": "returned"}}}});
        let open_deleted = json!({"eventName": "REMOVE", "dynamodb": {"OldImage": {"_et": {"S": "loan"}, "status": {"S": "open"}}}});
        assert!(passes_filters(&returned_deleted));
        assert!(!passes_filters(&open_deleted));
    }
}
