//! Embedded only: the size counter follows edits and deletes, and the size cap refuses edits.

use mongodb::bson::{Bson, Document};

use crate::embedded::raw_discussion;

use super::*;

// ---------------------------------------------------------------------------------------------
// Embedded only: the size counter and the size cap

fn replies_of(node: &Document) -> &[Bson] {
    match node.get("replies") {
        Some(Bson::Array(items)) => items.as_slice(),
        _ => &[],
    }
}

/// The comment element with a slug, anywhere in the document.
fn element<'a>(node: &'a Document, slug: &str) -> Option<&'a Document> {
    replies_of(node).iter().find_map(|item| {
        let c = item.as_document()?;
        if c.get_str("slug").ok() == Some(slug) {
            Some(c)
        } else {
            element(c, slug)
        }
    })
}

fn bson_len(document: &Document) -> i64 {
    mongodb::bson::to_vec(document).unwrap().len() as i64
}

/// The size of a comment element, nested replies included.
fn element_len(discussion: &Document, slug: &str) -> i64 {
    bson_len(element(discussion, slug).unwrap_or_else(|| panic!("no element {slug}")))
}

/// The sum of every comment element's own size (its `replies` counted empty).
fn own_sizes(node: &Document) -> i64 {
    replies_of(node)
        .iter()
        .map(|item| {
            let c = item.as_document().expect("a comment element");
            let mut own = c.clone();
            own.insert("replies", Bson::Array(Vec::new()));
            bson_len(&own) + own_sizes(c)
        })
        .sum()
}

