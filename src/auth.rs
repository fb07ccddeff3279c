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

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{decode, encode, Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::domain::Author;

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
    /// Roles; `moderator` may moderate.
    #[serde(default)]
    pub roles: Vec<String>,
    /// Expiry, seconds since the epoch.
    pub exp: u64,
    /// Issued at, seconds since the epoch.
    #[serde(default)]
    pub iat: Option<u64>,
}

/// The authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewer {
    /// Who they are, as an author.
    pub author: Author,
    /// Whether they may moderate.
    pub moderator: bool,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
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
    sub: Option<String>,
    name: Option<String>,
    roles: Option<Vec<String>>,
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

/// The DER prefix of an uncompressed P-256 public key (SubjectPublicKeyInfo, `id-ecPublicKey`,
/// `prime256v1`, a 65-byte bit string starting with 0x04); 64 bytes of point follow.
const P256_SPKI_PREFIX: [u8; 27] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00, 0x04,
];
/// The DER of the `id-ecPublicKey` algorithm identifier.
const EC_PUBLIC_KEY_OID: [u8; 9] = [0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];

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

    /// Keys for a PEM public key (`-----BEGIN PUBLIC KEY-----` or `-----BEGIN RSA PUBLIC
    /// KEY-----`): an RSA key verifies RS256 tokens, an EC P-256 key ES256 tokens, and nothing
    /// else is accepted.
    pub fn from_public_key_pem(pem: &[u8], rules: TokenRules) -> Result<Self, KeyError> {
        rules.check()?;
        let (label, der) = pem_block(pem)?;
        let (alg, key) = match label.as_str() {
            "RSA PUBLIC KEY" => (Algorithm::RS256, rsa_pem(pem)?),
            "PUBLIC KEY" if der.len() == 91 && der.starts_with(&P256_SPKI_PREFIX) => {
                let key = DecodingKey::from_ec_pem(pem).map_err(|err| {
                    KeyError::NotPublicKey(format!("cannot read the EC key: {err}"))
                })?;
                (Algorithm::ES256, key)
            }
            "PUBLIC KEY" if contains(&der, &EC_PUBLIC_KEY_OID) => {
                return Err(KeyError::UnsupportedCurve)
            }
            "PUBLIC KEY" => (Algorithm::RS256, rsa_pem(pem)?),
            "CERTIFICATE" => {
                return Err(KeyError::NotPublicKey(
                    "this is a certificate: extract its key with `openssl x509 -in cert.pem -pubkey -noout`"
                        .to_owned(),
                ))
            }
            label if label.ends_with("PRIVATE KEY") => return Err(KeyError::PrivateKey),
            label => {
                return Err(KeyError::NotPublicKey(format!(
                    "unexpected PEM block `{label}`"
                )))
            }
        };
        let key = VerifyingKey::new(alg, key, &rules);
        Ok(Self::from_parts(Source::PublicKey(key), rules))
    }

    /// Keys for a JWKS document (`{"keys": [...]}`): RSA keys verify RS256 tokens and EC P-256
    /// keys ES256 tokens, each chosen by the token header's `kid`. A token without `kid` is
    /// accepted only when the set has exactly one usable key. Keys that cannot verify signatures
    /// (`"use": "enc"`, symmetric `oct` keys, other curves or algorithms, malformed entries) are
    /// skipped with a warning; a set with no usable key, or two usable keys with one `kid`, is an
    /// error.
    pub fn from_jwks(json: &[u8], rules: TokenRules) -> Result<Self, KeyError> {
        rules.check()?;
        #[derive(Deserialize)]
        struct RawSet {
            keys: Vec<serde_json::Value>,
        }
        let set: RawSet =
            serde_json::from_slice(json).map_err(|err| KeyError::Jwks(err.to_string()))?;
        let mut usable = Vec::new();
        for (index, value) in set.keys.into_iter().enumerate() {
            let jwk: Jwk = match serde_json::from_value(value) {
                Ok(jwk) => jwk,
                Err(err) => {
                    tracing::warn!("skipping JWKS key #{index}: {err}");
                    continue;
                }
            };
            let kid = jwk.common.key_id.clone();
            match jwk_key(&jwk) {
                Ok((alg, key)) => usable.push((kid, VerifyingKey::new(alg, key, &rules))),
                Err(why) => tracing::warn!(
                    kid = kid.as_deref().unwrap_or(""),
                    "skipping JWKS key #{index}: {why}"
                ),
            }
        }
        let only_one = usable.len() == 1;
        let mut by_kid = HashMap::new();
        let mut sole = None;
        for (kid, key) in usable {
            if only_one {
                sole = Some(key.clone());
            }
            match kid {
                Some(kid) => {
                    if by_kid.insert(kid.clone(), key).is_some() {
                        return Err(KeyError::DuplicateKeyId(kid));
                    }
                }
                None if only_one => {}
                None => tracing::warn!(
                    "skipping a JWKS key without kid: with several keys, no token can name it"
                ),
            }
        }
        if by_kid.is_empty() && sole.is_none() {
            return Err(KeyError::NoUsableKey);
        }
        Ok(Self::from_parts(Source::Jwks { by_kid, sole }, rules))
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
        let Some(header) = header else {
            return AuthState::Anonymous;
        };
        let verified = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .ok_or(Rejection::NotBearer)
            .and_then(|token| self.verify(token.trim()));
        match verified {
            Ok(viewer) => AuthState::Authenticated(viewer),
            Err(why) => AuthState::Rejected(why.to_string()),
        }
    }

    /// Verifies a token and returns its viewer.
    pub fn verify(&self, token: &str) -> Result<Viewer, Rejection> {
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
        let roles = claims.roles.unwrap_or_default();
        Ok(Viewer {
            moderator: roles.iter().any(|r| r == "moderator"),
            author: Author { id: sub, name },
        })
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

/// The label and DER bytes of the first PEM block.
fn pem_block(pem: &[u8]) -> Result<(String, Vec<u8>), KeyError> {
    let not_pem = || KeyError::NotPublicKey("no `-----BEGIN PUBLIC KEY-----` block".to_owned());
    let text = std::str::from_utf8(pem).map_err(|_| not_pem())?;
    let (_, rest) = text.split_once("-----BEGIN ").ok_or_else(not_pem)?;
    let (label, rest) = rest.split_once("-----").ok_or_else(not_pem)?;
    let (body, _) = rest
        .split_once(&format!("-----END {label}-----"))
        .ok_or_else(not_pem)?;
    let body: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    let der = STANDARD
        .decode(body)
        .map_err(|_| KeyError::NotPublicKey(format!("the `{label}` block is not base64")))?;
    Ok((label.to_owned(), der))
}

/// An RSA public key in PEM form.
fn rsa_pem(pem: &[u8]) -> Result<DecodingKey, KeyError> {
    DecodingKey::from_rsa_pem(pem)
        .map_err(|err| KeyError::NotPublicKey(format!("cannot read the RSA key: {err}")))
}

/// Whether `needle` occurs in `haystack`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The algorithm and key of a JWKS entry, or why it cannot verify tokens.
fn jwk_key(jwk: &Jwk) -> Result<(Algorithm, DecodingKey), String> {
    if matches!(
        jwk.common.public_key_use,
        Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
    ) {
        return Err("not a signing key (`use` is not `sig`)".to_owned());
    }
    let declared = jwk.common.key_algorithm;
    match &jwk.algorithm {
        AlgorithmParameters::RSA(rsa) => {
            if !matches!(declared, None | Some(KeyAlgorithm::RS256)) {
                return Err(format!("declares {declared:?}; RSA keys verify RS256 only"));
            }
            let key = DecodingKey::from_rsa_components(&rsa.n, &rsa.e)
                .map_err(|err| format!("bad RSA components: {err}"))?;
            Ok((Algorithm::RS256, key))
        }
        AlgorithmParameters::EllipticCurve(ec) => {
            if ec.curve != EllipticCurve::P256 {
                return Err(format!(
                    "curve {:?}; only P-256 (ES256) is supported",
                    ec.curve
                ));
            }
            if !matches!(declared, None | Some(KeyAlgorithm::ES256)) {
                return Err(format!(
                    "declares {declared:?}; P-256 keys verify ES256 only"
                ));
            }
            let coordinate = |c: &str| URL_SAFE_NO_PAD.decode(c).ok().filter(|b| b.len() == 32);
            if coordinate(&ec.x).is_none() || coordinate(&ec.y).is_none() {
                return Err("bad P-256 coordinates".to_owned());
            }
            let key = DecodingKey::from_ec_components(&ec.x, &ec.y)
                .map_err(|err| format!("bad EC components: {err}"))?;
            Ok((Algorithm::ES256, key))
        }
        AlgorithmParameters::OctetKey(_) => {
            Err("symmetric (`oct`) keys are never accepted from a JWKS".to_owned())
        }
        AlgorithmParameters::OctetKeyPair(_) => Err("EdDSA keys are not supported".to_owned()),
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    const RSA_PRIVATE: &[u8] = include_bytes!("../tests/fixtures/jwt/rsa-private.pem");
    const RSA_PUBLIC: &[u8] = include_bytes!("../tests/fixtures/jwt/rsa-public.pem");
    const RSA_OTHER_PRIVATE: &[u8] = include_bytes!("../tests/fixtures/jwt/rsa-other-private.pem");
    const EC_PRIVATE: &[u8] = include_bytes!("../tests/fixtures/jwt/ec-private.pem");
    const EC_PUBLIC: &[u8] = include_bytes!("../tests/fixtures/jwt/ec-public.pem");
    const EC_P384_PUBLIC: &[u8] = include_bytes!("../tests/fixtures/jwt/ec-p384-public.pem");
    const JWKS: &[u8] = include_bytes!("../tests/fixtures/jwt/jwks.json");
    const SECRET: &str = "unit-test-secret";
    const ISSUER: &str = "https://idp.example.com/";
    const AUDIENCE: &str = "threadql";

    fn rules() -> TokenRules {
        TokenRules {
            issuer: Some(ISSUER.to_owned()),
            audience: Some(AUDIENCE.to_owned()),
            leeway_secs: 5,
        }
    }

    fn rsa() -> EncodingKey {
        EncodingKey::from_rsa_pem(RSA_PRIVATE).unwrap()
    }

    fn rsa_other() -> EncodingKey {
        EncodingKey::from_rsa_pem(RSA_OTHER_PRIVATE).unwrap()
    }

    fn ec() -> EncodingKey {
        EncodingKey::from_ec_pem(EC_PRIVATE).unwrap()
    }

    fn hmac(secret: &[u8]) -> EncodingKey {
        EncodingKey::from_secret(secret)
    }

    /// Valid claims for `rules()`, with `changes` applied (`null` removes a claim).
    fn claims(changes: Value) -> Value {
        let mut claims = json!({
            "sub": "u1",
            "name": "Ada",
            "exp": now_secs() + 600,
            "iat": now_secs(),
            "iss": ISSUER,
            "aud": AUDIENCE,
        });
        for (claim, value) in changes.as_object().unwrap() {
            if value.is_null() {
                claims.as_object_mut().unwrap().remove(claim);
            } else {
                claims[claim] = value.clone();
            }
        }
        claims
    }

    fn sign(alg: Algorithm, key: &EncodingKey, kid: Option<&str>, claims: &Value) -> String {
        let mut header = Header::new(alg);
        header.kid = kid.map(str::to_owned);
        encode(&header, claims, key).unwrap()
    }

    /// A hand-built unsigned token: `{"alg":"none"}`, the claims, an empty signature.
    fn unsigned(claims: &Value) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).unwrap());
        format!("{header}.{payload}.")
    }

    fn author(keys: &JwtKeys, token: &str) -> (String, String, bool) {
        let viewer = keys.verify(token).unwrap();
        (viewer.author.id, viewer.author.name, viewer.moderator)
    }

    /// The claim checks every source shares: `mint` signs claims with a key the source accepts.
    fn check_claims(keys: &JwtKeys, mint: impl Fn(&Value) -> String) {
        let now = now_secs();
        let verify = |changes: Value| keys.verify(&mint(&claims(changes)));
        assert_eq!(
            author(keys, &mint(&claims(json!({})))),
            ("u1".into(), "Ada".into(), false)
        );
        let moderator = mint(&claims(json!({"roles": ["moderator"]})));
        assert!(author(keys, &moderator).2);
        // Identity providers add claims of their own: they are ignored.
        let extra = json!({"email": "ada@example.com", "scope": "openid", "realm_access": {"roles": ["x"]}});
        assert!(verify(extra).is_ok());
        assert!(verify(json!({"aud": ["other", AUDIENCE]})).is_ok());

        assert_eq!(verify(json!({"exp": now - 60})), Err(Rejection::Expired));
        assert!(verify(json!({"exp": now - 2})).is_ok(), "within the leeway");
        assert_eq!(verify(json!({"exp": null})), Err(Rejection::MissingClaims));
        assert_eq!(
            verify(json!({"nbf": now + 60})),
            Err(Rejection::NotYetValid)
        );
        assert!(verify(json!({"nbf": now + 2})).is_ok(), "within the leeway");
        assert!(verify(json!({"nbf": now - 60})).is_ok());
        assert_eq!(
            verify(json!({"iss": "https://evil.example/"})),
            Err(Rejection::Issuer)
        );
        assert_eq!(verify(json!({"iss": null})), Err(Rejection::Issuer));
        assert_eq!(verify(json!({"aud": "other"})), Err(Rejection::Audience));
        assert_eq!(verify(json!({"aud": ["a", "b"]})), Err(Rejection::Audience));
        assert_eq!(verify(json!({"aud": null})), Err(Rejection::Audience));
        assert_eq!(verify(json!({"sub": null})), Err(Rejection::MissingClaims));
        assert_eq!(verify(json!({"name": null})), Err(Rejection::MissingClaims));
        assert_eq!(verify(json!({"name": ""})), Err(Rejection::EmptyIdentity));
        assert_eq!(verify(json!({"sub": "  "})), Err(Rejection::EmptyIdentity));
        assert_eq!(verify(json!({"sub": 42})), Err(Rejection::InvalidClaims));
        assert_eq!(
            verify(json!({"roles": "moderator"})),
            Err(Rejection::InvalidClaims)
        );

        assert_eq!(
            keys.verify(&unsigned(&claims(json!({})))),
            Err(Rejection::Algorithm)
        );
        assert_eq!(keys.verify("abc.def.ghi"), Err(Rejection::Malformed));
        assert_eq!(keys.verify("abc.def"), Err(Rejection::Malformed));
        // The reasons reach clients through `authenticate`.
        let expired = mint(&claims(json!({"exp": now - 60})));
        assert_eq!(
            keys.authenticate(Some(&format!("Bearer {expired}"))),
            AuthState::Rejected("the token has expired".into())
        );
        let early = mint(&claims(json!({"nbf": now + 60})));
        assert_eq!(
            keys.authenticate(Some(&format!("Bearer {early}"))),
            AuthState::Rejected("the token is not valid yet".into())
        );
    }

    #[test]
    fn tokens_are_checked() {
        let keys = JwtKeys::new("secret");
        let token = keys.mint("u1", "Ada", &["moderator".into()], 60);
        let header = format!("Bearer {token}");
        match keys.authenticate(Some(&header)) {
            AuthState::Authenticated(v) => {
                assert_eq!(v.author.id, "u1");
                assert!(v.moderator);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(keys.authenticate(None), AuthState::Anonymous);
        let forged = JwtKeys::new("other").mint("u1", "Ada", &[], 60);
        assert!(matches!(
            keys.authenticate(Some(&format!("Bearer {forged}"))),
            AuthState::Rejected(_)
        ));
        let expired = keys.sign(&Claims {
            sub: "u1".into(),
            name: "Ada".into(),
            roles: vec![],
            exp: now_secs() - 3600,
            iat: None,
        });
        assert_eq!(
            keys.authenticate(Some(&format!("Bearer {expired}"))),
            AuthState::Rejected("the token has expired".into())
        );
        assert!(matches!(
            keys.authenticate(Some("Basic abc")),
            AuthState::Rejected(_)
        ));
    }

    #[test]
    fn an_hs256_secret_verifies_only_its_own_hs256_tokens() {
        let keys = JwtKeys::hs256(SECRET, rules()).unwrap();
        assert_eq!(keys.describe(), "HS256 secret");
        check_claims(&keys, |c| {
            sign(Algorithm::HS256, &hmac(SECRET.as_bytes()), None, c)
        });
        let valid = claims(json!({}));
        let wrong_key = sign(Algorithm::HS256, &hmac(b"another-secret"), None, &valid);
        assert_eq!(keys.verify(&wrong_key), Err(Rejection::Signature));
        // Algorithm confusion: an RS256 (or ES256) token is refused outright.
        let rs256 = sign(Algorithm::RS256, &rsa(), None, &valid);
        assert_eq!(keys.verify(&rs256), Err(Rejection::Algorithm));
        let es256 = sign(Algorithm::ES256, &ec(), None, &valid);
        assert_eq!(keys.verify(&es256), Err(Rejection::Algorithm));
        let hs512 = sign(Algorithm::HS512, &hmac(SECRET.as_bytes()), None, &valid);
        assert_eq!(keys.verify(&hs512), Err(Rejection::Algorithm));
    }

    #[test]
    fn minted_tokens_carry_the_configured_issuer_and_audience() {
        let keys = JwtKeys::hs256(SECRET, rules()).unwrap();
        assert!(keys.can_mint());
        let token = keys.try_mint("u9", "Grace", &[], 60).unwrap();
        assert_eq!(author(&keys, &token), ("u9".into(), "Grace".into(), false));
        // Without an issuer or audience configured, a token's `iss` and `aud` are not checked.
        let open = JwtKeys::new(SECRET);
        let token = sign(
            Algorithm::HS256,
            &hmac(SECRET.as_bytes()),
            None,
            &claims(json!({"aud": "anyone", "iss": "anywhere"})),
        );
        assert!(open.verify(&token).is_ok());
        assert!(matches!(
            JwtKeys::hs256(" ", rules()),
            Err(KeyError::EmptySecret)
        ));
    }

    #[test]
    fn an_rsa_public_key_verifies_only_rs256_tokens() {
        let keys = JwtKeys::from_public_key_pem(RSA_PUBLIC, rules()).unwrap();
        assert_eq!(keys.describe(), "RS256 public key");
        check_claims(&keys, |c| sign(Algorithm::RS256, &rsa(), None, c));
        let valid = claims(json!({}));
        let wrong_key = sign(Algorithm::RS256, &rsa_other(), None, &valid);
        assert_eq!(keys.verify(&wrong_key), Err(Rejection::Signature));
        // Algorithm confusion: HS256 signed with the public key's PEM bytes as the HMAC secret.
        let confused = sign(Algorithm::HS256, &hmac(RSA_PUBLIC), None, &valid);
        assert_eq!(keys.verify(&confused), Err(Rejection::Algorithm));
        let ps256 = sign(Algorithm::PS256, &rsa(), None, &valid);
        assert_eq!(keys.verify(&ps256), Err(Rejection::Algorithm));
        // A kid is irrelevant with one key.
        let with_kid = sign(Algorithm::RS256, &rsa(), Some("whatever"), &valid);
        assert!(keys.verify(&with_kid).is_ok());
        assert!(matches!(
            keys.try_mint("u1", "Ada", &[], 60),
            Err(KeyError::CannotMint)
        ));
        assert_eq!(keys.mint("u1", "Ada", &[], 60), "");
    }

    #[test]
    fn an_ec_public_key_verifies_only_es256_tokens() {
        let keys = JwtKeys::from_public_key_pem(EC_PUBLIC, rules()).unwrap();
        assert_eq!(keys.describe(), "ES256 public key");
        check_claims(&keys, |c| sign(Algorithm::ES256, &ec(), None, c));
        let valid = claims(json!({}));
        let token = sign(Algorithm::ES256, &ec(), None, &valid);
        let (head, rest) = token.split_once('.').unwrap();
        let (_, signature) = rest.split_once('.').unwrap();
        let other_claims =
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims(json!({"sub": "admin"}))).unwrap());
        let tampered = format!("{head}.{other_claims}.{signature}");
        assert_eq!(keys.verify(&tampered), Err(Rejection::Signature));
        let confused = sign(Algorithm::HS256, &hmac(EC_PUBLIC), None, &valid);
        assert_eq!(keys.verify(&confused), Err(Rejection::Algorithm));
        let rs256 = sign(Algorithm::RS256, &rsa(), None, &valid);
        assert_eq!(keys.verify(&rs256), Err(Rejection::Algorithm));
        assert!(matches!(
            keys.try_mint("u1", "Ada", &[], 60),
            Err(KeyError::CannotMint)
        ));
    }

    #[test]
    fn unusable_pem_files_are_refused_with_a_reason() {
        let refused = |pem: &[u8]| JwtKeys::from_public_key_pem(pem, rules()).unwrap_err();
        assert!(matches!(
            refused(EC_P384_PUBLIC),
            KeyError::UnsupportedCurve
        ));
        assert!(matches!(refused(RSA_PRIVATE), KeyError::PrivateKey));
        assert!(matches!(refused(EC_PRIVATE), KeyError::PrivateKey));
        assert!(matches!(refused(JWKS), KeyError::NotPublicKey(_)));
        assert!(matches!(
            refused(b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"),
            KeyError::NotPublicKey(_)
        ));
        let leeway = TokenRules {
            leeway_secs: MAX_LEEWAY_SECS + 1,
            ..rules()
        };
        assert!(matches!(
            JwtKeys::from_public_key_pem(RSA_PUBLIC, leeway),
            Err(KeyError::Leeway(_))
        ));
        let blank = TokenRules {
            audience: Some(String::new()),
            ..rules()
        };
        assert!(matches!(
            JwtKeys::from_public_key_pem(RSA_PUBLIC, blank),
            Err(KeyError::EmptyRequirement("audience"))
        ));
    }

    #[test]
    fn a_jwks_verifies_each_token_with_the_key_its_kid_names() {
        let keys = JwtKeys::from_jwks(JWKS, rules()).unwrap();
        assert_eq!(
            keys.describe(),
            "JWKS: test-ec-1 (ES256), test-rsa-1 (RS256)"
        );
        check_claims(&keys, |c| {
            sign(Algorithm::RS256, &rsa(), Some("test-rsa-1"), c)
        });
        check_claims(&keys, |c| {
            sign(Algorithm::ES256, &ec(), Some("test-ec-1"), c)
        });
        let valid = claims(json!({}));
        let unknown = sign(Algorithm::RS256, &rsa(), Some("test-rsa-2"), &valid);
        assert_eq!(keys.verify(&unknown), Err(Rejection::UnknownKeyId));
        let no_kid = sign(Algorithm::RS256, &rsa(), None, &valid);
        assert_eq!(keys.verify(&no_kid), Err(Rejection::NoKeyId));
        let wrong_key = sign(Algorithm::RS256, &rsa_other(), Some("test-rsa-1"), &valid);
        assert_eq!(keys.verify(&wrong_key), Err(Rejection::Signature));
        // The kid of the EC key with an RSA signature, and HMAC with the public key's bytes.
        let mixed = sign(Algorithm::RS256, &rsa(), Some("test-ec-1"), &valid);
        assert_eq!(keys.verify(&mixed), Err(Rejection::Algorithm));
        let confused = sign(
            Algorithm::HS256,
            &hmac(RSA_PUBLIC),
            Some("test-rsa-1"),
            &valid,
        );
        assert_eq!(keys.verify(&confused), Err(Rejection::Algorithm));
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","kid":"test-rsa-1"}"#);
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&valid).unwrap());
        assert_eq!(
            keys.verify(&format!("{header}.{payload}.")),
            Err(Rejection::Algorithm)
        );
        assert_eq!(
            keys.authenticate(Some(&format!("Bearer {unknown}"))),
            AuthState::Rejected("the token's key (`kid`) is not known".into())
        );
        assert!(matches!(
            keys.try_mint("u1", "Ada", &[], 60),
            Err(KeyError::CannotMint)
        ));
    }

    #[test]
    fn a_single_key_jwks_accepts_tokens_without_kid() {
        let set: Value = serde_json::from_slice(JWKS).unwrap();
        let rsa_only = json!({"keys": [set["keys"][0]]});
        let keys = JwtKeys::from_jwks(rsa_only.to_string().as_bytes(), rules()).unwrap();
        let valid = claims(json!({}));
        assert!(keys
            .verify(&sign(Algorithm::RS256, &rsa(), None, &valid))
            .is_ok());
        assert!(keys
            .verify(&sign(Algorithm::RS256, &rsa(), Some("test-rsa-1"), &valid))
            .is_ok());
        assert_eq!(
            keys.verify(&sign(Algorithm::RS256, &rsa(), Some("other"), &valid)),
            Err(Rejection::UnknownKeyId)
        );
    }

    #[test]
    fn unusable_jwks_keys_are_skipped_and_bad_sets_refused() {
        let set: Value = serde_json::from_slice(JWKS).unwrap();
        let (rsa_key, ec_key) = (set["keys"][0].clone(), set["keys"][1].clone());
        let build =
            |keys: Value| JwtKeys::from_jwks(json!({"keys": keys}).to_string().as_bytes(), rules());
        let oct = json!({"kty": "oct", "kid": "sym", "k": URL_SAFE_NO_PAD.encode(SECRET)});
        let mut enc = ec_key.clone();
        enc["use"] = json!("enc");
        let mut ps256 = rsa_key.clone();
        ps256["alg"] = json!("PS256");
        ps256["kid"] = json!("ps");
        let unknown = json!({"kty": "XYZ", "kid": "odd"});
        let keys = build(json!([oct, enc, ps256, unknown, rsa_key])).unwrap();
        assert_eq!(keys.describe(), "JWKS: test-rsa-1 (RS256)");
        // An HS256 token naming the symmetric key is refused: no loaded key verifies HS256.
        let hs = sign(
            Algorithm::HS256,
            &hmac(SECRET.as_bytes()),
            Some("sym"),
            &claims(json!({})),
        );
        assert_eq!(keys.verify(&hs), Err(Rejection::Algorithm));

        assert!(matches!(build(json!([oct])), Err(KeyError::NoUsableKey)));
        assert!(matches!(build(json!([])), Err(KeyError::NoUsableKey)));
        let mut twin = ec_key.clone();
        twin["kid"] = json!("test-rsa-1");
        assert!(matches!(
            build(json!([rsa_key, twin])),
            Err(KeyError::DuplicateKeyId(_))
        ));
        assert!(matches!(
            JwtKeys::from_jwks(b"{\"kids\": []}", rules()),
            Err(KeyError::Jwks(_))
        ));
        assert!(matches!(
            JwtKeys::from_jwks(b"not json", rules()),
            Err(KeyError::Jwks(_))
        ));
    }
}
