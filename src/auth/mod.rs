//! Bearer-token authentication: JWTs verified with one HS256 secret, one RS256/ES256 public key
//! (PEM) or a JWKS, carrying the `sub`, `name`, `roles` and `exp` claims.
//!
//! Exactly one key source verifies tokens, and only the algorithm that matches its key is
//! accepted: `alg: none`, an HMAC token checked against a public key, or an RSA/EC token checked
//! against a secret are all refused. `exp` is required, `nbf` is checked when present (both with
//! the configured leeway), and `iss` / `aud` are required and checked only when configured.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{decode, encode, Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::domain::{check_identity, Author};

/// The secret used when none is configured. Anyone can mint tokens with it: development only.
pub const DEV_SECRET: &str = "threadql-development-secret-do-not-use-in-production";

/// The largest clock skew [`TokenRules::leeway_secs`] may allow.
pub const MAX_LEEWAY_SECS: u64 = 3600;

/// The claims threadql reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// Author id.
    pub sub: String,
    /// Author display name.
    pub name: String,
    /// Roles; `moderator` may moderate, `admin` may also manage webhooks and read the event
    /// log.
    #[serde(default)]
    pub roles: Vec<String>,
    /// Expiry, seconds since the epoch.
    pub exp: u64,
    /// Issued at, seconds since the epoch.
    #[serde(default)]
    pub iat: Option<u64>,
    /// The OIDC `email` claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// The OIDC `email_verified` claim: an address is kept only when it is `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email_verified: Option<bool>,
}

/// The authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewer {
    /// Who they are, as an author.
    pub author: Author,
    /// Whether they may moderate (`moderator` or `admin` among the token's roles).
    pub moderator: bool,
    /// Whether they may manage webhooks and read the event log (`admin`).
    pub admin: bool,
    /// Their e-mail address, when the token carries one with `email_verified: true` (and it
    /// looks like an address).
    pub email: Option<String>,
}

/// What the request's `Authorization` header said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthState {
    /// No header.
    Anonymous,
    /// A valid token.
    Authenticated(Viewer),
    /// A header that could not be accepted, and why.
    Rejected(String),
}

/// Why a bearer token was refused. The messages go to clients: they never hold key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// The header is not `Bearer <token>`.
    #[error("the Authorization header must be `Bearer <token>`")]
    NotBearer,
    /// Not three base64url parts with a JSON header.
    #[error("the token is malformed")]
    Malformed,
    /// `alg` is not the one the configured key verifies (including `none`).
    #[error("the token's algorithm is not accepted")]
    Algorithm,
    /// A JWKS is configured with several keys and the token has no `kid`.
    #[error("the token does not name its key (`kid`)")]
    NoKeyId,
    /// The token's `kid` is not in the JWKS.
    #[error("the token's key (`kid`) is not known")]
    UnknownKeyId,
    /// The signature does not match.
    #[error("the token's signature is not valid")]
    Signature,
    /// `exp` is past (beyond the leeway).
    #[error("the token has expired")]
    Expired,
    /// `nbf` is ahead (beyond the leeway).
    #[error("the token is not valid yet")]
    NotYetValid,
    /// `iss` is missing or not the configured issuer.
    #[error("the token's issuer is not accepted")]
    Issuer,
    /// `aud` is missing or does not name the configured audience.
    #[error("the token's audience is not accepted")]
    Audience,
    /// `sub`, `name` or `exp` is missing.
    #[error("the token lacks required claims (sub, name, exp)")]
    MissingClaims,
    /// A claim threadql reads has the wrong type.
    #[error("the token's claims are malformed (`sub` and `name` must be strings, `roles` an array of strings)")]
    InvalidClaims,
    /// `sub` or `name` is blank.
    #[error("the token's `sub` and `name` must not be empty")]
    EmptyIdentity,
    /// `sub` is not a user id `banUser` accepts, or `name` not a name the service shows (see
    /// `domain::check_identity`).
    #[error("the token's identity is refused (`sub` is its user id, `name` its name): {0}")]
    Identity(String),
}

