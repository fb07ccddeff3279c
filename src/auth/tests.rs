//! Unit tests of token verification and minting, with the key files of tests/fixtures/jwt.

use super::*;
use serde_json::{json, Value};

const RSA_PRIVATE: &[u8] = include_bytes!("../../tests/fixtures/jwt/rsa-private.pem");
const RSA_PUBLIC: &[u8] = include_bytes!("../../tests/fixtures/jwt/rsa-public.pem");
const RSA_OTHER_PRIVATE: &[u8] = include_bytes!("../../tests/fixtures/jwt/rsa-other-private.pem");
const EC_PRIVATE: &[u8] = include_bytes!("../../tests/fixtures/jwt/ec-private.pem");
const EC_PUBLIC: &[u8] = include_bytes!("../../tests/fixtures/jwt/ec-public.pem");
const EC_P384_PUBLIC: &[u8] = include_bytes!("../../tests/fixtures/jwt/ec-p384-public.pem");
const JWKS: &[u8] = include_bytes!("../../tests/fixtures/jwt/jwks.json");
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
    let Value::Object(changes) = changes else {
        panic!("claim changes are an object");
    };
    for (claim, value) in changes {
        if value.is_null() {
            claims.as_object_mut().unwrap().remove(&claim);
        } else {
            claims[claim] = value;
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
    let extra =
        json!({"email": "ada@example.com", "scope": "openid", "realm_access": {"roles": ["x"]}});
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
        email: None,
        email_verified: None,
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
    assert!(matches!(
        refused(b"-----BEGIN PUBLIC KEY-----\n!!!!\n-----END PUBLIC KEY-----\n"),
        KeyError::NotPublicKey(_)
    ));
    // A P-256 key as a compressed point: ES256 verifies uncompressed points only.
    let mut compressed = vec![
        0x30, 0x39, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08,
        0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x22, 0x00, 0x02,
    ];
    compressed.extend([0x11; 32]);
    let compressed = pem::encode(&pem::Pem::new("PUBLIC KEY", compressed));
    assert!(matches!(
        refused(compressed.as_bytes()),
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

#[test]
fn an_address_is_kept_only_when_verified_and_well_formed() {
    let keys = JwtKeys::new("secret");
    let with = |email: serde_json::Value, verified: serde_json::Value| {
        let token = keys
            .try_sign(&json!({
                "sub": "u1", "name": "Ada", "exp": now_secs() + 60,
                "email": email, "email_verified": verified,
            }))
            .expect("signed");
        match keys.authenticate(Some(&format!("Bearer {token}"))) {
            AuthState::Authenticated(viewer) => viewer.email,
            other => panic!("refused: {other:?}"),
        }
    };
    assert_eq!(
        with(json!("ada@example.com"), json!(true)),
        Some("ada@example.com".into())
    );
    assert_eq!(with(json!("ada@example.com"), json!(false)), None);
    assert_eq!(
        with(json!("ada@example.com"), json!("true")),
        None,
        "a string is not true"
    );
    assert_eq!(
        with(json!("ada@example.com"), serde_json::Value::Null),
        None
    );
    assert_eq!(
        with(json!(42), json!(true)),
        None,
        "an odd claim never refuses the token"
    );
    for bad in [
        "ada",
        "ada@",
        "@example.com",
        "a b@example.com",
        "ada@localhost",
        "a@b@c.d",
        "<a@b.c>",
        "a@b.c\r\nBcc: x@y.z",
    ] {
        assert_eq!(verified_address(Some(bad), Some(true)), None, "{bad}");
    }
}
