//! The keys that sign list cursors, and a cursor's wire form.
//!
//! A cursor is DynamoDB's `LastEvaluatedKey` made opaque: `base64url(kid ‖ payload ‖ tag)`.
//! `kid` (4 bytes) names the key that signed it; the payload lists the key's values by the
//! position of their attribute in the table's schema (so no key attribute's name is shown); the
//! tag is HMAC-SHA256 over the scope (route and partition), the kid and the payload. An edit, a
//! truncation, or a cursor used on another route or partition fails the tag.
//!
//! Rotation: `CURSOR_KEY` signs; `CURSOR_KEY_PREVIOUS` still verifies until
//! `CURSOR_KEY_PREVIOUS_UNTIL` (ISO-8601 UTC), so rotating the key breaks no open cursor within
//! that grace period. On Lambda a missing or short key stops the cold start ([`CursorKeys::from_env`]).

use aws_sdk_dynamodb::types::AttributeValue;
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use singlet_shared::schema;

use time::OffsetDateTime;

/// The shortest key taken: template.yaml asks for as much.
pub const MIN_KEY_LEN: usize = 32;
const KID_LEN: usize = 4;
const TAG_LEN: usize = 32;

use crate::model::Item;

/// The server secret the local runner uses when `CURSOR_KEY` is not set: public, so that ids
/// derived from `Idempotency-Key`s, cursors and the sample events in `events/` agree across runs
/// and machines. Only the local runner falls back to it; a Lambda refuses it ([`PUBLISHED_KEYS`]).
pub const LOCAL_SECRET: &str = "singlet-local-development-secret-do-not-deploy";

/// The keys published with singlet's source (the runner's default, and `events/env.json`'s for
/// `sam local invoke`): anyone can sign cursors and compute derived ids with them, so a function
/// on Lambda refuses to start with one (`Ctx::from_lambda_env`).
pub const PUBLISHED_KEYS: [&str; 2] = [
    LOCAL_SECRET,
    "local-only-cursor-key-not-a-secret-0123456789",
];

/// One signing key and its id.
struct SigningKey {
    kid: [u8; KID_LEN],
    secret: Vec<u8>,
}

impl SigningKey {
    /// The cursor key derived from the server's secret (`server_secret`): HMAC under a label of
    /// its own, so that it is not the key ids are derived with (`crate::ids::IdKey`), and
    /// knowing one tells nothing of the other.
    fn new(server_secret: impl Into<Vec<u8>>) -> Self {
        let mut mac = Hmac::<Sha256>::new_from_slice(&server_secret.into())
            .expect("HMAC takes any key length");
        mac.update(b"singlet cursors");
        let secret = mac.finalize().into_bytes().to_vec();
        let digest = Sha256::digest(&secret);
        let kid = [digest[0], digest[1], digest[2], digest[3]];
        Self { kid, secret }
    }

    fn mac(&self, scope: &str, payload: &[u8]) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes any key length");
        mac.update(scope.as_bytes());
        mac.update(&[0]);
        mac.update(&self.kid);
        mac.update(payload);
        mac
    }
}

/// The current key, and the previous one while its grace period lasts.
pub struct CursorKeys {
    current: SigningKey,
    previous: Option<(SigningKey, OffsetDateTime)>,
    /// The server's secret both keys are derived from.
    server_secret: Vec<u8>,
}

impl CursorKeys {
    pub fn new(secret: impl Into<Vec<u8>>) -> Self {
        let server_secret = secret.into();
        Self {
            current: SigningKey::new(server_secret.clone()),
            previous: None,
            server_secret,
        }
    }

    /// `previous` keeps verifying cursors it signed until `until`.
    pub fn with_previous(mut self, secret: impl Into<Vec<u8>>, until: OffsetDateTime) -> Self {
        self.previous = Some((SigningKey::new(secret), until));
        self
    }

    /// A random key: cursors then verify only in this process (tests, and a runner without
    /// `CURSOR_KEY`).
    pub fn random() -> Self {
        let random: Vec<u8> = uuid::Uuid::new_v4()
            .as_bytes()
            .iter()
            .chain(uuid::Uuid::new_v4().as_bytes())
            .copied()
            .collect();
        Self::new(random)
    }