/// Why keys could not be built from the configuration, or a token could not be minted.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The HS256 secret is blank.
    #[error("the JWT secret is empty")]
    EmptySecret,
    /// A required issuer or audience is blank.
    #[error("the required JWT {0} is empty")]
    EmptyRequirement(&'static str),
    /// The leeway is unreasonably long.
    #[error("a JWT leeway of {0} seconds is too long (at most {MAX_LEEWAY_SECS})")]
    Leeway(u64),
    /// A private key was given where the public key is needed.
    #[error("this PEM holds a private key: give its public key (`openssl pkey -in private.pem -pubout`)")]
    PrivateKey,
    /// Not a PEM public key threadql can use.
    #[error("not an RSA or EC P-256 public key in PEM form: {0}")]
    NotPublicKey(String),
    /// An EC key on a curve other than P-256.
    #[error(
        "the EC public key is not on the P-256 curve: only ES256 (P-256) EC keys are supported"
    )]
    UnsupportedCurve,
    /// The JWKS document cannot be read.
    #[error("the JWKS is not valid: {0}")]
    Jwks(String),
    /// Two usable keys share a `kid`.
    #[error("two keys of the JWKS share the kid {0:?}")]
    DuplicateKeyId(String),
    /// No key of the JWKS can verify tokens.
    #[error("the JWKS holds no usable signing key (RSA for RS256 or EC P-256 for ES256, with a kid when there are several)")]
    NoUsableKey,
    /// The keys only verify (a public key or JWKS is configured).
    #[error("tokens must come from the identity provider: with a public key or a JWKS configured, threadql only verifies tokens and cannot mint them")]
    CannotMint,
    /// Signing failed.
    #[error("cannot sign the token: {0}")]
    Sign(#[from] jsonwebtoken::errors::Error),
}

/// The checks every token passes besides its signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRules {
    /// Required `iss`, when set.
    pub issuer: Option<String>,
    /// Required member of `aud`, when set.
    pub audience: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    pub leeway_secs: u64,
}

impl Default for TokenRules {
    fn default() -> Self {
        Self {
            issuer: None,
            audience: None,
            leeway_secs: 5,
        }
    }
}

impl TokenRules {
    /// The checks for tokens signed with `alg`.
    fn validation(&self, alg: Algorithm) -> Validation {
        let mut validation = Validation::new(alg);
        validation.leeway = self.leeway_secs;
        validation.validate_nbf = true;
        let mut required = vec!["exp"];
        if let Some(issuer) = &self.issuer {
            validation.set_issuer(&[issuer]);
            required.push("iss");
        }
        match &self.audience {
            Some(audience) => {
                validation.set_audience(&[audience]);
                required.push("aud");
            }
            None => validation.validate_aud = false,
        }
        validation.set_required_spec_claims(&required);
        validation
    }

    /// Refuses rules that cannot be meant.
    fn check(&self) -> Result<(), KeyError> {
        if self.leeway_secs > MAX_LEEWAY_SECS {
            return Err(KeyError::Leeway(self.leeway_secs));
        }
        if self.issuer.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return Err(KeyError::EmptyRequirement("issuer"));
        }
        if self
            .audience
            .as_deref()
            .is_some_and(|s| s.trim().is_empty())
        {
            return Err(KeyError::EmptyRequirement("audience"));
        }
        Ok(())
    }
}

/// One key that verifies tokens of one algorithm.
#[derive(Clone)]
struct VerifyingKey {
    alg: Algorithm,
    key: DecodingKey,
    validation: Validation,
}

impl VerifyingKey {
    fn new(alg: Algorithm, key: DecodingKey, rules: &TokenRules) -> Self {
        Self {
            alg,
            key,
            validation: rules.validation(alg),
        }
    }
}

/// Where the verifying key comes from.
enum Source {
    /// An HS256 secret, which also signs (`threadql token`).
    Secret {
        key: VerifyingKey,
        signing: EncodingKey,
    },
    /// A PEM public key.
    PublicKey(VerifyingKey),
    /// A JWKS: keys by `kid`, and the key a token without `kid` uses (only when there is one).
    Jwks {
        by_kid: HashMap<String, VerifyingKey>,
        sole: Option<VerifyingKey>,
    },
}

struct Inner {
    source: Source,
    rules: TokenRules,
}

/// Verifies bearer tokens with one configured key source, and mints tokens when that source is
/// an HS256 secret.
#[derive(Clone)]
pub struct JwtKeys {
    inner: Arc<Inner>,
}

impl fmt::Debug for JwtKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JwtKeys")
            .field("source", &self.describe())
            .field("rules", &self.inner.rules)
            .finish()
    }
}

/// The claims as read from a token: types are checked here, presence afterwards.
#[derive(Deserialize)]
struct TokenClaims {
    exp: Option<u64>,
    sub: Option<String>,
    name: Option<String>,
    roles: Option<Vec<String>>,
    /// Anything but a string is no address.
    #[serde(default, deserialize_with = "lenient")]
    email: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    email_verified: Option<bool>,
}

/// An optional claim that is `None` when it has another type (an identity provider's odd
/// claim never refuses a token).
fn lenient<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).ok())
}

/// A verified address, when `email` is one (at most 254 characters, one `@` with text on both
/// sides, no spaces or controls) and `verified` is `true`.
pub fn verified_address(email: Option<&str>, verified: Option<bool>) -> Option<String> {
    let email = email?.trim();
    let (local, domain) = email.split_once('@')?;
    let fine = verified == Some(true)
        && email.len() <= 254
        && !local.is_empty()
        && domain.contains('.')
        && !domain.contains('@')
        && !email
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '<' || c == '>');
    fine.then(|| email.to_owned())
}

