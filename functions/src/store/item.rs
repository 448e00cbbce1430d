//! Items and attribute values. An entity becomes an item in the model
//! ([`crate::model::Entity::to_item`]); a stored item decodes into the type a pattern asks for
//! here, in one place: a stored value that does not decode is logged with its key, and the request
//! is a `500`.

use crate::error::ApiError;
pub use crate::model::Item;
use crate::model::{Entity, TableEntity, without_values};
use aws_sdk_dynamodb::types::AttributeValue;
use singlet_shared::Key;
use singlet_shared::schema::{PK, SK};
use std::collections::HashMap;

/// A key as the item attributes `PK` and `SK`.
pub fn key_item(key: &Key) -> Item {
    HashMap::from([
        (PK.to_owned(), AttributeValue::S(key.pk.clone())),
        (SK.to_owned(), AttributeValue::S(key.sk.clone())),
    ])
}

/// An item as the entity a read asks for, through the registry ([`crate::model::decode_as_a`]):
/// an item of another type, or of a later version than this code writes, is no `T`. The
/// handlers' decoder.
pub fn decode<T: Entity>(item: &Item) -> Result<T, ApiError> {
    crate::model::decode_as_a(item).map_err(|undecodable| {
        let error = without_values(&undecodable.reason);
        tracing::error!(item = %log_name(item), error, "a stored item does not decode");
        ApiError::Internal
    })
}

/// An item as whichever entity the registry says it is (its `_et`, else its key's shape), for a
/// read whose items are of more than one type.
pub fn decode_any(item: &Item) -> Result<TableEntity, ApiError> {
    crate::model::decode(item).map_err(|undecodable| {
        let error = without_values(&undecodable.reason);
        tracing::error!(item = %log_name(item), error, "a stored item does not decode");
        ApiError::Internal
    })
}

/// How a log line names an item: `PK/SK` when its key is made of ids; when its key holds a
/// value a person gave (`PLATE#ka19xtr`, `UNIQ#EMAIL#…`), its entity type and a keyed hash of
/// the key (`plate-lock 5f0c…`), which an operator holding the server's key can match against a
/// value, and no one else can.
pub fn log_name(item: &Item) -> String {
    let (pk, sk) = (text(item, PK), text(item, SK));
    match crate::model::value_keyed(pk) {
        None => format!("{pk}/{sk}"),
        Some(entity) => {
            let hash = crate::ids::log_key()
                .map(|key| key.pseudonym("log", &[pk, sk]))
                .unwrap_or_else(|| "-".into());
            format!("{entity} {hash}")
        }
    }
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

#[cfg(test)]
mod tests {
    use super::{key_item, log_name};
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
}
