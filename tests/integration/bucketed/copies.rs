//! Copies of voted comments: a ranked page of a bucketed discussion reads its comments from
//! them, so every change of a comment (edit, delete, rejection and approval, an erasure, a
//! reply, a move out and back) must show on it exactly as on the chronological list; and a
//! ranked first page costs the same commands at any size, reading no page of comments.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use mongodb::bson::{doc, Bson, Document};
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use serde_json::{json, Value};

use super::{raw_db, settings};
use crate::support::{diff, TestApp};

/// What a ranked page and the chronological list both show of a comment.
const SHOWN: &str =
    "slug text html deleted status editedAt replyCount upvotes downvotes score author { id name }";
const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: { discussionId: $d, parentSlug: $p, text: $t }) { slug } }";
const UP: &str = "mutation($d: ID!, $s: String!) { voteComment(discussionId: $d, slug: $s, value: UP) { upvotes } }";
const EDIT: &str = "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: { discussionId: $d, slug: $s, text: $t }) { text } }";
const DELETE: &str =
    "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { deleted } }";
const REJECT: &str = "mutation($d: ID!, $s: String!) { rejectComment(discussionId: $d, slug: $s, reason: \"spam\") { status } }";
const APPROVE: &str =
    "mutation($d: ID!, $s: String!) { approveComment(discussionId: $d, slug: $s) { status } }";
const MIGRATE: &str =
    "mutation($d: ID!, $l: StorageLayout!) { migrateDiscussion(id: $d, layout: $l) { layout } }";

