//! Subtree sizes of the per-comment layout: exact after posts and after a move into the layout,
//! and pages of a sub-discussion that end where the sizes say equal the `full_slug` order, with
//! a bounded number of queries, even when a size is wrong.

use std::collections::BTreeMap;

use futures::TryStreamExt;
use mongodb::bson::{doc, Document};
use serde_json::json;
use threadql::domain::{FullSlug, Layout, Window};
use threadql::store::{ReadScope, Storage};

use crate::support::{finds, load_discussion, node_slugs, sent, server_uri, Settings, TestApp};

const SUB: &str = "query($d: ID!, $s: String!, $f: Int, $a: String) { comment(discussionId: $d, slug: $s) { subDiscussion(first: $f, after: $a) { totalCount nodes { slug fullSlug } pageInfo { hasNextPage endCursor } } } }";

/// The discussion's comments as stored, by slug.
async fn stored(app: &TestApp, d: &str) -> BTreeMap<String, Document> {
    mongodb::Client::with_uri_str(server_uri())
        .await
        .unwrap()
        .database(&app.database)
        .collection::<Document>("comments")
        .find(doc! { "discussion_id": d })
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.get_str("slug").unwrap().to_owned(), c))
        .collect()
}

/// Every comment's `descendants` is the number of comments below it.
fn assert_sizes_exact(comments: &BTreeMap<String, Document>) {
    for (slug, c) in comments {
        let below = comments
            .keys()
            .filter(|s| s.starts_with(&format!("{slug}/")))
            .count() as i64;
        assert_eq!(c.get_i64("descendants").ok(), Some(below), "{c}");
    }
}

/// The slugs of `root`'s sub-discussion in `full_slug` order.
fn below(comments: &BTreeMap<String, Document>, root: &str) -> Vec<String> {
    let mut found: Vec<(&str, &str)> = comments
        .iter()
        .filter(|(s, _)| s.starts_with(&format!("{root}/")))
        .map(|(s, c)| (c.get_str("full_slug").unwrap(), s.as_str()))
        .collect();
    found.sort();
    found.into_iter().map(|(_, s)| s.to_owned()).collect()
}

/// Every page of the connection `field` of the comment `slug` by cursor (`first` at a time,
/// with `query`), with the `command`s each page cost.
async fn comment_pages(
    app: &TestApp,
    (query, field, command): (&str, &str, &str),
    d: &str,
    slug: &str,
    first: usize,
) -> (Vec<String>, Vec<u64>) {
    let (mut seen, mut costs) = (Vec::new(), Vec::new());
    let mut after: Option<String> = None;
    loop {
        let before = sent(app, command);
        let data = app
            .ok(query, json!({ "d": d, "s": slug, "f": first, "a": after }))
            .await;
        costs.push(sent(app, command) - before);
        let connection = &data["comment"][field];
        seen.extend(node_slugs(connection));
        if connection["pageInfo"]["hasNextPage"] != json!(true) {
            return (seen, costs);
        }
        after = connection["pageInfo"]["endCursor"]
            .as_str()
            .map(str::to_owned);
    }
}

/// Every page of `root`'s sub-discussion by cursor, with the `find`s each page cost.
async fn sub_discussion_pages(
    app: &TestApp,
    d: &str,
    root: &str,
    first: usize,
) -> (Vec<String>, Vec<u64>) {
    comment_pages(app, (SUB, "subDiscussion", "find"), d, root, first).await
}

