//! Notifications over real sockets: every kind on every layout, who is (not) told (`kinds`),
//! the inbox's paging, marking and count (`inbox`), the live subscription (`live`), follows
//! (`follows`), settings (`settings`), the fan-out through kill -9 (`durable`) and across two
//! replicas, with SSE (`replicas`), and e-mail through a real SMTP server (`email`).

mod durable;
mod email;
mod follows;
mod inbox;
mod kinds;
mod live;
mod replicas;
mod settings;

use std::time::Duration;

use chrono::{DateTime, Utc};
use mongodb::bson::{doc, Document};
use serde_json::{json, Value};
use threadql::config::LayoutArg;
use threadql::domain::Layout;

use crate::support::{graphql_data, post_graphql, server_config, server_uri, token, Running};

/// A notification's fields as these tests read them.
pub(crate) const NOTE: &str =
    "id kind at read reason approved actor { id name } discussion { id } comment { slug }";

/// Runs `query` as `token`; its data.
pub(crate) async fn as_user(server: &Running, token: &str, query: &str, vars: Value) -> Value {
    graphql_data(&reqwest::Client::new(), server, Some(token), query, vars).await
}

/// Runs `query` as `token` (anonymous without one); the whole response, errors included.
pub(crate) async fn attempt(
    server: &Running,
    token: Option<&str>,
    query: &str,
    vars: Value,
) -> Value {
    post_graphql(&reqwest::Client::new(), server, token, query, vars)
        .await
        .1
}

/// A server whose new discussions are in `layout`, with the name of its database.
pub(crate) async fn notify_server(label: &str, layout: Layout) -> (Running, String) {
    let mut config = server_config(label);
    config.default_layout = match layout {
        Layout::PerComment => LayoutArg::PerComment,
        Layout::Embedded => LayoutArg::Embedded,
        Layout::Bucketed => LayoutArg::Bucketed,
    };
    let database = config.database.clone();
    (Running::start(config).await, database)
}

/// Follows (or stops following) discussion `d` as `token`; `viewerFollows` after it.
pub(crate) async fn follow_as(server: &Running, token: &str, d: &str, on: bool) -> Value {
    let follow = "mutation($d: ID!, $f: Boolean!) { followDiscussion(discussionId: $d, follow: $f) { id viewerFollows } }";
    let done = as_user(server, token, follow, json!({ "d": d, "f": on })).await;
    assert_eq!(done["followDiscussion"]["id"], d, "{done:#}");
    done["followDiscussion"]["viewerFollows"].clone()
}

