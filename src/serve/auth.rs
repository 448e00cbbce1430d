//! The local runner's stand-in for API Gateway's JWT authorizer: it checks a token exactly as the
//! authorizer does ("Control access to HTTP APIs with JWT authorizers in API Gateway",
//! <https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-jwt-authorizer.html>):
//! the token alone or after `Bearer ` in `authorization`; its signature and `alg` (RSA); a `kid`
//! that names a key of the issuer's keys (a token without one is refused); no `crit` header
//! parameter (RFC 7515); `iss`, `aud`, `exp`, `nbf` and `iat`; then the route's scopes. It answers what API Gateway answers
//! (`401 {"message":"Unauthorized"}`,
//! `403 {"message":"Forbidden"}`); a valid token's claims go to the function in
//! `requestContext.authorizer.jwt`, as on AWS.
//!
//! By default the runner is its own issuer: an RSA key made under `.singlet/` on first use signs
//! the tokens `cargo run -- token` prints. It can trust another issuer instead (its JWKS file,
//! issuer and audience), so a team's own identity provider's tokens work locally too. The Lambda
//! binary links none of this (it lives in the runner's crate): on AWS the authorizer has checked
//! the token before a function runs.

use crate::serve::refusal::GatewayRefusal;
use axum::http::{HeaderMap, StatusCode, header};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey, EncodePublicKey, LineEnding};
use serde_json::{Map, Value};
use singlet_functions::routes::Route;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

/// The local issuer's `iss` and `aud`.
pub const LOCAL_ISSUER: &str = "https://singlet.local";
pub const LOCAL_AUDIENCE: &str = "singlet";
/// The local signing key's file under the key directory.
const KEY_FILE: &str = "token-signing-key.pem";
/// API Gateway's JWT authorizers take RSA-signed tokens.
const ALGORITHM: Algorithm = Algorithm::RS256;

/// A verified token's claims, as the authorizer hands them to the function.
pub type Claims = Map<String, Value>;

enum Keys {
    /// The runner's own key.
    Local { kid: String, key: DecodingKey },
    /// Another issuer's published keys.
    Jwks(JwkSet),
}

/// Checks tokens for one issuer and audience.
pub struct Authorizer {
    issuer: String,
    audience: String,
    keys: Keys,
    /// Tokens whose signature, `alg`, `iss` and `aud` have passed, with their claims: none of
    /// those can change for a given token, so each is checked once, as a gateway would cache it.
    /// Its time window is checked on every use.
    verified: Mutex<HashMap<String, Claims>>,
}

/// Verified tokens kept at most; the whole cache is dropped when full (a client fleet rarely
/// holds this many live tokens, and a dropped token is only checked again).
const VERIFIED_TOKENS: usize = 4096;

/// Signs tokens as the local issuer.
pub struct LocalIssuer {
    kid: String,
    key: EncodingKey,
    /// The public key as a JWKS, as an identity provider publishes its keys.
    jwks: Value,
}

fn unauthorized() -> GatewayRefusal {
    GatewayRefusal(StatusCode::UNAUTHORIZED, "Unauthorized")
}

