//! Signed one-click unsubscribe tokens: a token names a user under the server key's
//! unsubscribe sub-key, so the link in a message needs no stored state to check.

use crate::domain::secrets::{Purpose, ServerKey};
use crate::domain::tokens::SignedTokens;

/// The longest user id a token may name, in bytes.
pub const MAX_USER_BYTES: usize = 256;

/// Signs and checks unsubscribe tokens with the server key's unsubscribe sub-key.
#[derive(Debug, Clone)]
pub struct UnsubscribeTokens(SignedTokens);

impl UnsubscribeTokens {
    /// Tokens under the sub-key `key` derives for unsubscribing.
    pub fn new(key: &ServerKey) -> Self {
        Self(SignedTokens::new(key, Purpose::Unsubscribe, MAX_USER_BYTES))
    }

    /// A token naming `user` (1 to [`MAX_USER_BYTES`] bytes: a token for any other never
    /// verifies).
    pub fn sign(&self, user: &str) -> String {
        self.0.sign(user)
    }

    /// The user `token` names; `None` when it is malformed, altered, or signed with another
    /// key.
    pub fn verify(&self, token: &str) -> Option<String> {
        self.0.verify(token)
    }
}
