//! Endpoint secrets (`whsec_…`) and the `webhook-signature` header of Standard Webhooks.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use rand::RngCore as _;
use sha2::Sha256;

/// HMAC-SHA256, the one signature scheme (`v1`) Standard Webhooks defines for symmetric keys.
type HmacSha256 = Hmac<Sha256>;

/// What every secret's text starts with.
const PREFIX: &str = "whsec_";

/// Bytes of key a generated secret has.
const GENERATED_LEN: usize = 24;

/// The fewest bytes of key a parsed secret may have.
const MIN_LEN: usize = 24;

/// The most bytes of key a parsed secret may have.
const MAX_LEN: usize = 64;

/// An endpoint's signing secret: the key bytes and their `whsec_…` text.
///
/// `Debug` shows `Secret(whsec_…)` and never the key; there is no `Display`.
#[derive(Clone)]
pub struct Secret {
    /// The decoded key the signatures are made with.
    key: Vec<u8>,
    /// `whsec_` and the standard base64 of `key`.
    text: String,
}

impl Secret {
    /// A new random secret of 24 bytes.
    pub fn generate() -> Secret {
        let mut key = vec![0; GENERATED_LEN];
        rand::thread_rng().fill_bytes(&mut key);
        let text = format!("{PREFIX}{}", STANDARD.encode(&key));
        Secret { key, text }
    }

    /// Reads a `whsec_…` text: the prefix and the standard base64 of 24 to 64 bytes.
    ///
    /// The error never repeats the text.
    pub fn parse(text: &str) -> Result<Secret, String> {
        let Some(encoded) = text.strip_prefix(PREFIX) else {
            return Err(format!("a webhook secret starts with {PREFIX}"));
        };
        let key = STANDARD
            .decode(encoded)
            .map_err(|_| format!("a webhook secret is {PREFIX} and standard base64"))?;
        if !(MIN_LEN..=MAX_LEN).contains(&key.len()) {
            return Err(format!(
                "a webhook secret's key has {MIN_LEN} to {MAX_LEN} bytes, this one has {}",
                key.len()
            ));
        }
        Ok(Secret {
            key,
            text: text.to_owned(),
        })
    }

    /// The `whsec_…` text, to show once when the secret is made and to store.
    pub fn expose(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(whsec_…)")
    }
}

/// The `v1,<base64>` signature of one message under one secret: HMAC-SHA256 of
/// `{id}.{timestamp}.{body}`.
pub fn sign(secret: &Secret, id: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    let Ok(mut mac) = HmacSha256::new_from_slice(&secret.key) else {
        return String::from("v1,");
    };
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// The `webhook-signature` header's value: one signature per secret, in the order given,
/// separated by single spaces (several secrets while a secret is being rotated).
pub fn signature_header(secrets: &[&Secret], id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets
        .iter()
        .map(|secret| sign(secret, id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example the Standard Webhooks specification publishes.
    const SPEC_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const SPEC_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const SPEC_TIMESTAMP: i64 = 1614265330;
    const SPEC_BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SPEC_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn the_specification_example_signs_as_published() {
        let secret = Secret::parse(SPEC_SECRET).unwrap();
        assert_eq!(
            sign(&secret, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY),
            SPEC_SIGNATURE
        );
    }

    #[test]
    fn the_header_lists_one_signature_per_secret_in_order() {
        let first = Secret::parse(SPEC_SECRET).unwrap();
        let second = Secret::generate();
        let header = signature_header(&[&first, &second], SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY);
        let expected = format!(
            "{SPEC_SIGNATURE} {}",
            sign(&second, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY)
        );
        assert_eq!(header, expected);
        assert_eq!(
            signature_header(&[&first], SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY),
            SPEC_SIGNATURE
        );
    }

    #[test]
    fn a_signature_depends_on_id_timestamp_and_body() {
        let secret = Secret::parse(SPEC_SECRET).unwrap();
        let others = [
            sign(&secret, "msg_other", SPEC_TIMESTAMP, SPEC_BODY),
            sign(&secret, SPEC_ID, SPEC_TIMESTAMP + 1, SPEC_BODY),
            sign(&secret, SPEC_ID, SPEC_TIMESTAMP, b"{}"),
        ];
        for other in others {
            assert_ne!(other, SPEC_SIGNATURE);
        }
    }

    #[test]
    fn a_generated_secret_has_24_random_bytes_and_parses_back() {
        let secret = Secret::generate();
        assert!(secret.expose().starts_with("whsec_"));
        assert_eq!(secret.key.len(), 24);
        let parsed = Secret::parse(secret.expose()).unwrap();
        assert_eq!(parsed.key, secret.key);
        assert_ne!(Secret::generate().key, secret.key);
    }

    #[test]
    fn parse_keeps_the_text_and_decodes_the_key() {
        let secret = Secret::parse(SPEC_SECRET).unwrap();
        assert_eq!(secret.expose(), SPEC_SECRET);
        assert_eq!(secret.key.len(), 24);
        let longest = format!("whsec_{}", STANDARD.encode([7u8; 64]));
        assert_eq!(Secret::parse(&longest).unwrap().key, vec![7u8; 64]);
    }

    #[test]
    fn parse_refuses_bad_texts_without_repeating_them() {
        let bad = [
            "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned(),
            "whsec_".to_owned(),
            "whsec_not*base64*at*all*here*xx".to_owned(),
            format!("whsec_{}", STANDARD.encode([1u8; 23])),
            format!("whsec_{}", STANDARD.encode([1u8; 65])),
            format!("WHSEC_{}", STANDARD.encode([1u8; 24])),
        ];
        for text in bad {
            let error = Secret::parse(&text).unwrap_err();
            let body = text
                .trim_start_matches("whsec_")
                .trim_start_matches("WHSEC_");
            assert!(
                body.is_empty() || !error.contains(body),
                "{error:?} repeats the text"
            );
        }
    }

    #[test]
    fn debug_never_shows_the_key() {
        let secret = Secret::parse(SPEC_SECRET).unwrap();
        assert_eq!(format!("{secret:?}"), "Secret(whsec_…)");
        assert_eq!(format!("{:#?}", [&secret]), "[\n    Secret(whsec_…),\n]");
    }
}
