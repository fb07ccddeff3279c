//! The fan-out through kill -9: 2 000 followers of a discussion are each notified once of
//! every comment, though the process dies while it fans out and starts again.

use std::time::Duration;

use futures::stream::{self, StreamExt};
use mongodb::bson::doc;
use nix::sys::signal::Signal;
use serde_json::{json, Value};

use crate::support::{server_uri, token, unique_db, Process};

/// Followers of the discussion.
const FOLLOWERS: usize = 2_000;
/// Comments posted before the kill.
const COMMENTS: usize = 5;

/// Runs `query` as `token` against `url`; its data (failing the test on errors).
async fn call_at(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    query: &str,
    vars: Value,
) -> Value {
    let body: Value = client
        .post(url)
        .bearer_auth(token)
        .json(&json!({ "query": query, "variables": vars }))
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("json");
    assert!(body["errors"].is_null(), "{body:#}");
    body["data"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_follower_is_notified_once_through_a_kill_and_a_restart() {
    let database = unique_db("notify_kill");
    let env = [
        ("THREADQL_MONGODB_URI", server_uri().to_owned()),
        ("THREADQL_DATABASE", database.clone()),
        ("THREADQL_WEBHOOK_LEASE_SECS", "3".to_owned()),
    ];
    let process = Process::serve(&env).await;
    let graphql = process.url("/graphql");
    let client = reqwest::Client::new();
    let ada = token("ada", "Ada");
    let d = call_at(
        &client,
        &graphql,
        &ada,
        "mutation { createDiscussion(input: {title: \"Followed\"}) { id } }",
        json!({}),
    )
    .await["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let follow = "mutation($d: ID!) { followDiscussion(discussionId: $d, follow: true) { id } }";
    stream::iter(0..FOLLOWERS)
        .for_each_concurrent(16, |i| {
            let (client, graphql, d) = (&client, &graphql, &d);
            async move {
                let follower = token(&format!("f{i:04}"), &format!("F{i}"));
                call_at(client, graphql, &follower, follow, json!({ "d": d })).await;
            }
        })
        .await;
    let post = "mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug } }";
    for i in 0..COMMENTS {
        call_at(
            &client,
            &graphql,
            &ada,
            post,
            json!({ "d": d, "t": format!("news {i}") }),
        )
        .await;
    }
    let db = mongodb::Client::with_uri_str(server_uri())
        .await
        .expect("a client")
        .database(&database);
    let notifications = db.collection::<mongodb::bson::Document>("notifications");
    // Killed while it fans out: once the first notifications are stored.
    while notifications
        .count_documents(doc! {})
        .await
        .expect("a count")
        == 0
    {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    process.signal(Signal::SIGKILL);
    drop(process);
    let before = notifications
        .count_documents(doc! {})
        .await
        .expect("a count");
    let wanted = (FOLLOWERS * COMMENTS) as u64;
    assert!(before < wanted, "the kill came after the fan-out");
    let restarted = Process::serve(&env).await;
    let mut stored = 0;
    for _ in 0..600 {
        stored = notifications
            .count_documents(doc! {})
            .await
            .expect("a count");
        if stored >= wanted {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(stored, wanted, "{before} were stored before the kill");
    // Nothing more comes, and each follower has one notification of each comment.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        notifications.count_documents(doc! {}).await.unwrap(),
        wanted
    );
    for i in [0, 999, 1_999] {
        let of = doc! { "recipient": format!("f{i:04}"), "kind": "followed" };
        assert_eq!(
            notifications.count_documents(of).await.unwrap(),
            COMMENTS as u64
        );
    }
    assert_eq!(
        notifications
            .count_documents(doc! { "recipient": "ada" })
            .await
            .unwrap(),
        0,
        "not of her own comments"
    );
    let events = db.collection::<mongodb::bson::Document>("events");
    let due = events
        .count_documents(doc! { "notify": { "$exists": true } })
        .await
        .unwrap();
    assert_eq!(due, 0, "every event's fan-out ended");
    drop(restarted);
}
