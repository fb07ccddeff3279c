//! The live subscription `notificationReceived` over both WebSocket protocols: a person hears
//! their own notifications as they are stored, nobody else's, and not at all without a token.

use std::time::Duration;

use serde_json::{json, Value};
use threadql::domain::Layout;
use tokio_tungstenite::tungstenite::Message;

use super::{all_notes, discussion_by, notify_server, post_as, settled};
use crate::live::{await_subscribers, text_json, Protocol, Ws};
use crate::support::{error_code, token};

const RECEIVED: &str = "subscription { notificationReceived { id kind read actor { id name } discussion { id } comment { slug } } }";

/// The `connection_init` payload that signs a socket in with `token`.
fn signed_in_payload(token: &str) -> Value {
    json!({ "Authorization": format!("Bearer {token}") })
}

/// Checks that `ws` receives no result for `wait` (keep-alives aside).
async fn hears_nothing_for(ws: &mut Ws, wait: Duration) {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let message = match tokio::time::timeout_at(deadline, ws.socket_next()).await {
            Err(_) => return,
            Ok(message) => message.expect("the socket stays open"),
        };
        match &message {
            Message::Ping(_) | Message::Pong(_) => {}
            Message::Text(_) if text_json(&message)["type"] == "ka" => {}
            other => panic!("expected nothing, got {other:?}"),
        }
    }
}

/// The notification of the next result on `ws`, for the operation `id`.
async fn next_notification(ws: &mut Ws, id: &str) -> Value {
    let (got, payload) = ws.next().await;
    assert_eq!(got, id, "{payload:#}");
    assert!(payload["errors"].is_null(), "{payload:#}");
    payload["data"]["notificationReceived"].clone()
}

/// Ada and Cy subscribe; Bob replies to Ada: only Ada's socket hears it (as her inbox has
/// it), Cy's next result is Ada's later reply to Cy; a socket without a token is refused.
async fn only_the_recipient_hears_a_notification_live_case(protocol: Protocol) {
    let label = format!("notify_live_{protocol:?}");
    let (server, db) = notify_server(&label, Layout::PerComment).await;
    let (ada, bob, cy) = (token("ada", "Ada"), token("bob", "Bob"), token("cy", "Cy"));
    let d = discussion_by(&server, &ada).await;
    let (c1, _) = post_as(&server, &ada, &d, None, "ada's").await;
    let (c2, _) = post_as(&server, &cy, &d, None, "cy's").await;
    settled(&db).await;
    let mut ada_ws = Ws::connect(&server, protocol, signed_in_payload(&ada)).await;
    let mut cy_ws = Ws::connect(&server, protocol, signed_in_payload(&cy)).await;
    ada_ws.start("a", RECEIVED, json!({})).await;
    cy_ws.start("c", RECEIVED, json!({})).await;
    await_subscribers(&server, 2).await;

    let (r1, _) = post_as(&server, &bob, &d, Some(&c1), "bob to ada").await;
    let heard = next_notification(&mut ada_ws, "a").await;
    assert_eq!(heard["kind"], "REPLY", "{heard:#}");
    assert_eq!(heard["read"], false);
    assert_eq!(heard["actor"], json!({ "id": "bob", "name": "Bob" }));
    assert_eq!(heard["discussion"]["id"], d.as_str());
    assert_eq!(heard["comment"]["slug"], r1.as_str());
    settled(&db).await;
    assert_eq!(all_notes(&server, &ada).await[0]["id"], heard["id"]);
    hears_nothing_for(&mut cy_ws, Duration::from_millis(500)).await;

    let (r2, _) = post_as(&server, &ada, &d, Some(&c2), "ada to cy").await;
    let heard = next_notification(&mut cy_ws, "c").await;
    assert_eq!(heard["kind"], "REPLY", "{heard:#}");
    assert_eq!(heard["actor"]["id"], "ada");
    assert_eq!(heard["comment"]["slug"], r2.as_str());
    hears_nothing_for(&mut ada_ws, Duration::from_millis(300)).await;

    let mut anonymous = Ws::connect(&server, protocol, json!({})).await;
    anonymous.start("x", RECEIVED, json!({})).await;
    let (id, payload) = anonymous.next().await;
    assert_eq!(id, "x");
    assert!(payload["data"].is_null(), "{payload:#}");
    assert_eq!(error_code(&payload), "UNAUTHENTICATED");
    assert_eq!(
        anonymous.message().await,
        json!({ "type": "complete", "id": "x" })
    );
    drop((ada_ws, cy_ws, anonymous));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_recipient_hears_a_notification_live_over_graphql_transport_ws() {
    only_the_recipient_hears_a_notification_live_case(Protocol::TransportWs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_recipient_hears_a_notification_live_over_legacy_graphql_ws() {
    only_the_recipient_hears_a_notification_live_case(Protocol::LegacyGraphqlWs).await;
}