fn counted_bytes(discussion: &Document) -> i64 {
    match discussion.get("embedded_bytes") {
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Int32(n)) => i64::from(*n),
        other => panic!("embedded_bytes is {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_size_counter_follows_edits_and_deletes() {
    let app = TestApp::new("lc_embedded_bytes", Layout::Embedded).await;
    let api = Calls::new(&app);
    let d = app.discussion("bytes").await;
    let t0 = api.post(Who::Ada, &d, None, "thread zero").await;
    let r = api.post(Who::Ada, &d, Some(&t0), "a reply").await;
    let leaf = api.post(Who::Ada, &d, Some(&r), "a leaf").await;
    let t1 = api.post(Who::Ada, &d, None, "thread one").await;
    let other = api.post(Who::Grace, &d, Some(&t0), "Grace's leaf").await;

    // Edits and deletes add and remove no element, so what the counter holds besides the
    // elements' own sizes stays the same.
    let start = raw_discussion(&app, &d).await;
    let besides = counted_bytes(&start) - own_sizes(&start);

    enum Op {
        Edit(String),
        Delete,
    }
    let steps = [
        (
            "a leaf grows",
            Who::Ada,
            Op::Edit("a leaf that grew ".repeat(40).trim_end().to_owned()),
            &leaf,
        ),
        (
            "the leaf shrinks",
            Who::Ada,
            Op::Edit("s".to_owned()),
            &leaf,
        ),
        (
            "a moderator edits the leaf",
            Who::Moderator,
            Op::Edit("moderated: ünïcödé ✓".to_owned()),
            &leaf,
        ),
        (
            "another leaf grows",
            Who::Grace,
            Op::Edit("Grace's leaf, longer now".to_owned()),
            &other,
        ),
        (
            "a comment with replies grows",
            Who::Ada,
            Op::Edit(
                "thread zero, with much more to say "
                    .repeat(10)
                    .trim_end()
                    .to_owned(),
            ),
            &t0,
        ),
        (
            "a comment with replies shrinks",
            Who::Moderator,
            Op::Edit("t0".to_owned()),
            &t0,
        ),
        ("the leaf is deleted", Who::Ada, Op::Delete, &leaf),
        (
            "the leaf is deleted twice",
            Who::Moderator,
            Op::Delete,
            &leaf,
        ),
        (
            "another leaf is deleted",
            Who::Moderator,
            Op::Delete,
            &other,
        ),
        (
            "a comment with replies is deleted",
            Who::Ada,
            Op::Delete,
            &r,
        ),
        ("a thread is deleted", Who::Ada, Op::Delete, &t1),
    ];
    for (what, who, op, slug) in steps {
        let before = raw_discussion(&app, &d).await;
        match op {
            Op::Edit(text) => {
                api.edit_ok(who, &d, slug, &text).await;
            }
            Op::Delete => {
                api.delete_ok(who, &d, slug).await;
            }
        }
        let after = raw_discussion(&app, &d).await;
        assert_eq!(
            counted_bytes(&after) - counted_bytes(&before),
            element_len(&after, slug) - element_len(&before, slug),
            "{what}: the counter moves by the element's change"
        );
        assert_eq!(
            counted_bytes(&after) - own_sizes(&after),
            besides,
            "{what}: the counter drifted"
        );
        assert_eq!(after.get("comment_count"), start.get("comment_count"));
    }

    // Refused edits write nothing.
    let before = raw_discussion(&app, &d).await;
    assert_code(
        &api.edit(Who::Ada, &d, &t0, "   ").await,
        "BAD_USER_INPUT",
        "blank edit",
    );
    assert_code(
        &api.edit(Who::Ada, &d, &leaf, "again").await,
        "COMMENT_DELETED",
        "edit of a tombstone",
    );
    assert_code(
        &api.edit(Who::Grace, &d, &t0, "not mine").await,
        "FORBIDDEN",
        "edit by another user",
    );
    assert_eq!(raw_discussion(&app, &d).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_edits_past_the_size_cap_are_refused() {
    let mut settings = Settings::new(Layout::Embedded);
    settings.embedded_max_bytes = 16 * 1024;
    settings.promote_embedded = false;
    let app = TestApp::with("lc_embedded_cap", settings).await;
    let api = Calls::new(&app);
    let filler = "y".repeat(1000);
    let much_longer = "w".repeat(5000);

    // Fill one discussion until a post is refused.
    let full = app.discussion("full up").await;
    let mut posted = Vec::new();
    loop {
        assert!(posted.len() < 100, "the cap never refused a post");
        let response = api.post_raw(Who::Ada, &full, None, &filler).await;
        match response["data"]["postComment"]["slug"].as_str() {
            Some(slug) => posted.push(slug.to_owned()),
            None => {
                assert_code(&response, "DISCUSSION_TOO_LARGE", "the post past the cap");
                break;
            }
        }
    }
    assert!(posted.len() >= 5, "only {} posts fitted", posted.len());
    let before = raw_discussion(&app, &full).await;
    for who in [Who::Ada, Who::Moderator] {
        let response = api.edit(who, &full, &posted[0], &much_longer).await;
        assert_code(
            &response,
            "DISCUSSION_TOO_LARGE",
            &format!("{who:?}'s long edit in a full discussion"),
        );
    }
    assert_eq!(
        raw_discussion(&app, &full).await,
        before,
        "nothing was written"
    );

    // Another discussion with one post fewer has room for about one more comment: not for a
    // much longer text, but for a shorter one.
    let close = app.discussion("nearly up").await;
    let mut near = Vec::new();
    for _ in 1..posted.len() {
        near.push(api.post(Who::Ada, &close, None, &filler).await);
    }
    let before = raw_discussion(&app, &close).await;
    for who in [Who::Ada, Who::Moderator] {
        let response = api.edit(who, &close, &near[0], &much_longer).await;
        assert_code(
            &response,
            "DISCUSSION_TOO_LARGE",
            &format!("{who:?}'s long edit near the cap"),
        );
        let message = error_message(&response);
        assert!(!message.is_empty());
    }
    assert_eq!(
        raw_discussion(&app, &close).await,
        before,
        "nothing was written"
    );
    api.edit_ok(Who::Ada, &close, &near[0], "a much shorter text")
        .await;
    let after = raw_discussion(&app, &close).await;
    assert_eq!(
        counted_bytes(&after) - counted_bytes(&before),
        element_len(&after, &near[0]) - element_len(&before, &near[0])
    );
    let now = api.read(Who::Ada, &close, &near[0]).await;
    assert_eq!(now["text"], json!("a much shorter text"));
    assert_eq!(now["revisions"][0]["text"], json!(filler));
}
