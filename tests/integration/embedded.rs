//! What only the embedded layout has: positional paths, the size cap, concurrent pushes into one
//! document, and one document read per request.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use mongodb::bson::{doc, Bson, Document};
use serde_json::json;
use threadql::domain::{Layout, Slug};
use threadql::store::{Discussions, Store};

use crate::model::build_tree;
use crate::support::{
    cost, diff, error_code, load_discussion, open_feed, post_in, posts_reported, server_uri,
    store_config, Settings, TestApp,
};

/// The discussion document as stored.
pub(crate) async fn raw_discussion(app: &TestApp, id: &str) -> Document {
    let client = mongodb::Client::with_uri_str(server_uri()).await.unwrap();
    client
        .database(&app.database)
        .collection::<Document>(Discussions::COLLECTION)
        .find_one(doc! { "_id": id })
        .await
        .unwrap()
        .expect("the discussion document")
}

/// The element at a positional path (`[1, 0, 2]` = `replies.1.replies.0.replies.2`).
fn at_path<'a>(discussion: &'a Document, path: &[usize]) -> &'a Document {
    path.iter().fold(discussion, |node, &i| {
        node.get_array("replies").unwrap()[i]
            .as_document()
            .unwrap_or_else(|| panic!("no element at {path:?}"))
    })
}

/// Checks every comment of a document: it sits in its parent's `replies`, its slug extends its
/// parent's, its `reply_count` is the length of its `replies`, and siblings are in posting
/// order. Returns every slug, depth first.
fn check_nesting(discussion: &Document) -> Vec<String> {
    fn walk(replies: &[Bson], parent: Option<&str>, out: &mut Vec<String>) {
        let mut last_posted = i64::MIN;
        for item in replies {
            let c = item.as_document().expect("a comment element");
            let slug = c.get_str("slug").unwrap().to_owned();
            match parent {
                None => {
                    assert_eq!(c.get("parent"), Some(&Bson::Null), "{slug}");
                    assert!(!slug.contains('/'), "{slug} is top-level");
                }
                Some(p) => {
                    assert_eq!(c.get_str("parent").unwrap(), p, "{slug}");
                    let rest = slug
                        .strip_prefix(&format!("{p}/"))
                        .unwrap_or_else(|| panic!("{slug} is stored under {p}"));
                    assert!(!rest.contains('/'), "{slug} is a direct reply of {p}");
                }
            }
            let posted = c.get_i64("posted").unwrap();
            assert!(posted > last_posted, "siblings are in posting order");
            last_posted = posted;
            let children = c.get_array("replies").unwrap();
            assert_eq!(
                c.get_i64("reply_count").unwrap(),
                children.len() as i64,
                "{slug}"
            );
            out.push(slug.clone());
            walk(children, Some(&slug), out);
        }
    }
    let mut out = Vec::new();
    let top = match discussion.get("replies") {
        Some(Bson::Array(top)) => top.as_slice(),
        _ => &[],
    };
    walk(top, None, &mut out);
    assert_eq!(
        discussion.get_i64("comment_count").unwrap_or(0),
        out.len() as i64
    );
    assert_eq!(
        discussion.get_i64("thread_count").unwrap_or(0),
        top.len() as i64
    );
    out
}

fn bson_size(document: &Document) -> usize {
    mongodb::bson::to_vec(document).unwrap().len()
}

