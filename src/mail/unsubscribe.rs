//! Signed one-click unsubscribe tokens: a token names a user and carries an HMAC under a key
//! derived for this purpose alone, so the link in a message needs no stored state to check.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::digest::CtOutput;
use hmac::Hmac;
use sha2::Sha256;

use crate::domain::secrets::{Purpose, ServerKey, SubKey};

/// The version byte every MAC covers, so a later token format can never be read as this one.
const VERSION: u8 = 1;

/// The longest user id a token may name, in bytes.
pub const MAX_USER_BYTES: usize = 256;

/// The bytes of a MAC (HMAC-SHA256).
const MAC_BYTES: usize = 32;

/// Signs and checks unsubscribe tokens with the server key's unsubscribe sub-key.
#[derive(Debug, Clone)]
pub struct UnsubscribeTokens {
    /// The sub-key derived with [`Purpose::Unsubscribe`].
    key: SubKey,
}

impl UnsubscribeTokens {
    /// Tokens under the sub-key `key` derives for unsubscribing.
    pub fn new(key: &ServerKey) -> Self {
        Self {
            key: key.derive(Purpose::Unsubscribe),
        }
    }

    /// A token naming `user`: `base64url(user) "." base64url(HMAC(version byte + user))`,
    /// without padding. `user` should be 1 to [`MAX_USER_BYTES`] bytes: a token for any other
    /// never verifies.
    pub fn sign(&self, user: &str) -> String {
        let mac = self.mac(user.as_bytes());
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(user),
            URL_SAFE_NO_PAD.encode(mac)
        )
    }

    /// The user `token` names; `None` when it is malformed, altered, or signed with another
    /// key. The MAC is compared in constant time.
    pub fn verify(&self, token: &str) -> Option<String> {
        // The longest well-formed token, so that no caller makes us decode a huge input.
        let longest = MAX_USER_BYTES.div_ceil(3) * 4 + 1 + MAC_BYTES.div_ceil(3) * 4;
        if token.len() > longest {
            return None;
        }
        let (user, mac) = token.split_once('.')?;
        let user = URL_SAFE_NO_PAD.decode(user).ok()?;
        let given: [u8; MAC_BYTES] = URL_SAFE_NO_PAD.decode(mac).ok()?.try_into().ok()?;
        if user.is_empty() || user.len() > MAX_USER_BYTES {
            return None;
        }
        // `CtOutput`'s equality is the constant-time comparison `Mac::verify_slice` uses.
        let expected = CtOutput::<Hmac<Sha256>>::new(self.mac(&user).into());
        if expected != CtOutput::new(given.into()) {
            return None;
        }
        String::from_utf8(user).ok()
    }

    /// The MAC of the version byte followed by `user`.
    fn mac(&self, user: &[u8]) -> [u8; MAC_BYTES] {
        let mut data = Vec::with_capacity(1 + user.len());
        data.push(VERSION);
        data.extend_from_slice(user);
        self.key.mac(&data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tokens under a fixed key.
    fn tokens() -> UnsubscribeTokens {
        let key = ServerKey::parse(&"0123456789abcdef".repeat(4)).expect("a key");
        UnsubscribeTokens::new(&key)
    }

    /// `text` with the character at `at` replaced by another base64url character.
    fn flipped(text: &str, at: usize) -> String {
        text.char_indices()
            .map(|(i, c)| match (i == at, c) {
                (false, c) => c,
                (true, 'A') => 'B',
                (true, _) => 'A',
            })
            .collect()
    }

    #[test]
    fn a_token_names_the_user_it_was_signed_for() {
        let tokens = tokens();
        for user in ["user-1", "ünïcödé ✓", "a", &"x".repeat(MAX_USER_BYTES)] {
            let token = tokens.sign(user);
            assert_eq!(tokens.verify(&token).as_deref(), Some(user), "{token}");
            assert!(!token.contains('='), "no padding: {token}");
            assert!(token
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)));
        }
    }

    #[test]
    fn an_altered_token_never_verifies() {
        let tokens = tokens();
        let token = tokens.sign("user-1");
        let dot = token.find('.').expect("a dot");
        for at in (0..token.len()).filter(|&i| i != dot) {
            let altered = flipped(&token, at);
            assert_ne!(altered, token);
            assert_eq!(tokens.verify(&altered), None, "{altered}");
        }
        assert_eq!(tokens.verify(&format!("{token}A")), None);
        assert_eq!(tokens.verify(&token[..token.len() - 1]), None);
    }

    #[test]
    fn a_token_of_another_key_never_verifies() {
        let other = UnsubscribeTokens::new(&ServerKey::generate());
        assert_eq!(tokens().verify(&other.sign("user-1")), None);
    }

    #[test]
    fn a_token_for_one_user_never_names_another() {
        let tokens = tokens();
        let a = tokens.sign("alice");
        let b = tokens.sign("bob");
        let (a_user, a_mac) = a.split_once('.').expect("a dot");
        let (b_user, b_mac) = b.split_once('.').expect("a dot");
        assert_eq!(tokens.verify(&a).as_deref(), Some("alice"));
        assert_eq!(tokens.verify(&format!("{b_user}.{a_mac}")), None);
        assert_eq!(tokens.verify(&format!("{a_user}.{b_mac}")), None);
    }

    #[test]
    fn garbage_never_verifies() {
        let tokens = tokens();
        let long = tokens.sign(&"x".repeat(MAX_USER_BYTES + 1));
        for garbage in [
            "",
            ".",
            "..",
            "a.b.c",
            "abc",
            "dXNlcg",
            "dXNlcg.",
            ".AAAA",
            "!!!.???",
            "dXNlcg==.AAAA",
            "dXNlcg.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            &long,
            &tokens.sign(""),
        ] {
            assert_eq!(tokens.verify(garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn a_user_that_is_not_utf8_never_verifies() {
        let tokens = tokens();
        let user = [0xff_u8, 0xfe];
        let forged = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(user),
            URL_SAFE_NO_PAD.encode(tokens.mac(&user))
        );
        assert_eq!(tokens.verify(&forged), None);
    }
}
