//! Domain events: every workflow hands what it committed to the event sink, in order; the
//! moderation log is the view of the moderators' events. And what a locked discussion refuses,
//! on every path a post can take.

use std::sync::Arc;

use serde_json::{json, Value};
use threadql::domain::{Event, Layout};
use tokio::sync::broadcast::error::TryRecvError;

use crate::support::{error_code, stored_events, Settings, TestApp};

const CREATE: &str = "mutation($t: String!) { createDiscussion(input: {title: $t}) { id layout } }";
const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug status } }";
const EDIT: &str = "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: {discussionId: $d, slug: $s, text: $t}) { slug } }";
const DELETE: &str =
    "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug } }";
const PIN: &str = "mutation($d: ID!, $s: String!, $p: Boolean!) { pinComment(discussionId: $d, slug: $s, pinned: $p) { slug } }";
const MODE: &str =
    "mutation($d: ID!, $m: ModerationMode!) { setModeration(id: $d, mode: $m) { moderation } }";
const APPROVE: &str =
    "mutation($d: ID!, $s: String!) { approveComment(discussionId: $d, slug: $s) { slug status } }";
const REJECT: &str = "mutation($d: ID!, $s: String!, $r: String) { rejectComment(discussionId: $d, slug: $s, reason: $r) { slug } }";
const REPORT: &str =
    "mutation($d: ID!, $s: String!) { reportComment(discussionId: $d, slug: $s, reason: SPAM) }";
const LOCK: &str =
    "mutation($d: ID!, $l: Boolean!) { lockDiscussion(id: $d, locked: $l) { locked } }";
const BAN: &str = "mutation($u: ID!, $r: String) { banUser(userId: $u, reason: $r) { userId } }";
const UNBAN: &str = "mutation($u: ID!) { unbanUser(userId: $u) }";
const MOVE: &str =
    "mutation($d: ID!, $l: StorageLayout!) { migrateDiscussion(id: $d, layout: $l) { layout } }";
const LOG: &str = "{ moderationLog(first: 50) { nodes { action moderator { id } discussionId slug userId reason detail } } }";

/// Posts `text` to `d` as `token` (under `parent`); returns the comment's slug and status.
async fn post_comment_as(
    app: &TestApp,
    token: &str,
    d: &str,
    parent: Option<&str>,
    text: &str,
) -> Value {
    let vars = json!({ "d": d, "p": parent, "t": text });
    app.ok_as(Some(token), POST, vars).await["postComment"].clone()
}

/// An event as the test compares it: its kind, its actor, the discussion and comment it names,
/// and what else it says.
fn event_line(event: &Event) -> String {
    let comment = event
        .comment()
        .map(|c| format!(" {} by {}", c.slug, c.author))
        .unwrap_or_default();
    let discussion = event
        .discussion()
        .map(|d| format!(" in {d}"))
        .unwrap_or_default();
    let more = match event {
        Event::CommentPosted { parent, .. } => parent
            .as_ref()
            .map(|p| format!(" under {p}"))
            .unwrap_or_default(),
        Event::CommentHeld { reason, .. } => format!(" ({})", reason.as_deref().unwrap_or("-")),
        Event::CommentRejected { reason, .. } => {
            format!(" ({})", reason.as_ref().map_or("-", |r| r.as_str()))
        }
        Event::CommentReported { reason, .. } => format!(" ({})", reason.as_str()),
        Event::CommentPinned { pinned, .. } => format!(" pinned={pinned}"),
        Event::DiscussionLocked { locked, .. } => format!(" locked={locked}"),
        Event::ModerationChanged { mode, .. } => format!(" mode={}", mode.as_str()),
        Event::DiscussionMoved { from, to, .. } => format!(" {from}->{to}"),
        Event::UserBanned { ban, .. } => format!(" {}", ban.user),
        Event::UserUnbanned { user, .. } => format!(" {user}"),
        _ => String::new(),
    };
    format!(
        "{} by {}{}{discussion}{comment}{more}",
        event.kind().as_str(),
        event.acted().by.id,
        if event.acted().moderator {
            " (moderator)"
        } else {
            ""
        },
    )
}

/// Every event received so far, as [`event_line`] writes them.
fn received(events: &mut tokio::sync::broadcast::Receiver<Arc<Event>>) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        match events.try_recv() {
            Ok(event) => seen.push(event_line(&event)),
            Err(TryRecvError::Empty) => return seen,
            Err(other) => panic!("the event feed failed: {other}"),
        }
    }
}

