//! Verifying keys from configuration: a PEM public key (RSA or EC P-256) or the keys of a JWKS.

use std::collections::HashMap;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;

use super::{JwtKeys, KeyError, Source, TokenRules, VerifyingKey};

/// The DER prefix of an uncompressed P-256 public key (SubjectPublicKeyInfo, `id-ecPublicKey`,
/// `prime256v1`, a 65-byte bit string starting with 0x04); 64 bytes of point follow.
const P256_SPKI_PREFIX: [u8; 27] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00, 0x04,
];
/// The DER of the `id-ecPublicKey` algorithm identifier.
const EC_PUBLIC_KEY_OID: [u8; 9] = [0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];

impl JwtKeys {
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