impl Authorizer {
    /// The runner as its own issuer, its key under `dir` (made on first use).
    pub fn local(dir: &Path) -> Result<(Self, LocalIssuer), String> {
        let path = dir.join(KEY_FILE);
        let private = match std::fs::read_to_string(&path) {
            Ok(pem) => rsa::RsaPrivateKey::from_pkcs8_pem(&pem).map_err(|_| {
                format!(
                    "{} is not an RSA private key in PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`): \
                     delete it to have a new one made (tokens it signed stop working)",
                    path.display()
                )
            })?,
            // Only a key that is not there is made: a file that cannot be read is someone's,
            // and is never written over.
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("cannot read {}: {e}", path.display()));
            }
            Err(_) => {
                singlet_tools::files::create_private_dir(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                let key = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048)
                    .map_err(|e| format!("cannot make a signing key: {e}"))?;
                let pem = key
                    .to_pkcs8_pem(LineEnding::LF)
                    .map_err(|e| format!("cannot encode the signing key: {e}"))?;
                write_private(&path, pem.as_bytes())?;
                key
            }
        };
        let private_pem = private
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(|e| e.to_string())?;
        let public_pem = private
            .to_public_key()
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| e.to_string())?;
        let kid = {
            use sha2::{Digest, Sha256};
            let digest = Sha256::digest(public_pem.as_bytes());
            digest[..8]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        let authorizer = Self {
            issuer: LOCAL_ISSUER.into(),
            audience: LOCAL_AUDIENCE.into(),
            keys: Keys::Local {
                kid: kid.clone(),
                key: DecodingKey::from_rsa_pem(public_pem.as_bytes()).map_err(|e| e.to_string())?,
            },
            verified: Mutex::default(),
        };
        let jwks = {
            use base64::Engine;
            use rsa::traits::PublicKeyParts;
            let b64 =
                |bytes: Vec<u8>| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
            serde_json::json!({"keys": [{
                "kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
                "n": b64(private.n().to_bytes_be()), "e": b64(private.e().to_bytes_be()),
            }]})
        };
        let issuer = LocalIssuer {
            kid,
            key: EncodingKey::from_rsa_pem(private_pem.as_bytes()).map_err(|e| e.to_string())?,
            jwks,
        };
        Ok((authorizer, issuer))
    }

    /// Another issuer: its JWKS (a file of its published keys), `iss` and `aud`.
    pub fn from_jwks(jwks: &Path, issuer: &str, audience: &str) -> Result<Self, String> {
        let text = std::fs::read_to_string(jwks)
            .map_err(|e| format!("cannot read {}: {e}", jwks.display()))?;
        let keys: JwkSet = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a JWKS: {e}", jwks.display()))?;
        Ok(Self {
            issuer: issuer.into(),
            audience: audience.into(),
            keys: Keys::Jwks(keys),
            verified: Mutex::default(),
        })
    }

    /// The claims of the request's bearer token if it is valid and holds one of `route`'s
    /// scopes; API Gateway's `401` or `403` otherwise.
    pub fn authorize(&self, headers: &HeaderMap, route: &Route) -> Result<Claims, GatewayRefusal> {
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(bearer_token)
            .filter(|token| !token.is_empty())
            .ok_or_else(unauthorized)?;
        let claims = self.verify(token).ok_or_else(unauthorized)?;
        let scopes = scopes(&claims);
        if !route.scopes.iter().any(|s| scopes.iter().any(|t| t == s)) {
            return Err(GatewayRefusal(StatusCode::FORBIDDEN, "Forbidden"));
        }
        Ok(claims)
    }

    fn verify(&self, token: &str) -> Option<Claims> {
        let now = jsonwebtoken::get_current_timestamp();
        let known = self
            .verified
            .lock()
            .expect("not poisoned")
            .get(token)
            .cloned();
        if let Some(claims) = known {
            return in_window(&claims, now).then_some(claims);
        }
        // The window is judged here too, not only by the library's check: `jsonwebtoken` skips
        // an `nbf` too large for its integer type (`1e30`), which `in_window` reads as a date.
        let claims = self.check(token).filter(|claims| in_window(claims, now))?;
        let mut verified = self.verified.lock().expect("not poisoned");
        if verified.len() >= VERIFIED_TOKENS {
            verified.clear();
        }
        verified.insert(token.to_owned(), claims.clone());
        Some(claims)
    }

    /// The token's claims if its signature, `alg`, `kid`, `iss`, `aud`, `exp` and `nbf` pass.
    fn check(&self, token: &str) -> Option<Claims> {
        // `alg: none`, or any algorithm but the issuer's, never verifies.
        let header = jsonwebtoken::decode_header(token).ok()?;
        if header.alg != ALGORITHM || names_critical_extensions(token) {
            return None;
        }
        let key = match &self.keys {
            // API Gateway requires a `kid` that names one of the issuer's keys: a token without
            // one never verifies, whoever signed it.
            Keys::Local { kid, key } => {
                if header.kid.as_deref() != Some(kid.as_str()) {
                    return None;
                }
                key.clone()
            }
            Keys::Jwks(set) => DecodingKey::from_jwk(set.find(header.kid.as_deref()?)?).ok()?,
        };
        let mut validation = Validation::new(ALGORITHM);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.leeway = 0;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation).ok()?;
        // A time claim that is present is a NumericDate (RFC 7519: a number of seconds, which
        // may have a fraction), or the token is refused: never read as "absent".
        let malformed = ["exp", "nbf", "iat"].into_iter().any(|name| {
            data.claims
                .get(name)
                .is_some_and(|v| numeric_date(v).is_none())
        });
        if malformed {
            return None;
        }
        Some(data.claims)
    }
}