/// The contract case: posting, editing, deleting, holding, approving, rejecting, reporting,
/// pinning, locking, banning and moving each hand the sink exactly their events, in order, and
/// the moderation log holds the moderators' ones.
pub(crate) async fn every_workflow_emits_its_events_in_order_case(settings: Settings) {
    let app = TestApp::with("events_in_order", settings).await;
    let (ada, bob) = (app.token("ada", "Ada"), app.token("bob", "Bob"));
    let m = app.moderator_token("mod", "Mo");
    let mut events = app.api.events();

    let created = app
        .ok_as(Some(&ada), CREATE, json!({ "t": "Events" }))
        .await;
    let d = created["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let layout = created["createDiscussion"]["layout"]
        .as_str()
        .unwrap()
        .to_owned();
    let c1 = post_comment_as(&app, &ada, &d, None, "first").await["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    let r1 = post_comment_as(&app, &bob, &d, Some(&c1), "a reply").await["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    app.ok_as(
        Some(&ada),
        EDIT,
        json!({ "d": d, "s": c1, "t": "first, edited" }),
    )
    .await;
    app.ok_as(Some(&bob), DELETE, json!({ "d": d, "s": r1 }))
        .await;
    // Deleting a tombstone again changes nothing, and says nothing.
    app.ok_as(Some(&bob), DELETE, json!({ "d": d, "s": r1 }))
        .await;
    app.ok_as(Some(&m), PIN, json!({ "d": d, "s": c1, "p": true }))
        .await;
    app.ok_as(Some(&m), MODE, json!({ "d": d, "m": "PRE" }))
        .await;
    let c2 = post_comment_as(&app, &bob, &d, None, "held, then approved").await;
    assert_eq!(c2["status"], "PENDING");
    let c2 = c2["slug"].as_str().unwrap().to_owned();
    app.ok_as(Some(&m), APPROVE, json!({ "d": d, "s": c2 }))
        .await;
    let c3 = post_comment_as(&app, &bob, &d, None, "held, then rejected").await["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    app.ok_as(
        Some(&m),
        REJECT,
        json!({ "d": d, "s": c3, "r": "off topic" }),
    )
    .await;
    app.ok_as(Some(&m), MODE, json!({ "d": d, "m": "POST" }))
        .await;
    assert_eq!(
        app.ok_as(Some(&bob), REPORT, json!({ "d": d, "s": c1 }))
            .await["reportComment"],
        true
    );
    // A repeated report changes nothing, and says nothing.
    app.ok_as(Some(&bob), REPORT, json!({ "d": d, "s": c1 }))
        .await;
    app.ok_as(Some(&m), LOCK, json!({ "d": d, "l": true }))
        .await;
    app.ok_as(Some(&m), BAN, json!({ "u": "bob", "r": "spam" }))
        .await;
    app.ok_as(Some(&m), UNBAN, json!({ "u": "bob" })).await;
    // Lifting a ban nobody has changes nothing, and says nothing.
    app.ok_as(Some(&m), UNBAN, json!({ "u": "bob" })).await;
    let to = match layout.as_str() {
        "EMBEDDED" => "BUCKETED",
        _ => "EMBEDDED",
    };
    app.ok_as(Some(&m), MOVE, json!({ "d": d, "l": to })).await;

    let (from, to) = (layout.to_lowercase(), to.to_lowercase());
    let expected = vec![
        format!("discussion.created by ada in {d}"),
        format!("comment.posted by ada in {d} {c1} by ada"),
        format!("comment.posted by bob in {d} {r1} by bob under {c1}"),
        format!("comment.edited by ada in {d} {c1} by ada"),
        format!("comment.deleted by bob in {d} {r1} by bob"),
        format!("comment.pinned by mod (moderator) in {d} {c1} by ada pinned=true"),
        format!("discussion.moderation_changed by mod (moderator) in {d} mode=pre"),
        format!("comment.held by bob in {d} {c2} by bob (-)"),
        format!("comment.approved by mod (moderator) in {d} {c2} by bob"),
        format!("comment.held by bob in {d} {c3} by bob (-)"),
        format!("comment.rejected by mod (moderator) in {d} {c3} by bob (off topic)"),
        format!("discussion.moderation_changed by mod (moderator) in {d} mode=post"),
        format!("comment.reported by bob in {d} {c1} by ada (spam)"),
        format!("discussion.locked by mod (moderator) in {d} locked=true"),
        "user.banned by mod (moderator) bob".to_owned(),
        "user.unbanned by mod (moderator) bob".to_owned(),
        format!("discussion.moved by mod (moderator) in {d} {from}->{to}"),
    ];
    assert_eq!(received(&mut events), expected);

    // Every change wrote the same events to the durable log in its own transaction, ids in
    // commit order.
    let (durable, ttl) = stored_events(&app.database).await;
    assert_eq!(ttl, Some(7 * 86_400), "kept 7 days by a TTL index");
    let written: Vec<String> = durable
        .iter()
        .map(|e| {
            let slug = e
                .get_str("slug")
                .map(|s| format!(" {s}"))
                .unwrap_or_default();
            let d = e.get_str("discussion_id").unwrap_or("-");
            format!(
                "{} by {} in {d}{slug}",
                e.get_str("type").unwrap(),
                e.get_document("actor").unwrap().get_str("id").unwrap()
            )
        })
        .collect();
    let on = |kind: &str, by: &str, slug: Option<&str>| {
        format!(
            "{kind} by {by} in {d}{}",
            slug.map(|s| format!(" {s}")).unwrap_or_default()
        )
    };
    assert_eq!(
        written,
        [
            on("discussion.created", "ada", None),
            on("comment.posted", "ada", Some(&c1)),
            on("comment.posted", "bob", Some(&r1)),
            on("comment.edited", "ada", Some(&c1)),
            on("comment.deleted", "bob", Some(&r1)),
            on("comment.pinned", "mod", Some(&c1)),
            on("discussion.moderation_changed", "mod", None),
            on("comment.held", "bob", Some(&c2)),
            on("comment.approved", "mod", Some(&c2)),
            on("comment.held", "bob", Some(&c3)),
            on("comment.rejected", "mod", Some(&c3)),
            on("discussion.moderation_changed", "mod", None),
            on("comment.reported", "bob", Some(&c1)),
            on("discussion.locked", "mod", None),
            "user.banned by mod in -".to_owned(),
            "user.unbanned by mod in -".to_owned(),
            on("discussion.moved", "mod", None),
        ]
    );
    assert_eq!(durable[7].get_str("reason").ok(), None, "held by the mode");
    assert_eq!(durable[10].get_str("reason"), Ok("off topic"));
    assert_eq!(durable[5].get_str("detail"), Ok("pinned"));
    assert_eq!(durable[14].get_str("user"), Ok("bob"));
    assert_eq!(durable[14].get_str("reason"), Ok("spam"));
    assert_eq!(
        durable[16].get_str("detail"),
        Ok(format!("{from} {to}").as_str())
    );

    // The moderation log is the moderators' events, newest first.
    let log = app.ok_as(Some(&m), LOG, json!({})).await;
    let actions: Vec<&str> = log["moderationLog"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "MOVE",
            "UNBAN",
            "BAN",
            "LOCK",
            "SET_MODERATION",
            "REJECT",
            "APPROVE",
            "SET_MODERATION",
            "PIN"
        ]
    );
}

/// The contract case: once a discussion is locked, no post is accepted, public or held, even
/// when this process kept the discussion from before the lock (an approval posts to it).
pub(crate) async fn a_locked_discussion_takes_no_held_post_case(settings: Settings) {
    let app = TestApp::with("locked_takes_no_held_post", settings).await;
    let (ada, bob) = (app.token("ada", "Ada"), app.token("bob", "Bob"));
    let m = app.moderator_token("mod", "Mo");
    let created = app
        .ok_as(Some(&ada), CREATE, json!({ "t": "Locked" }))
        .await;
    let d = created["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let top = app
        .ok_as(Some(&ada), POST, json!({ "d": d, "t": "before" }))
        .await;
    let top = top["postComment"]["slug"].as_str().unwrap().to_owned();
    app.ok_as(Some(&m), MODE, json!({ "d": d, "m": "PRE" }))
        .await;
    let held = app
        .ok_as(Some(&bob), POST, json!({ "d": d, "t": "held" }))
        .await;
    let held = held["postComment"]["slug"].as_str().unwrap().to_owned();
    app.ok_as(Some(&m), APPROVE, json!({ "d": d, "s": held }))
        .await;
    let pending = app
        .ok_as(Some(&bob), POST, json!({ "d": d, "p": top, "t": "waits" }))
        .await;
    let pending = pending["postComment"]["slug"].as_str().unwrap().to_owned();
    app.ok_as(Some(&m), LOCK, json!({ "d": d, "l": true }))
        .await;
    for (parent, what) in [
        (None, "a top-level post"),
        (Some(top.as_str()), "a reply to a public comment"),
        (Some(pending.as_str()), "a reply to a held comment"),
    ] {
        let refused = app
            .exec_as(
                Some(&bob),
                POST,
                json!({ "d": d, "p": parent, "t": "after" }),
            )
            .await;
        assert_eq!(error_code(&refused), "FORBIDDEN", "{what}: {refused:#}");
    }
    // In POST mode too, and for moderators' own posts.
    app.ok_as(Some(&m), MODE, json!({ "d": d, "m": "POST" }))
        .await;
    for token in [&bob, &m] {
        let refused = app
            .exec_as(Some(token), POST, json!({ "d": d, "t": "after" }))
            .await;
        assert_eq!(error_code(&refused), "FORBIDDEN", "{refused:#}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_feed_reaches_every_listener() {
    let app = TestApp::new("event_feed_listeners", Layout::PerComment).await;
    let (mut one, mut two) = (app.api.events(), app.api.events());
    let ada = app.token("ada", "Ada");
    app.ok_as(Some(&ada), CREATE, json!({ "t": "Two listeners" }))
        .await;
    assert_eq!(received(&mut one).len(), 1);
    assert_eq!(received(&mut two).len(), 1);
    // A refused change commits nothing, and says nothing.
    let refused = app
        .exec_as(Some(&ada), LOCK, json!({ "d": "nope", "l": true }))
        .await;
    assert_eq!(error_code(&refused), "FORBIDDEN");
    assert!(received(&mut one).is_empty());
}
