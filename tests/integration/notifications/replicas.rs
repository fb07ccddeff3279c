//! Two replicas over one database fan out the same event log without telling anyone twice, and
//! the live subscription also runs over Server-Sent Events.

use std::time::Duration;

use futures::stream::{self, StreamExt};
use mongodb::bson::{doc, Document};
use serde_json::json;

use super::{as_user, post_as, settled};
use crate::support::{server_config, server_uri, token, Running};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_store_each_followers_notice_once() {
    let config = server_config("notify_replicas");
    let database = config.database.clone();
    let one = Running::start(config.clone()).await;
    let two = Running::start(config).await;
    let ada = token("ada", "Ada");
    let create = "mutation { createDiscussion(input: {title: \"Two replicas\"}) { id } }";
    let d = as_user(&one, &ada, create, json!({})).await["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let follow = "mutation($d: ID!) { followDiscussion(discussionId: $d, follow: true) { id } }";
    stream::iter(0..300)
        .for_each_concurrent(16, |i| {
            let (one, d) = (&one, &d);
            async move {
                let follower = token(&format!("r{i:03}"), &format!("R{i}"));
                as_user(one, &follower, follow, json!({ "d": d })).await;
            }
        })
        .await;
    for i in 0..10 {
        let server = if i % 2 == 0 { &one } else { &two };
        post_as(server, &ada, &d, None, &format!("news {i}")).await;
    }
    settled(&database).await;
    let notifications = mongodb::Client::with_uri_str(server_uri())
        .await
        .unwrap()
        .database(&database)
        .collection::<Document>("notifications");
    assert_eq!(notifications.count_documents(doc! {}).await.unwrap(), 3_000);
    let one_follower = doc! { "recipient": "r150" };
    assert_eq!(
        notifications.count_documents(one_follower).await.unwrap(),
        10
    );
    one.shutdown().await;
    two.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_arrives_live_over_server_sent_events() {
    let server = Running::start(server_config("notify_sse")).await;
    let (ada, bob) = (token("ada", "Ada"), token("bob", "Bob"));
    let create = "mutation { createDiscussion(input: {title: \"SSE\"}) { id } }";
    let d = as_user(&server, &ada, create, json!({})).await["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (c, _) = post_as(&server, &ada, &d, None, "mine").await;
    let subscription = json!({ "query": "subscription { notificationReceived { kind actor { id } comment { slug } } }" });
    let mut stream = reqwest::Client::new()
        .post(server.url("/graphql"))
        .bearer_auth(&ada)
        .header("accept", "text/event-stream")
        .json(&subscription)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    // The subscription is in place once the stream is open; then Bob replies.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (r, _) = post_as(&server, &bob, &d, Some(&c), "to ada").await;
    let mut seen = String::new();
    let read = async {
        while let Some(chunk) = stream.chunk().await.unwrap() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains(&r) {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .unwrap_or_else(|_| panic!("no notification over SSE: {seen}"));
    assert!(
        seen.contains("\"REPLY\"") && seen.contains("\"bob\""),
        "{seen}"
    );
    server.shutdown().await;
}