/// Whether the token's header has a `crit` parameter. RFC 7515 (section 4.1.11): a recipient
/// that does not understand every extension `crit` names must refuse the token; this authorizer
/// understands none, so any `crit` is refused (as is a header that is not a JSON object, which
/// `decode_header` refuses too). AWS documents nothing of `crit`: this is the strict reading.
fn names_critical_extensions(token: &str) -> bool {
    use base64::Engine;
    let Some(header) = token.split('.').next() else {
        return true;
    };
    let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(header) else {
        return true;
    };
    match serde_json::from_slice::<Map<String, Value>>(&bytes) {
        Ok(header) => header.contains_key("crit"),
        Err(_) => true,
    }
}

/// The token in an `authorization` value, as API Gateway's JWT authorizer reads its identity
/// source: the token alone, or after `Bearer ` (any case).
fn bearer_token(value: &str) -> &str {
    let value = value.trim();
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
        _ => value,
    }
}

/// A claim's value as a NumericDate: a finite, non-negative number of seconds.
fn numeric_date(value: &Value) -> Option<f64> {
    value.as_f64().filter(|s| s.is_finite() && *s >= 0.0)
}

/// Whether a verified token's time window holds `now` (seconds since the epoch), as the first
/// check read it (no leeway): its `exp` not passed, and its `nbf` and `iat`, if any, reached
/// (API Gateway: `iat` "must be before the current time").
fn in_window(claims: &Claims, now: u64) -> bool {
    let now = now as f64;
    let date = |name: &str| claims.get(name).map(numeric_date);
    let reached = |name: &str| match date(name) {
        None => true,
        Some(Some(at)) => at <= now,
        Some(None) => false,
    };
    matches!(date("exp"), Some(Some(exp)) if exp >= now) && reached("nbf") && reached("iat")
}

/// The token's scopes, from `scope` and `scp`, the two claims API Gateway's JWT authorizer
/// names. `scope` is what RFC 8693 (section 4.2) and RFC 9068 (section 2.2.3) define: one string
/// of space-separated scopes, so a `scope` of any other form (a list) grants nothing. `scp` has
/// no standard form (Entra ID writes a string, Okta a list of strings): both are read. AWS
/// documents neither claim's form; this is the strict reading (docs/guide/authentication.md).
pub fn scopes(claims: &Claims) -> Vec<String> {
    let mut scopes = Vec::new();
    for claim in ["scope", "scp"] {
        match claims.get(claim) {
            Some(Value::String(list)) => {
                // Space-separated: a tab or a line break is part of a scope, as the authorizer
                // reads it.
                scopes.extend(list.split(' ').filter(|s| !s.is_empty()).map(str::to_owned));
            }
            // Each element is one scope, whole: `["fleet:read library:staff"]` grants neither.
            Some(Value::Array(list)) if claim == "scp" => {
                scopes.extend(list.iter().filter_map(Value::as_str).map(str::to_owned));
            }
            _ => {}
        }
    }
    scopes
}

/// `requestContext.authorizer` as API Gateway builds it: every claim as a string, and the scopes.
pub fn authorizer_context(claims: &Claims) -> Value {
    let strings: Map<String, Value> = claims
        .iter()
        .map(|(name, value)| {
            // API Gateway flattens a list claim to `[a b]`.
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Array(items) => {
                    let items: Vec<String> = items
                        .iter()
                        .map(|item| match item {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect();
                    format!("[{}]", items.join(" "))
                }
                other => other.to_string(),
            };
            (name.clone(), Value::String(text))
        })
        .collect();
    serde_json::json!({ "jwt": { "claims": strings, "scopes": scopes(claims) } })
}

impl LocalIssuer {
    /// A token for `subject` with `scopes`, valid for `ttl_seconds` from now, and `extra`
    /// claims, which replace a default claim of the same name (`nbf`, `exp` and `scope`
    /// included, so a malformed token can be made on purpose). A `scope` that is empty, by
    /// default or by `extra`, is left out.
    pub fn mint(&self, subject: &str, scopes: &str, extra: &Claims, ttl_seconds: i64) -> String {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let mut claims = Claims::new();
        claims.insert("iss".into(), LOCAL_ISSUER.into());
        claims.insert("aud".into(), LOCAL_AUDIENCE.into());
        claims.insert("sub".into(), subject.into());
        claims.insert("scope".into(), scopes.into());
        claims.insert("iat".into(), now.into());
        claims.insert("nbf".into(), now.into());
        // Saturating: `--ttl 9223372036854775807` is a token that never expires, not a panic.
        claims.insert("exp".into(), now.saturating_add(ttl_seconds).into());
        claims.extend(extra.clone());
        if claims.get("scope").is_some_and(|s| s == "") {
            claims.remove("scope");
        }
        self.sign(&claims)
    }

    /// The issuer's public key as a JWKS document.
    pub fn jwks(&self) -> &Value {
        &self.jwks
    }

    /// Signs `claims` as they are (tests make expired, future and foreign tokens with it).
    pub fn sign(&self, claims: &Claims) -> String {
        let mut header = Header::new(ALGORITHM);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.key).expect("RSA signing does not fail")
    }
}

