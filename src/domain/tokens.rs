//! Signed tokens: a token names a text (a user, a comment) and carries an HMAC under a sub-key
//! derived for one purpose alone, so checking it needs no stored state. Unsubscribe links and
//! guests' comment tokens are made of them.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::digest::CtOutput;
use hmac::Hmac;
use sha2::Sha256;

use super::secrets::{Purpose, ServerKey, SubKey};

/// The version byte every MAC covers, so a later token format can never be read as this one.
const VERSION: u8 = 1;

/// The bytes of a MAC (HMAC-SHA256).
const MAC_BYTES: usize = 32;

/// Signs and checks tokens with one sub-key of the server key.
#[derive(Debug, Clone)]
pub struct SignedTokens {
    /// The sub-key derived for the tokens' purpose.
    key: SubKey,
    /// The longest text a token may name, in bytes.
    max_bytes: usize,
}

impl SignedTokens {
    /// Tokens under the sub-key `key` derives for `purpose`, naming texts of at most
    /// `max_bytes` bytes.
    pub fn new(key: &ServerKey, purpose: Purpose, max_bytes: usize) -> Self {
        Self {
            key: key.derive(purpose),
            max_bytes,
        }
    }

    /// A token naming `user`: `base64url(user) "." base64url(HMAC(version byte + user))`,
    /// without padding. `user` should be 1 to `max_bytes` bytes: a token for any other never
    /// verifies.
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
        let longest = self.max_bytes.div_ceil(3) * 4 + 1 + MAC_BYTES.div_ceil(3) * 4;
        if token.len() > longest {
            return None;
        }
        let (user, mac) = token.split_once('.')?;
        let user = URL_SAFE_NO_PAD.decode(user).ok()?;
        let given: [u8; MAC_BYTES] = URL_SAFE_NO_PAD.decode(mac).ok()?.try_into().ok()?;
        if user.is_empty() || user.len() > self.max_bytes {
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
    pub(crate) fn mac(&self, user: &[u8]) -> [u8; MAC_BYTES] {
        let mut data = Vec::with_capacity(1 + user.len());
        data.push(VERSION);
        data.extend_from_slice(user);
        self.key.mac(&data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The longest text the tests' tokens name.
    const MAX_USER_BYTES: usize = 256;

    /// Tokens under a fixed key.
    fn tokens() -> SignedTokens {
        let key = ServerKey::parse(&"0123456789abcdef".repeat(4)).expect("a key");
        SignedTokens::new(&key, Purpose::Unsubscribe, MAX_USER_BYTES)
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
    fn a_token_for_another_purpose_never_verifies() {
        let key = ServerKey::parse(&"0123456789abcdef".repeat(4)).expect("a key");
        let guests = SignedTokens::new(&key, Purpose::GuestTokens, MAX_USER_BYTES);
        assert_eq!(tokens().verify(&guests.sign("user-1")), None);
    }

    #[test]
    fn a_token_of_another_key_never_verifies() {
        let other = SignedTokens::new(&ServerKey::generate(), Purpose::Unsubscribe, MAX_USER_BYTES);
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