const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug parentSlug } }";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_land_at_their_positional_path() {
    let mut settings = Settings::new(Layout::Embedded);
    settings.max_depth = 4;
    let app = TestApp::with("embedded_paths", settings).await;
    let d = app.discussion("paths").await;
    let t0 = app.post(&d, None, "t0").await;
    let t1 = app.post(&d, None, "t1").await;
    let _t2 = app.post(&d, None, "t2").await;
    let _a = app.post(&d, Some(&t1), "a").await;
    let b = app.post(&d, Some(&t1), "b").await;
    let mut xs = Vec::new();
    for i in 0..3 {
        xs.push(app.post(&d, Some(&b), &format!("x{i}")).await);
    }
    let deep = app.post(&d, Some(&xs[2]), "deep").await;

    let raw = raw_discussion(&app, &d).await;
    assert_eq!(at_path(&raw, &[1]).get_str("slug").unwrap(), t1);
    assert_eq!(at_path(&raw, &[1, 1]).get_str("slug").unwrap(), b);
    assert_eq!(at_path(&raw, &[1, 1, 2]).get_str("slug").unwrap(), xs[2]);
    let element = at_path(&raw, &[1, 1, 2, 0]);
    assert_eq!(element.get_str("slug").unwrap(), deep);
    assert_eq!(element.get_str("text").unwrap(), "deep");
    assert_eq!(at_path(&raw, &[1, 1, 2]).get_i64("reply_count").unwrap(), 1);
    assert_eq!(at_path(&raw, &[1, 1]).get_i64("reply_count").unwrap(), 3);
    assert!(
        !raw.contains_key("discussion_id"),
        "no per-comment fields leak in"
    );
    let all = check_nesting(&raw);
    assert_eq!(all.len(), 9);
    assert_eq!(all.iter().filter(|s| **s == deep).count(), 1);

    // Past the depth cap (4 levels: 0..=3) a reply goes to the deepest allowed ancestor, and is
    // stored in that ancestor's array.
    let data = app
        .ok(POST, json!({ "d": d, "p": deep, "t": "too deep" }))
        .await;
    let moved = data["postComment"]["slug"].as_str().unwrap().to_owned();
    assert_eq!(data["postComment"]["parentSlug"], json!(xs[2]));
    let raw = raw_discussion(&app, &d).await;
    assert_eq!(at_path(&raw, &[1, 1, 2, 1]).get_str("slug").unwrap(), moved);
    check_nesting(&raw);

    // Unknown parents write nothing: a made-up part, and a real part under the wrong thread (the
    // whole ancestor chain must exist, not just the last part).
    let b_part = b.rsplit('/').next().unwrap();
    for parent in [
        format!("{t1}/zzzzzzzz"),
        format!("{t0}/{b_part}"),
        format!("{b}/zzzzzzzz/yyyyyyyy"),
    ] {
        let response = app
            .exec(POST, json!({ "d": d, "p": parent, "t": "orphan" }))
            .await;
        assert_eq!(error_code(&response), "NOT_FOUND", "{parent}: {response:#}");
    }
    assert_eq!(raw_discussion(&app, &d).await, raw, "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_size_cap_refuses_posts_with_discussion_too_large() {
    let cap = 16 * 1024;
    let mut settings = Settings::new(Layout::Embedded);
    settings.embedded_max_bytes = cap;
    settings.promote_embedded = false;
    let app = TestApp::with("embedded_cap", settings).await;
    let d = app.discussion("fills up").await;
    let text = "y".repeat(1000);
    let mut posted = Vec::new();
    let refused = loop {
        assert!(posted.len() < 100, "the cap never refused a post");
        let parent = posted.first().cloned();
        let response = app
            .exec(POST, json!({ "d": d, "p": parent, "t": text }))
            .await;
        match response["data"]["postComment"]["slug"].as_str() {
            Some(slug) => posted.push(slug.to_owned()),
            None => break response,
        }
    };
    assert!(posted.len() >= 5, "only {} posts fitted", posted.len());
    assert_eq!(error_code(&refused), "DISCUSSION_TOO_LARGE", "{refused:#}");
    let message = refused["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("PER_COMMENT") && message.contains("BUCKETED"),
        "the message says what to do: {message}"
    );

    // Nothing was written by the refused post, nor by the next ones (top-level and reply).
    let before = raw_discussion(&app, &d).await;
    assert!(
        bson_size(&before) <= cap,
        "{} bytes stored",
        bson_size(&before)
    );
    for parent in [None, Some(posted[0].clone()), posted.last().cloned()] {
        let response = app
            .exec(POST, json!({ "d": d, "p": parent, "t": text }))
            .await;
        assert_eq!(error_code(&response), "DISCUSSION_TOO_LARGE");
    }
    assert_eq!(raw_discussion(&app, &d).await, before);

    // Everything posted before is still readable.
    let data = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { commentCount comments(first: 100) { nodes { slug text } } } }",
            json!({ "d": d }),
        )
        .await;
    assert_eq!(data["discussion"]["commentCount"], json!(posted.len()));
    let nodes = data["discussion"]["comments"]["nodes"].as_array().unwrap();
    let got: Vec<&str> = nodes.iter().map(|n| n["slug"].as_str().unwrap()).collect();
    assert_eq!(got, posted);
    assert!(nodes.iter().all(|n| n["text"] == json!(text)));

    // The cap is per discussion.
    let other = app.discussion("empty").await;
    app.post(&other, None, "fits").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongodbs_own_limit_is_discussion_too_large_too() {
    // A cap above MongoDB's 16 MiB document limit: the database refuses first (code 10334), and
    // the client still gets DISCUSSION_TOO_LARGE, not an internal error.
    let mut settings = Settings::new(Layout::Embedded);
    settings.embedded_max_bytes = 64 * 1024 * 1024;
    settings.promote_embedded = false;
    settings.max_text_chars = 2_000_000;
    let app = TestApp::with("embedded_16mb", settings).await;
    let d = app.discussion("huge").await;
    let text = "z".repeat(1_500_000);
    let mut posted = 0;
    let refused = loop {
        assert!(posted < 20, "16 MiB were never reached");
        let response = app.exec(POST, json!({ "d": d, "t": text })).await;
        if response["data"]["postComment"]["slug"].is_string() {
            posted += 1;
        } else {
            break response;
        }
    };
    // Each comment keeps its text and the HTML rendered from it: 3 MB a post.
    assert!(posted >= 4, "only {posted} posts of 1.5 MB fitted");
    assert_eq!(error_code(&refused), "DISCUSSION_TOO_LARGE", "{refused:#}");
    let data = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { commentCount threads(first: 1) { nodes { text } } } }",
            json!({ "d": d }),
        )
        .await;
    assert_eq!(data["discussion"]["commentCount"], json!(posted));
    assert_eq!(
        data["discussion"]["threads"]["nodes"][0]["text"]
            .as_str()
            .map(str::len),
        Some(text.len())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_replies_land_under_their_parents() {
    let app = Arc::new(TestApp::new("embedded_race", Layout::Embedded).await);
    let d = app.discussion("race").await;
    let a = app.post(&d, None, "a").await;
    let b = app.post(&d, None, "b").await;
    let a1 = app.post(&d, Some(&a), "a1").await;
    let a11 = app.post(&d, Some(&a1), "a11").await;
    let parents = [a.clone(), b.clone(), a1.clone(), a11.clone()];
    let mut tasks = Vec::new();
    for i in 0..20 {
        let (app, d, parent) = (app.clone(), d.clone(), parents[i % 4].clone());
        tasks.push(tokio::spawn(async move {
            let slug = app.post(&d, Some(&parent), &format!("reply {i}")).await;
            (parent, slug)
        }));
    }
    let mut expected: BTreeMap<String, HashSet<String>> = BTreeMap::new();
    for task in tasks {
        let (parent, slug) = task.await.unwrap();
        expected.entry(parent).or_default().insert(slug);
    }

    let raw = raw_discussion(&app, &d).await;
    let all = check_nesting(&raw);
    assert_eq!(all.len(), 24, "nothing lost");
    assert_eq!(
        all.iter().collect::<HashSet<_>>().len(),
        24,
        "nothing twice"
    );
    for (path, parent) in [
        (vec![0], &a),
        (vec![1], &b),
        (vec![0, 0], &a1),
        (vec![0, 0, 0], &a11),
    ] {
        let element = at_path(&raw, &path);
        assert_eq!(element.get_str("slug").unwrap(), parent.as_str());
        let stored: HashSet<String> = element
            .get_array("replies")
            .unwrap()
            .iter()
            .map(|r| r.as_document().unwrap().get_str("slug").unwrap().to_owned())
            .filter(|s| !parents.contains(s))
            .collect();
        assert_eq!(stored, expected[parent], "replies of {parent}");
    }
    let data = app
        .ok(
            "query($d: ID!, $s: String!) { discussion(id: $d) { commentCount } comment(discussionId: $d, slug: $s) { replyCount subDiscussion { totalCount } } }",
            json!({ "d": d, "s": a }),
        )
        .await;
    assert_eq!(data["discussion"]["commentCount"], json!(24));
    assert_eq!(data["comment"]["replyCount"], json!(6));
    assert_eq!(data["comment"]["subDiscussion"]["totalCount"], json!(17));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_tree_costs_one_document_read() {
    let app = TestApp::new("embedded_round_trips", Layout::Embedded).await;
    let d = app.discussion("round trips").await;
    // Page sizes keep the query under the complexity limit (connections cost per item).
    let tree = "query($d: ID!, $s: String!) { discussion(id: $d) { title commentCount
        comment(slug: $s) { slug parent { slug parent { slug } } }
        threads(first: 20) { totalCount nodes { slug replyCount
            subDiscussion(first: 5) { totalCount nodes { slug parent { slug } } }
            replies(first: 10) { totalCount nodes { slug parent { slug parent { slug } }
                subDiscussion(first: 1) { totalCount }
                replies(first: 5) { nodes { slug parent { slug }
                    replies(first: 5) { nodes { slug text parent { slug } } } } } } } } } } }";
    let mut model_len = 0;
    for size in [30, 150] {
        let model = build_tree(&app, &d, size - model_len, 6, size as u64).await;
        model_len = size;
        let deepest = model.slugs.last().unwrap().clone();
        let (data, spent) = cost(&app, tree, json!({ "d": d, "s": deepest })).await;
        assert_eq!(data["discussion"]["commentCount"], json!(size));
        assert!(!data["discussion"]["threads"]["nodes"]
            .as_array()
            .unwrap()
            .is_empty());
        // The discussion's metadata, then its document once.
        assert_eq!(
            spent,
            BTreeMap::from([("find".to_owned(), 2)]),
            "{size} comments"
        );
    }

    // A page of top-level comments alone is a `$slice` of the top-level array, and it is the
    // same page the whole document gives.
    let shallow = "query($d: ID!, $o: Int) { discussion(id: $d) { threads(first: 7, offset: $o) { totalCount pageInfo { hasNextPage } nodes { slug text replyCount posted author { id name } } } } }";
    let deep = "query($d: ID!, $o: Int) { discussion(id: $d) { threads(first: 7, offset: $o) { totalCount pageInfo { hasNextPage } nodes { slug text replyCount posted author { id name } replies(first: 1) { totalCount } } } } }";
    let threads = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { threads(first: 100) { totalCount } } }",
            json!({ "d": d }),
        )
        .await["discussion"]["threads"]["totalCount"]
        .as_u64()
        .unwrap();
    for offset in [0, 3, threads - 1, threads + 5] {
        let vars = json!({ "d": d, "o": offset });
        let (sliced, spent) = cost(&app, shallow, vars.clone()).await;
        assert_eq!(
            spent,
            BTreeMap::from([("aggregate".to_owned(), 1), ("find".to_owned(), 1)])
        );
        let (full, spent) = cost(&app, deep, vars).await;
        assert_eq!(spent, BTreeMap::from([("find".to_owned(), 2)]));
        let mut full = full;
        for node in full["discussion"]["threads"]["nodes"]
            .as_array_mut()
            .unwrap()
        {
            node.as_object_mut().unwrap().remove("replies");
        }
        assert_eq!(sliced, full, "offset {offset}");
    }
}

