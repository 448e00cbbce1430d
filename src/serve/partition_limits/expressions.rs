//! What the limiter reads in a request's expressions: the partition key value a query's key
//! condition names, and what an update expression sets or removes plainly.

use super::schema::key_text;
use serde_json::{Map, Value};

type Item = Map<String, Value>;

/// What an update expression says plainly: `SET <name> = :value` and `REMOVE <name>` of top-level
/// attributes. Anything else (`if_not_exists`, arithmetic, nested paths) is learned from the
/// engine after the update has run.
#[derive(Clone, Default)]
pub struct Assignments {
    set: Vec<(String, Value)>,
    removed: Vec<String>,
}

impl Assignments {
    pub fn of(request: &Item) -> Assignments {
        let mut assignments = Assignments::default();
        let Some(expression) = request.get("UpdateExpression").and_then(Value::as_str) else {
            return assignments;
        };
        let names = request
            .get("ExpressionAttributeNames")
            .and_then(Value::as_object);
        let values = request
            .get("ExpressionAttributeValues")
            .and_then(Value::as_object);
        let name = |token: &str| -> Option<String> {
            let token = token.trim();
            if token.contains(['.', '[', '(']) {
                return None;
            }
            match token.strip_prefix('#') {
                Some(_) => Some(names?.get(token)?.as_str()?.to_owned()),
                None => Some(token.to_owned()),
            }
        };
        for (clause, body) in clauses(expression) {
            for action in split_top_level(&body) {
                match clause.as_str() {
                    "SET" => {
                        let Some((path, operand)) = action.split_once('=') else {
                            continue;
                        };
                        let value = operand
                            .trim()
                            .starts_with(':')
                            .then(|| values.and_then(|v| v.get(operand.trim())))
                            .flatten();
                        if let (Some(path), Some(value)) = (name(path), value) {
                            assignments.set.push((path, value.clone()));
                        }
                    }
                    "REMOVE" => {
                        if let Some(path) = name(&action) {
                            assignments.removed.push(path);
                        }
                    }
                    _ => {}
                }
            }
        }
        assignments
    }

    pub fn applied(&self, mut item: Item) -> Item {
        for (name, value) in &self.set {
            item.insert(name.clone(), value.clone());
        }
        for name in &self.removed {
            item.remove(name);
        }
        item
    }
}

/// An update expression's clauses: (`SET`, `a = :a, b = :b`), (`REMOVE`, `c`), …
fn clauses(expression: &str) -> Vec<(String, String)> {
    let mut clauses: Vec<(String, String)> = Vec::new();
    for word in expression.split_whitespace() {
        let upper = word.to_ascii_uppercase();
        if matches!(upper.as_str(), "SET" | "REMOVE" | "ADD" | "DELETE") {
            clauses.push((upper, String::new()));
        } else if let Some((_, body)) = clauses.last_mut() {
            body.push(' ');
            body.push_str(word);
        }
    }
    clauses
}

/// `body` split at each comma outside parentheses.
fn split_top_level(body: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in body.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    parts
}

/// The partition key value a query names: `<hash> = <value>` in its `KeyConditionExpression`
/// (names and values through `ExpressionAttributeNames`/`Values`), or the legacy `KeyConditions`.
pub fn queried_key(request: &Item, hash: &str) -> Option<String> {
    if let Some(conditions) = request.get("KeyConditions").and_then(Value::as_object) {
        let condition = conditions.get(hash)?;
        return key_text(condition.get("AttributeValueList")?.get(0)?);
    }
    let expression = request.get("KeyConditionExpression")?.as_str()?;
    let names = request
        .get("ExpressionAttributeNames")
        .and_then(Value::as_object);
    let values = request.get("ExpressionAttributeValues")?.as_object()?;
    let name = |token: &str| -> String {
        let token = token.trim().trim_matches(['(', ')']).trim();
        match token.strip_prefix('#') {
            Some(_) => names
                .and_then(|n| n.get(token))
                .and_then(Value::as_str)
                .unwrap_or(token)
                .to_owned(),
            None => token.to_owned(),
        }
    };
    for clause in split_and(expression) {
        let Some((left, right)) = clause.split_once('=') else {
            continue;
        };
        if left.ends_with(['<', '>', '!']) {
            continue;
        }
        let (left, right) = (name(left), right.trim().trim_matches(['(', ')']).trim());
        let value = if left == hash {
            right.to_owned()
        } else if name(right) == hash {
            left
        } else {
            continue;
        };
        return key_text(values.get(value.trim())?);
    }
    None
}

/// The clauses of a key condition, split at each `AND` (any case) outside a `BETWEEN … AND …`.
fn split_and(expression: &str) -> Vec<String> {
    let mut clauses = Vec::new();
    let mut current = Vec::new();
    let mut between = false;
    for word in expression.split_whitespace() {
        if word.eq_ignore_ascii_case("BETWEEN") {
            between = true;
        }
        if word.eq_ignore_ascii_case("AND") {
            if between {
                between = false;
            } else {
                clauses.push(current.join(" "));
                current.clear();
                continue;
            }
        }
        current.push(word);
    }
    clauses.push(current.join(" "));
    clauses
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_queried_partition_key_is_found_in_its_key_condition() {
        let request = json!({
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :p)",
            "ExpressionAttributeNames": {"#pk": "gsi1pk", "#sk": "gsi1sk"},
            "ExpressionAttributeValues": {":pk": {"S": "OVERDUE"}, ":p": {"S": "2026"}},
        });
        assert_eq!(
            queried_key(request.as_object().unwrap(), "gsi1pk").as_deref(),
            Some("OVERDUE")
        );
        let between = json!({
            "KeyConditionExpression": "sk BETWEEN :a AND :b AND pk = :v",
            "ExpressionAttributeValues": {":v": {"S": "A#1"}, ":a": {"S": "1"}, ":b": {"S": "2"}},
        });
        assert_eq!(
            queried_key(between.as_object().unwrap(), "pk").as_deref(),
            Some("A#1")
        );
    }
}
