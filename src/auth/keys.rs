//! Verifying keys from configuration: a PEM public key (RSA or EC P-256) or the keys of a JWKS.

use std::collections::HashMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;
use spki::{ObjectIdentifier, SubjectPublicKeyInfoRef};

use super::{JwtKeys, KeyError, Source, TokenRules, VerifyingKey};

/// `id-ecPublicKey` (RFC 5480): the algorithm of an EC public key.
const EC_PUBLIC_KEY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
/// `secp256r1` (P-256, RFC 5480): the curve ES256 signs on.
const P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");

impl JwtKeys {
    /// Keys for a PEM public key (`-----BEGIN PUBLIC KEY-----` or `-----BEGIN RSA PUBLIC
    /// KEY-----`): an RSA key verifies RS256 tokens, an EC P-256 key ES256 tokens, and nothing
    /// else is accepted.
    pub fn from_public_key_pem(pem: &[u8], rules: TokenRules) -> Result<Self, KeyError> {
        rules.check()?;
        let block = pem::parse(pem).map_err(not_pem)?;
        let (alg, key) = match block.tag() {
            "RSA PUBLIC KEY" => (Algorithm::RS256, rsa_pem(pem)?),
            "PUBLIC KEY" => match ec_curve(block.contents())? {
                None => (Algorithm::RS256, rsa_pem(pem)?),
                Some(curve) if curve == P256 => {
                    let key = DecodingKey::from_ec_pem(pem).map_err(|err| {
                        KeyError::NotPublicKey(format!("cannot read the EC key: {err}"))
                    })?;
                    (Algorithm::ES256, key)
                }
                Some(_) => return Err(KeyError::UnsupportedCurve),
            },
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

/// Why a PEM file holds no block to read.
fn not_pem(err: pem::PemError) -> KeyError {
    match err {
        pem::PemError::InvalidData(_) => {
            KeyError::NotPublicKey("the PEM block is not base64".to_owned())
        }
        pem::PemError::MismatchedTags(begin, end) => KeyError::NotPublicKey(format!(
            "the PEM block begins as `{begin}` and ends as `{end}`"
        )),
        _ => KeyError::NotPublicKey("no `-----BEGIN PUBLIC KEY-----` block".to_owned()),
    }
}

/// The curve of an EC public key (a DER SubjectPublicKeyInfo), `None` for any other kind of
/// key. Only an uncompressed point is accepted on P-256: that is the form ES256 verifies.
fn ec_curve(der: &[u8]) -> Result<Option<ObjectIdentifier>, KeyError> {
    let info = SubjectPublicKeyInfoRef::try_from(der)
        .map_err(|err| KeyError::NotPublicKey(format!("cannot read the public key: {err}")))?;
    if info.algorithm.oid != EC_PUBLIC_KEY {
        return Ok(None);
    }
    let curve = info
        .algorithm
        .parameters_oid()
        .map_err(|err| KeyError::NotPublicKey(format!("the EC key names no curve: {err}")))?;
    if curve == P256
        && !matches!(info.subject_public_key.as_bytes(), Some([0x04, point @ ..]) if point.len() == 64)
    {
        return Err(KeyError::NotPublicKey(
            "the P-256 key is not an uncompressed point".to_owned(),
        ));
    }
    Ok(Some(curve))
}

/// An RSA public key in PEM form.
fn rsa_pem(pem: &[u8]) -> Result<DecodingKey, KeyError> {
    DecodingKey::from_rsa_pem(pem)
        .map_err(|err| KeyError::NotPublicKey(format!("cannot read the RSA key: {err}")))
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
