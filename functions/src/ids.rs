//! Ids derived from `Idempotency-Key`s, under a key of the server's: so every retry of one request
//! names the same entity, and no client can compute another's id from a key it guessed.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use singlet_shared::Id;
use uuid::Uuid;

/// The server's secret for ids derived from `Idempotency-Key`s.
pub struct IdKey(Vec<u8>);

impl IdKey {
    /// A key of its own, derived from the server's secret (domain-separated, so that it signs
    /// nothing a cursor key signs).
    pub fn derived_from(secret: &[u8]) -> Self {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
        mac.update(b"singlet entity ids");
        Self(mac.finalize().into_bytes().to_vec())
    }

    pub fn uuid(&self, route: &str, key: &Id) -> Uuid {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(route.as_bytes());
        mac.update(&[0]);
        mac.update(key.as_str().as_bytes());
        let digest = mac.finalize().into_bytes();
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        uuid::Builder::from_custom_bytes(bytes).into_uuid()
    }
}
