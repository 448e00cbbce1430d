//! IAM on a developer's machine: the local runner refuses a function's DynamoDB call that the
//! function's policy in `template.yaml` would refuse on AWS.
//!
//! Why: a policy is rendered from what the route table declares (`functions/src/routes.rs`), and
//! a handler that reaches an entity, an action or an index its route does not declare works
//! everywhere but on AWS, where it is `AccessDeniedException` after the deploy. So the runner
//! applies the same statements, as IAM reads them: `dynamodb:LeadingKeys` on the partition key
//! of every item a call touches (a transaction part by part), an index query against that
//! index's own statement, nothing for `Scan` or a batch but where a statement allows it on the
//! whole table (the tools functions', declared whole in [`crate::render::tools_policy`]). Every
//! request of the front door, `invoke` (the tools functions' segments included), the schedule
//! and the stream runs inside [`serving`], which names its function; a call made outside one
//! (`fsck`, `migrate`, `import`, `export`, `load` run from a machine, a test's own reads) is an
//! operator's, with the operator's rights, and is not checked.
//!
//! A refused call fails before it is sent, with [`AccessDenied`] (logged at `ERROR` with the
//! function, the action and the item's entity type, never its key, which may be a plate or an
//! email); the handler answers it as it would AWS's `AccessDeniedException`: `500`, not
//! retried. The whole API test
//! suite runs through this check, so every path a test takes is one its policy allows.

use crate::render::{Statement, TABLE_ARN, index_arn, policy, tools_check_policy, tools_policy};
use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use serde_json::Value;
use singlet_functions::model::{ENTITY_TYPES, EntityType, entity_type_of};
use singlet_functions::routes::{ROUTES, SCHEDULED, STREAMED};
pub use singlet_functions::store::AccessDenied;
use singlet_shared::Key;
use std::collections::HashMap;
use std::future::Future;
use std::sync::OnceLock;

tokio::task_local! {
    static SERVING: &'static str;
}

/// Runs `work` as `function`: its DynamoDB calls are checked against that function's policy.
pub async fn serving<F: Future>(function: &'static str, work: F) -> F::Output {
    SERVING.scope(function, work).await
}

/// The function whose work this task is doing, if any.
pub fn current_function() -> Option<&'static str> {
    SERVING.try_with(|function| *function).ok()
}

/// Every function's rendered statements, by function.
fn statements(function: &str) -> Option<&'static [Statement]> {
    static ALL: OnceLock<HashMap<&'static str, Vec<Statement>>> = OnceLock::new();
    ALL.get_or_init(|| {
        ROUTES
            .iter()
            .map(|r| (r.function, policy(r.function, r.idempotent, &r.access)))
            .chain(
                SCHEDULED
                    .iter()
                    .map(|s| (s.function, policy(s.function, false, &s.access))),
            )
            .chain(
                STREAMED
                    .iter()
                    .map(|s| (s.function, policy(s.function, false, &s.access))),
            )
            // The tools functions' policies are declared whole (`render::tools_policy`), not
            // from the route table, and held to the same way.
            .chain([
                (singlet_tools::segment::FUNCTION, tools_policy()),
                (singlet_tools::segment::CHECK_FUNCTION, tools_check_policy()),
            ])
            .collect()
    })
    .get(function)
    .map(Vec::as_slice)
}

/// What IAM authorises one part of a call by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touch {
    /// An action (`GetItem`, `PutItem`, ..., `ConditionCheckItem`, `Query`) on the table's item
    /// with this key (a table `Query`: its partition, and no sort key).
    Item { action: String, key: Key },
    /// A `Query` on an index.
    Index(String),
    /// An operation no policy allows (`Scan`, a batch, `DescribeTable`).
    Other(String),
}

impl Touch {
    /// The touch as a log line or an error may name it: the item's entity type, never its key.
    fn describe(&self) -> String {
        match self {
            Touch::Item { action, key } => {
                let entity = entity_of(key).map_or("unknown", |t| t.name);
                let article = if entity.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                };
                format!("dynamodb:{action} on {article} {entity} item")
            }
            Touch::Index(index) => format!("dynamodb:Query on the index {index}"),
            Touch::Other(operation) => format!("dynamodb:{operation}"),
        }
    }
}

/// The entity type of an item's key, or of a partition's alone (a table `Query`'s).
fn entity_of(key: &Key) -> Option<&'static EntityType> {
    if !key.sk.is_empty() {
        return entity_type_of(key);
    }
    ENTITY_TYPES.iter().copied().find(|t| {
        t.keys.iter().any(|shape| {
            key.pk.len() > shape.partition.len() && key.pk.starts_with(shape.partition)
        })
    })
}

fn string_at(value: &Value, name: &str) -> String {
    value[name]["S"].as_str().unwrap_or_default().to_owned()
}

fn item(action: &str, key: &Value) -> Touch {
    Touch::Item {
        action: action.to_owned(),
        key: Key {
            pk: string_at(key, "PK"),
            sk: string_at(key, "SK"),
        },
    }
}