/// A thread whose first reply holds most of it: `root` → `a` (3 replies of 110 replies each),
/// `b` (5 replies), `c` (2 replies of 130 replies each); and a thread after it.
async fn lopsided(app: &TestApp, d: &str) -> [String; 4] {
    let root = app.post(d, None, "root").await;
    let a = app.post(d, Some(&root), "a").await;
    for i in 0..3 {
        let mid = app.post(d, Some(&a), &format!("a{i}")).await;
        for j in 0..110 {
            app.post(d, Some(&mid), &format!("a{i} {j}")).await;
        }
    }
    let b = app.post(d, Some(&root), "b").await;
    for j in 0..5 {
        app.post(d, Some(&b), &format!("b {j}")).await;
    }
    let c = app.post(d, Some(&root), "c").await;
    for i in 0..2 {
        let mid = app.post(d, Some(&c), &format!("c{i}")).await;
        for j in 0..130 {
            app.post(d, Some(&mid), &format!("c{i} {j}")).await;
        }
    }
    let other = app.post(d, None, "another thread").await;
    app.post(d, Some(&other), "its reply").await;
    [root, a, b, c]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_discussion_pages_end_where_the_subtree_sizes_say() {
    let app = TestApp::new("subtree_pages", Layout::PerComment).await;
    let d = app.discussion("lopsided").await;
    let [root, a, b, _c] = lopsided(&app, &d).await;
    let comments = stored(&app, &d).await;
    assert_sizes_exact(&comments);

    for sub in [&root, &a] {
        let expected = below(&comments, sub);
        for first in [50, 7] {
            let (seen, costs) = sub_discussion_pages(&app, &d, sub, first).await;
            assert_eq!(seen, expected, "{sub} by {first}");
            // The discussion, the comment (its replies' sizes come with it), the cursor's
            // ancestors (none on a first page), at most four levels looked into, the page.
            assert!(
                costs.iter().all(|&c| (3..=8).contains(&c)),
                "{sub} by {first}: {costs:?}"
            );
        }
        // Offset windows (the store's, which the API does not offer for sub-discussions).
        let discussion = load_discussion(app.store(), &d).await;
        let full = FullSlug::from_stored(
            comments[sub.as_str()]
                .get_str("full_slug")
                .unwrap()
                .to_owned(),
        );
        let layout = app.store().layout(Layout::PerComment).unwrap();
        for limit in [50, 13] {
            for skip in (0..=expected.len() + 2).step_by(11) {
                let window = Window::Offset {
                    skip: skip as u64,
                    limit,
                };
                let mut pages = layout
                    .sub_discussions(
                        &ReadScope::new(),
                        &discussion,
                        std::slice::from_ref(&full),
                        &window,
                    )
                    .await
                    .unwrap();
                let page = pages.remove(&full).unwrap();
                let got: Vec<&str> = page.items.iter().map(|c| c.slug.as_str()).collect();
                let want: Vec<&str> = expected
                    .iter()
                    .skip(skip)
                    .take(limit)
                    .map(String::as_str)
                    .collect();
                assert_eq!(got, want, "{sub} offset {skip} by {limit}");
                assert_eq!(page.has_next, skip + limit < expected.len());
            }
        }
        let data = app.ok(SUB, json!({ "d": d, "s": sub, "f": 1 })).await;
        assert_eq!(
            data["comment"]["subDiscussion"]["totalCount"],
            json!(expected.len())
        );
    }

    // The first page of the root looks one level into `a` (334 comments for a page of 51) and
    // reads from `a` to the end of its first reply's subtree: the discussion, the comment (with
    // its replies' sizes, which also give the count), `a`, the page.
    let before = finds(&app);
    app.ok(SUB, json!({ "d": d, "s": root, "f": 50 })).await;
    assert_eq!(finds(&app) - before, 4);

    // Sizes that promise more than there is (`b` counted as 120 on the root, which still adds
    // up): a page that ends in `b` comes back short and is read again over the whole range,
    // with the same result.
    let db = mongodb::Client::with_uri_str(server_uri())
        .await
        .unwrap()
        .database(&app.database);
    let b_segment = comments[b.as_str()]
        .get_str("full_slug")
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    db.collection::<Document>("comments")
        .update_one(
            doc! { "discussion_id": &d, "slug": &root },
            doc! { "$inc": { format!("reply_sizes.{b_segment}"): 114_i64, "descendants": 114_i64 } },
        )
        .await
        .unwrap();
    let expected = below(&comments, &root);
    let (seen, _) = sub_discussion_pages(&app, &d, &root, 50).await;
    assert_eq!(seen, expected);

    // A discussion that does not keep sizes (from before they were kept) is read the general
    // way, with the same result: one query for the page.
    db.collection::<Document>("discussions")
        .update_one(
            doc! { "_id": &d },
            doc! { "$unset": { "subtree_sizes": "" } },
        )
        .await
        .unwrap();
    let (seen, costs) = sub_discussion_pages(&app, &d, &root, 50).await;
    assert_eq!(seen, expected);
    assert!(costs.iter().all(|&c| c == 3), "{costs:?}");
}

/// Sizes are counted by every post on all its ancestors, also while many post at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subtree_sizes_stay_exact_under_concurrent_posts() {
    let app = TestApp::new("subtree_concurrent", Layout::PerComment).await;
    let d = app.discussion("busy").await;
    let root = app.post(&d, None, "root").await;
    let writers = (0..8).map(|w| {
        let (app, d, root) = (&app, &d, &root);
        async move {
            let mut chain = vec![root.clone()];
            for i in 0..15 {
                // A reply to a comment at depth i % 4 of this writer's chain (or the root).
                let parent = chain[(i % 4).min(chain.len() - 1)].clone();
                let slug = app.post(d, Some(&parent), &format!("w{w} {i}")).await;
                if chain.len() < 5 {
                    chain.push(slug);
                }
            }
        }
    });
    futures::future::join_all(writers).await;
    let comments = stored(&app, &d).await;
    assert_eq!(comments.len(), 1 + 8 * 15);
    assert_sizes_exact(&comments);
    let data = app.ok(SUB, json!({ "d": d, "s": root, "f": 5 })).await;
    assert_eq!(
        data["comment"]["subDiscussion"]["totalCount"],
        json!(8 * 15)
    );
}

