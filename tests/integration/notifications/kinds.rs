//! Who is told of what, on every layout: each kind with its actor, discussion, comment and
//! time; one notification per person and comment; nobody told of their own action; held
//! comments telling nobody until approved; and notices outliving their comment.

use std::time::Duration;

use chrono::Utc;
use serde_json::{json, Value};
use threadql::domain::Layout;

use super::{
    all_notes, approve_as, check_notes, delete_as, discussion_by, follow_as, gists_of, moderate_as,
    note_about, notify_server, post_as, reject_as, settled,
};
use crate::support::{layout_name, moderator_token, token};

/// A reply, follows, a held reply approved and one rejected: every kind reaches whom it
/// should, with who acted, where, about what and when.
async fn every_kind_reaches_its_recipient_case(layout: Layout) {
    let label = format!("notify_kinds_{}", layout_name(layout));
    let (server, db) = notify_server(&label, layout).await;
    let (ada, bob, cy) = (token("ada", "Ada"), token("bob", "Bob"), token("cy", "Cy"));
    let m = moderator_token("mod", "Mo");
    let d = discussion_by(&server, &ada).await;
    assert_eq!(follow_as(&server, &cy, &d, true).await, true);
    let from = Utc::now();
    let (c1, _) = post_as(&server, &ada, &d, None, "first").await;
    let (r1, status) = post_as(&server, &bob, &d, Some(&c1), "a reply").await;
    assert_eq!(status, "APPROVED");
    moderate_as(&server, &m, &d, "PRE").await;
    let (r2, status) = post_as(&server, &bob, &d, Some(&c1), "held, then approved").await;
    assert_eq!(status, "PENDING");
    approve_as(&server, &m, &d, &r2).await;
    let (r3, status) = post_as(&server, &bob, &d, Some(&c1), "held, then rejected").await;
    assert_eq!(status, "PENDING");
    reject_as(&server, &m, &d, &r3, "off topic").await;
    settled(&db).await;
    let to = Utc::now();

    let ada_notes = all_notes(&server, &ada).await;
    check_notes(&ada_notes, &d, from, to);
    assert_eq!(
        gists_of(&server, &ada).await,
        vec![json!(["REPLY", "bob", r2]), json!(["REPLY", "bob", r1])],
        "the approved reply tells the parent's author, naming the replier"
    );
    assert_eq!(note_about(&ada_notes, "REPLY", &r1)["actor"]["name"], "Bob");

    let bob_notes = all_notes(&server, &bob).await;
    check_notes(&bob_notes, &d, from, to);
    assert_eq!(
        gists_of(&server, &bob).await,
        vec![
            json!(["MODERATION", "mod", Value::Null]),
            json!(["MODERATION", "mod", r2])
        ],
        "a rejected held comment is shown to nobody but moderators"
    );
    assert_eq!(bob_notes[0]["approved"], false);
    assert_eq!(bob_notes[0]["reason"], "off topic");
    assert_eq!(bob_notes[0]["actor"]["name"], "Mo");
    assert_eq!(bob_notes[1]["approved"], true);
    assert_eq!(bob_notes[1]["reason"], Value::Null);

    let cy_notes = all_notes(&server, &cy).await;
    check_notes(&cy_notes, &d, from, to);
    assert_eq!(
        gists_of(&server, &cy).await,
        vec![
            json!(["FOLLOWED", "bob", r2]),
            json!(["FOLLOWED", "bob", r1]),
            json!(["FOLLOWED", "ada", c1])
        ],
        "a follower hears of public comments only"
    );
    assert!(
        all_notes(&server, &m).await.is_empty(),
        "nobody told the moderator"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_reaches_its_recipient_per_comment() {
    every_kind_reaches_its_recipient_case(Layout::PerComment).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_reaches_its_recipient_embedded() {
    every_kind_reaches_its_recipient_case(Layout::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_reaches_its_recipient_bucketed() {
    every_kind_reaches_its_recipient_case(Layout::Bucketed).await;
}

/// A follower who wrote the parent hears of a reply once (as a reply); nobody hears of their
/// own post, reply or moderation.
async fn nobody_is_told_twice_or_of_themselves_case(layout: Layout) {
    let label = format!("notify_once_{}", layout_name(layout));
    let (server, db) = notify_server(&label, layout).await;
    let (ada, bob) = (token("ada", "Ada"), token("bob", "Bob"));
    let m = moderator_token("mod", "Mo");
    let d = discussion_by(&server, &ada).await;
    for who in [&ada, &bob, &m] {
        assert_eq!(follow_as(&server, who, &d, true).await, true);
    }
    let (c1, _) = post_as(&server, &ada, &d, None, "ada's comment").await;
    let (r1, _) = post_as(&server, &bob, &d, Some(&c1), "bob replies to ada").await;
    let (r2, _) = post_as(&server, &ada, &d, Some(&c1), "ada replies to herself").await;
    let (r3, _) = post_as(&server, &bob, &d, Some(&r1), "bob replies to himself").await;
    let (mc, status) = post_as(&server, &m, &d, None, "the moderator's own").await;
    assert_eq!(status, "APPROVED");
    reject_as(&server, &m, &d, &mc, "second thoughts").await;
    approve_as(&server, &m, &d, &mc).await;
    settled(&db).await;
    assert_eq!(
        gists_of(&server, &ada).await,
        vec![
            json!(["FOLLOWED", "mod", mc]),
            json!(["FOLLOWED", "bob", r3]),
            json!(["REPLY", "bob", r1])
        ],
        "one REPLY for bob's reply to the follower who wrote its parent"
    );
    assert_eq!(
        gists_of(&server, &bob).await,
        vec![
            json!(["FOLLOWED", "mod", mc]),
            json!(["FOLLOWED", "ada", r2]),
            json!(["FOLLOWED", "ada", c1])
        ],
        "bob hears nothing of his own replies"
    );
    assert_eq!(
        gists_of(&server, &m).await,
        vec![
            json!(["FOLLOWED", "bob", r3]),
            json!(["FOLLOWED", "ada", r2]),
            json!(["FOLLOWED", "bob", r1]),
            json!(["FOLLOWED", "ada", c1])
        ],
        "the moderator hears nothing of their own comment or its moderation"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_is_told_twice_or_of_themselves_per_comment() {
    nobody_is_told_twice_or_of_themselves_case(Layout::PerComment).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_is_told_twice_or_of_themselves_embedded() {
    nobody_is_told_twice_or_of_themselves_case(Layout::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_is_told_twice_or_of_themselves_bucketed() {
    nobody_is_told_twice_or_of_themselves_case(Layout::Bucketed).await;
}

/// A held reply and a held comment tell neither the parent's author nor the followers nor
/// the author while they wait; approving the reply tells all three, the other still waits.
async fn held_comments_tell_nobody_until_approved_case(layout: Layout) {
    let label = format!("notify_held_{}", layout_name(layout));
    let (server, db) = notify_server(&label, layout).await;
    let (ada, bob, cy) = (token("ada", "Ada"), token("bob", "Bob"), token("cy", "Cy"));
    let m = moderator_token("mod", "Mo");
    let d = discussion_by(&server, &ada).await;
    let (c1, _) = post_as(&server, &ada, &d, None, "public").await;
    // Followers are read when the fan-out runs: let c1's run before cy follows.
    settled(&db).await;
    assert_eq!(follow_as(&server, &cy, &d, true).await, true);
    moderate_as(&server, &m, &d, "PRE").await;
    let (held_reply, status) = post_as(&server, &bob, &d, Some(&c1), "a held reply").await;
    assert_eq!(status, "PENDING");
    let (held_top, status) = post_as(&server, &bob, &d, None, "a held comment").await;
    assert_eq!(status, "PENDING");
    settled(&db).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    for who in [&ada, &bob, &cy] {
        assert_eq!(gists_of(&server, who).await, Vec::<Value>::new());
    }
    approve_as(&server, &m, &d, &held_reply).await;
    settled(&db).await;
    assert_eq!(
        gists_of(&server, &ada).await,
        vec![json!(["REPLY", "bob", held_reply])]
    );
    assert_eq!(
        gists_of(&server, &cy).await,
        vec![json!(["FOLLOWED", "bob", held_reply])]
    );
    assert_eq!(
        gists_of(&server, &bob).await,
        vec![json!(["MODERATION", "mod", held_reply])]
    );
    let still: Vec<Value> = all_notes(&server, &cy).await;
    assert!(
        still
            .iter()
            .all(|n| n["comment"]["slug"] != held_top.as_str()),
        "the comment still held tells nobody: {still:#?}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_comments_tell_nobody_until_approved_per_comment() {
    held_comments_tell_nobody_until_approved_case(Layout::PerComment).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_comments_tell_nobody_until_approved_embedded() {
    held_comments_tell_nobody_until_approved_case(Layout::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_comments_tell_nobody_until_approved_bucketed() {
    held_comments_tell_nobody_until_approved_case(Layout::Bucketed).await;
}

/// Notices of a reply its author deleted and of one a moderator rejected stay, without the
/// comment for the people they told; a moderator who follows still sees both comments; the
/// rejected one approved again shows again and tells only its author.
async fn a_notice_outlives_its_comment_case(layout: Layout) {
    let label = format!("notify_gone_{}", layout_name(layout));
    let (server, db) = notify_server(&label, layout).await;
    let (ada, bob, cy) = (token("ada", "Ada"), token("bob", "Bob"), token("cy", "Cy"));
    let m = moderator_token("mod", "Mo");
    let d = discussion_by(&server, &ada).await;
    let (c1, _) = post_as(&server, &ada, &d, None, "public").await;
    settled(&db).await;
    for who in [&cy, &m] {
        assert_eq!(follow_as(&server, who, &d, true).await, true);
    }
    let (deleted, _) = post_as(&server, &bob, &d, Some(&c1), "to be deleted").await;
    let (rejected, _) = post_as(&server, &bob, &d, Some(&c1), "to be rejected").await;
    settled(&db).await;
    let shown = vec![
        json!(["REPLY", "bob", rejected]),
        json!(["REPLY", "bob", deleted]),
    ];
    assert_eq!(gists_of(&server, &ada).await, shown);
    delete_as(&server, &bob, &d, &deleted).await;
    reject_as(&server, &m, &d, &rejected, "spam").await;
    settled(&db).await;
    assert_eq!(
        gists_of(&server, &ada).await,
        vec![
            json!(["REPLY", "bob", Value::Null]),
            json!(["REPLY", "bob", Value::Null])
        ]
    );
    assert_eq!(
        gists_of(&server, &cy).await,
        vec![
            json!(["FOLLOWED", "bob", Value::Null]),
            json!(["FOLLOWED", "bob", Value::Null])
        ]
    );
    assert_eq!(
        gists_of(&server, &m).await,
        vec![
            json!(["FOLLOWED", "bob", rejected]),
            json!(["FOLLOWED", "bob", deleted])
        ],
        "moderators still see what the notices are about"
    );
    let bob_notes = all_notes(&server, &bob).await;
    assert_eq!(bob_notes.len(), 1, "{bob_notes:#?}");
    assert_eq!(bob_notes[0]["kind"], "MODERATION");
    assert_eq!(bob_notes[0]["approved"], false);
    assert_eq!(bob_notes[0]["reason"], "spam");

    // Approving the rejected reply restores it in place: its notices show it again, its
    // author hears of it, and nobody hears of it as new.
    approve_as(&server, &m, &d, &rejected).await;
    settled(&db).await;
    assert_eq!(
        gists_of(&server, &ada).await,
        vec![
            json!(["REPLY", "bob", rejected]),
            json!(["REPLY", "bob", Value::Null])
        ]
    );
    assert_eq!(gists_of(&server, &cy).await.len(), 2, "nothing new");
    let bob_notes = all_notes(&server, &bob).await;
    assert_eq!(bob_notes.len(), 2, "{bob_notes:#?}");
    assert_eq!(bob_notes[0]["kind"], "MODERATION");
    assert_eq!(bob_notes[0]["approved"], true);
    assert_eq!(bob_notes[0]["actor"]["id"], "mod");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_outlives_its_comment_per_comment() {
    a_notice_outlives_its_comment_case(Layout::PerComment).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_outlives_its_comment_embedded() {
    a_notice_outlives_its_comment_case(Layout::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_outlives_its_comment_bucketed() {
    a_notice_outlives_its_comment_case(Layout::Bucketed).await;
}