/// The partition a table `Query` reads, as IAM sees it: the value its key condition sets the
/// table's partition key to (`#pk = :pk`, the names and values looked up), `Null` if none.
fn partition_of_query(request: &Value) -> Value {
    let partition_key = singlet_shared::schema::PK;
    let names = request["ExpressionAttributeNames"].as_object();
    let spelled: Vec<&str> = names
        .into_iter()
        .flatten()
        .filter(|(_, name)| name.as_str() == Some(partition_key))
        .map(|(placeholder, _)| placeholder.as_str())
        .chain([partition_key])
        .collect();
    let condition = request["KeyConditionExpression"]
        .as_str()
        .unwrap_or_default();
    for term in condition.split(" AND ").chain(condition.split(" and ")) {
        let Some((left, right)) = term.split_once('=') else {
            continue;
        };
        if spelled.contains(&left.trim()) {
            let value = right.trim();
            return request["ExpressionAttributeValues"][value].clone();
        }
    }
    Value::Null
}

/// What `operation` (as `x-amz-target` names it) touches, from its request body in DynamoDB
/// JSON.
pub fn touches(operation: &str, request: &Value) -> Vec<Touch> {
    // Each part of a transaction as its kind (`Put`, `Update`, ...) and its body.
    let parts = || -> Vec<(String, Value)> {
        request["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|part| {
                part.as_object()
                    .and_then(|p| p.iter().next())
                    .map(|(kind, body)| (kind.clone(), body.clone()))
                    .unwrap_or_default()
            })
            .collect()
    };
    match operation {
        "GetItem" | "UpdateItem" | "DeleteItem" => vec![item(operation, &request["Key"])],
        "PutItem" => vec![item(operation, &request["Item"])],
        "Query" => match request["IndexName"].as_str() {
            Some(index) => vec![Touch::Index(index.to_owned())],
            None => vec![item(
                operation,
                &serde_json::json!({"PK": partition_of_query(request)}),
            )],
        },
        "TransactWriteItems" => parts()
            .into_iter()
            .map(|(kind, body)| match kind.as_str() {
                "Put" => item("PutItem", &body["Item"]),
                "Update" => item("UpdateItem", &body["Key"]),
                "Delete" => item("DeleteItem", &body["Key"]),
                "ConditionCheck" => item("ConditionCheckItem", &body["Key"]),
                other => Touch::Other(format!("TransactWriteItems part {other}")),
            })
            .collect(),
        "TransactGetItems" => parts()
            .into_iter()
            .map(|(_, body)| item("GetItem", &body["Key"]))
            .collect(),
        other => vec![Touch::Other(other.to_owned())],
    }
}

/// One thing a policy allows: an IAM action on the items under a partition-key prefix
/// (`dynamodb:GetItem`, `VEHICLE#*`), or `dynamodb:Query` on an index (its ARN).
pub type Grant = (String, String);

/// The grant of `statements` that allows `touch`, as IAM decides it; `None` if none does.
pub fn grant_for(statements: &[Statement], touch: &Touch) -> Option<Grant> {
    match touch {
        Touch::Item { action, key } => {
            let action = format!("dynamodb:{action}");
            let on_table = || {
                statements
                    .iter()
                    .filter(|s| s.resource == TABLE_ARN && s.actions.contains(&action))
            };
            // A statement without `dynamodb:LeadingKeys` allows every item (a tools function's).
            if on_table().any(|s| s.leading_keys.is_empty()) {
                return Some((action.clone(), "*".to_owned()));
            }
            on_table()
                .flat_map(|s| &s.leading_keys)
                .find(|prefix| key.pk.starts_with(prefix.trim_end_matches('*')))
                .map(|prefix| (action.clone(), prefix.clone()))
        }
        Touch::Index(index) => statements
            .iter()
            .find(|s| s.resource == index_arn(index) && s.actions == ["dynamodb:Query"])
            .map(|s| (s.actions[0].clone(), s.resource.clone())),
        // A `Scan` (or any call on the table as a whole) only where a statement allows it on
        // the whole table, as a tools function's does.
        Touch::Other(operation) => {
            let action = format!("dynamodb:{operation}");
            statements
                .iter()
                .find(|s| {
                    s.resource == TABLE_ARN
                        && s.leading_keys.is_empty()
                        && s.actions.contains(&action)
                })
                .map(|s| (action.clone(), s.resource.clone()))
        }
    }
}

/// Every grant `function`'s policy makes on the table and its indexes.
pub fn grants(function: &str) -> Vec<Grant> {
    let mut grants = Vec::new();
    for statement in statements(function).unwrap_or_default() {
        if statement.resource == TABLE_ARN {
            for action in &statement.actions {
                for prefix in &statement.leading_keys {
                    grants.push((action.clone(), prefix.clone()));
                }
            }
        } else if statement.actions == ["dynamodb:Query"] {
            grants.push((statement.actions[0].clone(), statement.resource.clone()));
        }
    }
    grants
}

/// The variable naming a file where the check notes each grant a function used, once per
/// process: CI runs the tests with it, then reports every grant no test used
/// (`policy::every_grant_of_every_policy_is_used_by_some_test`), so a declaration cannot grow
/// wider than its handler without a test saying so.
pub const USED_GRANTS_VAR: &str = "SINGLET_IAM_USED";

