//! Notification settings on a server without SMTP: the defaults, a partial change that keeps
//! the rest, mail refused, and the address a token carries only when it is verified.

use serde_json::{json, Value};
use threadql::domain::Layout;

use super::{as_user, attempt, notify_server};
use crate::support::{error_code, sign, token, Claims, Running};

const SETTINGS: &str = "{ viewer { notificationSettings { email onReply onModeration onFollowed emailAddress emailAvailable } } }";
const SET: &str = "mutation($i: NotificationSettingsInput!) { setNotificationSettings(input: $i) { email onReply onModeration onFollowed emailAddress emailAvailable } }";

/// `token`'s settings as `viewer` reads them.
async fn settings_now(server: &Running, token: &str) -> Value {
    as_user(server, token, SETTINGS, json!({})).await["viewer"]["notificationSettings"].clone()
}

/// A token for `sub` carrying the address `email`, verified or not (no `email_verified`
/// claim when `verified` is `None`).
fn token_with_address(sub: &str, email: &str, verified: Option<bool>) -> String {
    let mut claims = Claims::new(sub, sub);
    claims.email = Some(email.to_owned());
    claims.email_verified = verified;
    sign(&claims)
}

/// A person who set nothing has the defaults; changing one field keeps the others, and
/// what was set is what is read back; mail is refused without SMTP and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_start_at_the_defaults_and_change_one_field_at_a_time() {
    let (server, _) = notify_server("notify_settings", Layout::PerComment).await;
    let ada = token("ada", "Ada");
    let defaults = json!({
        "email": "NEVER",
        "onReply": true,
        "onModeration": true,
        "onFollowed": true,
        "emailAddress": null,
        "emailAvailable": false,
    });
    assert_eq!(settings_now(&server, &ada).await, defaults);

    let mut expected = defaults.clone();
    expected["onFollowed"] = json!(false);
    let set = as_user(&server, &ada, SET, json!({ "i": { "onFollowed": false } })).await;
    assert_eq!(set["setNotificationSettings"], expected);
    assert_eq!(settings_now(&server, &ada).await, expected);
    expected["onReply"] = json!(false);
    let set = as_user(&server, &ada, SET, json!({ "i": { "onReply": false } })).await;
    assert_eq!(
        set["setNotificationSettings"], expected,
        "onFollowed stays off"
    );
    assert_eq!(settings_now(&server, &ada).await, expected);

    for email in ["IMMEDIATE", "HOURLY", "DAILY"] {
        let refused = attempt(&server, Some(&ada), SET, json!({ "i": { "email": email } })).await;
        assert_eq!(
            error_code(&refused),
            "BAD_USER_INPUT",
            "{email}: {refused:#}"
        );
    }
    let refused = attempt(
        &server,
        Some(&ada),
        SET,
        json!({ "i": { "email": "IMMEDIATE", "onReply": true } }),
    )
    .await;
    assert_eq!(error_code(&refused), "BAD_USER_INPUT", "{refused:#}");
    assert_eq!(
        settings_now(&server, &ada).await,
        expected,
        "nothing changed"
    );
    let set = as_user(&server, &ada, SET, json!({ "i": { "email": "NEVER" } })).await;
    assert_eq!(set["setNotificationSettings"], expected);

    assert_eq!(
        settings_now(&server, &token("bob", "Bob")).await,
        defaults,
        "another person's settings are their own"
    );
    let anonymous = attempt(&server, None, SET, json!({ "i": { "onReply": false } })).await;
    assert_eq!(error_code(&anonymous), "UNAUTHENTICATED", "{anonymous:#}");
    server.shutdown().await;
}

/// `emailAddress` is null for a token without an address, the address for one with
/// `email_verified: true`, and null for one whose address is unverified or not said to be
/// verified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_email_address_is_shown_only_when_the_token_verified_it() {
    let (server, _) = notify_server("notify_address", Layout::PerComment).await;
    let address = |settings: Value| settings["emailAddress"].clone();
    let plain = sign(&Claims::new("ada", "Ada"));
    assert_eq!(address(settings_now(&server, &plain).await), Value::Null);
    let verified = token_with_address("eve", "eve@example.com", Some(true));
    assert_eq!(
        address(settings_now(&server, &verified).await),
        "eve@example.com"
    );
    let set = as_user(
        &server,
        &verified,
        SET,
        json!({ "i": { "onReply": false } }),
    )
    .await;
    assert_eq!(
        set["setNotificationSettings"]["emailAddress"],
        "eve@example.com"
    );
    let unverified = token_with_address("fay", "fay@example.com", Some(false));
    assert_eq!(
        address(settings_now(&server, &unverified).await),
        Value::Null
    );
    let unsaid = token_with_address("gus", "gus@example.com", None);
    assert_eq!(address(settings_now(&server, &unsaid).await), Value::Null);
    assert_eq!(
        settings_now(&server, &verified).await["emailAvailable"],
        false,
        "an address does not make a server without SMTP send mail"
    );
    server.shutdown().await;
}
