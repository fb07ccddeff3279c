//! The server key: the installation's one root secret, and the sub-keys derived from it, one
//! per purpose, so that no two uses ever share a key.

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// HMAC-SHA256, the one keyed hash every purpose uses.
type HmacSha256 = Hmac<Sha256>;

/// What a sub-key is for: each purpose has its own label, so a value made for one can never
/// stand for a value of another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The ids of imported authors who had no account at the source (`disqus-guest:…`).
    ImportedGuestIds,
    /// The one-click unsubscribe links of notification mail.
    Unsubscribe,
    /// The signatures of guests' proof-of-work challenges.
    GuestProofs,
    /// The ids of guests who post here (`guest:…`).
    GuestIds,
    /// The tokens that let a guest edit or delete their own comment.
    GuestTokens,
}

impl Purpose {
    /// The label the sub-key is derived with (versioned: a new derivation gets a new label).
    pub fn label(self) -> &'static str {
        match self {
            Purpose::ImportedGuestIds => "threadql/imported-guest-ids/v1",
            Purpose::Unsubscribe => "threadql/unsubscribe/v1",
            Purpose::GuestProofs => "threadql/guest-proofs/v1",
            Purpose::GuestIds => "threadql/guest-ids/v1",
            Purpose::GuestTokens => "threadql/guest-tokens/v1",
        }
    }
}

/// Why a text is not a server key. The text itself is never part of the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Neither hex nor base64.
    #[error("it is neither hex nor base64")]
    NotEncoded,
    /// Fewer bytes than [`ServerKey::MIN_BYTES`].
    #[error("it holds {0} bytes; a server key needs at least 32 random bytes")]
    TooShort(usize),
    /// So few distinct bytes that it cannot be random (`000…`, `abab…`).
    #[error("it repeats a few byte values; a server key must be random bytes")]
    NotRandom,
}

/// The root secret. Its bytes never leave it: it derives sub-keys, and its `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerKey(Vec<u8>);

impl ServerKey {
    /// The fewest bytes a key may have.
    pub const MIN_BYTES: usize = 32;

    /// The bytes a generated key has.
    pub const GENERATED_BYTES: usize = 32;

    /// Fewer distinct byte values than this in a key are refused (32 random bytes have about
    /// 30; fewer than 8 is a chance of less than 1 in 10^30).
    const MIN_DISTINCT: usize = 8;

    /// A key of these bytes: at least [`Self::MIN_BYTES`], and not a few values repeated.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, KeyError> {
        if bytes.len() < Self::MIN_BYTES {
            return Err(KeyError::TooShort(bytes.len()));
        }
        let distinct: std::collections::HashSet<u8> = bytes.iter().copied().collect();
        if distinct.len() < Self::MIN_DISTINCT {
            return Err(KeyError::NotRandom);
        }
        Ok(Self(bytes))
    }

    /// A key written as hex (an even number of hex digits) or as base64 (standard or URL-safe,
    /// padded or not), surrounding white space ignored.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        use base64::engine::general_purpose::{
            STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD,
        };
        use base64::Engine as _;
        let text = text.trim();
        if let Some(bytes) = hex_bytes(text) {
            return Self::from_bytes(bytes);
        }
        let bytes = [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
            .iter()
            .find_map(|engine| engine.decode(text).ok())
            .ok_or(KeyError::NotEncoded)?;
        Self::from_bytes(bytes)
    }

    /// A new key of [`Self::GENERATED_BYTES`] from the operating system's random source.
    pub fn generate() -> Self {
        use rand::RngCore as _;
        let mut bytes = vec![0_u8; Self::GENERATED_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        Self(bytes)
    }

    /// The key's bytes, to store it (the one place they are handed out).
    pub fn to_stored(&self) -> Vec<u8> {
        self.0.clone()
    }

    /// The sub-key for `purpose`: HMAC-SHA256(root key, the purpose's label).
    pub fn derive(&self, purpose: Purpose) -> SubKey {
        SubKey(mac(&self.0, purpose.label().as_bytes()))
    }
}

impl fmt::Debug for ServerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ServerKey(<secret>)")
    }
}

/// A key derived from the server key for one purpose. Its `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct SubKey([u8; 32]);

impl SubKey {
    /// HMAC-SHA256 of `data` under this key.
    pub fn mac(&self, data: &[u8]) -> [u8; 32] {
        mac(&self.0, data)
    }
}

impl fmt::Debug for SubKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SubKey(<secret>)")
    }
}

/// HMAC-SHA256 of `data` under `key`.
fn mac(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    let Ok(mut hmac) = HmacSha256::new_from_slice(key) else {
        return [0; 32];
    };
    hmac.update(data);
    hmac.finalize().into_bytes().into()
}

/// The bytes of a text of an even number of hex digits (`None` for anything else).
fn hex_bytes(text: &str) -> Option<Vec<u8>> {
    if text.is_empty()
        || !text.len().is_multiple_of(2)
        || !text.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn keys_are_read_from_hex_or_base64_and_weak_ones_are_refused() {
        let from_hex = ServerKey::parse(HEX).ok();
        assert!(from_hex.is_some());
        let bytes: Vec<u8> = (0..32).collect();
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
        assert_eq!(ServerKey::parse(&b64).ok(), from_hex);
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bytes);
        assert_eq!(ServerKey::parse(&format!(" {url}\n")).ok(), from_hex);
        assert_eq!(
            ServerKey::parse(&HEX[..62]).err(),
            Some(KeyError::TooShort(31))
        );
        assert_eq!(
            ServerKey::parse("c2VjcmV0").err(),
            Some(KeyError::TooShort(6))
        );
        assert_eq!(ServerKey::parse("secret").err(), Some(KeyError::NotEncoded));
        assert_eq!(
            ServerKey::parse("not a key!").err(),
            Some(KeyError::NotEncoded)
        );
        assert_eq!(ServerKey::parse("").err(), Some(KeyError::TooShort(0)));
        assert_eq!(
            ServerKey::parse(&"ab".repeat(32)).err(),
            Some(KeyError::NotRandom)
        );
        assert_eq!(
            ServerKey::parse(&"0".repeat(64)).err(),
            Some(KeyError::NotRandom)
        );
    }

    #[test]
    fn a_key_never_shows_in_debug_output() {
        let key = ServerKey::parse(HEX).expect("a key");
        assert_eq!(format!("{key:?}"), "ServerKey(<secret>)");
        let sub = key.derive(Purpose::ImportedGuestIds);
        assert_eq!(format!("{sub:?}"), "SubKey(<secret>)");
    }

    #[test]
    fn generated_keys_differ_and_are_accepted() {
        let (a, b) = (ServerKey::generate(), ServerKey::generate());
        assert_ne!(a, b);
        assert!(ServerKey::from_bytes(a.to_stored()).is_ok());
    }

    #[test]
    fn the_mac_is_hmac_sha256() {
        // RFC 4231, test case 2.
        let key = b"Jefe";
        let digest = mac(key, b"what do ya want for nothing?");
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn sub_keys_depend_on_the_root_key() {
        let one = ServerKey::parse(HEX).expect("a key");
        let other = ServerKey::generate();
        assert_ne!(
            one.derive(Purpose::ImportedGuestIds).mac(b"x"),
            other.derive(Purpose::ImportedGuestIds).mac(b"x")
        );
    }
}