/// The [`USED_GRANTS_VAR`] file, and the lines this process has written to it.
struct UsedGrants {
    file: std::fs::File,
    written: std::collections::HashSet<String>,
}

/// Notes that `function` used `grant`, in [`USED_GRANTS_VAR`]'s file if it is set.
fn note_used(function: &str, grant: &Grant) {
    use std::io::Write;
    use std::sync::Mutex;
    static USED: OnceLock<Option<Mutex<UsedGrants>>> = OnceLock::new();
    let Some(used) = USED.get_or_init(|| {
        let path = std::env::var_os(USED_GRANTS_VAR)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()?;
        Some(Mutex::new(UsedGrants {
            file,
            written: Default::default(),
        }))
    }) else {
        return;
    };
    let line = format!("{function}\t{}\t{}\n", grant.0, grant.1);
    let mut used = used.lock().expect("not poisoned");
    if used.written.insert(line.clone()) {
        // One write per line, so that lines of processes appending at once do not mix.
        let _ = used.file.write_all(line.as_bytes());
    }
}

/// The grants noted in a [`USED_GRANTS_VAR`] file, by function.
pub fn read_used(text: &str) -> std::collections::BTreeSet<(String, Grant)> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split('\t');
            let function = fields.next()?.to_owned();
            let action = fields.next()?.to_owned();
            let resource = fields.next()?.to_owned();
            Some((function, (action, resource)))
        })
        .collect()
}

/// What of `operation`'s `request` the policy of `function` refuses, each as `Touch::describe`
/// names it (each grant that allows the rest is noted as used, [`USED_GRANTS_VAR`]). A function
/// the route table does not know is refused everything.
pub fn refused(function: &str, operation: &str, request: &Value) -> Vec<String> {
    let statements = statements(function).unwrap_or_default();
    let mut refused = Vec::new();
    for touch in touches(operation, request) {
        match grant_for(statements, &touch) {
            Some(grant) => note_used(function, &grant),
            None => refused.push(touch.describe()),
        }
    }
    refused
}

/// A DynamoDB call as it goes over the wire: its operation (`GetItem`, from `x-amz-target`) and
/// its request body in DynamoDB JSON (`Null` if it is none).
pub fn read_call(request: &aws_smithy_runtime_api::http::Request) -> (String, Value) {
    let operation = request
        .headers()
        .get("x-amz-target")
        .map(|t| t.rsplit('.').next().unwrap_or(t).to_owned())
        .unwrap_or_default();
    let body = request
        .body()
        .bytes()
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or(Value::Null);
    (operation, body)
}

/// The interceptor every runner client carries ([`crate::serve::engine`]): a no-op outside
/// [`serving`].
#[derive(Debug, Default)]
pub struct Enforce;

impl Intercept for Enforce {
    fn name(&self) -> &'static str {
        "singlet-local-iam"
    }

    /// Once per operation, before its first attempt: a refused call is never sent.
    fn read_after_serialization(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let Some(function) = current_function() else {
            return Ok(());
        };
        let (operation, body) = read_call(context.request());
        let refused = refused(function, &operation, &body);
        if refused.is_empty() {
            return Ok(());
        }
        // Logged where every failed call is (`store::failure`), once, as AWS's would be.
        Err(Box::new(AccessDenied { function, refused }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A table query's partition is whatever its key condition sets the partition key to, under
    /// any placeholder: the store's `#pk = :pk`, another name, or the key named outright.
    #[test]
    fn a_table_querys_partition_is_read_from_its_key_condition() {
        let store = json!({
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :sk)",
            "ExpressionAttributeNames": {"#pk": "PK", "#sk": "SK"},
            "ExpressionAttributeValues": {":pk": {"S": "BRANCH#b1"}, ":sk": {"S": "PATRON#"}},
        });
        assert_eq!(partition_of_query(&store), json!({"S": "BRANCH#b1"}));
        let other = json!({
            "KeyConditionExpression": "#s >= :from and #p = :partition",
            "ExpressionAttributeNames": {"#p": "PK", "#s": "SK"},
            "ExpressionAttributeValues": {":partition": {"S": "RESOURCE#r1"}, ":from": {"S": "E"}},
        });
        assert_eq!(partition_of_query(&other), json!({"S": "RESOURCE#r1"}));
        let outright = json!({
            "KeyConditionExpression": "PK = :v",
            "ExpressionAttributeValues": {":v": {"S": "VEHICLE#v1"}},
        });
        assert_eq!(partition_of_query(&outright), json!({"S": "VEHICLE#v1"}));
        assert_eq!(partition_of_query(&json!({})), Value::Null);
        // Read as IAM reads it: the item the partition's prefix names.
        let touches = touches("Query", &store);
        assert_eq!(
            touches,
            [Touch::Item {
                action: "Query".into(),
                key: Key {
                    pk: "BRANCH#b1".into(),
                    sk: String::new()
                }
            }]
        );
    }
}
