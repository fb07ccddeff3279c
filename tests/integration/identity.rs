//! Tokens from an identity provider: a JWKS with an RSA and an EC key verifies bearer tokens,
//! with the issuer and audience required; everything else is UNAUTHENTICATED.

use jsonwebtoken::{Algorithm, EncodingKey};
use serde_json::{json, Value};
use threadql::app::{jwt_keys, App};
use threadql::config::{Cli, Command, Config, TokenArgs};
use threadql::domain::Layout;
use threadql::graphql::Api;

use crate::support::{
    defaults, ec_token, error_code, fixture, now, rsa_key, rsa_token, sign_key, sign_with,
    unique_db, unsigned, Settings, SECRET,
};

const ISSUER: &str = "https://idp.example.com/";
const AUDIENCE: &str = "threadql-api";

/// Valid claims for the identity provider, with `changes` applied.
fn claims(sub: &str, name: &str, changes: Value) -> Value {
    let mut claims = json!({
        "sub": sub,
        "name": name,
        "iss": ISSUER,
        "aud": AUDIENCE,
        "exp": now() + 600,
        "iat": now(),
        "email": format!("{sub}@example.com"),
    });
    let Value::Object(changes) = changes else {
        panic!("claim changes are an object");
    };
    for (claim, value) in changes {
        claims[claim] = value;
    }
    claims
}

/// The server configuration of a test database with the JWKS as the only key source.
fn jwks_config(database: &str) -> Config {
    let mut config = Settings::new(Layout::PerComment).config(database);
    config.jwt_secret = None;
    config.jwt_jwks = Some(fixture("jwks.json"));
    config.jwt_issuer = Some(ISSUER.to_owned());
    config.jwt_audience = Some(AUDIENCE.to_owned());
    config
}

async fn exec(api: &Api, token: &str, query: &str, variables: Value) -> Value {
    let request = async_graphql::Request::new(query)
        .variables(async_graphql::Variables::from_json(variables));
    let header = format!("Bearer {token}");
    let response = api.execute(request, Some(&header)).await;
    serde_json::to_value(&response).unwrap()
}

const CREATE: &str = "mutation { createDiscussion(input: {title: \"from the IdP\"}) { id } }";
const POST: &str = "mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug author { id name } } }";

