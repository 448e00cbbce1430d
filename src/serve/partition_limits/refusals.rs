//! The answers DynamoDB refuses a throttled request with, in its JSON protocol: shapes from the
//! API reference (ProvisionedThroughputExceededException with `ThrottlingReasons`,
//! API_ThrottlingReason; TransactionCanceledException's `CancellationReasons` with
//! `ThrottlingError`, API_TransactWriteItems).

use super::heat::{Charge, Kind};
use serde_json::{Value, json};

const PREFIX: &str = "com.amazonaws.dynamodb.v20120810#";

/// Said in every refusal: what happened, and where AWS explains it.
const MESSAGE: &str = "Throughput exceeds the current capacity for one partition key value of \
     your table or index (1,000 write units and 3,000 read units a second per key). If exceptions \
     persist, check if you have a hot key: \
     https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html";

/// `<Table|Index><Read|Write>KeyRangeThroughputExceeded`, as ThrottlingReason spells it.
pub fn reason(charge: &Charge) -> String {
    format!(
        "{}{}KeyRangeThroughputExceeded",
        if charge.index.is_some() {
            "Index"
        } else {
            "Table"
        },
        match charge.kind {
            Kind::Read => "Read",
            Kind::Write => "Write",
        }
    )
}

/// The table's ARN, or its index's, as the engine itself names them.
pub fn resource(charge: &Charge) -> String {
    match &charge.index {
        Some(index) => dynoxide::streams::index_arn(&charge.table, index),
        None => dynoxide::streams::table_arn(&charge.table),
    }
}

/// The `400` body of a throttled request.
pub fn throughput_exceeded(over: &Charge) -> String {
    json!({
        "__type": format!("{PREFIX}ProvisionedThroughputExceededException"),
        "message": MESSAGE,
        "ThrottlingReasons": [{"reason": reason(over), "resource": resource(over)}],
    })
    .to_string()
}

/// The `400` body of a transaction cancelled because `throttled` of its `parts` would go over.
pub fn transaction_throttled(parts: usize, throttled: &[usize]) -> String {
    let reasons: Vec<Value> = (0..parts)
        .map(|p| {
            if throttled.contains(&p) {
                json!({"Code": "ThrottlingError", "Message": MESSAGE})
            } else {
                json!({"Code": "None"})
            }
        })
        .collect();
    let codes: Vec<&str> = (0..parts)
        .map(|p| {
            if throttled.contains(&p) {
                "ThrottlingError"
            } else {
                "None"
            }
        })
        .collect();
    json!({
        "__type": format!("{PREFIX}TransactionCanceledException"),
        "message": format!(
            "Transaction cancelled, please refer cancellation reasons for specific reasons [{}]",
            codes.join(", ")
        ),
        "CancellationReasons": reasons,
    })
    .to_string()
}
