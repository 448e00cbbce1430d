//! Ids derived from `Idempotency-Key`s, under a key of the server's: so every retry of one request
//! names the same entity, and no client can compute another's id from a key it guessed.
//!
//! A derived id is an HMAC-SHA-256 under that key (its first 16 bytes, shaped as a UUID of
//! version 8, "custom"), not a UUIDv5: a UUIDv5 is a plain SHA-1 of its name, which anyone who
//! knows the name can compute.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use singlet_shared::Id;
use uuid::Uuid;

/// The server's secret for ids derived from `Idempotency-Key`s.
pub struct IdKey(Vec<u8>);

/// Who sent a request, as far as its `Idempotency-Key` is concerned: the token's issuer and
/// subject. Two callers' keys never meet, whatever they are.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    pub issuer: &'a str,
    pub subject: &'a str,
}

impl IdKey {
    /// A key of its own, derived from the server's secret (domain-separated, so that it signs
    /// nothing a cursor key signs).
    pub fn derived_from(secret: &[u8]) -> Self {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
        mac.update(b"singlet entity ids");
        Self(mac.finalize().into_bytes().to_vec())
    }

    /// The key itself, used as it is (the anonymiser's key for the ids it replaces).
    pub fn new(key: &[u8]) -> Self {
        Self(key.to_vec())
    }

    /// The id `caller`'s `key` derives on `route`: the same for every retry, another for every
    /// other caller, route or key.
    pub fn uuid(&self, route: &str, caller: Caller, key: &Id) -> Uuid {
        let digest = self.mac(
            b"id",
            &[
                route.as_bytes(),
                caller.issuer.as_bytes(),
                caller.subject.as_bytes(),
                key.as_str().as_bytes(),
            ],
        );
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        uuid::Builder::from_custom_bytes(bytes).into_uuid()
    }

    /// A keyed hash of `parts` (hex, 128 bits) for a key or a log line that must name a value
    /// without showing it (a subject, an email): equal values hash alike, and without the server's
    /// key no one can test a guess against it.
    pub fn pseudonym(&self, purpose: &str, parts: &[&str]) -> String {
        let parts: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
        let digest = self.mac(purpose.as_bytes(), &parts);
        digest[..16].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// HMAC over `purpose` and `parts`, each length-prefixed so that no two lists of parts
    /// are ever one input.
    fn mac(&self, purpose: &[u8], parts: &[&[u8]]) -> [u8; 32] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        for part in std::iter::once(purpose).chain(parts.iter().copied()) {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }
}

/// Whether `id` was derived from an `Idempotency-Key` (a version-8 UUID in simple form) rather
/// than made at random (version 4): only a derived id can have an idempotency record.
pub fn is_derived(id: &Id) -> bool {
    Uuid::try_parse(id.as_str()).is_ok_and(|uuid| uuid.get_version_num() == 8)
}

/// The key a log names pseudonyms with: the server's id key, set by the first context made (in
/// a function that does not hold the server's keys, a key of its instance alone).
static LOG_KEY: std::sync::OnceLock<std::sync::Arc<IdKey>> = std::sync::OnceLock::new();

/// Sets the key log lines name value-keyed items with (`Ctx::new` does, once per process).
pub fn use_log_key(key: std::sync::Arc<IdKey>) {
    let _ = LOG_KEY.set(key);
}

/// The key [`use_log_key`] set, if one was.
pub fn log_key() -> Option<&'static IdKey> {
    LOG_KEY.get().map(|key| &**key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> Id {
        Id::parse(s).unwrap()
    }

    #[test]
    fn a_key_derives_one_id_per_caller_and_route() {
        let key = IdKey::derived_from(b"a secret of at least thirty-two bytes!");
        let ada = Caller {
            issuer: "https://a",
            subject: "ada",
        };
        let bob = Caller {
            issuer: "https://a",
            subject: "bob",
        };
        let other_issuer = Caller {
            issuer: "https://b",
            subject: "ada",
        };
        let k = id("k1");
        let first = key.uuid("create-account", ada, &k);
        assert_eq!(first, key.uuid("create-account", ada, &k));
        assert_ne!(first, key.uuid("create-account", bob, &k));
        assert_ne!(first, key.uuid("create-account", other_issuer, &k));
        assert_ne!(first, key.uuid("register-vehicle", ada, &k));
        assert!(is_derived(&id(&first.simple().to_string())));
        assert!(!is_derived(&id(&Uuid::new_v4().simple().to_string())));
        assert!(!is_derived(&id("v1")));
    }

    #[test]
    fn parts_are_length_prefixed() {
        let key = IdKey::new(b"k");
        assert_ne!(
            key.pseudonym("p", &["ab", "c"]),
            key.pseudonym("p", &["a", "bc"])
        );
    }
}