/// The claims a minted token carries: threadql's, plus the configured issuer and audience.
#[derive(Serialize)]
struct MintedClaims<'a> {
    #[serde(flatten)]
    claims: &'a Claims,
    #[serde(skip_serializing_if = "Option::is_none")]
    iss: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    aud: Option<&'a str>,
}

/// The token header fields read before choosing a key.
#[derive(Deserialize)]
struct RawHeader {
    alg: String,
    kid: Option<String>,
}

impl JwtKeys {
    /// HS256 keys for a secret, with the default rules (no issuer or audience, 5 s leeway).
    pub fn new(secret: &str) -> Self {
        Self::with_secret(secret, TokenRules::default())
    }

    /// HS256 keys for a secret: tokens are verified and minted with it.
    pub fn hs256(secret: &str, rules: TokenRules) -> Result<Self, KeyError> {
        rules.check()?;
        if secret.trim().is_empty() {
            return Err(KeyError::EmptySecret);
        }
        Ok(Self::with_secret(secret, rules))
    }

    fn with_secret(secret: &str, rules: TokenRules) -> Self {
        let key = VerifyingKey::new(
            Algorithm::HS256,
            DecodingKey::from_secret(secret.as_bytes()),
            &rules,
        );
        Self::from_parts(
            Source::Secret {
                key,
                signing: EncodingKey::from_secret(secret.as_bytes()),
            },
            rules,
        )
    }

    fn from_parts(source: Source, rules: TokenRules) -> Self {
        Self {
            inner: Arc::new(Inner { source, rules }),
        }
    }

    /// What verifies tokens, without key material: `HS256 secret`, `RS256 public key`,
    /// `JWKS: kid-a (RS256), kid-b (ES256)`.
    pub fn describe(&self) -> String {
        match &self.inner.source {
            Source::Secret { .. } => "HS256 secret".to_owned(),
            Source::PublicKey(key) => format!("{:?} public key", key.alg),
            Source::Jwks { by_kid, sole } => {
                let mut keys: Vec<String> = by_kid
                    .iter()
                    .map(|(kid, key)| format!("{kid} ({:?})", key.alg))
                    .collect();
                keys.sort();
                if by_kid.is_empty() {
                    if let Some(key) = sole {
                        keys.push(format!("one key without kid ({:?})", key.alg));
                    }
                }
                format!("JWKS: {}", keys.join(", "))
            }
        }
    }

    /// Whether these keys can mint tokens (only an HS256 secret can).
    pub fn can_mint(&self) -> bool {
        matches!(self.inner.source, Source::Secret { .. })
    }

    /// Mints a token valid for `ttl_secs`, carrying the configured issuer and audience; an empty
    /// string when the keys cannot mint (see [`JwtKeys::try_mint`]).
    pub fn mint(&self, sub: &str, name: &str, roles: &[String], ttl_secs: u64) -> String {
        self.try_mint(sub, name, roles, ttl_secs)
            .unwrap_or_default()
    }

    /// Mints a token valid for `ttl_secs`, carrying the configured issuer and audience; fails
    /// when a public key or JWKS is configured.
    pub fn try_mint(
        &self,
        sub: &str,
        name: &str,
        roles: &[String],
        ttl_secs: u64,
    ) -> Result<String, KeyError> {
        let now = now_secs();
        let claims = Claims {
            sub: sub.to_owned(),
            name: name.to_owned(),
            roles: roles.to_vec(),
            exp: now.saturating_add(ttl_secs),
            iat: Some(now),
            email: None,
            email_verified: None,
        };
        self.try_sign(&MintedClaims {
            claims: &claims,
            iss: self.inner.rules.issuer.as_deref(),
            aud: self.inner.rules.audience.as_deref(),
        })
    }

    /// Signs exactly these claims (tests use it to make expired tokens); an empty string when the
    /// keys cannot mint.
    pub fn sign(&self, claims: &Claims) -> String {
        self.try_sign(claims).unwrap_or_default()
    }

    fn try_sign(&self, claims: &impl Serialize) -> Result<String, KeyError> {
        match &self.inner.source {
            Source::Secret { signing, .. } => {
                Ok(encode(&Header::new(Algorithm::HS256), claims, signing)?)
            }
            Source::PublicKey(_) | Source::Jwks { .. } => Err(KeyError::CannotMint),
        }
    }

    /// Reads an `Authorization` header value.
    pub fn authenticate(&self, header: Option<&str>) -> AuthState {
        self.authenticate_until(header).0
    }

