//! Bearer-token authentication: HS256 JWTs with `sub`, `name`, `roles` and `exp` claims.

use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{decode, encode, Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::domain::Author;

/// The secret used when none is configured. Anyone can mint tokens with it: development only.
pub const DEV_SECRET: &str = "threadql-development-secret-do-not-use-in-production";

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

/// Signs and verifies tokens with one HS256 secret.
#[derive(Clone)]
pub struct JwtKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl JwtKeys {
    /// Keys for a secret.
    pub fn new(secret: &str) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 5;
        validation.set_required_spec_claims(&["exp", "sub"]);
        Self {
            encoding: EncodingKey::from_secret(secret.as_bytes()),
            decoding: DecodingKey::from_secret(secret.as_bytes()),
            validation,
        }
    }

    /// Mints a token valid for `ttl_secs`.
    pub fn mint(&self, sub: &str, name: &str, roles: &[String], ttl_secs: u64) -> String {
        let now = now_secs();
        let claims = Claims {
            sub: sub.to_owned(),
            name: name.to_owned(),
            roles: roles.to_vec(),
            exp: now + ttl_secs,
            iat: Some(now),
        };
        self.sign(&claims)
    }

    /// Signs arbitrary claims (tests use it to make expired tokens).
    pub fn sign(&self, claims: &Claims) -> String {
        encode(&Header::new(Algorithm::HS256), claims, &self.encoding).unwrap_or_default()
    }

    /// Reads an `Authorization` header value.
    pub fn authenticate(&self, header: Option<&str>) -> AuthState {
        let Some(header) = header else {
            return AuthState::Anonymous;
        };
        let Some(token) = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
        else {
            return AuthState::Rejected(
                "the Authorization header must be `Bearer <token>`".to_owned(),
            );
        };
        match decode::<Claims>(token.trim(), &self.decoding, &self.validation) {
            Ok(data) => {
                let claims = data.claims;
                if claims.sub.trim().is_empty() || claims.name.trim().is_empty() {
                    return AuthState::Rejected(
                        "the token's `sub` and `name` must not be empty".into(),
                    );
                }
                AuthState::Authenticated(Viewer {
                    moderator: claims.roles.iter().any(|r| r == "moderator"),
                    author: Author {
                        id: claims.sub,
                        name: claims.name,
                    },
                })
            }
            Err(err) => {
                use jsonwebtoken::errors::ErrorKind;
                let why = match err.kind() {
                    ErrorKind::ExpiredSignature => "the token has expired",
                    ErrorKind::InvalidSignature => "the token's signature is not valid",
                    ErrorKind::MissingRequiredClaim(_) | ErrorKind::Json(_) => {
                        "the token lacks required claims (sub, name, exp)"
                    }
                    _ => "the token is malformed",
                };
                AuthState::Rejected(why.to_owned())
            }
        }
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
}
