//! Notifications over real sockets: the inbox, follows and settings; the fan-out through kill
//! -9 (`durable.rs`); e-mail through a real SMTP server (`email.rs`).

mod durable;
mod email;

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{graphql_data, server_config, token, Running};

/// Runs `query` as `token`; its data.
async fn as_user(server: &Running, token: &str, query: &str, vars: Value) -> Value {
    graphql_data(&reqwest::Client::new(), server, Some(token), query, vars).await
}

/// Waits until `token`'s inbox holds `n` notifications; the inbox.
async fn inbox_of(server: &Running, token: &str, n: usize) -> Value {
    let query = "{ viewer { unreadNotificationCount notifications(first: 50) { nodes { id kind read actor { id } comment { slug } discussion { id } } } } }";
    for _ in 0..200 {
        let viewer = as_user(server, token, query, json!({})).await["viewer"].clone();
        if viewer["notifications"]["nodes"].as_array().unwrap().len() >= n {
            return viewer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{n} notifications never came");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_notifies_the_parents_author_and_followers_once() {
    let server = Running::start(server_config("notify_smoke")).await;
    let (ada, bob, cy) = (token("ada", "Ada"), token("bob", "Bob"), token("cy", "Cy"));
    let d = as_user(
        &server,
        &ada,
        "mutation { createDiscussion(input: {title: \"N\"}) { id } }",
        json!({}),
    )
    .await["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for who in [&ada, &cy] {
        let follow = "mutation($d: ID!) { followDiscussion(discussionId: $d, follow: true) { viewerFollows } }";
        let followed = as_user(&server, who, follow, json!({ "d": d })).await;
        assert_eq!(followed["followDiscussion"]["viewerFollows"], true);
    }
    let post = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }";
    let c1 = as_user(&server, &ada, post, json!({ "d": d, "t": "first" })).await["postComment"]
        ["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    let r1 = as_user(
        &server,
        &bob,
        post,
        json!({ "d": d, "p": c1, "t": "reply" }),
    )
    .await["postComment"]["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    let ada_inbox = inbox_of(&server, &ada, 1).await;
    let nodes = ada_inbox["notifications"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{ada_inbox:#}");
    assert_eq!(nodes[0]["kind"], "REPLY");
    assert_eq!(nodes[0]["comment"]["slug"], r1.as_str());
    assert_eq!(ada_inbox["unreadNotificationCount"], 1);
    let cy_inbox = inbox_of(&server, &cy, 2).await;
    let kinds: Vec<&Value> = cy_inbox["notifications"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| &n["kind"])
        .collect();
    assert_eq!(kinds, vec!["FOLLOWED", "FOLLOWED"], "{cy_inbox:#}");
    let marked = as_user(
        &server,
        &cy,
        "mutation { markNotificationsRead }",
        json!({}),
    )
    .await;
    assert_eq!(marked["markNotificationsRead"], 2);
    assert_eq!(
        inbox_of(&server, &cy, 2).await["unreadNotificationCount"],
        0
    );
    server.shutdown().await;
}
