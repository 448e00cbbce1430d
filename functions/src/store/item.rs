//! Entities to items and back. An entity is a serde struct of validated types; it becomes an item
//! under its key (and its index keys), and an item decodes into it here, in one place: a stored
//! value that does not decode is logged with its key, and the request is a `500`.

use crate::error::ApiError;
use crate::ids::IdKey;
use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Serialize, de::DeserializeOwned};
use singlet_shared::schema::{Index, PK, SK};
use singlet_shared::{IndexKey, Key};
use std::collections::HashMap;

pub type Item = HashMap<String, AttributeValue>;

/// A key as the item attributes `PK` and `SK`.
pub fn key_item(key: &Key) -> Item {
    HashMap::from([
        (PK.to_owned(), AttributeValue::S(key.pk.clone())),
        (SK.to_owned(), AttributeValue::S(key.sk.clone())),
    ])
}

/// An entity as a table item under `key`.
pub fn item<T: Serialize>(key: &Key, entity: &T) -> Item {
    let mut item: Item = serde_dynamo::to_item(entity).expect("entities serialise to items");
    item.extend(key_item(key));
    item
}

/// Adds one index's keys to an item.
pub fn with_index(mut item: Item, index: Index, key: &IndexKey) -> Item {
    item.insert(index.pk.to_owned(), AttributeValue::S(key.pk.clone()));
    item.insert(index.sk.to_owned(), AttributeValue::S(key.sk.clone()));
    item
}

/// An item as its entity. The only place a stored item is decoded.
pub fn decode<T: DeserializeOwned>(item: &Item) -> Result<T, ApiError> {
    serde_dynamo::from_item(item.clone()).map_err(|e| {
        let error = without_values(&e.to_string());
        tracing::error!(item = %log_name(item), error, "a stored item does not decode");
        ApiError::Internal
    })
}

/// The key a log names pseudonyms with: the server's id key, set by the first context made.
static LOG_KEY: std::sync::OnceLock<std::sync::Arc<IdKey>> = std::sync::OnceLock::new();

/// Sets the key [`log_name`] hashes with (`Ctx::new` does, once per process).
pub fn use_log_key(key: std::sync::Arc<IdKey>) {
    let _ = LOG_KEY.set(key);
}

/// How a log line names an item: `PK/SK` when its key is made of ids; when its key holds a
/// value a person gave (`PLATE#ka19xtr`, `UNIQ#EMAIL#…`), its entity type and a keyed hash of
/// the key (`plate-lock 5f0c…`), which an operator holding the server's key can match against a
/// value, and no one else can.
pub fn log_name(item: &Item) -> String {
    let (pk, sk) = (text(item, PK), text(item, SK));
    match singlet_shared::keys::value_keyed(pk) {
        None => format!("{pk}/{sk}"),
        Some(entity) => {
            let hash = LOG_KEY
                .get()
                .map(|key| key.pseudonym("log", &[pk, sk]))
                .unwrap_or_else(|| "-".into());
            format!("{entity} {hash}")
        }
    }
}

/// A decode error without the stored value serde may quote in it (``unknown variant `…` ``,
/// `invalid type: string "…"`): a stored value can be a person's name or email, and a log names
/// items by their key only. Errors that quote a field's name, not a value, are kept whole.
fn without_values(error: &str) -> String {
    if error.starts_with("missing field") || error.starts_with("unknown field") {
        return error.to_owned();
    }
    let kind = error.split(['`', '"']).next().unwrap_or_default();
    kind.trim_end_matches([' ', ':', ',']).to_owned()
}

/// A string attribute of an item, or `""`.
pub fn text<'i>(item: &'i Item, name: &str) -> &'i str {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
        .unwrap_or_default()
}

pub fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// A value of an entity's field type as an attribute value (an enum as its string).
pub fn value<T: Serialize>(value: T) -> AttributeValue {
    serde_dynamo::to_attribute_value(value).expect("field values serialise")
}

#[cfg(test)]
mod tests {
    use super::{key_item, log_name, without_values};
    use singlet_shared::Key;

    #[test]
    fn a_log_names_a_value_keyed_item_by_its_type_and_a_hash() {
        let named = |pk: &str, sk: &str| {
            log_name(&key_item(&Key {
                pk: pk.into(),
                sk: sk.into(),
            }))
        };
        assert_eq!(named("PATRON#p1", "CHECKOUT#k1"), "PATRON#p1/CHECKOUT#k1");
        for (pk, sk, entity) in [
            ("PLATE#ka19xtr", "PLATE#ka19xtr", "plate-lock"),
            ("UNIQ#EMAIL#ada@exarnple.corn", "LOCK", "email-lock"),
            ("CARD#card-1", "CARD#card-1", "card-lock"),
        ] {
            let name = named(pk, sk);
            assert!(name.starts_with(entity), "{name}");
            assert!(!name.contains(&pk[pk.rfind('#').unwrap() + 1..]), "{name}");
        }
    }

    #[test]
    fn a_decode_error_is_logged_without_the_value() {
        assert_eq!(
            without_values("unknown variant `Ada Lovelace`, expected one of `open`, `returned`"),
            "unknown variant"
        );
        assert_eq!(
            without_values("invalid type: string \"ada@example.com\", expected u32"),
            "invalid type: string"
        );
        assert_eq!(
            without_values("missing field `title`"),
            "missing field `title`"
        );
        assert_eq!(
            without_values("not a valid Email: Invalid"),
            "not a valid Email: Invalid"
        );
    }
}