/// Posts a reply through another process's store (a second server on the same database).
async fn post_elsewhere(store: &Store, d: &str, parent: &str, text: &str) -> String {
    let discussion = load_discussion(store, d).await;
    let parent = Slug::parse(parent).expect("slug");
    post_in(store, Layout::Embedded, &discussion, Some(&parent), text)
        .await
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_use_the_tree_a_process_keeps_and_survive_another_process_posting() {
    let settings = Settings::new(Layout::Embedded);
    let app = TestApp::with("embedded_kept_tree", settings.clone()).await;
    let other = Store::connect(&store_config(&app.database, &settings))
        .await
        .expect("a second store");
    let d = app.discussion("two servers").await;
    let root = app.post(&d, None, "root").await;
    let first = app.post(&d, Some(&root), "first").await;
    // This process knows the tree and the discussion now: a reply is one update (which checks
    // that the discussion is still open for posts), with its event in the same transaction,
    // after its author's number is drawn.
    let (_, spent) = cost(
        &app,
        POST,
        json!({ "d": d, "p": first, "t": "a warm reply" }),
    )
    .await;
    assert_eq!(
        spent,
        BTreeMap::from([
            ("findAndModify".to_owned(), 1),
            ("update".to_owned(), 1),
            ("insert".to_owned(), 1),
            ("commitTransaction".to_owned(), 1)
        ]),
        "a reply to a known comment reads no document"
    );
    // Another process posts under the same comments, and under what this one posted; this one
    // goes on from what it kept, and its guarded updates catch every change it did not see.
    let mut all = vec![root.clone(), first.clone()];
    let mut mine = first.clone();
    let mut theirs = root.clone();
    for i in 0..6 {
        theirs = post_elsewhere(
            &other,
            &d,
            [&root, &mine, &theirs][i % 3],
            &format!("theirs {i}"),
        )
        .await;
        all.push(theirs.clone());
        mine = app
            .post(
                &d,
                Some([&root, &theirs, &mine][i % 3]),
                &format!("mine {i}"),
            )
            .await;
        all.push(mine.clone());
    }
    let raw = raw_discussion(&app, &d).await;
    let stored = check_nesting(&raw);
    assert_eq!(
        stored.len(),
        all.len() + 1,
        "every post stored once (and the warm reply)"
    );
    let stored: HashSet<String> = stored.into_iter().collect();
    for slug in &all {
        assert!(stored.contains(slug), "{slug} is stored");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_waiting_for_their_turn_are_stored_together() {
    const TASKS: usize = 16;
    const POSTS: usize = 30;
    let app = TestApp::new("embedded_grouped", Layout::Embedded).await;
    let d = app.discussion("many writers").await;
    let discussion = Arc::new(load_discussion(app.store(), &d).await);
    let mut feed = open_feed(app.store()).await;
    let before = app.store().commands().snapshot();
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (store, discussion) = (app.store().clone(), discussion.clone());
        tasks.push(tokio::spawn(async move {
            let mut mine: Vec<Slug> = Vec::new();
            for i in 0..POSTS {
                // Top-level comments, and replies at every depth to the task's earlier ones
                // (so groups meet parents whose replies nest in each other's).
                let parent = (i % 3 != 0).then(|| mine[(i * 7 + task) % mine.len()].clone());
                let slug = post_in(
                    &store,
                    Layout::Embedded,
                    &discussion,
                    parent.as_ref(),
                    &format!("{task}/{i}"),
                )
                .await;
                assert_eq!(slug.depth(), parent.as_ref().map_or(0, |p| p.depth() + 1));
                mine.push(slug);
            }
            mine
        }));
    }
    let mut posted: HashSet<String> = HashSet::new();
    for task in tasks {
        for slug in task.await.expect("task") {
            assert!(posted.insert(slug.to_string()), "{slug} handed out twice");
        }
    }
    let total = TASKS * POSTS;
    let used = diff(&before, &app.store().commands().snapshot());
    eprintln!("{total} posts by {TASKS} writers: commands {used:?}");
    assert!(
        used["update"] < total as u64,
        "posts that waited for their turn share updates"
    );

    let raw = raw_discussion(&app, &d).await;
    let stored = check_nesting(&raw);
    assert_eq!(stored.len(), total, "nothing lost");
    assert_eq!(stored.into_iter().collect::<HashSet<_>>(), posted);
    assert_eq!(
        posts_reported(&mut feed, &d, total).await,
        posted,
        "the feed reports exactly the posted comments"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_stored_together_respect_the_size_cap() {
    let cap = 16 * 1024;
    let mut settings = Settings::new(Layout::Embedded);
    settings.embedded_max_bytes = cap;
    settings.promote_embedded = false;
    let app = Arc::new(TestApp::with("embedded_grouped_cap", settings).await);
    let d = app.discussion("fills up at once").await;
    let first = app.post(&d, None, "first").await;
    let text = "y".repeat(1000);
    let mut tasks = Vec::new();
    for i in 0..24 {
        let (app, d, text) = (app.clone(), d.clone(), text.clone());
        let parent = (i % 2 == 1).then(|| first.clone());
        tasks.push(tokio::spawn(async move {
            app.exec(POST, json!({ "d": d, "p": parent, "t": text }))
                .await
        }));
    }
    let mut stored = 1;
    let mut refused = 0;
    for task in tasks {
        let response = task.await.expect("task");
        match response["data"]["postComment"]["slug"].as_str() {
            Some(_) => stored += 1,
            None => {
                assert_eq!(
                    error_code(&response),
                    "DISCUSSION_TOO_LARGE",
                    "{response:#}"
                );
                refused += 1;
            }
        }
    }
    assert!(
        stored >= 6 && refused >= 1,
        "{stored} stored, {refused} refused"
    );
    let raw = raw_discussion(&app, &d).await;
    assert!(bson_size(&raw) <= cap, "{} bytes stored", bson_size(&raw));
    assert_eq!(
        check_nesting(&raw).len(),
        stored,
        "every answered post is stored"
    );
}
