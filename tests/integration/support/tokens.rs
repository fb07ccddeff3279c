//! Bearer tokens: valid ones as the server mints them, and hand-made ones (expired, forged,
//! unsigned, signed by the identity provider's test keys) for the tests that must refuse them.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde::Serialize;
use threadql::auth::JwtKeys;

/// The JWT secret tests sign with.
pub(crate) const SECRET: &str = "integration-test-secret";

/// Seconds since the epoch, as tokens count time.
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// A valid token for a user, minted as `threadql token` mints it.
pub(crate) fn token(sub: &str, name: &str) -> String {
    JwtKeys::new(SECRET).mint(sub, name, &[], 3600)
}

/// A valid token for a moderator, minted as the server mints it.
pub(crate) fn moderator_token(sub: &str, name: &str) -> String {
    JwtKeys::new(SECRET).mint(sub, name, &["moderator".to_owned()], 3600)
}

/// A valid token for an admin (who may also moderate), minted as the server mints it.
pub(crate) fn admin_token_for(sub: &str, name: &str) -> String {
    JwtKeys::new(SECRET).mint(sub, name, &["admin".to_owned()], 3600)
}

/// The claims of a hand-made token.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Claims {
    pub sub: String,
    pub name: String,
    pub roles: Vec<String>,
    pub exp: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aud: Option<String>,
    /// The OIDC `email` claim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// The OIDC `email_verified` claim.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email_verified: Option<bool>,
}

impl Claims {
    /// A user's claims, valid for ten minutes, without roles, audience or address.
    pub(crate) fn new(sub: &str, name: &str) -> Claims {
        Claims {
            sub: sub.to_owned(),
            name: name.to_owned(),
            roles: Vec::new(),
            exp: now() + 600,
            nbf: None,
            aud: None,
            email: None,
            email_verified: None,
        }
    }
}

/// Signs `claims` with `key`, the header naming `alg` (and `kid` when given).
pub(crate) fn sign_key(
    alg: Algorithm,
    kid: Option<&str>,
    claims: &impl Serialize,
    key: &EncodingKey,
) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    encode(&header, claims, key).expect("sign")
}

/// Signs `claims` with an HMAC `alg` and `secret`.
pub(crate) fn sign_with(alg: Algorithm, claims: &impl Serialize, secret: &str) -> String {
    sign_key(
        alg,
        None,
        claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
}

/// Signs `claims` as the tests' server expects: HS256 with [`SECRET`].
pub(crate) fn sign(claims: &impl Serialize) -> String {
    sign_with(Algorithm::HS256, claims, SECRET)
}

/// A token with `alg: none` and no signature.
pub(crate) fn unsigned(claims: &impl Serialize) -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).expect("claims"));
    format!("{header}.{payload}.")
}

/// A file of the identity provider's test keys (tests/fixtures/jwt).
pub(crate) fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/jwt")
        .join(name)
}

/// The identity provider's RSA private key.
pub(crate) fn rsa_key() -> EncodingKey {
    EncodingKey::from_rsa_pem(&std::fs::read(fixture("rsa-private.pem")).expect("read the key"))
        .expect("an RSA key")
}

/// A token signed by the JWKS's RSA key (kid `test-rsa-1`).
pub(crate) fn rsa_token(claims: &impl Serialize) -> String {
    sign_key(Algorithm::RS256, Some("test-rsa-1"), claims, &rsa_key())
}

/// A token signed by the JWKS's EC key (kid `test-ec-1`).
pub(crate) fn ec_token(claims: &impl Serialize) -> String {
    let key =
        EncodingKey::from_ec_pem(&std::fs::read(fixture("ec-private.pem")).expect("read the key"))
            .expect("an EC key");
    sign_key(Algorithm::ES256, Some("test-ec-1"), claims, &key)
}