/// Waits until the fan-out has stored the notifications of every event committed so far in
/// `database` (no event is left with its fan-out due), so what is not there now never comes.
pub(crate) async fn settled(database: &str) {
    let events = mongodb::Client::with_uri_str(server_uri())
        .await
        .expect("connect to the test database")
        .database(database)
        .collection::<Document>("events");
    for _ in 0..600 {
        let due = events
            .count_documents(doc! { "notify": { "$exists": true } })
            .await
            .expect("count the events due");
        if due == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the fan-out never caught up");
}

/// Every notification in `token`'s inbox now (with [`NOTE`]'s fields), newest first, read
/// page by page.
pub(crate) async fn all_notes(server: &Running, token: &str) -> Vec<Value> {
    let query = format!("query($a: String) {{ viewer {{ notifications(first: 100, after: $a) {{ nodes {{ {NOTE} }} pageInfo {{ hasNextPage endCursor }} }} }} }}");
    let mut notes = Vec::new();
    let mut after = Value::Null;
    loop {
        let page = as_user(server, token, &query, json!({ "a": after })).await["viewer"]
            ["notifications"]
            .clone();
        notes.extend(page["nodes"].as_array().unwrap().iter().cloned());
        if page["pageInfo"]["hasNextPage"] != true {
            return notes;
        }
        after = page["pageInfo"]["endCursor"].clone();
    }
}

/// `token`'s unread count.
pub(crate) async fn unread_of(server: &Running, token: &str) -> u64 {
    as_user(
        server,
        token,
        "{ viewer { unreadNotificationCount } }",
        json!({}),
    )
    .await["viewer"]["unreadNotificationCount"]
        .as_u64()
        .unwrap()
}

/// Creates a discussion as `token` (in the server's default layout); its id.
pub(crate) async fn discussion_by(server: &Running, token: &str) -> String {
    as_user(
        server,
        token,
        "mutation { createDiscussion(input: {title: \"N\"}) { id } }",
        json!({}),
    )
    .await["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Posts a comment as `token` (a reply to `parent` when given); its slug and status.
pub(crate) async fn post_as(
    server: &Running,
    token: &str,
    d: &str,
    parent: Option<&str>,
    text: &str,
) -> (String, String) {
    let post = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug status } }";
    let posted = as_user(
        server,
        token,
        post,
        json!({ "d": d, "p": parent, "t": text }),
    )
    .await["postComment"]
        .clone();
    (
        posted["slug"].as_str().unwrap().to_owned(),
        posted["status"].as_str().unwrap().to_owned(),
    )
}

/// Sets discussion `d`'s moderation `mode` (`PRE`, `POST`) as moderator `m`.
pub(crate) async fn moderate_as(server: &Running, m: &str, d: &str, mode: &str) {
    let set =
        "mutation($d: ID!, $m: ModerationMode!) { setModeration(id: $d, mode: $m) { moderation } }";
    let done = as_user(server, m, set, json!({ "d": d, "m": mode })).await;
    assert_eq!(done["setModeration"]["moderation"], mode);
}

/// Approves comment `slug` of `d` as moderator `m`.
pub(crate) async fn approve_as(server: &Running, m: &str, d: &str, slug: &str) {
    let approve =
        "mutation($d: ID!, $s: String!) { approveComment(discussionId: $d, slug: $s) { slug } }";
    as_user(server, m, approve, json!({ "d": d, "s": slug })).await;
}

/// Rejects comment `slug` of `d` as moderator `m`, for `reason`.
pub(crate) async fn reject_as(server: &Running, m: &str, d: &str, slug: &str, reason: &str) {
    let reject = "mutation($d: ID!, $s: String!, $r: String) { rejectComment(discussionId: $d, slug: $s, reason: $r) { slug } }";
    as_user(server, m, reject, json!({ "d": d, "s": slug, "r": reason })).await;
}

/// Deletes comment `slug` of `d` as `token`.
pub(crate) async fn delete_as(server: &Running, token: &str, d: &str, slug: &str) {
    let delete =
        "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug } }";
    as_user(server, token, delete, json!({ "d": d, "s": slug })).await;
}

/// A notification in brief, to compare whole inboxes: `[kind, actor id, comment slug]` (the
/// slug null when the comment is not shown).
pub(crate) fn gist(note: &Value) -> Value {
    json!([note["kind"], note["actor"]["id"], note["comment"]["slug"]])
}

/// Every notification in `token`'s inbox now, in brief ([`gist`]), newest first.
pub(crate) async fn gists_of(server: &Running, token: &str) -> Vec<Value> {
    all_notes(server, token).await.iter().map(gist).collect()
}

/// The one notification of `notes` of `kind` about comment `slug` (failing unless there is
/// exactly one).
pub(crate) fn note_about<'a>(notes: &'a [Value], kind: &str, slug: &str) -> &'a Value {
    let found: Vec<&Value> = notes
        .iter()
        .filter(|n| n["kind"] == kind && slug_of(n) == Some(slug))
        .collect();
    assert_eq!(found.len(), 1, "one {kind} about {slug} in {notes:#?}");
    found[0]
}

/// The slug of the comment `note` is about as shown (none when it is hidden).
fn slug_of(note: &Value) -> Option<&str> {
    note["comment"]["slug"].as_str()
}

/// Checks what every one of `notes` says besides its kind: discussion `d`, unread, committed
/// between `from` and `to`, a reason and `approved` only on a MODERATION notice.
pub(crate) fn check_notes(notes: &[Value], d: &str, from: DateTime<Utc>, to: DateTime<Utc>) {
    for note in notes {
        assert_eq!(note["discussion"]["id"], d, "{note:#}");
        assert_eq!(note["read"], false, "{note:#}");
        let at = DateTime::parse_from_rfc3339(note["at"].as_str().unwrap())
            .unwrap()
            .with_timezone(&Utc);
        assert!(
            from <= at && at <= to,
            "{at} not in [{from}, {to}]: {note:#}"
        );
        assert!(note["actor"]["name"].is_string(), "{note:#}");
        if note["kind"] != "MODERATION" {
            assert_eq!(note["approved"], Value::Null, "{note:#}");
            assert_eq!(note["reason"], Value::Null, "{note:#}");
        }
    }
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
