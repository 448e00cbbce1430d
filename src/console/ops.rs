//! A recorded DynamoDB call, read for a person: the operation, its key or index, its expressions
//! with names and values put back in, each part of a transaction with the reason it was
//! cancelled (and what the handler made of it), and the capacity each consumed, per table and
//! per index when the response carries it.

use super::capture::Call;
use super::table::plain_wire;
use serde::Serialize;
use serde_json::{Map, Value};
use singlet_functions::model::{Lock, entity_type_of};
use singlet_shared::Key;
use singlet_shared::schema::{INDEXES, PK, SK};

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Expression {
    /// `key condition`, `condition`, `update`, `filter`, `projection`.
    pub kind: &'static str,
    /// As sent.
    pub raw: String,
    /// With `#names` and `:values` replaced by what they stand for.
    pub resolved: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexKeys {
    pub index: &'static str,
    pub pk: Value,
    pub sk: Value,
}

/// One part of a `TransactWriteItems` (or the request itself, for single-item operations).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    /// `Put`, `Update`, `Delete`, `ConditionCheck`.
    pub action: String,
    pub key: Value,
    /// For a `Put`: the index keys the new item carries.
    pub index_keys: Vec<IndexKeys>,
    pub expressions: Vec<Expression>,
    /// The cancellation reason at this part's position, when the transaction was cancelled.
    pub reason: Option<String>,
    pub reason_message: Option<String>,
    /// What the handler's answer made of that reason (`409 plate: taken`).
    pub became: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Capacity {
    pub table: String,
    pub units: Option<f64>,
    pub read_units: Option<f64>,
    pub write_units: Option<f64>,
    /// The base table's share, when the response breaks the units down (`INDEXES`).
    pub table_units: Option<f64>,
    /// Each index's share, when the response breaks the units down.
    pub indexes: Vec<(String, f64)>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    pub operation: String,
    pub table: Option<String>,
    pub index: Option<String>,
    pub key: Option<Value>,
    pub expressions: Vec<Expression>,
    pub parts: Vec<Part>,
    pub consistent: Option<bool>,
    pub limit: Option<i64>,
    pub scan_forward: Option<bool>,
    /// HTTP status of the engine's answer (`None`: no answer).
    pub status: Option<u16>,
    /// The error's type (`ConditionalCheckFailedException`, `TransactionCanceledException`).
    pub error: Option<String>,
    pub error_message: Option<String>,
    /// For `GetItem`: whether an item came back.
    pub found: Option<bool>,
    /// For `Query`/`Scan`: items returned, items read, and whether another page follows.
    pub count: Option<i64>,
    pub scanned: Option<i64>,
    pub more: Option<bool>,
    pub capacity: Vec<Capacity>,
    pub attempts: u32,
    /// The wire request and response, for whoever wants every byte.
    pub raw: Option<Value>,
}

/// Reads one recorded call.
pub fn read(call: &Call, with_raw: bool) -> Operation {
    let request = &call.request;
    let (status, response) = match &call.response {
        Some((status, body)) => (Some(*status), body.clone()),
        None => (None, Value::Null),
    };
    let error = response["__type"]
        .as_str()
        .map(|t| t.rsplit('#').next().unwrap_or(t).to_owned());
    let error_message = response["message"]
        .as_str()
        .or(response["Message"].as_str())
        .map(str::to_owned);
    let reasons = response["CancellationReasons"].as_array();
    let parts = request["TransactItems"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| {
                    let (action, body) = item.as_object()?.iter().next()?;
                    let reason = reasons.and_then(|r| r.get(i));
                    let code = reason
                        .and_then(|r| r["Code"].as_str())
                        .filter(|c| *c != "None")
                        .map(str::to_owned);
                    Some(Part {
                        action: action.clone(),
                        key: part_key(body),
                        index_keys: index_keys(&body["Item"]),
                        expressions: expressions(body),
                        reason_message: code
                            .as_ref()
                            .and_then(|_| reason?["Message"].as_str().map(str::to_owned)),
                        reason: code,
                        became: None,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Operation {
        operation: call.operation.clone(),
        table: request["TableName"]
            .as_str()
            .or_else(|| {
                request["TransactItems"][0]
                    .as_object()
                    .and_then(|o| o.values().next())
                    .and_then(|b| b["TableName"].as_str())
            })
            .map(str::to_owned),
        index: request["IndexName"].as_str().map(str::to_owned),
        key: request
            .get("Key")
            .or_else(|| request.get("Item"))
            .map(key_of),
        expressions: expressions(request),
        parts,
        consistent: request["ConsistentRead"].as_bool(),
        limit: request["Limit"].as_i64(),
        scan_forward: request["ScanIndexForward"].as_bool(),
        status,
        error,
        error_message,
        found: (call.operation == "GetItem" && status == Some(200))
            .then(|| response.get("Item").is_some()),
        count: response["Count"].as_i64(),
        scanned: response["ScannedCount"].as_i64(),
        more: response["Count"]
            .as_i64()
            .map(|_| response.get("LastEvaluatedKey").is_some()),
        capacity: capacity(&response["ConsumedCapacity"]),
        attempts: call.attempts,
        raw: with_raw.then(|| serde_json::json!({"request": request, "response": response})),
    }
}

/// A wire-JSON item's or key's primary key, as `{"pk": ..., "sk": ...}`.
fn key_of(item: &Value) -> Value {
    let mut key = Map::new();
    for (name, shown) in [(PK, "pk"), (SK, "sk")] {
        if let Some(v) = item.get(name) {
            key.insert(shown.to_owned(), plain_wire(v));
        }
    }
    key.into()
}

fn part_key(body: &Value) -> Value {
    match body.get("Key") {
        Some(key) => key_of(key),
        None => key_of(&body["Item"]),
    }
}

fn index_keys(item: &Value) -> Vec<IndexKeys> {
    INDEXES
        .iter()
        .filter_map(|index| {
            Some(IndexKeys {
                index: index.name,
                pk: plain_wire(item.get(index.pk)?),
                sk: item.get(index.sk).map(plain_wire).unwrap_or(Value::Null),
            })
        })
        .collect()
}

fn expressions(body: &Value) -> Vec<Expression> {
    let names = body["ExpressionAttributeNames"].as_object();
    let values = body["ExpressionAttributeValues"].as_object();
    [
        ("KeyConditionExpression", "key condition"),
        ("ConditionExpression", "condition"),
        ("UpdateExpression", "update"),
        ("FilterExpression", "filter"),
        ("ProjectionExpression", "projection"),
    ]
    .into_iter()
    .filter_map(|(field, kind)| {
        let raw = body[field].as_str()?;
        Some(Expression {
            kind,
            raw: raw.to_owned(),
            resolved: resolve(raw, names, values),
        })
    })
    .collect()
}

/// `#status = :out` with `{"#status": "status"}` and `{":out": {"S": "checked_out"}}` reads
/// `status = "checked_out"`.
pub fn resolve(
    expression: &str,
    names: Option<&Map<String, Value>>,
    values: Option<&Map<String, Value>>,
) -> String {
    let mut out = String::with_capacity(expression.len());
    let mut chars = expression.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if c != '#' && c != ':' {
            out.push(c);
            continue;
        }
        let mut end = start + 1;
        while let Some(&(i, next)) = chars.peek() {
            if next.is_ascii_alphanumeric() || next == '_' {
                end = i + next.len_utf8();
                chars.next();
            } else {
                break;
            }
        }
        let token = &expression[start..end];
        let replacement = match c {
            '#' => names
                .and_then(|n| n.get(token))
                .and_then(Value::as_str)
                .map(str::to_owned),
            _ => values
                .and_then(|v| v.get(token))
                .map(|v| plain_wire(v).to_string()),
        };
        out.push_str(replacement.as_deref().unwrap_or(token));
    }
    out
}

fn units(value: &Value) -> Option<f64> {
    value["CapacityUnits"].as_f64()
}

fn capacity(consumed: &Value) -> Vec<Capacity> {
    let one = |c: &Value| Capacity {
        table: c["TableName"].as_str().unwrap_or_default().to_owned(),
        units: units(c),
        read_units: c["ReadCapacityUnits"].as_f64(),
        write_units: c["WriteCapacityUnits"].as_f64(),
        table_units: units(&c["Table"]),
        indexes: c["GlobalSecondaryIndexes"]
            .as_object()
            .into_iter()
            .chain(c["LocalSecondaryIndexes"].as_object())
            .flatten()
            .filter_map(|(name, v)| Some((name.clone(), units(v)?)))
            .collect(),
    };
    match consumed {
        Value::Array(list) => list.iter().map(one).collect(),
        Value::Object(_) => vec![one(consumed)],
        _ => Vec::new(),
    }
}

/// The item a transaction part wrote or checked, by its key: what the model's registry says it
/// is. A lock stands for the owner's value it makes unique (`plate`), which is the request field
/// a failed condition on it becomes.
fn locked_value(key: &Value) -> Option<&'static str> {
    let key = Key {
        pk: key["pk"].as_str()?.to_owned(),
        sk: key["sk"].as_str().unwrap_or_default().to_owned(),
    };
    match entity_type_of(&key)?.lock? {
        Lock::Of { value, .. } => Some(value),
        Lock::DerivedId => None,
    }
}

/// The entity a part's key belongs to (`copy`), for a field named after it (`copyId`).
fn entity_of(key: &Value) -> Option<&'static str> {
    let key = Key {
        pk: key["pk"].as_str()?.to_owned(),
        sk: key["sk"].as_str().unwrap_or_default().to_owned(),
    };
    entity_type_of(&key).map(|t| t.name)
}

/// Puts next to each cancelled part what the handler's answer (`status`, `body`) made of it: the
/// field error on the value a lock holds, else the one named after the part's entity, else the
/// answer's only field error.
pub fn link_reasons(operations: &mut [Operation], status: u16, body: &Value) {
    let errors: Vec<(String, String)> = body["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            Some((
                e["field"].as_str()?.to_owned(),
                e["code"].as_str()?.to_owned(),
            ))
        })
        .collect();
    for part in operations.iter_mut().flat_map(|o| o.parts.iter_mut()) {
        if part.reason.is_none() {
            continue;
        }
        let error = match locked_value(&part.key) {
            Some(value) => errors.iter().find(|(field, _)| field == value),
            None => entity_of(&part.key)
                .and_then(|entity| errors.iter().find(|(field, _)| field.starts_with(entity)))
                .or(match errors.as_slice() {
                    [only] => Some(only),
                    _ => None,
                }),
        };
        part.became = Some(match (error, status) {
            (Some((field, code)), _) => format!("{status} {field}: {code}"),
            (None, 412) => match body["currentVersion"].as_i64() {
                Some(version) => format!("412, currentVersion {version}"),
                None => "412".to_owned(),
            },
            (None, 200 | 201) => format!("{status}: the handler read again and went on"),
            (None, _) => format!("{status}"),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use singlet_shared::schema::{GSI1, GSI3};
    use singlet_shared::{Id, Plate, keys};

    #[test]
    fn expressions_read_with_their_names_and_values() {
        let names = json!({"#colour": "colour", "#n": "n"});
        let values = json!({":red": {"S": "red"}, ":one": {"N": "1"}});
        assert_eq!(
            resolve(
                "SET #colour = :red, shade = :shade, #n = #n + :one",
                names.as_object(),
                values.as_object()
            ),
            "SET colour = \"red\", shade = :shade, n = n + 1"
        );
        assert_eq!(
            resolve("attribute_not_exists(x)", None, None),
            "attribute_not_exists(x)"
        );
    }

    #[test]
    fn capacity_is_read_per_table_and_per_index_when_the_response_has_it() {
        let total = capacity(&json!({"TableName": "singlet", "CapacityUnits": 1.0}));
        assert_eq!(total.len(), 1);
        assert_eq!(total[0].units, Some(1.0));
        assert!(total[0].indexes.is_empty());
        let indexes = capacity(&json!([{
            "TableName": "singlet", "CapacityUnits": 4.0,
            "Table": {"CapacityUnits": 2.0},
            "GlobalSecondaryIndexes": {GSI1.name: {"CapacityUnits": 1.0}, GSI3.name: {"CapacityUnits": 1.0}},
        }]));
        assert_eq!(indexes[0].table_units, Some(2.0));
        assert_eq!(
            indexes[0].indexes,
            [(GSI1.name.to_owned(), 1.0), (GSI3.name.to_owned(), 1.0)]
        );
    }

    /// A wire-JSON item holding only `key`.
    fn wire(key: Key) -> Value {
        json!({PK: {"S": key.pk}, SK: {"S": key.sk}})
    }

    #[test]
    fn a_cancelled_part_says_what_it_became() {
        let vehicle = keys::vehicle(&Id::parse("v1").unwrap());
        let plate = keys::plate_lock(&Plate::parse("KA19 XTR").unwrap());
        let call = Call {
            operation: "TransactWriteItems".into(),
            request: json!({"TransactItems": [
                {"Put": {"TableName": "singlet", "Item": wire(vehicle)}},
                {"Put": {"TableName": "singlet", "Item": wire(plate),
                         "ConditionExpression": "attribute_not_exists(#pk)"}},
            ]}),
            response: Some((
                400,
                json!({
                    "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                    "CancellationReasons": [{"Code": "None"}, {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}],
                }),
            )),
            attempts: 1,
        };
        let mut operations = vec![read(&call, false)];
        assert_eq!(
            operations[0].error.as_deref(),
            Some("TransactionCanceledException")
        );
        assert_eq!(operations[0].table.as_deref(), Some("singlet"));
        link_reasons(
            &mut operations,
            409,
            &json!({"errors": [{"field": "chassis", "code": "taken"}, {"field": "plate", "code": "taken"}]}),
        );
        let parts = &operations[0].parts;
        assert_eq!(parts[0].reason, None);
        assert_eq!(parts[1].reason.as_deref(), Some("ConditionalCheckFailed"));
        assert_eq!(parts[1].became.as_deref(), Some("409 plate: taken"));
    }
}
