//! Follows: `followDiscussion` turns `viewerFollows` on and off, `viewer.following` lists the
//! discussions followed latest first in pages with their count, and ids are checked.

use serde_json::{json, Value};
use threadql::domain::Layout;

use super::{as_user, attempt, discussion_by, follow_as, notify_server};
use crate::support::{error_code, token, Running};

const FOLLOW: &str = "mutation($d: ID!, $f: Boolean!) { followDiscussion(discussionId: $d, follow: $f) { id viewerFollows } }";

/// `viewerFollows` of discussion `d` as `token` (anonymous without one).
async fn follows_now(server: &Running, token: Option<&str>, d: &str) -> Value {
    let query = "query($d: ID!) { discussion(id: $d) { viewerFollows } }";
    let read = attempt(server, token, query, json!({ "d": d })).await;
    assert!(read["errors"].is_null(), "{read:#}");
    read["data"]["discussion"]["viewerFollows"].clone()
}

/// One page of `token`'s follows: the ids, `hasNextPage`, `endCursor` and `totalCount`.
async fn following_page(
    server: &Running,
    token: &str,
    first: i64,
    after: &Value,
) -> (Vec<String>, bool, Value, u64) {
    let query = "query($f: Int, $a: String) { viewer { following(first: $f, after: $a) { nodes { id viewerFollows } edges { cursor node { id } } pageInfo { hasNextPage endCursor } totalCount } } }";
    let page = as_user(server, token, query, json!({ "f": first, "a": after })).await["viewer"]
        ["following"]
        .clone();
    let nodes = page["nodes"].as_array().unwrap();
    assert!(nodes.iter().all(|n| n["viewerFollows"] == true), "{page:#}");
    let edges = page["edges"].as_array().unwrap();
    let edge_ids: Vec<&Value> = edges.iter().map(|e| &e["node"]["id"]).collect();
    let ids: Vec<&Value> = nodes.iter().map(|n| &n["id"]).collect();
    assert_eq!(edge_ids, ids);
    if let Some(last) = edges.last() {
        assert_eq!(page["pageInfo"]["endCursor"], last["cursor"]);
    }
    (
        nodes
            .iter()
            .map(|n| n["id"].as_str().unwrap().to_owned())
            .collect(),
        page["pageInfo"]["hasNextPage"] == true,
        page["pageInfo"]["endCursor"].clone(),
        page["totalCount"].as_u64().unwrap(),
    )
}

/// Every discussion `token` follows, in pages of two; checks each page's count.
async fn all_followed(server: &Running, token: &str, total: u64) -> Vec<String> {
    let mut ids = Vec::new();
    let mut after = Value::Null;
    loop {
        let (page, more, end, count) = following_page(server, token, 2, &after).await;
        assert_eq!(count, total);
        ids.extend(page);
        if !more {
            return ids;
        }
        after = end;
    }
}

/// Following and unfollowing turn `viewerFollows` on and off (twice the same changes
/// nothing); it is false for someone else and null without a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn following_a_discussion_turns_viewer_follows_on_and_off() {
    let (server, _) = notify_server("notify_follow", Layout::PerComment).await;
    let (ada, bob) = (token("ada", "Ada"), token("bob", "Bob"));
    let d = discussion_by(&server, &ada).await;
    assert_eq!(follows_now(&server, Some(&ada), &d).await, false);
    for _ in 0..2 {
        assert_eq!(follow_as(&server, &ada, &d, true).await, true);
        assert_eq!(follows_now(&server, Some(&ada), &d).await, true);
    }
    assert_eq!(follows_now(&server, Some(&bob), &d).await, false);
    assert_eq!(follows_now(&server, None, &d).await, Value::Null);
    for _ in 0..2 {
        assert_eq!(follow_as(&server, &ada, &d, false).await, false);
        assert_eq!(follows_now(&server, Some(&ada), &d).await, false);
    }
    server.shutdown().await;
}

/// `viewer.following` lists what the viewer follows, latest followed first, in pages through
/// `endCursor` with the total; unfollowing takes one out, following again puts it first,
/// following one already followed moves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_discussions_followed_are_listed_latest_first_in_pages() {
    let (server, _) = notify_server("notify_following", Layout::PerComment).await;
    let (ada, bob) = (token("ada", "Ada"), token("bob", "Bob"));
    let mut ds = Vec::new();
    for _ in 0..5 {
        let d = discussion_by(&server, &bob).await;
        follow_as(&server, &ada, &d, true).await;
        ds.push(d);
    }
    let latest_first: Vec<String> = ds.iter().rev().cloned().collect();
    assert_eq!(all_followed(&server, &ada, 5).await, latest_first);
    let (first, more, _, total) = following_page(&server, &ada, 5, &Value::Null).await;
    assert_eq!((first, more, total), (latest_first.clone(), false, 5));

    follow_as(&server, &ada, &ds[2], false).await;
    follow_as(&server, &ada, &ds[3], true).await;
    assert_eq!(
        all_followed(&server, &ada, 4).await,
        [4, 3, 1, 0].map(|i| ds[i].clone())
    );
    follow_as(&server, &ada, &ds[2], true).await;
    assert_eq!(
        all_followed(&server, &ada, 5).await,
        [2, 4, 3, 1, 0].map(|i| ds[i].clone())
    );
    assert_eq!(all_followed(&server, &bob, 0).await, Vec::<String>::new());
    server.shutdown().await;
}

/// An unknown discussion is NOT_FOUND, an id that is none BAD_USER_INPUT, and following
/// without a token UNAUTHENTICATED; none of them is listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn following_refuses_unknown_and_malformed_discussions() {
    let (server, _) = notify_server("notify_follow_ids", Layout::PerComment).await;
    let ada = token("ada", "Ada");
    let d = discussion_by(&server, &ada).await;
    for (id, code) in [
        ("000000000000000000000000", "NOT_FOUND"),
        ("not a discussion", "BAD_USER_INPUT"),
        ("", "BAD_USER_INPUT"),
    ] {
        let refused = attempt(&server, Some(&ada), FOLLOW, json!({ "d": id, "f": true })).await;
        assert_eq!(error_code(&refused), code, "{id:?}: {refused:#}");
    }
    let anonymous = attempt(&server, None, FOLLOW, json!({ "d": d, "f": true })).await;
    assert_eq!(error_code(&anonymous), "UNAUTHENTICATED", "{anonymous:#}");
    assert_eq!(all_followed(&server, &ada, 0).await, Vec::<String>::new());
    let refused = attempt(
        &server,
        Some(&ada),
        "{ viewer { following(first: 0) { totalCount } } }",
        json!({}),
    )
    .await;
    assert_eq!(error_code(&refused), "BAD_USER_INPUT", "{refused:#}");
    server.shutdown().await;
}
