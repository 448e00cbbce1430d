//! `?limit=` and `?cursor=`, written once for every list route.
//!
//! A cursor is DynamoDB's `LastEvaluatedKey` (all string attributes), base64url-encoded with an
//! HMAC-SHA256 tag over the route, the partition and the key. Any edit, truncation, or use on
//! another route or another partition fails the tag and is `400`: a cursor can never steer a
//! query outside the partition it came from.

use crate::db::{Ctx, Item, from_item, log_capacity};
use crate::error::{ApiError, Code};
use crate::http::{HandlerResult, ok};
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::types::ReturnConsumedCapacity;
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac};
use lambda_http::{Request, RequestExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::Sha256;
use std::collections::BTreeMap;
use std::future::Future;

pub const DEFAULT_LIMIT: i32 = 25;
pub const MAX_LIMIT: i32 = 100;
const TAG_LEN: usize = 32;
/// The shortest `CURSOR_KEY` taken: template.yaml asks for as much.
pub const MIN_KEY_LEN: usize = 32;

/// The key that signs cursors.
pub struct CursorKey(Vec<u8>);

impl CursorKey {
    pub fn new(secret: impl Into<Vec<u8>>) -> Self {
        Self(secret.into())
    }

    /// A random key: cursors then only verify in this process.
    pub fn random() -> Self {
        Self(
            uuid::Uuid::new_v4()
                .as_bytes()
                .iter()
                .chain(uuid::Uuid::new_v4().as_bytes())
                .copied()
                .collect(),
        )
    }

    /// `CURSOR_KEY` from the environment, or a random key with a warning: every instance must
    /// share one key for a cursor from one to be valid on another.
    pub fn from_env() -> Self {
        match std::env::var("CURSOR_KEY") {
            Ok(secret) if secret.len() >= MIN_KEY_LEN => Self::new(secret),
            _ => {
                tracing::warn!(
                    min_len = MIN_KEY_LEN,
                    "CURSOR_KEY is unset or too short; cursors are signed with a per-process key"
                );
                Self::random()
            }
        }
    }

    fn mac(&self, scope: &str, payload: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(scope.as_bytes());
        mac.update(&[0]);
        mac.update(payload);
        mac
    }
}

/// One page's request: how many items, and where to start.
#[derive(Debug)]
pub struct Page {
    pub limit: i32,
    pub start: Option<Item>,
    scope: String,
}

/// One page of a list response.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Paged<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

impl Page {
    /// Reads `limit` (1..=100, default 25) and `cursor`, bound to `route` and `partition`.
    pub fn from_request(
        ctx: &Ctx,
        req: &Request,
        route: &str,
        partition: &str,
    ) -> Result<Self, ApiError> {
        let query = req.query_string_parameters();
        let scope = format!("{route}\n{partition}");
        let limit = match query.first("limit") {
            None => DEFAULT_LIMIT,
            Some(raw) => raw
                .parse::<i32>()
                .ok()
                .filter(|l| (1..=MAX_LIMIT).contains(l))
                .ok_or(ApiError::field("limit", Code::Invalid))?,
        };
        let start = match query.first("cursor") {
            None => None,
            Some(cursor) => Some(
                decode(&ctx.cursors, &scope, cursor)
                    .ok_or(ApiError::field("cursor", Code::Invalid))?,
            ),
        };
        Ok(Self {
            limit,
            start,
            scope,
        })
    }

    /// Runs one page of `query` (its table, index and key condition set) and answers
    /// `{items, nextCursor}`. The partition's owner (a branch, a patron) is only looked up when
    /// the first page comes back empty: `missing` then tells an empty list (`200`) from an owner
    /// that does not exist (`404`), so a list costs one `Query` whenever it has items.
    pub async fn query<T, M>(
        self,
        ctx: &Ctx,
        query: QueryFluentBuilder,
        missing: M,
    ) -> HandlerResult
    where
        T: DeserializeOwned + Serialize,
        M: Future<Output = Result<(), ApiError>>,
    {
        let output = query
            .limit(self.limit)
            .set_exclusive_start_key(self.start.clone())
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await?;
        log_capacity("Query", output.consumed_capacity());
        if output.items().is_empty() && self.start.is_none() {
            missing.await?;
        }
        let items = output
            .items()
            .iter()
            .map(from_item::<T>)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ok(&self.reply(ctx, items, output.last_evaluated_key())))
    }

    /// The response page: `items` and the cursor for `last_evaluated_key`, if any.
    pub fn reply<T>(
        &self,
        ctx: &Ctx,
        items: Vec<T>,
        last_evaluated_key: Option<&Item>,
    ) -> Paged<T> {
        Paged {
            items,
            next_cursor: last_evaluated_key.map(|key| encode(&ctx.cursors, &self.scope, key)),
        }
    }
}

fn encode(key: &CursorKey, scope: &str, last: &Item) -> String {
    let strings: BTreeMap<&str, &str> = last
        .iter()
        .filter_map(|(name, value)| value.as_s().ok().map(|v| (name.as_str(), v.as_str())))
        .collect();
    let mut bytes = serde_json::to_vec(&strings).expect("strings serialise");
    let tag = key.mac(scope, &bytes).finalize().into_bytes();
    bytes.extend_from_slice(&tag);
    URL_SAFE_NO_PAD.encode(bytes)
}

fn decode(key: &CursorKey, scope: &str, cursor: &str) -> Option<Item> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let split = bytes.len().checked_sub(TAG_LEN)?;
    let (payload, tag) = bytes.split_at(split);
    key.mac(scope, payload).verify_slice(tag).ok()?;
    let strings: BTreeMap<String, String> = serde_json::from_slice(payload).ok()?;
    Some(
        strings
            .into_iter()
            .map(|(k, v)| (k, AttributeValue::S(v)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last() -> Item {
        Item::from([
            ("PK".into(), AttributeValue::S("BRANCH#b1".into())),
            ("SK".into(), AttributeValue::S("PATRON#p9".into())),
        ])
    }

    #[test]
    fn a_cursor_round_trips_only_in_its_scope() {
        let key = CursorKey::new("k".repeat(32));
        let cursor = encode(&key, "list\nBRANCH#b1", &last());
        assert_eq!(decode(&key, "list\nBRANCH#b1", &cursor), Some(last()));
        assert_eq!(decode(&key, "list\nBRANCH#b2", &cursor), None);
        assert_eq!(decode(&key, "other\nBRANCH#b1", &cursor), None);
        assert_eq!(
            decode(&CursorKey::new("x".repeat(32)), "list\nBRANCH#b1", &cursor),
            None
        );
    }

    #[test]
    fn edited_and_truncated_cursors_fail() {
        let key = CursorKey::new("k".repeat(32));
        let cursor = encode(&key, "s", &last());
        assert_eq!(decode(&key, "s", &cursor[..cursor.len() - 1]), None);
        assert_eq!(decode(&key, "s", &cursor[..10]), None);
        assert_eq!(decode(&key, "s", ""), None);
        assert_eq!(decode(&key, "s", "!!!"), None);
        let mut bytes = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
        bytes[3] ^= 1;
        assert_eq!(decode(&key, "s", &URL_SAFE_NO_PAD.encode(bytes)), None);
    }
}