    /// `CURSOR_KEY` (at least [`MIN_KEY_LEN`] bytes), and `CURSOR_KEY_PREVIOUS` with
    /// `CURSOR_KEY_PREVIOUS_UNTIL` when set. Every instance must share the key for a cursor from
    /// one to be valid on another, so there is no fallback: the error says what is wrong.
    pub fn from_env() -> Result<Self, String> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`CursorKeys::from_env`] with the variables read by `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let current = var("CURSOR_KEY").unwrap_or_default();
        if current.len() < MIN_KEY_LEN {
            return Err(format!(
                "CURSOR_KEY is unset or shorter than {MIN_KEY_LEN} bytes: cursors could not be \
                 verified across instances"
            ));
        }
        let mut keys = Self::new(current);
        if let Some(previous) = var("CURSOR_KEY_PREVIOUS")
            && !previous.is_empty()
        {
            let until = var("CURSOR_KEY_PREVIOUS_UNTIL").unwrap_or_default();
            let until = crate::clock::parse_iso(&until).ok_or(
                "CURSOR_KEY_PREVIOUS is set without a valid CURSOR_KEY_PREVIOUS_UNTIL (ISO-8601 UTC)",
            )?;
            if previous.len() < MIN_KEY_LEN {
                return Err(format!(
                    "CURSOR_KEY_PREVIOUS is shorter than {MIN_KEY_LEN} bytes"
                ));
            }
            keys = keys.with_previous(previous, until);
        }
        Ok(keys)
    }

    /// The server's secret, from which the cursor key and the id key are derived apart.
    pub(crate) fn server_secret(&self) -> &[u8] {
        &self.server_secret
    }

    /// Whether the current or previous key is one of the [`PUBLISHED_KEYS`].
    pub fn is_published(&self) -> bool {
        let published = |secret: &[u8]| PUBLISHED_KEYS.iter().any(|k| k.as_bytes() == secret);
        published(&self.server_secret)
            || self.previous.as_ref().is_some_and(|(key, _)| {
                PUBLISHED_KEYS
                    .iter()
                    .any(|k| SigningKey::new(k.as_bytes().to_vec()).secret == key.secret)
            })
    }

    fn verifying(&self, kid: &[u8], now: OffsetDateTime) -> Option<&SigningKey> {
        if kid == self.current.kid {
            return Some(&self.current);
        }
        self.previous
            .as_ref()
            .filter(|(key, until)| key.kid == kid && now < *until)
            .map(|(key, _)| key)
    }

    /// The cursor for `last` (a `LastEvaluatedKey`), bound to `scope`.
    pub fn encode(&self, scope: &str, last: &Item) -> String {
        let names = schema::key_attributes();
        let values: Vec<(usize, &str)> = names
            .iter()
            .enumerate()
            .filter_map(|(position, name)| {
                let value = last.get(*name)?.as_s().ok()?;
                Some((position, value.as_str()))
            })
            .collect();
        let payload = serde_json::to_vec(&values).expect("pairs serialise");
        let tag = self.current.mac(scope, &payload).finalize().into_bytes();
        let mut bytes = self.current.kid.to_vec();
        bytes.extend_from_slice(&payload);
        bytes.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The `LastEvaluatedKey` a cursor carries, if it verifies for `scope` now.
    pub fn decode(&self, scope: &str, cursor: &str) -> Option<Item> {
        self.decode_at(scope, cursor, OffsetDateTime::now_utc())
    }

    fn decode_at(&self, scope: &str, cursor: &str, now: OffsetDateTime) -> Option<Item> {
        let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
        if bytes.len() < KID_LEN + TAG_LEN {
            return None;
        }
        let (kid, rest) = bytes.split_at(KID_LEN);
        let (payload, tag) = rest.split_at(rest.len() - TAG_LEN);
        let key = self.verifying(kid, now)?;
        key.mac(scope, payload).verify_slice(tag).ok()?;
        let values: Vec<(usize, String)> = serde_json::from_slice(payload).ok()?;
        let names = schema::key_attributes();
        values
            .into_iter()
            .map(|(position, value)| {
                let name = names.get(position)?;
                Some(((*name).to_owned(), AttributeValue::S(value)))
            })
            .collect()
    }
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
        let keys = CursorKeys::new("k".repeat(32));
        let cursor = keys.encode("list\nBRANCH#b1", &last());
        assert_eq!(keys.decode("list\nBRANCH#b1", &cursor), Some(last()));
        assert_eq!(keys.decode("list\nBRANCH#b2", &cursor), None);
        assert_eq!(keys.decode("other\nBRANCH#b1", &cursor), None);
        assert_eq!(
            CursorKeys::new("x".repeat(32)).decode("list\nBRANCH#b1", &cursor),
            None
        );
    }

    #[test]
    fn a_cursor_shows_no_key_attribute_name() {
        let keys = CursorKeys::new("k".repeat(32));
        let bytes = URL_SAFE_NO_PAD.decode(keys.encode("s", &last())).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains("\"PK\"") && !text.contains("\"SK\""),
            "{text}"
        );
    }

    #[test]
    fn edited_and_truncated_cursors_fail() {
        let keys = CursorKeys::new("k".repeat(32));
        let cursor = keys.encode("s", &last());
        assert_eq!(keys.decode("s", &cursor[..cursor.len() - 1]), None);
        assert_eq!(keys.decode("s", &cursor[..10]), None);
        assert_eq!(keys.decode("s", ""), None);
        assert_eq!(keys.decode("s", "!!!"), None);
        let mut bytes = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
        bytes[6] ^= 1;
        assert_eq!(keys.decode("s", &URL_SAFE_NO_PAD.encode(bytes)), None);
    }

    #[test]
    fn a_rotated_key_verifies_within_its_grace_period_only() {
        let old = CursorKeys::new("o".repeat(32));
        let cursor = old.encode("s", &last());
        let now = OffsetDateTime::now_utc();
        let until = now + time::Duration::hours(1);
        let rotated = CursorKeys::new("n".repeat(32)).with_previous("o".repeat(32), until);
        assert_eq!(rotated.decode_at("s", &cursor, now), Some(last()));
        assert_eq!(rotated.decode_at("s", &cursor, until), None);
        // New cursors are signed with the new key.
        let fresh = rotated.encode("s", &last());
        assert_eq!(
            CursorKeys::new("n".repeat(32)).decode("s", &fresh),
            Some(last())
        );
    }
}