/// Writes a private key readable by its owner only, whole or not at all (a temporary file
/// renamed into place, so a second process never reads half a key).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let failed = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let mut file = options.open(&temporary).map_err(failed)?;
    file.write_all(bytes).map_err(failed)?;
    std::fs::rename(&temporary, path).map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key file that is not a key is refused, and never written over, whatever it holds.
    #[test]
    fn a_key_file_that_is_not_a_key_is_refused_and_kept() {
        let dir = std::env::temp_dir().join(format!("singlet-auth-{:016x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        for junk in [b"not a key\n".to_vec(), vec![0xff, 0xfe, 0x00, 0x01]] {
            std::fs::write(dir.join(KEY_FILE), &junk).unwrap();
            let refused = Authorizer::local(&dir).err().expect("refused");
            assert!(
                refused.contains("not an RSA private key") || refused.contains("cannot read"),
                "{refused}"
            );
            assert_eq!(std::fs::read(dir.join(KEY_FILE)).unwrap(), junk, "kept");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn claims(exp: i64, nbf: Option<i64>) -> Claims {
        let mut claims = Claims::new();
        claims.insert("exp".into(), exp.into());
        if let Some(nbf) = nbf {
            claims.insert("nbf".into(), nbf.into());
        }
        claims
    }

    #[test]
    fn a_verified_token_passes_only_within_its_window() {
        assert!(in_window(&claims(100, None), 100));
        assert!(!in_window(&claims(100, None), 101), "expired");
        assert!(in_window(&claims(100, Some(50)), 50));
        assert!(!in_window(&claims(100, Some(50)), 49), "not yet valid");
        assert!(!in_window(&Claims::new(), 0), "no exp, no pass");
        let mut fractional = claims(100, None);
        fractional.insert("nbf".into(), 60.5.into());
        assert!(
            !in_window(&fractional, 50),
            "a NumericDate may have a fraction: it is read, never ignored"
        );
        assert!(in_window(&fractional, 61));
        let mut malformed = claims(100, None);
        malformed.insert("nbf".into(), "soon".into());
        assert!(!in_window(&malformed, 50), "a malformed nbf never passes");
        let mut issued_later = claims(100, None);
        issued_later.insert("iat".into(), 60.into());
        assert!(!in_window(&issued_later, 59), "issued in the future");
        assert!(in_window(&issued_later, 60));
    }

    #[test]
    fn the_token_is_read_alone_or_after_bearer() {
        assert_eq!(bearer_token("Bearer a.b.c"), "a.b.c");
        assert_eq!(bearer_token("bearer  a.b.c "), "a.b.c");
        assert_eq!(bearer_token("a.b.c"), "a.b.c");
        assert_eq!(bearer_token(" a.b.c"), "a.b.c");
        // Another scheme is no token API Gateway could decode: refused when it is checked.
        assert_eq!(bearer_token("Basic YWRhOg=="), "Basic YWRhOg==");
    }

    #[test]
    fn a_token_checked_once_is_checked_again_for_its_window_on_every_use() {
        let dir = std::env::temp_dir().join(format!("singlet-auth-{}", std::process::id()));
        let (authorizer, issuer) = Authorizer::local(&dir).unwrap();
        let now = jsonwebtoken::get_current_timestamp() as i64;
        let mut short = Claims::new();
        short.insert("sub".into(), "s".into());
        short.insert("iss".into(), LOCAL_ISSUER.into());
        short.insert("aud".into(), LOCAL_AUDIENCE.into());
        short.insert("exp".into(), (now + 3600).into());
        let token = issuer.sign(&short);
        assert!(authorizer.verify(&token).is_some());
        // The same token, remembered with a window that has closed since, is refused.
        let remembered = claims(now - 1, None);
        authorizer
            .verified
            .lock()
            .unwrap()
            .insert(token.clone(), remembered);
        assert!(authorizer.verify(&token).is_none());
        // A token that fails its first check is never remembered.
        assert!(authorizer.verify("not.a.token").is_none());
        assert!(
            !authorizer
                .verified
                .lock()
                .unwrap()
                .contains_key("not.a.token")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
