//! The event log as a pull feed: `Query.events` pages the committed events oldest first, for
//! admins only, with every bad argument refused; an admin may also moderate.

use std::time::Duration;

use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::support::{error_code, TestApp};

const CREATE: &str = "mutation($t: String!) { createDiscussion(input: {title: $t}) { id } }";
const POST: &str =
    "mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug } }";
const DELETE: &str =
    "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug } }";
const LOCK: &str =
    "mutation($d: ID!, $l: Boolean!) { lockDiscussion(id: $d, locked: $l) { locked } }";
const EVENTS: &str = r#"query($after: String, $first: Int, $types: [EventType!]) {
  events(after: $after, first: $first, types: $types) {
    pageInfo { hasNextPage endCursor }
    edges { cursor }
    nodes { id type timestamp actor { id name } byModerator discussionId slug parentSlug reason detail
      discussion { id title } comment { slug text deleted } } } }"#;

/// Every event the feed lists from the start, walked in pages of `first`, once `want` of them
/// are listed (they are listed a second after their commit).
async fn walk_feed(
    app: &TestApp,
    admin: &str,
    first: i64,
    types: Value,
    want: usize,
) -> Vec<Value> {
    for _ in 0..100 {
        let mut all = Vec::new();
        let mut after = Value::Null;
        loop {
            let vars = json!({ "after": after, "first": first, "types": types });
            let page = app.ok_as(Some(admin), EVENTS, vars).await["events"].clone();
            let nodes = page["nodes"].as_array().unwrap().clone();
            assert!(nodes.len() as i64 <= first, "{page:#}");
            let cursors: Vec<&Value> = page["edges"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| &e["cursor"])
                .collect();
            let ids: Vec<&Value> = nodes.iter().map(|n| &n["id"]).collect();
            assert_eq!(cursors, ids, "an edge's cursor is its event's id");
            all.extend(nodes);
            if page["pageInfo"]["hasNextPage"] != true {
                break;
            }
            after = page["pageInfo"]["endCursor"].clone();
        }
        if all.len() >= want {
            return all;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the feed never listed {want} events");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admins_page_through_every_committed_event_in_order() {
    let app = TestApp::new("event_feed", Layout::Bucketed).await;
    let (ada, admin) = (app.token("ada", "Ada"), app.admin_token("root", "Root"));
    let d = app.ok_as(Some(&ada), CREATE, json!({ "t": "Fed" })).await["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut slugs = Vec::new();
    for n in 0..5 {
        let posted = app
            .ok_as(
                Some(&ada),
                POST,
                json!({ "d": d, "t": format!("post {n}") }),
            )
            .await;
        slugs.push(posted["postComment"]["slug"].as_str().unwrap().to_owned());
    }
    app.ok_as(Some(&ada), DELETE, json!({ "d": d, "s": slugs[0] }))
        .await;
    // An admin moderates too.
    app.ok_as(Some(&admin), LOCK, json!({ "d": d, "l": true }))
        .await;

    let all = walk_feed(&app, &admin, 2, Value::Null, 8).await;
    let kinds: Vec<&str> = all.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "DISCUSSION_CREATED",
            "COMMENT_POSTED",
            "COMMENT_POSTED",
            "COMMENT_POSTED",
            "COMMENT_POSTED",
            "COMMENT_POSTED",
            "COMMENT_DELETED",
            "DISCUSSION_LOCKED"
        ]
    );
    let ids: Vec<&str> = all.iter().map(|e| e["id"].as_str().unwrap()).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(ids, sorted, "ids increase, none twice");
    assert!(all.iter().all(|e| e["discussionId"] == d.as_str()));
    assert_eq!(all[0]["discussion"]["title"], "Fed");
    assert_eq!(all[1]["slug"], slugs[0].as_str());
    assert_eq!(all[1]["actor"]["id"], "ada");
    assert_eq!(all[1]["byModerator"], false);
    // The comment as it is now: the first one was deleted since.
    assert_eq!(all[1]["comment"]["deleted"], true);
    assert_eq!(all[1]["comment"]["text"], Value::Null);
    assert_eq!(all[2]["comment"]["text"], "post 1");
    assert_eq!(all[7]["detail"], "locked");
    assert_eq!(all[7]["byModerator"], true);
    let at = all[7]["timestamp"].as_str().unwrap();
    assert!(chrono::DateTime::parse_from_rfc3339(at).is_ok(), "{at}");

    // Only the kinds asked for, in the same order.
    let some = walk_feed(
        &app,
        &admin,
        100,
        json!(["COMMENT_DELETED", "DISCUSSION_LOCKED"]),
        2,
    )
    .await;
    let picked: Vec<&str> = some.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(picked, [ids[6], ids[7]]);
    // After the last event, nothing more, until something happens.
    let vars = json!({ "after": ids[7], "first": 10 });
    let empty = app.ok_as(Some(&admin), EVENTS, vars).await;
    assert_eq!(empty["events"]["nodes"], json!([]));
    assert_eq!(empty["events"]["pageInfo"]["endCursor"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_is_for_admins_and_refuses_bad_arguments() {
    let app = TestApp::new("event_feed_refusals", Layout::PerComment).await;
    let (ada, moderator, admin) = (
        app.token("ada", "Ada"),
        app.moderator_token("mod", "Mo"),
        app.admin_token("root", "Root"),
    );
    let read = |token: Option<String>, vars: Value| {
        let app = &app;
        async move { error_code(&app.exec_as(token.as_deref(), EVENTS, vars).await) }
    };
    assert_eq!(read(None, json!({})).await, "UNAUTHENTICATED");
    assert_eq!(read(Some(ada), json!({})).await, "FORBIDDEN");
    assert_eq!(read(Some(moderator), json!({})).await, "FORBIDDEN");
    for bad in [
        json!({ "first": 0 }),
        json!({ "first": -1 }),
        json!({ "first": 101 }),
        json!({ "after": "" }),
        json!({ "after": "not an id" }),
        json!({ "after": "00000000000000000000000Z" }),
        json!({ "after": "0000000000000000000000000" }),
    ] {
        assert_eq!(
            read(Some(admin.clone()), bad.clone()).await,
            "BAD_USER_INPUT",
            "{bad}"
        );
    }
    assert_eq!(
        read(Some(admin.clone()), json!({ "types": ["COMMENT.POSTED"] })).await,
        "BAD_USER_INPUT"
    );
    let fine = app
        .ok_as(Some(&admin), EVENTS, json!({ "first": 100 }))
        .await;
    assert_eq!(fine["events"]["pageInfo"]["hasNextPage"], false);
}