    /// Reads an `Authorization` header value, and says until when (seconds since the epoch)
    /// its token is accepted: its `exp` plus the leeway. A connection that keeps the caller
    /// for longer than one request stops accepting them then.
    pub fn authenticate_until(&self, header: Option<&str>) -> (AuthState, Option<u64>) {
        let Some(header) = header else {
            return (AuthState::Anonymous, None);
        };
        let verified = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .ok_or(Rejection::NotBearer)
            .and_then(|token| self.verify_until(token.trim()));
        match verified {
            Ok((viewer, exp)) => (
                AuthState::Authenticated(viewer),
                Some(exp.saturating_add(self.inner.rules.leeway_secs)),
            ),
            Err(why) => (AuthState::Rejected(why.to_string()), None),
        }
    }

    /// Verifies a token and returns its viewer.
    pub fn verify(&self, token: &str) -> Result<Viewer, Rejection> {
        self.verify_until(token).map(|(viewer, _)| viewer)
    }

    /// Verifies a token and returns its viewer and its `exp`.
    fn verify_until(&self, token: &str) -> Result<(Viewer, u64), Rejection> {
        let header = raw_header(token)?;
        // `none`, and any algorithm no configured key verifies, is refused before choosing a key.
        let alg = header
            .alg
            .parse::<Algorithm>()
            .map_err(|_| Rejection::Algorithm)?;
        if !self.accepts(alg) {
            return Err(Rejection::Algorithm);
        }
        let key = self.key_for(header.kid.as_deref())?;
        if alg != key.alg {
            return Err(Rejection::Algorithm);
        }
        // The full header must parse too, so that a JSON error below can only be the claims'.
        jsonwebtoken::decode_header(token).map_err(|_| Rejection::Malformed)?;
        let claims = decode::<TokenClaims>(token, &key.key, &key.validation)
            .map_err(|err| rejection(err.kind()))?
            .claims;
        let (Some(sub), Some(name)) = (claims.sub, claims.name) else {
            return Err(Rejection::MissingClaims);
        };
        if sub.trim().is_empty() || name.trim().is_empty() {
            return Err(Rejection::EmptyIdentity);
        }
        // The one identity rule: an id every ban can name, a name the service may show.
        check_identity(&sub, &name).map_err(|e| Rejection::Identity(e.to_string()))?;
        let roles = claims.roles.unwrap_or_default();
        let admin = roles.iter().any(|r| r == "admin");
        let viewer = Viewer {
            moderator: admin || roles.iter().any(|r| r == "moderator"),
            admin,
            email: verified_address(claims.email.as_deref(), claims.email_verified),
            author: Author { id: sub, name },
        };
        Ok((viewer, claims.exp.ok_or(Rejection::MissingClaims)?))
    }

    /// Whether some configured key verifies `alg`.
    fn accepts(&self, alg: Algorithm) -> bool {
        match &self.inner.source {
            Source::Secret { key, .. } | Source::PublicKey(key) => key.alg == alg,
            Source::Jwks { by_kid, sole } => by_kid.values().chain(sole).any(|key| key.alg == alg),
        }
    }

    /// The key that must have signed a token with this `kid`.
    fn key_for(&self, kid: Option<&str>) -> Result<&VerifyingKey, Rejection> {
        match &self.inner.source {
            Source::Secret { key, .. } | Source::PublicKey(key) => Ok(key),
            Source::Jwks { by_kid, sole } => match kid {
                Some(kid) => by_kid.get(kid).ok_or(Rejection::UnknownKeyId),
                None => sole.as_ref().ok_or(Rejection::NoKeyId),
            },
        }
    }
}

/// The header of a compact JWT (three base64url parts), read leniently enough to see any `alg`.
fn raw_header(token: &str) -> Result<RawHeader, Rejection> {
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Rejection::Malformed);
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| Rejection::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| Rejection::Malformed)
}

/// The client-facing reason for a verification error.
fn rejection(kind: &ErrorKind) -> Rejection {
    match kind {
        ErrorKind::InvalidSignature => Rejection::Signature,
        ErrorKind::ExpiredSignature => Rejection::Expired,
        ErrorKind::ImmatureSignature => Rejection::NotYetValid,
        ErrorKind::InvalidIssuer => Rejection::Issuer,
        ErrorKind::InvalidAudience => Rejection::Audience,
        ErrorKind::MissingRequiredClaim(claim) => match claim.as_str() {
            "iss" => Rejection::Issuer,
            "aud" => Rejection::Audience,
            _ => Rejection::MissingClaims,
        },
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => Rejection::Algorithm,
        ErrorKind::Json(_) => Rejection::InvalidClaims,
        _ => Rejection::Malformed,
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

mod keys;

#[cfg(test)]
mod tests;
