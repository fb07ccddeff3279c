//! The webhook receiver the delivery tests rely on (support's `Receiver`, tests/node/webhooks.mjs)
//! on a real socket: requests signed here the Standard Webhooks way verify with the reference
//! implementation, wrong or stale ones do not, each secret of a rotation verifies its own
//! signature, and it answers, waits or hangs as told.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{json, Value};
use sha2::Sha256;

use crate::support::{Delivery, Receiver};

/// The secret deliveries are signed with.
const FIRST: &str = "whsec_dGhyZWFkcWwgcmVjZWl2ZXIgdGVzdCBzZWNyZXQsIGZpcnN0";
/// The secret a rotation moves to.
const SECOND: &str = "whsec_dGhyZWFkcWwgcmVjZWl2ZXIgdGVzdCBzZWNyZXQsIHNlY29uZA==";
/// A secret the receiver is never given.
const UNKNOWN: &str = "whsec_YSBzZWNyZXQgdGhlIHJlY2VpdmVyIHdhcyBuZXZlciBnaXZlbg==";

/// The longest a delivery may take to be reported.
const REPORTED: Duration = Duration::from_secs(10);

/// Now, in Unix seconds.
fn unix_seconds() -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(now.as_secs()).expect("seconds fit")
}

/// The `v1,<base64>` signature of a delivery with `secret` (`whsec_` + base64 of the key):
/// HMAC-SHA256 of `{id}.{timestamp}.{body}`.
fn webhook_signature(secret: &str, id: &str, timestamp: i64, body: &str) -> String {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").expect("a whsec_ secret"))
        .expect("a base64 secret");
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("any key length");
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// A Standard Webhooks body of type `kind`.
fn event_body(kind: &str, data: &Value) -> String {
    json!({ "type": kind, "timestamp": "2025-01-01T00:00:00Z", "data": data }).to_string()
}

/// The `webhook-id`s of deliveries, in the order they were reported.
fn delivery_ids(delivered: &[Delivery]) -> Vec<&str> {
    delivered.iter().map(|d| d.id.as_str()).collect()
}

/// POSTs `body` to the receiver with the three Standard Webhooks headers; returns the status.
async fn post_hook(
    client: &reqwest::Client,
    receiver: &Receiver,
    (id, timestamp, signature): (&str, i64, &str),
    body: &str,
) -> Result<StatusCode, reqwest::Error> {
    let response = client
        .post(receiver.url())
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(body.to_owned())
        .send()
        .await?;
    Ok(response.status())
}

#[tokio::test]
async fn a_correctly_signed_delivery_verifies() {
    let receiver = Receiver::start().await;
    receiver.secrets(&[FIRST]).await;
    let client = reqwest::Client::new();
    // Not ASCII, so that verification is shown to be over the bytes as sent.
    let body = event_body(
        "comment.posted",
        &json!({ "slug": "a1b2", "text": "Grüße — ça va?" }),
    );
    let now = unix_seconds();
    let signature = webhook_signature(FIRST, "msg_1", now, &body);
    let status = post_hook(&client, &receiver, ("msg_1", now, &signature), &body)
        .await
        .expect("delivered");
    assert_eq!(status, StatusCode::OK);

    let delivered = receiver.wait_for(1, REPORTED).await;
    let one = &delivered[0];
    assert_eq!(one.verified, [true], "{one:#?}");
    assert!(one.verified_by_all());
    assert_eq!(one.id, "msg_1");
    assert_eq!(one.timestamp, now);
    assert_eq!(one.signatures, [signature]);
    assert_eq!(one.status, 200);
    assert!(one.answered() && !one.cut);
    assert_eq!(one.kind, "comment.posted");
    assert_eq!(one.body["data"]["text"], "Grüße — ça va?");
    assert_eq!(one.path, "/hook");
    let now_ms = u64::try_from(now).expect("positive") * 1000;
    assert!(
        one.received_at_ms.abs_diff(now_ms) < 60_000,
        "received at {} ms, signed at {now_ms} ms",
        one.received_at_ms
    );
}

#[tokio::test]
async fn a_wrong_signature_or_a_stale_timestamp_does_not_verify() {
    let receiver = Receiver::start().await;
    receiver.secrets(&[FIRST]).await;
    let client = reqwest::Client::new();
    let body = event_body("comment.posted", &json!({ "slug": "a1b2" }));
    let now = unix_seconds();

    // Signed over another body.
    let wrong = webhook_signature(FIRST, "msg_wrong", now, "{}");
    post_hook(&client, &receiver, ("msg_wrong", now, &wrong), &body)
        .await
        .expect("delivered");
    // Signed correctly, ten minutes ago (the tolerance is five).
    let then = now - 600;
    let stale = webhook_signature(FIRST, "msg_stale", then, &body);
    post_hook(&client, &receiver, ("msg_stale", then, &stale), &body)
        .await
        .expect("delivered");

    let delivered = receiver.wait_for(2, REPORTED).await;
    assert_eq!(delivery_ids(&delivered), ["msg_wrong", "msg_stale"]);
    for one in &delivered {
        assert_eq!(one.verified, [false], "{one:#?}");
        assert!(!one.verified_by_any());
    }
    assert_eq!(delivered[1].timestamp, then);
}

#[tokio::test]
async fn during_a_rotation_each_secret_verifies_its_own_signature() {
    let receiver = Receiver::start().await;
    receiver.secrets(&[FIRST, SECOND]).await;
    let client = reqwest::Client::new();
    let body = event_body("comment.edited", &json!({ "slug": "c3d4" }));
    let now = unix_seconds();

    let both = [
        webhook_signature(FIRST, "msg_both", now, &body),
        webhook_signature(SECOND, "msg_both", now, &body),
    ];
    post_hook(
        &client,
        &receiver,
        ("msg_both", now, &both.join(" ")),
        &body,
    )
    .await
    .expect("delivered");
    let partly = [
        webhook_signature(UNKNOWN, "msg_partly", now, &body),
        webhook_signature(SECOND, "msg_partly", now, &body),
    ];
    post_hook(
        &client,
        &receiver,
        ("msg_partly", now, &partly.join(" ")),
        &body,
    )
    .await
    .expect("delivered");

    let delivered = receiver
        .wait_until(|d| d.iter().any(|one| one.id == "msg_partly"), REPORTED)
        .await;
    assert_eq!(delivery_ids(&delivered), ["msg_both", "msg_partly"]);
    assert_eq!(delivered[0].signatures, both);
    assert_eq!(delivered[0].verified, [true, true]);
    assert_eq!(delivered[1].signatures, partly);
    assert_eq!(delivered[1].verified, [false, true]);
    assert!(delivered[1].verified_by_any() && !delivered[1].verified_by_all());
}

#[tokio::test]
async fn answers_follow_the_respond_list_then_the_otherwise_status() {
    let receiver = Receiver::start().await;
    receiver.secrets(&[FIRST]).await;
    receiver.respond(&[500, 500, 200]).await;
    let client = reqwest::Client::new();
    let body = event_body("comment.deleted", &json!({ "slug": "e5f6" }));

    let mut answered = Vec::new();
    for n in 0..4 {
        let id = format!("msg_{n}");
        let now = unix_seconds();
        let signature = webhook_signature(FIRST, &id, now, &body);
        let status = post_hook(&client, &receiver, (&id, now, &signature), &body)
            .await
            .expect("delivered");
        answered.push(status.as_u16());
    }
    assert_eq!(answered, [500, 500, 200, 200]);
    receiver.otherwise(410).await;
    let now = unix_seconds();
    let signature = webhook_signature(FIRST, "msg_gone", now, &body);
    let status = post_hook(&client, &receiver, ("msg_gone", now, &signature), &body)
        .await
        .expect("delivered");
    assert_eq!(status, StatusCode::GONE);

    let delivered = receiver.wait_for(5, REPORTED).await;
    assert_eq!(
        delivery_ids(&delivered),
        ["msg_0", "msg_1", "msg_2", "msg_3", "msg_gone"]
    );
    let statuses: Vec<u16> = delivered.iter().map(|d| d.status).collect();
    assert_eq!(statuses, [500, 500, 200, 200, 410]);
    assert!(delivered.iter().all(|d| d.verified_by_all()));
    assert_eq!(receiver.deliveries(), delivered);
}

#[tokio::test]
async fn a_delayed_answer_comes_late_and_a_hung_one_never() {
    let receiver = Receiver::start().await;
    receiver.secrets(&[FIRST]).await;
    let body = event_body("comment.posted", &json!({ "slug": "g7h8" }));
    let now = unix_seconds();
    let signature = webhook_signature(FIRST, "msg_slow", now, &body);

    receiver.delay_ms(400).await;
    let client = reqwest::Client::new();
    let started = std::time::Instant::now();
    let status = post_hook(&client, &receiver, ("msg_slow", now, &signature), &body)
        .await
        .expect("delivered");
    assert_eq!(status, StatusCode::OK);
    assert!(started.elapsed() >= Duration::from_millis(400));

    // A client that gives up first: the receiver reports the cut attempt, unanswered.
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(100))
        .build()
        .expect("a client");
    let error = post_hook(&impatient, &receiver, ("msg_cut", now, &signature), &body)
        .await
        .expect_err("cut before the answer");
    assert!(error.is_timeout(), "{error}");
    let delivered = receiver.wait_for(2, REPORTED).await;
    assert_eq!(delivered[1].id, "msg_cut");
    assert!(
        delivered[1].cut && !delivered[1].answered(),
        "{delivered:#?}"
    );

    receiver.delay_ms(0).await;
    receiver.hang().await;
    let hung = webhook_signature(FIRST, "msg_hung", now, &body);
    let error = post_hook(&impatient, &receiver, ("msg_hung", now, &hung), &body)
        .await
        .expect_err("never answered");
    assert!(error.is_timeout(), "{error}");
    let delivered = receiver.wait_for(3, REPORTED).await;
    assert_eq!(delivered[2].id, "msg_hung");
    assert_eq!(delivered[2].status, 0);
    assert_eq!(delivered[2].verified, [true]);

    receiver.stop_hanging().await;
    let status = post_hook(&impatient, &receiver, ("msg_again", now, &signature), &body)
        .await
        .expect("answered again");
    assert_eq!(status, StatusCode::OK);
}