/// A bucketed discussion (pages of 3) of `n` comments by Ada (u1) and Bob (u2) in turns.
async fn copied_discussion(app: &TestApp, n: usize) -> (String, Vec<String>) {
    let data = app
        .ok(
            "mutation { createDiscussion(input: { title: \"copies\", layout: BUCKETED }) { id } }",
            json!({}),
        )
        .await;
    let d = data["createDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let (ada, bob) = (app.token("u1", "Ada"), app.token("u2", "Bob"));
    let mut slugs = Vec::new();
    for i in 0..n {
        let token = if i % 2 == 0 { &ada } else { &bob };
        let data = app
            .ok_as(
                Some(token),
                POST,
                json!({ "d": d, "p": null, "t": format!("comment {i}") }),
            )
            .await;
        slugs.push(
            data["postComment"]["slug"]
                .as_str()
                .expect("slug")
                .to_owned(),
        );
    }
    (d, slugs)
}

/// Votes UP on `slug` as `voter`.
async fn up_vote(app: &TestApp, d: &str, slug: &str, voter: &str) {
    let token = app.token(voter, voter);
    app.ok_as(Some(&token), UP, json!({ "d": d, "s": slug }))
        .await;
}

/// The stored copies of the discussion's comments, by slug.
async fn stored_copies(app: &TestApp, d: &str) -> BTreeMap<String, Document> {
    use futures::TryStreamExt;
    let found: Vec<Document> = raw_db(app)
        .await
        .collection::<Document>("voted_copies")
        .find(doc! { "discussion_id": d })
        .await
        .expect("find copies")
        .try_collect()
        .await
        .expect("read copies");
    found
        .into_iter()
        .map(|c| (c.get_str("slug").expect("slug").to_owned(), c))
        .collect()
}

/// Checks, as `reader` (anonymous without), that the TOP order shows every voted comment (each
/// with a copy) exactly as the chronological list shows it.
async fn check_ranked_as_listed(app: &TestApp, d: &str, voted: &[&str], reader: Option<&str>) {
    let list = |order: &str| {
        format!("query($d: ID!) {{ discussion(id: $d) {{ comments(order: {order}, first: 100) {{ nodes {{ {SHOWN} }} }} }} }}")
    };
    let top = app.ok_as(reader, &list("TOP"), json!({ "d": d })).await;
    let listed = app
        .ok_as(reader, &list("CHRONOLOGICAL"), json!({ "d": d }))
        .await;
    let by_slug = |data: &Value| -> BTreeMap<String, Value> {
        data["discussion"]["comments"]["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|n| (n["slug"].as_str().expect("slug").to_owned(), n.clone()))
            .collect()
    };
    let (top, listed) = (by_slug(&top), by_slug(&listed));
    for (slug, shown) in &top {
        assert_eq!(
            Some(shown),
            listed.get(slug),
            "{slug} as ranked and as listed"
        );
    }
    let public = |slug: &str| listed[slug]["status"] == "APPROVED";
    let copies = stored_copies(app, d).await;
    for slug in voted {
        assert!(copies.contains_key(*slug), "{slug} has a copy");
        assert_eq!(
            top.contains_key(*slug),
            public(slug),
            "{slug} ranked while public"
        );
    }
    assert_eq!(top.len(), listed.keys().filter(|s| public(s)).count());
}

#[tokio::test]
async fn ranked_pages_follow_every_change_of_a_voted_comment() {
    let app = TestApp::with("copies_follow", settings(3)).await;
    let (d, slugs) = copied_discussion(&app, 12).await;
    let moderator = app.moderator_token("m1", "Mo");
    let (ada, bob) = (app.token("u1", "Ada"), app.token("u2", "Bob"));
    // Ada's comments at even places, Bob's at odd ones: every third one voted on.
    let voted: Vec<&str> = slugs.iter().step_by(3).map(String::as_str).collect();
    for slug in &voted {
        up_vote(&app, &d, slug, "v1").await;
    }
    check_ranked_as_listed(&app, &d, &voted, None).await;

    // An edit (Ada's comment 0), a delete (Ada's comment 6).
    let vars = json!({ "d": d, "s": voted[0], "t": "edited *text*" });
    app.ok_as(Some(&ada), EDIT, vars).await;
    check_ranked_as_listed(&app, &d, &voted, None).await;
    app.ok_as(Some(&ada), DELETE, json!({ "d": d, "s": voted[2] }))
        .await;
    check_ranked_as_listed(&app, &d, &voted, None).await;

    // A rejection and an approval (Bob's comment 3), seen by the public and by a moderator.
    let one = json!({ "d": d, "s": voted[1] });
    app.ok_as(Some(&moderator), REJECT, one.clone()).await;
    check_ranked_as_listed(&app, &d, &voted, None).await;
    check_ranked_as_listed(&app, &d, &voted, Some(&moderator)).await;
    app.ok_as(Some(&moderator), APPROVE, one).await;
    check_ranked_as_listed(&app, &d, &voted, None).await;

    // Replies to a voted comment count in its copy (the second one from what the process
    // remembers of the first).
    for text in ["a reply", "another"] {
        let vars = json!({ "d": d, "p": voted[3], "t": text });
        app.ok_as(Some(&bob), POST, vars).await;
    }
    check_ranked_as_listed(&app, &d, &voted, None).await;
    let copies = stored_copies(&app, &d).await;
    assert_eq!(copies[voted[3]].get_i64("reply_count"), Ok(2));

    // Bob's erasure rewrites his comments' authors (comment 3 and comment 9).
    let erased = app
        .ok_as(
            Some(&bob),
            "mutation { deleteMyAccount(confirm: \"u2\") }",
            json!({}),
        )
        .await;
    assert_eq!(erased["deleteMyAccount"], true);
    check_ranked_as_listed(&app, &d, &voted, None).await;

    // Out of the bucketed layout the copies go; an edit there; back, they are made again.
    let out = json!({ "d": d, "l": "PER_COMMENT" });
    app.ok_as(Some(&moderator), MIGRATE, out).await;
    assert!(stored_copies(&app, &d).await.is_empty(), "no copy outside");
    let vars = json!({ "d": d, "s": voted[0], "t": "edited while away" });
    app.ok_as(Some(&ada), EDIT, vars).await;
    let back = json!({ "d": d, "l": "BUCKETED" });
    app.ok_as(Some(&moderator), MIGRATE, back).await;
    check_ranked_as_listed(&app, &d, &voted, None).await;
    let copies = stored_copies(&app, &d).await;
    assert_eq!(copies.len(), voted.len(), "a copy per voted comment");
    assert_eq!(copies[voted[0]].get_str("text"), Ok("edited while away"));
    assert_eq!(copies[voted[3]].get_i64("reply_count"), Ok(2));

    // And a vote after the move writes the copy again.
    up_vote(&app, &d, voted[0], "v2").await;
    check_ranked_as_listed(&app, &d, &voted, None).await;
}

#[tokio::test]
async fn a_reply_counts_in_a_copy_another_process_made() {
    let app = TestApp::with("copies_other", settings(3)).await;
    let config = app.settings.config(&app.database);
    let built = threadql::app::App::build(&config)
        .await
        .expect("a second app");
    let other = TestApp::from_app(built, app.database.clone(), app.settings.clone());
    let (d, slugs) = copied_discussion(&app, 4).await;
    // This process posted the comment and remembers it as never voted on; the other votes.
    up_vote(&other, &d, &slugs[2], "v1").await;
    let bob = app.token("u2", "Bob");
    for text in ["a reply", "another"] {
        let vars = json!({ "d": d, "p": slugs[2], "t": text });
        app.ok_as(Some(&bob), POST, vars).await;
    }
    let copies = stored_copies(&app, &d).await;
    assert_eq!(copies[&slugs[2]].get_i64("reply_count"), Ok(2));
    check_ranked_as_listed(&app, &d, &[slugs[2].as_str()], None).await;
    check_ranked_as_listed(&other, &d, &[slugs[2].as_str()], None).await;
}

/// What a test's commands read: documents returned per collection.
#[derive(Clone, Default)]
struct Returned(Arc<Mutex<BTreeMap<String, u64>>>);

impl Returned {
    fn handler(&self) -> EventHandler<CommandEvent> {
        let sink = self.0.clone();
        EventHandler::callback(move |event: CommandEvent| {
            let CommandEvent::Succeeded(done) = event else {
                return;
            };
            let Ok(cursor) = done.reply.get_document("cursor") else {
                return;
            };
            let collection = cursor
                .get_str("ns")
                .map(|ns| ns.split_once('.').map_or(ns, |(_, c)| c).to_owned())
                .unwrap_or_default();
            let batch = ["firstBatch", "nextBatch"]
                .iter()
                .find_map(|b| cursor.get_array(b).ok())
                .map_or(0, |b| {
                    b.iter().filter(|d| matches!(d, Bson::Document(_))).count()
                });
            let mut counts = sink.lock().unwrap_or_else(|p| p.into_inner());
            *counts.entry(collection).or_default() += batch as u64;
        })
    }

    fn take(&self) -> BTreeMap<String, u64> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[tokio::test]
async fn a_bucketed_ranked_first_page_costs_the_same_at_any_size() {
    let returned = Returned::default();
    let app = TestApp::with(
        "copies_bounded",
        crate::support::Settings {
            command_events: Some(returned.handler()),
            ..settings(3)
        },
    )
    .await;
    let top = "query($d: ID!) { discussion(id: $d) { comments(order: TOP, first: 5) { nodes { slug text replyCount upvotes } } } }";
    let mut costs = Vec::new();
    for n in [15, 150] {
        let (d, slugs) = copied_discussion(&app, n).await;
        // Six comments voted on, spread over every page of the discussion.
        let voted: Vec<&String> = slugs.iter().step_by(n / 6).take(6).collect();
        for slug in &voted {
            up_vote(&app, &d, slug, "v1").await;
        }
        returned.take();
        let before = app.store().commands().snapshot();
        let data = app.ok_as(None, top, json!({ "d": d })).await;
        let spent = diff(&before, &app.store().commands().snapshot());
        let read = returned.take();
        let nodes = data["discussion"]["comments"]["nodes"]
            .as_array()
            .expect("nodes")
            .clone();
        assert_eq!(nodes.len(), 5, "{data:#}");
        assert!(nodes.iter().all(|n| n["upvotes"] == 1));
        assert_eq!(
            read.get("comment_pages"),
            None,
            "no page read at {n}: {read:?}"
        );
        let copies = read.get("voted_copies").copied().unwrap_or(0);
        assert!((5..=6).contains(&copies), "at {n}: {read:?}");
        costs.push((spent, read));
    }
    assert_eq!(
        costs[0], costs[1],
        "the same commands and documents at 15 and 150"
    );
}