#[tokio::test(flavor = "multi_thread")]
async fn identity_provider_tokens_post_as_their_subject() {
    let app = App::build(&jwks_config(&unique_db("identity_ok")))
        .await
        .expect("build the app");
    for (token, sub, name) in [
        (
            rsa_token(&claims("rsa-user", "Rita", json!({}))),
            "rsa-user",
            "Rita",
        ),
        (
            ec_token(&claims("ec-user", "Emil", json!({"roles": ["reader"]}))),
            "ec-user",
            "Emil",
        ),
    ] {
        let created = exec(&app.api, &token, CREATE, json!({})).await;
        assert!(created.get("errors").is_none(), "{created:#}");
        let d = created["data"]["createDiscussion"]["id"]
            .as_str()
            .expect("id")
            .to_owned();
        let posted = exec(
            &app.api,
            &token,
            POST,
            json!({"d": d, "t": format!("hello from {sub}")}),
        )
        .await;
        assert!(posted.get("errors").is_none(), "{posted:#}");
        assert_eq!(
            posted["data"]["postComment"]["author"],
            json!({"id": sub, "name": name})
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn other_tokens_are_unauthenticated() {
    let app = App::build(&jwks_config(&unique_db("identity_refused")))
        .await
        .expect("build the app");
    let valid = claims("u1", "Ada", json!({}));
    let unsigned = unsigned(&valid);
    let hs256 = sign_with(Algorithm::HS256, &valid, SECRET);
    let confused = sign_key(
        Algorithm::HS256,
        Some("test-rsa-1"),
        &valid,
        &EncodingKey::from_secret(&std::fs::read(fixture("rsa-public.pem")).unwrap()),
    );
    let unknown_kid = sign_key(Algorithm::RS256, Some("retired-key"), &valid, &rsa_key());
    for (what, token, reason) in [
        (
            "wrong audience",
            rsa_token(&claims("u1", "Ada", json!({"aud": "another-app"}))),
            "the token's audience is not accepted",
        ),
        (
            "wrong issuer",
            ec_token(&claims(
                "u1",
                "Ada",
                json!({"iss": "https://evil.example/"}),
            )),
            "the token's issuer is not accepted",
        ),
        (
            "not yet valid",
            ec_token(&claims("u1", "Ada", json!({"nbf": now() + 3600}))),
            "the token is not valid yet",
        ),
        (
            "expired",
            rsa_token(&claims("u1", "Ada", json!({"exp": now() - 3600}))),
            "the token has expired",
        ),
        (
            "alg none",
            unsigned,
            "the token's algorithm is not accepted",
        ),
        ("HS256", hs256, "the token's algorithm is not accepted"),
        (
            "HS256 with the public key as secret",
            confused,
            "the token's algorithm is not accepted",
        ),
        (
            "unknown kid",
            unknown_kid,
            "the token's key (`kid`) is not known",
        ),
    ] {
        let response = exec(&app.api, &token, CREATE, json!({})).await;
        assert_eq!(
            error_code(&response),
            "UNAUTHENTICATED",
            "{what}: {response:#}"
        );
        assert_eq!(response["errors"][0]["message"], reason, "{what}");
        assert!(response["data"].is_null(), "{what}: {response:#}");
    }
}

#[test]
fn exactly_one_key_source_is_configured() {
    let mut config = defaults();
    config.jwt_secret = Some(SECRET.to_owned());
    config.jwt_public_key = None;
    config.jwt_jwks = Some(fixture("jwks.json"));
    let err = format!("{:#}", jwt_keys(&config).unwrap_err());
    assert!(
        err.contains("THREADQL_JWT_SECRET and THREADQL_JWT_JWKS are set together"),
        "{err}"
    );
    config.jwt_secret = None;
    config.jwt_public_key = Some(fixture("rsa-public.pem"));
    assert!(jwt_keys(&config).is_err());
    config.jwt_jwks = None;
    assert_eq!(jwt_keys(&config).unwrap().describe(), "RS256 public key");
    config.jwt_public_key = Some(fixture("ec-public.pem"));
    assert_eq!(jwt_keys(&config).unwrap().describe(), "ES256 public key");
    config.jwt_public_key = Some(fixture("rsa-private.pem"));
    let err = format!("{:#}", jwt_keys(&config).unwrap_err());
    assert!(err.contains("private key"), "{err}");
    config.jwt_public_key = Some(fixture("missing.pem"));
    let err = format!("{:#}", jwt_keys(&config).unwrap_err());
    assert!(err.contains("cannot read THREADQL_JWT_PUBLIC_KEY"), "{err}");
}

#[tokio::test]
async fn the_token_command_mints_only_with_a_secret() {
    let token_args = || TokenArgs {
        sub: "u1".to_owned(),
        name: "Ada".to_owned(),
        roles: vec![],
        ttl_secs: 60,
    };
    let mut config = defaults();
    config.jwt_secret = None;
    config.jwt_public_key = None;
    config.jwt_jwks = Some(fixture("jwks.json"));
    let refused = threadql::run(Cli {
        command: Some(Command::Token(token_args())),
        config: config.clone(),
    })
    .await
    .unwrap_err();
    assert!(
        format!("{refused:#}").contains("tokens must come from the identity provider"),
        "{refused:#}"
    );
    config.jwt_jwks = None;
    config.jwt_secret = Some(SECRET.to_owned());
    threadql::run(Cli {
        command: Some(Command::Token(token_args())),
        config,
    })
    .await
    .expect("an HS256 secret mints");
}