/// A discussion moved into the layout gets its sizes from the move; moved out, it forgets it
/// keeps them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_into_the_layout_counts_subtree_sizes() {
    let app = TestApp::with("subtree_move", Settings::new(Layout::Bucketed)).await;
    let d = app.discussion("moving").await;
    let [root, ..] = lopsided(&app, &d).await;
    let moderator = app.moderator_token("mod-1", "Moderator");
    let migrate = "mutation($d: ID!, $l: StorageLayout!) { migrateDiscussion(id: $d, layout: $l) { layout } }";
    let move_to = |layout: &'static str| {
        let (app, moderator, d) = (&app, &moderator, &d);
        async move {
            let moved = app
                .exec_as(Some(moderator), migrate, json!({ "d": d, "l": layout }))
                .await;
            assert_eq!(
                moved["data"]["migrateDiscussion"]["layout"],
                json!(layout),
                "{moved}"
            );
        }
    };
    let discussions = mongodb::Client::with_uri_str(server_uri())
        .await
        .unwrap()
        .database(&app.database)
        .collection::<Document>("discussions");
    move_to("PER_COMMENT").await;
    let comments = stored(&app, &d).await;
    assert_sizes_exact(&comments);
    let flag = |doc: Option<Document>| doc.unwrap().get_bool("subtree_sizes").ok();
    assert_eq!(
        flag(discussions.find_one(doc! { "_id": &d }).await.unwrap()),
        Some(true)
    );
    let (seen, _) = sub_discussion_pages(&app, &d, &root, 50).await;
    assert_eq!(seen, below(&comments, &root));
    // Posts after the move keep counting.
    app.post(&d, Some(&root), "after the move").await;
    assert_sizes_exact(&stored(&app, &d).await);

    move_to("BUCKETED").await;
    assert_eq!(
        flag(discussions.find_one(doc! { "_id": &d }).await.unwrap()),
        None
    );
}

const REPLIES: &str = "query($d: ID!, $s: String!, $f: Int, $a: String) { comment(discussionId: $d, slug: $s) { replies(first: $f, after: $a) { nodes { slug } pageInfo { hasNextPage endCursor } } } }";

/// Every page of `parent`'s replies by cursor, with the `aggregate`s each page cost (a page of
/// replies is one aggregation).
async fn reply_pages(
    app: &TestApp,
    d: &str,
    parent: &str,
    first: usize,
) -> (Vec<String>, Vec<u64>) {
    comment_pages(app, (REPLIES, "replies", "aggregate"), d, parent, first).await
}

/// A page of a comment's replies stops reading at the reply after it, which the comment's
/// replies' sizes name; sizes that name replies that do not exist make a page come back short,
/// and it is read again whole, with the same result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_pages_stop_where_the_reply_sizes_say() {
    let app = TestApp::new("subtree_replies", Layout::PerComment).await;
    let d = app.discussion("busy").await;
    let parent = app.post(&d, None, "busy").await;
    let mut replies = Vec::new();
    for i in 0..23 {
        let reply = app.post(&d, Some(&parent), &format!("reply {i}")).await;
        if i % 5 == 0 {
            app.post(&d, Some(&reply), "below").await;
        }
        replies.push(reply);
    }
    app.post(&d, None, "another thread").await;

    let (seen, costs) = reply_pages(&app, &d, &parent, 5).await;
    assert_eq!(seen, replies);
    assert!(costs.iter().all(|&c| c == 1), "{costs:?}");

    // Three replies that do not exist, posted before the rest (the sizes still add up): every
    // page ends three replies early by the sizes, comes back short and is read again.
    let db = mongodb::Client::with_uri_str(server_uri())
        .await
        .unwrap()
        .database(&app.database);
    let comments = db.collection::<Document>("comments");
    let mut phantoms = Document::new();
    for i in 0..3 {
        phantoms.insert(format!("reply_sizes.0000000000000001:ghost00{i}"), 1_i64);
    }
    phantoms.insert("descendants", 3_i64);
    comments
        .update_one(
            doc! { "discussion_id": &d, "slug": &parent },
            doc! { "$inc": phantoms },
        )
        .await
        .unwrap();
    let (seen, costs) = reply_pages(&app, &d, &parent, 5).await;
    assert_eq!(seen, replies);
    assert!(costs.contains(&2), "{costs:?}");
    assert!(costs.iter().all(|&c| c <= 2), "{costs:?}");

    // Sizes that leave replies out (the first ten, the count lowered to match) only stop the
    // read later than they could: one query a page, the same result.
    let stored = comments
        .find_one(doc! { "discussion_id": &d, "slug": &parent })
        .await
        .unwrap()
        .unwrap();
    let sizes = stored.get_document("reply_sizes").unwrap();
    let mut kept = Document::new();
    let mut total = 0_i64;
    for (i, (segment, n)) in sizes
        .iter()
        .filter(|(s, _)| !s.contains("ghost"))
        .enumerate()
    {
        if i >= 10 {
            total += n.as_i64().unwrap();
            kept.insert(segment.clone(), n.clone());
        }
    }
    comments
        .update_one(
            doc! { "discussion_id": &d, "slug": &parent },
            doc! { "$set": { "reply_sizes": kept, "descendants": total } },
        )
        .await
        .unwrap();
    let (seen, costs) = reply_pages(&app, &d, &parent, 5).await;
    assert_eq!(seen, replies);
    assert!(costs.iter().all(|&c| c == 1), "{costs:?}");
}
