//! Items and attribute values. An entity becomes an item in the model
//! ([`crate::model::Entity::to_item`]); a stored item decodes into the type a pattern asks for
//! here, in one place: a stored value that does not decode is logged with its key, and the request
//! is a `500`.

use crate::error::ApiError;
pub use crate::model::Item;
use crate::model::without_values;
use aws_sdk_dynamodb::types::AttributeValue;
use serde::de::DeserializeOwned;
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

/// An item as its entity. The only place a stored item is decoded.
pub fn decode<T: DeserializeOwned>(item: &Item) -> Result<T, ApiError> {
    serde_dynamo::from_item(item.clone()).map_err(|e| {
        let (pk, sk) = (text(item, PK), text(item, SK));
        let error = without_values(&e.to_string());
        tracing::error!(pk, sk, error, "a stored item does not decode");
        ApiError::Internal
    })
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
