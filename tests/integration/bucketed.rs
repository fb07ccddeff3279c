//! Bucketed-layout specifics: posting under contention, the seeds' offset walk, round-trip bounds.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use serde_json::json;
use threadql::domain::{
    Author, Comment, CommentText, Cursor, CursorKind, Discussion, DiscussionId, Layout, NewComment,
    Page, Slug, Window,
};
use threadql::store::bucketed::hints::{FullPages, Hints};
use threadql::store::{Listing, ReadScope, Storage, Store};

use crate::model::build_tree;
use crate::support::{
    diff, load_discussion, open_feed, post_in, posts_reported, server_uri, store_config, Settings,
    TestApp,
};

fn settings(bucket_size: u32) -> Settings {
    Settings {
        bucket_size,
        ..Settings::new(Layout::Bucketed)
    }
}

async fn raw_db(app: &TestApp) -> mongodb::Database {
    mongodb::Client::with_uri_str(server_uri())
        .await
        .expect("client")
        .database(&app.database)
}

/// The discussion's pages as stored, in page order.
async fn raw_pages(app: &TestApp, d: &str) -> Vec<Document> {
    raw_db(app)
        .await
        .collection::<Document>("comment_pages")
        .find(doc! { "discussion_id": d })
        .sort(doc! { "page": 1 })
        .await
        .expect("find pages")
        .try_collect()
        .await
        .expect("read pages")
}

fn int(doc: &Document, key: &str) -> i64 {
    match doc.get(key) {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        other => panic!("{key} is {other:?}"),
    }
}

/// The page each stored comment is on, by slug.
fn pages_by_slug(pages: &[Document]) -> HashMap<String, i64> {
    pages
        .iter()
        .flat_map(|p| {
            comments(p)
                .into_iter()
                .map(|c| (c.get_str("slug").expect("slug").to_owned(), int(p, "page")))
        })
        .collect()
}

fn comments(page: &Document) -> Vec<&Document> {
    page.get_array("comments")
        .expect("comments")
        .iter()
        .map(|c| c.as_document().expect("a comment document"))
        .collect()
}

fn key_of(c: &Document) -> (i64, String) {
    (
        int(c, "posted"),
        c.get_str("slug").expect("slug").to_owned(),
    )
}

/// Pages through a listing with the store's cursor windows; returns the comments.
async fn all_by_cursor(
    store: &Store,
    d: &Discussion,
    listing: Listing,
    size: usize,
) -> Vec<Comment> {
    let layout = store.layout(Layout::Bucketed).expect("layout");
    let kind = match listing {
        Listing::Threaded => CursorKind::Threaded,
        _ => CursorKind::Chronological,
    };
    let mut out: Vec<Comment> = Vec::new();
    loop {
        let window = Window::After {
            cursor: out.last().map(|c| Cursor::of_comment(c, kind)),
            limit: size,
        };
        let page: Page<Comment> = layout
            .list(&ReadScope::new(), d, listing, &window)
            .await
            .expect("list");
        assert!(page.items.len() == size || !page.has_next);
        out.extend(page.items);
        if !page.has_next {
            return out;
        }
    }
}

/// Pages through a listing with the store's offset windows; returns the comments.
async fn all_by_offset(
    store: &Store,
    d: &Discussion,
    listing: Listing,
    size: usize,
) -> Vec<Comment> {
    let layout = store.layout(Layout::Bucketed).expect("layout");
    let mut out: Vec<Comment> = Vec::new();
    loop {
        let window = Window::Offset {
            skip: out.len() as u64,
            limit: size,
        };
        let page = layout
            .list(&ReadScope::new(), d, listing, &window)
            .await
            .expect("list");
        out.extend(page.items);
        if !page.has_next {
            return out;
        }
    }
}

fn slugs(comments: &[Comment]) -> Vec<String> {
    comments.iter().map(|c| c.slug.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_writers_lose_and_duplicate_nothing() {
    const TASKS: usize = 16;
    const POSTS: usize = 200;
    const CAP: i64 = 10;
    let app = TestApp::with("bucketed_writers", settings(CAP as u32)).await;
    let d = app.discussion("contention").await;
    let discussion = Arc::new(load_discussion(app.store(), &d).await);
    // The change feed reports every post, those stored together included.
    let mut feed = open_feed(app.store()).await;
    let before = app.store().commands().snapshot();
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (store, discussion) = (app.store().clone(), discussion.clone());
        tasks.push(tokio::spawn(async move {
            let mut mine: Vec<Slug> = Vec::new();
            for i in 0..POSTS {
                // Every third post replies to one of the task's earlier comments, at any depth.
                let parent = (i % 3 == 2).then(|| mine[(i / 2 + task * 7) % mine.len()].clone());
                let posted = store
                    .post(
                        &discussion,
                        NewComment {
                            parent: parent.clone(),
                            author: Author {
                                id: format!("u{task}"),
                                name: format!("writer {task}"),
                            },
                            text: CommentText::parse(&format!("{task}/{i}"), 100).expect("text"),
                        },
                    )
                    .await
                    .expect("post");
                assert_eq!(posted.comment.parent, parent);
                mine.push(posted.comment.slug);
            }
            mine
        }));
    }
    let mut posted: HashSet<String> = HashSet::new();
    for task in tasks {
        for slug in task.await.expect("task") {
            assert!(
                posted.insert(slug.to_string()),
                "slug {slug} handed out twice"
            );
        }
    }
    let total = TASKS * POSTS;
    assert_eq!(posted.len(), total);
    let after = app.store().commands().snapshot();
    let used: BTreeMap<&String, u64> = after
        .iter()
        .map(|(k, v)| (k, v - before.get(k).copied().unwrap_or(0)))
        .collect();
    eprintln!("{total} posts by {TASKS} writers into pages of {CAP}: commands {used:?}");
    // Posts that waited for the discussion's turn were stored together: fewer transactions
    // than posts, and each post still read its parent once.
    assert!(
        used[&"commitTransaction".to_owned()] < total as u64,
        "posts waiting for their turn are stored together"
    );
    assert_eq!(
        posts_reported(&mut feed, &d, total).await,
        posted,
        "the feed reports exactly the posted comments"
    );

    // The raw pages: numbered 0..n, never empty, never over the cap, full but for the last,
    // counts equal to the arrays, arrays sorted, pages in order and disjoint.
    let pages = raw_pages(&app, &d).await;
    let mut stored: HashMap<String, Document> = HashMap::new();
    let mut last_key: Option<(i64, String)> = None;
    let mut thread_total = 0;
    let mut roots = 0;
    let mut overfilled = 0;
    for (n, page) in pages.iter().enumerate() {
        assert_eq!(int(page, "page"), n as i64, "page numbers have no gaps");
        let items = comments(page);
        assert_eq!(int(page, "count"), items.len() as i64, "count of page {n}");
        assert!(!items.is_empty(), "page {n} is empty");
        if items.len() as i64 > CAP {
            overfilled += 1;
        }
        if n + 1 < pages.len() {
            assert_eq!(items.len() as i64, CAP, "page {n} before the last is full");
        }
        let page_roots = items
            .iter()
            .filter(|c| matches!(c.get("parent"), Some(Bson::Null) | None))
            .count() as i64;
        assert_eq!(int(page, "roots"), page_roots);
        roots += page_roots;
        thread_total += int(page, "thread_total");
        for c in &items {
            let key = key_of(c);
            if let Some(prev) = &last_key {
                assert!(*prev < key, "page {n}: {prev:?} is not before {key:?}");
            }
            last_key = Some(key);
            let slug = c.get_str("slug").expect("slug").to_owned();
            assert!(
                stored.insert(slug.clone(), (*c).clone()).is_none(),
                "{slug} stored twice"
            );
        }
    }
    eprintln!("{} pages, {overfilled} over the cap of {CAP}", pages.len());
    assert_eq!(overfilled, 0);
    assert_eq!(stored.len(), total, "every comment stored exactly once");
    assert_eq!(
        stored.keys().cloned().collect::<HashSet<_>>(),
        posted,
        "the stored comments are the posted ones"
    );
    assert_eq!(thread_total, total as i64, "thread totals add up");
    check_thread_pages(&pages);
    check_page_blocks(&app, &d, &pages).await;

    // Reply counts agree with the stored parents.
    let mut children: HashMap<&str, i64> = HashMap::new();
    for c in stored.values() {
        if let Ok(parent) = c.get_str("parent") {
            *children.entry(parent).or_default() += 1;
        }
    }
    for (slug, c) in &stored {
        let expected = children.get(slug.as_str()).copied().unwrap_or(0);
        assert_eq!(int(c, "reply_count"), expected, "reply count of {slug}");
    }
    // So do the replies per page each parent keeps.
    let mut per_page: HashMap<String, BTreeMap<String, i64>> = HashMap::new();
    for page in &pages {
        for c in comments(page) {
            if let Ok(parent) = c.get_str("parent") {
                *per_page
                    .entry(parent.to_owned())
                    .or_default()
                    .entry(int(page, "page").to_string())
                    .or_default() += 1;
            }
        }
    }
    for (slug, c) in &stored {
        let kept: BTreeMap<String, i64> = c
            .get_document("reply_pages")
            .map(|d| d.keys().map(|k| (k.clone(), int(d, k))).collect())
            .unwrap_or_default();
        assert_eq!(
            kept,
            per_page.remove(slug).unwrap_or_default(),
            "replies per page of {slug}"
        );
    }

    // The discussion's counters and page number.
    let raw = raw_db(&app)
        .await
        .collection::<Document>("discussions")
        .find_one(doc! { "_id": &d })
        .await
        .expect("find")
        .expect("discussion");
    assert_eq!(int(&raw, "comment_count"), total as i64);
    assert_eq!(int(&raw, "thread_count"), roots);
    assert_eq!(int(&raw, "num_comment_pages"), pages.len() as i64 - 1);
    assert_eq!(int(&raw, "sealed_min"), CAP, "every sealed page is full");
    assert_eq!(int(&raw, "sealed_max"), CAP);

    // Every comment is reachable by slug and appears exactly once in every listing.
    let store = app.store();
    let discussion = load_discussion(store, &d).await;
    let layout = store.layout(Layout::Bucketed).expect("layout");
    let all: Vec<Slug> = posted
        .iter()
        .map(|s| Slug::parse(s).expect("slug"))
        .collect();
    for chunk in all.chunks(500) {
        let found = layout
            .by_slugs(&ReadScope::new(), &discussion, chunk)
            .await
            .expect("by slugs");
        assert_eq!(found.len(), chunk.len());
    }
    let chronological: Vec<String> = stored
        .values()
        .map(|c| (key_of(c), c.get_str("slug").expect("slug").to_owned()))
        .collect::<BTreeMap<_, _>>()
        .into_values()
        .collect();
    assert_eq!(
        slugs(&all_by_cursor(store, &discussion, Listing::Chronological, 100).await),
        chronological
    );
    assert_eq!(
        slugs(&all_by_offset(store, &discussion, Listing::Chronological, 77).await),
        chronological
    );
    let threaded: Vec<String> = stored
        .values()
        .map(|c| {
            (
                c.get_str("full_slug").expect("full").to_owned(),
                c.get_str("slug").expect("slug").to_owned(),
            )
        })
        .collect::<BTreeMap<_, _>>()
        .into_values()
        .collect();
    assert_eq!(
        slugs(&all_by_cursor(store, &discussion, Listing::Threaded, 100).await),
        threaded
    );
    assert_eq!(
        slugs(&all_by_offset(store, &discussion, Listing::Threaded, 100).await),
        threaded
    );
}

/// A stored comment element as the layout writes it.
fn element(posted: i64, slug: &str) -> Document {
    doc! {
        "slug": slug, "full_slug": format!("{posted:016}:{slug}"), "parent": Bson::Null,
        "posted": posted, "author": { "id": "u1", "name": "Ada" }, "text": format!("text {slug}"),
        "edited": Bson::Null, "deleted": false, "reply_count": 0_i64,
    }
}

/// A page of top-level comments `(posted, slug)`, in order.
fn page_doc(d: &str, page: i64, items: &[(i64, String)]) -> Document {
    let key = |(posted, slug): &(i64, String)| format!("{posted:016}:{slug}");
    doc! {
        "discussion_id": d, "page": page, "count": items.len() as i64,
        "roots": items.len() as i64, "thread_total": items.len() as i64,
        "first_key": key(&items[0]), "last_key": key(&items[items.len() - 1]),
        "comments": items.iter().map(|(p, s)| Bson::Document(element(*p, s))).collect::<Vec<_>>(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seeds_worked_example_reads_only_the_window() {
    // Pages of 100, 102, 101 and 22 comments (the seed's pages may overfill); skip 300, limit 50
    // must return the last 3 comments of page 2 and all 22 of page 3.
    let app = TestApp::with("bucketed_seed_example", settings(100)).await;
    let d = app.discussion("seed example").await;
    let mut posted = 1_700_000_000_000_000_i64;
    let mut all: Vec<Vec<(i64, String)>> = Vec::new();
    for (page, size) in [100, 102, 101, 22].into_iter().enumerate() {
        all.push(
            (0..size)
                .map(|i| {
                    posted += 1;
                    (posted, format!("{page:02}{i:06}"))
                })
                .collect(),
        );
    }
    let db = raw_db(&app).await;
    let docs: Vec<Document> = all
        .iter()
        .enumerate()
        .map(|(page, items)| page_doc(&d, page as i64, items))
        .collect();
    db.collection::<Document>("comment_pages")
        .insert_many(docs)
        .await
        .expect("insert pages");
    db.collection::<Document>("discussions")
        .update_one(
            doc! { "_id": &d },
            doc! { "$set": { "comment_count": 325_i64, "thread_count": 325_i64, "num_comment_pages": 3_i64 } },
        )
        .await
        .expect("counters");

    let before = app.store().commands().snapshot();
    let data = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { comments(offset: 300, first: 50) { nodes { slug } pageInfo { hasNextPage } } } }",
            json!({ "d": d }),
        )
        .await;
    let used = diff(&before, &app.store().commands().snapshot());
    let got = node_slugs(&data["discussion"]["comments"]);
    let expected: Vec<&str> = all[2][98..]
        .iter()
        .chain(all[3].iter())
        .map(|(_, s)| s.as_str())
        .collect();
    assert_eq!(expected.len(), 25);
    assert_eq!(got, expected);
    assert_eq!(
        data["discussion"]["comments"]["pageInfo"]["hasNextPage"],
        json!(false)
    );
    // The discussion, the {page, count} list, and one query that slices pages 2 and 3.
    assert_eq!(
        used,
        BTreeMap::from([("aggregate".to_owned(), 1), ("find".to_owned(), 2)]),
        "commands of an offset page"
    );

    // The same through threads (top-level comments) and with windows inside one page.
    for (skip, first) in [
        (0, 7),
        (99, 3),
        (100, 100),
        (201, 2),
        (302, 40),
        (324, 5),
        (325, 5),
    ] {
        let data = app
            .ok(
                "query($d: ID!, $o: Int, $f: Int) { discussion(id: $d) { threads(offset: $o, first: $f) { nodes { slug } } } }",
                json!({ "d": d, "o": skip, "f": first }),
            )
            .await;
        let got = node_slugs(&data["discussion"]["threads"]);
        let expected: Vec<&str> = all
            .iter()
            .flatten()
            .skip(skip)
            .take(first)
            .map(|(_, s)| s.as_str())
            .collect();
        assert_eq!(got, expected, "threads offset {skip} first {first}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_windows_straddle_pages() {
    let app = TestApp::with("bucketed_straddle", settings(5)).await;
    let d = app.discussion("straddle").await;
    let model = build_tree(&app, &d, 23, 3, 5).await;
    let orders = [
        ("comments(order: CHRONOLOGICAL", model.chronological()),
        ("comments(order: THREADED", model.threaded()),
        ("threads(", model.threads()),
    ];
    for (field, expected) in &orders {
        let q = format!(
            "query($d: ID!, $o: Int, $f: Int) {{ discussion(id: $d) {{ list: {field}, offset: $o, first: $f) {{ nodes {{ slug }} pageInfo {{ hasNextPage }} }} }} }}"
        );
        for skip in 0..=expected.len() + 1 {
            for first in [1, 4, 5, 6, 11] {
                let before = app.store().commands().snapshot();
                let data = app.ok(&q, json!({ "d": d, "o": skip, "f": first })).await;
                let used: u64 = diff(&before, &app.store().commands().snapshot())
                    .values()
                    .sum();
                let list = &data["discussion"]["list"];
                let got: Vec<String> = list["nodes"]
                    .as_array()
                    .expect("nodes")
                    .iter()
                    .map(|n| n["slug"].as_str().expect("slug").to_owned())
                    .collect();
                let want: Vec<String> = expected.iter().skip(skip).take(first).cloned().collect();
                assert_eq!(got, want, "{field} offset {skip} first {first}");
                assert_eq!(
                    list["pageInfo"]["hasNextPage"],
                    json!(skip + first < expected.len()),
                    "{field} offset {skip} first {first}"
                );
                // Discussion + page list + one batched fetch, whatever the window.
                assert!(used <= 3, "{field} offset {skip} first {first} cost {used}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_cost_the_same_for_small_and_large_discussions() {
    // Pages of 2: the large discussion has more pages than one reply batch of the driver holds.
    let app = TestApp::with("bucketed_round_trips", settings(2)).await;
    let queries = [
        ("tree", "query($d: ID!) { discussion(id: $d) { threads(first: 10) { nodes { slug
            replies(first: 5) { nodes { slug parent { slug } replies(first: 5) { nodes { slug
                replies(first: 5) { nodes { slug } } } } } }
            subDiscussion(first: 5) { totalCount nodes { slug parent { slug } } } } } } }"),
        ("chronological offset", "query($d: ID!) { discussion(id: $d) { comments(offset: 31, first: 20) { nodes { slug } } } }"),
        ("threaded offset", "query($d: ID!) { discussion(id: $d) { comments(order: THREADED, offset: 31, first: 20) { nodes { slug } } } }"),
        ("threads offset", "query($d: ID!) { discussion(id: $d) { threads(offset: 7, first: 20) { nodes { slug } } } }"),
        ("first page", "query($d: ID!) { discussion(id: $d) { comments(first: 20) { nodes { slug } } } }"),
    ];
    let mut costs: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for size in [40, 300] {
        let d = app.discussion("round trips").await;
        let model = build_tree(&app, &d, size, 4, size as u64).await;
        assert_eq!(model.slugs.len(), size);
        for (name, q) in queries {
            let before = app.commands();
            let data = app.ok(q, json!({ "d": d })).await;
            assert!(!data["discussion"].is_null());
            costs.entry(name).or_default().push(app.commands() - before);
        }
        // A direct link is one indexed query after the discussion.
        let before = app.commands();
        app.ok(
            "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { slug } }",
            json!({ "d": d, "s": model.slugs[size / 2] }),
        )
        .await;
        costs
            .entry("direct link")
            .or_default()
            .push(app.commands() - before);
    }
    eprintln!("commands per query for 40 and 300 comments in pages of 2: {costs:?}");
    let bounds = BTreeMap::from([
        // discussion, threads, 3 reply levels, sub-discussion and its count (parents are known)
        ("tree", 7),
        ("chronological offset", 3),
        ("threaded offset", 3),
        ("threads offset", 3),
        ("first page", 2),
        ("direct link", 2),
    ]);
    for (name, cost) in &costs {
        assert_eq!(
            cost[0], cost[1],
            "{name}: cost grew with the discussion: {cost:?}"
        );
        assert!(
            cost[1] <= bounds[name],
            "{name}: {cost:?} over {}",
            bounds[name]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_bucket_size_keeps_old_pages_readable() {
    let app = TestApp::with("bucketed_resize", settings(4)).await;
    let d = app.discussion("resize").await;
    let mut posted = Vec::new();
    for i in 0..10 {
        posted.push(app.post(&d, None, &format!("before {i}")).await);
    }
    // Two sealed pages of 4: offsets are cut by arithmetic.
    assert_eq!(
        *full_pages(&load_discussion(app.store(), &d).await),
        Some(FullPages { count: 2, size: 4 })
    );
    // The same database served with pages of 3 from now on.
    let resized = Store::connect(&store_config(&app.database, &settings(3)))
        .await
        .expect("connect");
    let discussion = load_discussion(&resized, &d).await;
    for i in 0..7 {
        let c = resized
            .post(
                &discussion,
                NewComment {
                    parent: None,
                    author: Author {
                        id: "u1".into(),
                        name: "Ada".into(),
                    },
                    text: CommentText::parse(&format!("after {i}"), 100).expect("text"),
                },
            )
            .await
            .expect("post");
        posted.push(c.comment.slug.to_string());
    }
    let counts: Vec<i64> = raw_pages(&app, &d)
        .await
        .iter()
        .map(|p| int(p, "count"))
        .collect();
    assert_eq!(counts, vec![4, 4, 3, 3, 3]);
    let discussion = load_discussion(app.store(), &d).await;
    // Sealed pages of two sizes: offsets go by the page list.
    assert_eq!(*full_pages(&discussion), None);
    for size in [1, 3, 4, 7] {
        let by_offset = all_by_offset(app.store(), &discussion, Listing::Chronological, size).await;
        assert_eq!(slugs(&by_offset), posted, "offset pages of {size}");
        let by_cursor = all_by_cursor(app.store(), &discussion, Listing::Chronological, size).await;
        assert_eq!(slugs(&by_cursor), posted, "cursor pages of {size}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_costs_three_commands_and_a_reply_to_a_comment_unknown_to_the_process_four() {
    let app = TestApp::with("bucketed_post_cost", settings(100)).await;
    let d = app.discussion("post cost").await;
    let store = app.store();
    let discussion = load_discussion(store, &d).await;
    // The first post of a process also reads where posts go; later ones remember it.
    let root = post_in(store, Layout::Bucketed, &discussion, None, "first").await;
    let mut parent = root.clone();
    let mut costs = Vec::new();
    for depth in 0..5 {
        let before = store.commands().snapshot();
        let top = post_in(
            store,
            Layout::Bucketed,
            &discussion,
            None,
            &format!("top {depth}"),
        )
        .await;
        let top_cost = diff(&before, &store.commands().snapshot());
        let before = store.commands().snapshot();
        parent = post_in(
            store,
            Layout::Bucketed,
            &discussion,
            Some(&parent),
            &format!("reply {depth}"),
        )
        .await;
        let reply_cost = diff(&before, &store.commands().snapshot());
        assert_eq!(top.depth(), 0);
        assert_eq!(parent.depth(), depth + 1);
        costs.push((top_cost, reply_cost));
    }
    eprintln!("post costs (top-level, reply) by depth: {costs:?}");
    let expected = |commands: &[(&str, u64)]| -> BTreeMap<String, u64> {
        commands
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect()
    };
    for (top, reply) in &costs {
        // A post: one update command on the pages (the guard that finds its slug anywhere in
        // the discussion, then the push, and for a reply its counters), the discussion's
        // counters, and the commit of their transaction (the development database has
        // transactions). The process stored the parent, so it knows where it and its thread's
        // root are.
        assert_eq!(top, &expected(&[("update", 2), ("commitTransaction", 1)]));
        assert_eq!(reply, &expected(&[("update", 2), ("commitTransaction", 1)]));
    }
    // Another process knows none of these comments: its first reply to one reads it and its
    // thread's root; the next reply there, and a reply to its own reply, do not.
    let other = Store::connect(&store_config(&app.database, &settings(100)))
        .await
        .expect("connect");
    post_in(&other, Layout::Bucketed, &discussion, None, "warm").await;
    let mut other_costs = Vec::new();
    let mut reply_to = parent.clone();
    for text in ["other 1", "other 2", "other 3"] {
        let before = other.commands().snapshot();
        let posted = post_in(&other, Layout::Bucketed, &discussion, Some(&reply_to), text).await;
        other_costs.push(diff(&before, &other.commands().snapshot()));
        if text == "other 2" {
            reply_to = posted;
        }
    }
    assert_eq!(
        other_costs,
        vec![
            expected(&[("aggregate", 1), ("update", 2), ("commitTransaction", 1)]),
            expected(&[("update", 2), ("commitTransaction", 1)]),
            expected(&[("update", 2), ("commitTransaction", 1)]),
        ]
    );
    // The reply counters landed with the push.
    let pages = raw_pages(&app, &d).await;
    assert_eq!(check_reply_counts(&pages), 15);
    assert_eq!(int(&pages[0], "thread_total"), 15);
    check_thread_pages(&pages);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_missed_page_changes_still_posts_in_order() {
    let app = TestApp::with("bucketed_stale_target", settings(5)).await;
    let d = app.discussion("stale target").await;
    let other = Store::connect(&store_config(&app.database, &settings(5)))
        .await
        .expect("connect");
    let discussion = load_discussion(app.store(), &d).await;
    let mut posted = Vec::new();
    for i in 0..3 {
        posted.push(
            post_in(
                app.store(),
                Layout::Bucketed,
                &discussion,
                None,
                &format!("a {i}"),
            )
            .await,
        );
    }
    // Another process fills page 0 and two more; this one still remembers page 0.
    for i in 0..12 {
        posted.push(
            post_in(
                &other,
                Layout::Bucketed,
                &discussion,
                None,
                &format!("b {i}"),
            )
            .await,
        );
    }
    for i in 0..4 {
        let parent = posted[i * 3].clone();
        posted.push(
            post_in(
                app.store(),
                Layout::Bucketed,
                &discussion,
                Some(&parent),
                &format!("c {i}"),
            )
            .await,
        );
    }
    let counts: Vec<i64> = raw_pages(&app, &d)
        .await
        .iter()
        .map(|p| int(p, "count"))
        .collect();
    assert_eq!(counts, vec![5, 5, 5, 4]);
    let discussion = load_discussion(app.store(), &d).await;
    assert_eq!(discussion.comment_count, 19);
    let strings: Vec<String> = posted.iter().map(ToString::to_string).collect();
    for size in [1, 4, 5, 7] {
        let by_offset = all_by_offset(app.store(), &discussion, Listing::Chronological, size).await;
        assert_eq!(slugs(&by_offset), strings, "offset pages of {size}");
        let by_cursor = all_by_cursor(app.store(), &discussion, Listing::Chronological, size).await;
        assert_eq!(slugs(&by_cursor), strings, "cursor pages of {size}");
    }
}

/// New discussions' pages are keyed `<discussion>:<page>` (a write to one page is an `_id`
/// lookup); a discussion from before keyed pages (no `keyed_pages` on it) keeps posting into
/// pages with generated ids, with the same counts and order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_are_keyed_and_discussions_from_before_still_post() {
    let app = TestApp::with("bucketed_keyed_pages", settings(5)).await;
    let keyed = app.discussion("keyed").await;
    let legacy = app.discussion("from before").await;
    raw_db(&app)
        .await
        .collection::<Document>("discussions")
        .update_one(
            doc! { "_id": &legacy },
            doc! { "$unset": { "keyed_pages": "" } },
        )
        .await
        .expect("unset");
    for d in [&keyed, &legacy] {
        let mut posted: Vec<String> = Vec::new();
        for i in 0..17 {
            let parent = match i % 3 {
                0 => None,
                1 => posted.last().cloned(),
                _ => posted.get(i / 2).cloned(),
            };
            posted.push(app.post(d, parent.as_deref(), &format!("c {i}")).await);
        }
        let pages = raw_pages(&app, d).await;
        assert_eq!(
            pages.iter().map(|p| int(p, "count")).collect::<Vec<_>>(),
            [5, 5, 5, 2]
        );
        for page in &pages {
            let id = page.get("_id").expect("_id");
            match d == &keyed {
                true => assert_eq!(
                    id,
                    &Bson::String(format!("{d}:{}", int(page, "page"))),
                    "{page}"
                ),
                false => assert!(matches!(id, Bson::ObjectId(_)), "{page}"),
            }
        }
        // Reply counts and thread totals landed on the right pages.
        check_reply_counts(&pages);
        let totals: i64 = pages.iter().map(|p| int(p, "thread_total")).sum();
        assert_eq!(totals, 17);
        // Both orders read back everything that was posted.
        let data = app
            .ok(
                "query($d: ID!) { discussion(id: $d) { commentCount comments(first: 100) { nodes { slug } } } }",
                json!({ "d": d }),
            )
            .await;
        assert_eq!(data["discussion"]["commentCount"], 17);
        let listed: Vec<String> = data["discussion"]["comments"]["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|n| n["slug"].as_str().expect("slug").to_owned())
            .collect();
        assert_eq!(listed, posted);
    }
}

/// Records the page numbers each query by page number asks for, and the pages each read of
/// page headers covers (`None` for every page of the discussion).
#[derive(Clone, Default)]
struct PageRequests {
    pages: Arc<std::sync::Mutex<Vec<Vec<i64>>>>,
    headers: Arc<std::sync::Mutex<Vec<HeaderRead>>>,
}

/// The pages a read of page headers covers, `[from, to)`; `None` for every page.
type HeaderRead = Option<(i64, i64)>;

impl PageRequests {
    /// A test app with pages of 3 whose page-number reads are recorded.
    async fn app(name: &str) -> (PageRequests, TestApp) {
        let requests = PageRequests::default();
        let app = TestApp::with(
            name,
            Settings {
                command_events: Some(requests.handler()),
                ..settings(3)
            },
        )
        .await;
        (requests, app)
    }

    fn handler(&self) -> mongodb::event::EventHandler<mongodb::event::command::CommandEvent> {
        let (pages_sink, headers_sink) = (self.pages.clone(), self.headers.clone());
        mongodb::event::EventHandler::callback(
            move |event: mongodb::event::command::CommandEvent| {
                let mongodb::event::command::CommandEvent::Started(started) = event else {
                    return;
                };
                let command = &started.command;
                let pages = command
                    .get_array("pipeline")
                    .ok()
                    .and_then(|p| p.first())
                    .and_then(Bson::as_document)
                    .and_then(|m| m.get_document("$match").ok())
                    .and_then(|m| m.get_document("page").ok())
                    .and_then(|page| page.get_array("$in").ok())
                    .map(|pages| pages.iter().filter_map(Bson::as_i64).collect::<Vec<_>>());
                if let Some(pages) = pages {
                    pages_sink
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(pages);
                }
                // A read of page headers: a `find` that projects the thread pages.
                let headers = command.get_str("find").is_ok()
                    && command
                        .get_document("projection")
                        .is_ok_and(|p| p.contains_key("thread_pages"));
                if headers {
                    let range = command
                        .get_document("filter")
                        .ok()
                        .and_then(|f| f.get_document("page").ok())
                        .map(|page| {
                            let bound = |op: &str| page.get(op).and_then(Bson::as_i64);
                            (bound("$gte").expect("from"), bound("$lt").expect("to"))
                        });
                    headers_sink
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(range);
                }
            },
        )
    }

    fn take(&self) -> Vec<Vec<i64>> {
        std::mem::take(&mut *self.pages.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn take_headers(&self) -> Vec<HeaderRead> {
        std::mem::take(&mut *self.headers.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_read_only_the_pages_that_hold_their_window() {
    let (requests, app) = PageRequests::app("bucketed_reply_pages").await;
    let d = app.discussion("replies over many pages").await;
    let parent = app.post(&d, None, "the parent").await;
    // Each reply lands two comments after the one before: 12 replies over 9 pages of 3.
    let mut replies = Vec::new();
    for i in 0..12 {
        app.post(&d, None, &format!("filler {i}")).await;
        replies.push(app.post(&d, Some(&parent), &format!("reply {i}")).await);
    }
    let page_of = pages_by_slug(&raw_pages(&app, &d).await);
    let store = app.store();
    let discussion = load_discussion(store, &d).await;
    let layout = store.layout(Layout::Bucketed).expect("layout");
    let parent_slug = Slug::parse(&parent).expect("slug");
    for (skip, limit) in [(0, 2), (0, 12), (5, 3), (10, 5), (12, 3)] {
        let scope = ReadScope::new();
        layout
            .by_slugs(&scope, &discussion, std::slice::from_ref(&parent_slug))
            .await
            .expect("parent");
        requests.take();
        let page = layout
            .replies(
                &scope,
                &discussion,
                std::slice::from_ref(&parent_slug),
                &Window::Offset { skip, limit },
            )
            .await
            .expect("replies")
            .remove(&parent_slug)
            .expect("a page");
        let end = (skip as usize + limit).min(replies.len());
        let expected = &replies[(skip as usize).min(end)..end];
        assert_eq!(slugs(&page.items), expected, "replies {skip}+{limit}");
        assert_eq!(
            page.has_next,
            end < replies.len(),
            "more after {skip}+{limit}"
        );
        // Only the pages of replies skip..skip+limit+1 (one more says whether more follow).
        let mut pages: Vec<i64> = replies
            [(skip as usize).min(replies.len())..(end + 1).min(replies.len())]
            .iter()
            .map(|s| page_of[s])
            .collect();
        pages.dedup();
        let asked = requests.take();
        if pages.is_empty() {
            assert!(asked.is_empty(), "no page to read, yet {asked:?}");
        } else {
            assert_eq!(asked, vec![pages], "pages read for replies {skip}+{limit}");
        }
    }
    // Cursor windows read every page of the parent's replies and agree with the offsets.
    let mut walked: Vec<Comment> = Vec::new();
    loop {
        let scope = ReadScope::new();
        layout
            .by_slugs(&scope, &discussion, std::slice::from_ref(&parent_slug))
            .await
            .expect("parent");
        let cursor = walked.last().map(|c| Cursor::Chronological {
            posted: c.posted,
            slug: c.slug.clone(),
        });
        let page = layout
            .replies(
                &scope,
                &discussion,
                std::slice::from_ref(&parent_slug),
                &Window::After { cursor, limit: 5 },
            )
            .await
            .expect("replies")
            .remove(&parent_slug)
            .expect("a page");
        walked.extend(page.items);
        if !page.has_next {
            break;
        }
    }
    assert_eq!(slugs(&walked), replies);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_levels_of_a_tree_read_each_page_once_per_request() {
    let (requests, app) = PageRequests::app("bucketed_tree_pages_once").await;
    let d = app.discussion("a tree over many pages").await;
    let root = app.post(&d, None, "the root").await;
    // Six replies, each answered right away and again after two fillers: a reply's own
    // replies lie on its page and on the next ones (pages of 3).
    let mut replies = Vec::new();
    let mut answers: HashMap<String, Vec<String>> = HashMap::new();
    for i in 0..6 {
        let reply = app.post(&d, Some(&root), &format!("reply {i}")).await;
        let first = app.post(&d, Some(&reply), &format!("answer {i}a")).await;
        app.post(&d, None, &format!("filler {i}")).await;
        let second = app.post(&d, Some(&reply), &format!("answer {i}b")).await;
        answers.insert(reply.clone(), vec![first, second]);
        replies.push(reply);
    }
    let page_of = pages_by_slug(&raw_pages(&app, &d).await);
    let store = app.store();
    let discussion = load_discussion(store, &d).await;
    let layout = store.layout(Layout::Bucketed).expect("layout");
    let root_slug = Slug::parse(&root).expect("slug");
    let window = Window::After {
        cursor: None,
        limit: 10,
    };
    let requests = &requests;
    let levels = |scope: ReadScope| {
        let (root_slug, window, discussion) = (&root_slug, &window, &discussion);
        async move {
            layout
                .by_slugs(&scope, discussion, std::slice::from_ref(root_slug))
                .await
                .expect("root");
            requests.take();
            let first = layout
                .replies(&scope, discussion, std::slice::from_ref(root_slug), window)
                .await
                .expect("replies")
                .remove(root_slug)
                .expect("a page");
            let read_first = requests.take();
            let parents: Vec<Slug> = first.items.iter().map(|c| c.slug.clone()).collect();
            let second = layout
                .replies(&scope, discussion, &parents, window)
                .await
                .expect("replies of replies");
            (first, read_first, second, requests.take())
        }
    };
    let (first, read_first, second, read_second) = levels(ReadScope::new()).await;
    assert_eq!(slugs(&first.items), replies);
    for reply in &replies {
        let got = &second[&Slug::parse(reply).expect("slug")];
        assert_eq!(slugs(&got.items), answers[reply], "answers to {reply}");
        assert!(!got.has_next);
    }
    let mut first_pages: Vec<i64> = replies.iter().map(|s| page_of[s]).collect();
    first_pages.dedup();
    assert_eq!(
        read_first,
        vec![first_pages.clone()],
        "pages of the first level"
    );
    // The second level asks only for the pages the first did not read, in one query.
    let mut second_pages: Vec<i64> = answers
        .values()
        .flatten()
        .map(|s| page_of[s])
        .filter(|page| !first_pages.contains(page))
        .collect();
    second_pages.sort_unstable();
    second_pages.dedup();
    assert!(!second_pages.is_empty() && second_pages.len() < 6);
    assert_eq!(read_second, vec![second_pages], "pages of the second level");
    // Another request reads its pages again, and gets the same answers.
    let (again, read_again, second_again, _) = levels(ReadScope::new()).await;
    assert_eq!(slugs(&again.items), replies);
    assert_eq!(read_again, vec![first_pages]);
    assert_eq!(second_again.len(), second.len());
    for (parent, page) in &second {
        assert_eq!(slugs(&second_again[parent].items), slugs(&page.items));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_through_the_api_does_not_read_a_discussion_it_posted_to() {
    let app = TestApp::with("bucketed_api_post_cost", settings(100)).await;
    let d = app.discussion("api post cost").await;
    let root = app.post(&d, None, "first").await;
    // A comment another process posted: this one has not seen it.
    let other = Store::connect(&store_config(&app.database, &settings(100)))
        .await
        .expect("connect");
    let discussion = load_discussion(&other, &d).await;
    let unseen = post_in(&other, Layout::Bucketed, &discussion, None, "elsewhere").await;
    let unseen = unseen.to_string();
    const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }";
    let posts = [
        (None, false),
        (Some(root.clone()), false),
        (Some(unseen.clone()), true),
        (Some(unseen.clone()), false),
    ];
    for (parent, read) in posts {
        let before = app.store().commands().snapshot();
        let response = app
            .exec(POST, json!({ "d": d, "p": parent, "t": "warm" }))
            .await;
        assert!(
            response["data"]["postComment"]["slug"].is_string(),
            "{response:#}"
        );
        let spent = diff(&before, &app.store().commands().snapshot());
        // A post's slug is guarded in the pages command; a reply reads its parent and its
        // thread's root the first time the process meets them.
        let read = u64::from(read);
        let expected: BTreeMap<String, u64> =
            [("aggregate", read), ("update", 2), ("commitTransaction", 1)]
                .into_iter()
                .filter(|(_, v)| *v > 0)
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
        assert_eq!(spent, expected, "a warm post under {parent:?}");
    }
    // Locked meanwhile (by anyone): the post's own transaction sees it.
    let raw = raw_db(&app).await.collection::<Document>("discussions");
    raw.update_one(doc! { "_id": &d }, doc! { "$set": { "locked": true } })
        .await
        .expect("lock");
    let response = app
        .exec(POST, json!({ "d": d, "p": root, "t": "too late" }))
        .await;
    assert_eq!(
        response["errors"][0]["extensions"]["code"],
        json!("FORBIDDEN"),
        "{response:#}"
    );
    let stored: i64 = raw_pages(&app, &d)
        .await
        .iter()
        .map(|p| int(p, "count"))
        .sum();
    assert_eq!(stored, 6, "nothing of the refused post stays");
}

/// What a process remembers of where comments live is checked by the reply's own pages command:
/// a comment that is not where it was remembered (here moved behind the store's back) costs the
/// post a retry from a read, and counts the reply where the comment is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_comment_not_where_the_process_remembered_it_is_read_again() {
    let app = TestApp::with("bucketed_stale_location", settings(3)).await;
    let d = app.discussion("stale location").await;
    let mut posted = Vec::new();
    for text in ["a", "b", "c", "d"] {
        posted.push(app.post(&d, None, text).await);
    }
    let pages = raw_pages(&app, &d).await;
    assert_eq!(pages.len(), 2);
    let moved = comments(&pages[0])
        .into_iter()
        .find(|c| c.get_str("slug") == Ok(posted[0].as_str()))
        .expect("the first comment is on page 0")
        .clone();
    let raw = raw_db(&app).await.collection::<Document>("comment_pages");
    raw.update_one(
        doc! { "_id": pages[0].get("_id").expect("id") },
        doc! { "$pull": { "comments": { "slug": &posted[0] } }, "$inc": { "count": -1 } },
    )
    .await
    .expect("take it off page 0");
    raw.update_one(
        doc! { "_id": pages[1].get("_id").expect("id") },
        doc! {
            "$push": { "comments": { "$each": [moved], "$sort": { "posted": 1, "slug": 1 } } },
            "$inc": { "count": 1 },
        },
    )
    .await
    .expect("put it on page 1");
    let before = app.store().commands().snapshot();
    let reply = app.post(&d, Some(&posted[0]), "to the moved one").await;
    let spent = diff(&before, &app.store().commands().snapshot());
    assert_eq!(spent.get("abortTransaction"), Some(&1), "{spent:?}");
    assert_eq!(spent.get("aggregate"), Some(&1), "{spent:?}");
    let pages = raw_pages(&app, &d).await;
    let count_of = |page: &Document, slug: &str| {
        comments(page)
            .into_iter()
            .find(|c| c.get_str("slug") == Ok(slug))
            .map(|c| int(c, "reply_count"))
    };
    assert_eq!(count_of(&pages[1], &posted[0]), Some(1));
    assert!(comments(&pages[0])
        .iter()
        .all(|c| int(c, "reply_count") == 0));
    let stored: Vec<String> = pages
        .iter()
        .flat_map(|p| comments(p))
        .map(|c| c.get_str("slug").expect("slug").to_owned())
        .collect();
    assert_eq!(
        stored.iter().filter(|s| **s == reply).count(),
        1,
        "stored once"
    );
    // And again: now it knows where the comment is (page 1 is full after this one, so the post
    // goes on to page 2 on its second try).
    let before = app.store().commands().snapshot();
    app.post(&d, Some(&posted[0]), "once more").await;
    let spent = diff(&before, &app.store().commands().snapshot());
    assert_eq!(spent.get("aggregate"), None, "{spent:?}");
    let pages = raw_pages(&app, &d).await;
    assert_eq!(count_of(&pages[1], &posted[0]), Some(2));
}

/// Another server moves the discussion out of the layout and back while this one remembers where
/// its comments were (and posts from the discussion as it kept it): its next replies are stored
/// once and counted where their parents are now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_by_another_server_does_not_mislead_what_this_one_remembers() {
    let app = TestApp::with("bucketed_known_moved", settings(3)).await;
    let d = app.discussion("known moved").await;
    let mut posted = Vec::new();
    for text in ["a", "b", "c", "d", "e"] {
        posted.push(app.post(&d, None, text).await);
    }
    let reply = app.post(&d, Some(&posted[3]), "remembered").await;
    let other = Store::connect(&store_config(&app.database, &settings(3)))
        .await
        .expect("connect");
    let id = DiscussionId::parse(&d).expect("id");
    for layout in [Layout::PerComment, Layout::Bucketed] {
        other.migrate(&id, layout, &|_| {}).await.expect("move");
    }
    let before = app.store().commands().snapshot();
    app.post(&d, Some(&reply), "after the move").await;
    let spent = diff(&before, &app.store().commands().snapshot());
    // It tried from what it remembered, which the post's own transaction refused (the
    // discussion moved), then read the parent where the discussion is now.
    assert!(
        spent.get("abortTransaction").is_some_and(|n| *n >= 1),
        "{spent:?}"
    );
    assert_eq!(spent.get("aggregate"), Some(&1), "{spent:?}");
    app.post(&d, Some(&posted[0]), "to the first").await;
    app.post(&d, Some(&reply), "again").await;
    let pages = raw_pages(&app, &d).await;
    check_thread_pages(&pages);
    assert_eq!(check_reply_counts(&pages), 9, "each post stored once");
    let discussion = load_discussion(app.store(), &d).await;
    assert_eq!(discussion.comment_count, 9);
    assert_eq!(discussion.moves, 2);
}

/// Checks every stored comment's `reply_count` against the comments stored under it; returns
/// how many comments the pages hold.
fn check_reply_counts(pages: &[Document]) -> usize {
    let stored: Vec<&Document> = pages.iter().flat_map(|p| comments(p)).collect();
    for c in &stored {
        let slug = c.get_str("slug").expect("slug");
        let children = stored
            .iter()
            .filter(|o| o.get_str("parent").ok() == Some(slug))
            .count() as i64;
        assert_eq!(int(c, "reply_count"), children, "reply count of {slug}");
    }
    stored.len()
}

/// Each page's `thread_pages` as stored: the pages that hold the threads it starts.
fn thread_pages_of(page: &Document) -> BTreeMap<i64, i64> {
    page.get_document("thread_pages")
        .map(|d| {
            d.keys()
                .map(|k| (k.parse().expect("a page number"), int(d, k)))
                .collect()
        })
        .unwrap_or_default()
}

/// Checks every page's `thread_pages` against the stored comments; returns them per page (the
/// pages holding the comments of the threads each page starts) and each comment's page.
fn check_thread_pages(
    pages: &[Document],
) -> (BTreeMap<i64, BTreeMap<i64, i64>>, HashMap<String, i64>) {
    let page_of = pages_by_slug(pages);
    let mut expected: BTreeMap<i64, BTreeMap<i64, i64>> = BTreeMap::new();
    for (slug, page) in &page_of {
        let root = slug.split('/').next().expect("a root");
        *expected
            .entry(page_of[root])
            .or_default()
            .entry(*page)
            .or_default() += 1;
    }
    for page in pages {
        let n = int(page, "page");
        let kept = thread_pages_of(page);
        assert_eq!(
            kept,
            expected.get(&n).cloned().unwrap_or_default(),
            "thread pages of page {n}"
        );
        assert_eq!(kept.values().sum::<i64>(), int(page, "thread_total"));
    }
    (expected, page_of)
}

/// Four threads that stay lively while others start, so that their comments spread over the
/// pages (pages of 3): returns their top-level comments and, per thread, its deepest reply.
async fn lively_threads(app: &TestApp, d: &str) -> (Vec<String>, Vec<String>) {
    let mut heads = Vec::new();
    for i in 0..4 {
        heads.push(app.post(d, None, &format!("thread {i}")).await);
    }
    let mut last_reply = heads.clone();
    for round in 0..6 {
        for (i, head) in heads.iter().enumerate() {
            let parent = if round % 2 == 0 { head } else { &last_reply[i] };
            last_reply[i] = app
                .post(d, Some(parent), &format!("reply {round} in {i}"))
                .await;
        }
        app.post(d, None, &format!("filler {round}")).await;
    }
    (heads, last_reply)
}

/// The slugs of a connection's nodes.
fn node_slugs(connection: &serde_json::Value) -> Vec<&str> {
    connection["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["slug"].as_str().expect("slug"))
        .collect()
}

/// The slugs of the discussion's comments in threaded order (by full slug), from its pages.
fn threaded_order(pages: &[Document]) -> Vec<String> {
    let mut threaded: Vec<(String, String)> = pages
        .iter()
        .flat_map(comments)
        .map(|c| {
            (
                c.get_str("full_slug").expect("full slug").to_owned(),
                c.get_str("slug").expect("slug").to_owned(),
            )
        })
        .collect();
    threaded.sort();
    threaded.into_iter().map(|(_, slug)| slug).collect()
}

/// Checks the threaded window `skip`, `limit` read from the store against `threaded` (the
/// expected order); returns where it ends.
async fn check_threaded_window(
    store: &Store,
    discussion: &Discussion,
    threaded: &[String],
    skip: usize,
    limit: usize,
) -> usize {
    let page = store
        .layout(Layout::Bucketed)
        .expect("layout")
        .list(
            &ReadScope::new(),
            discussion,
            Listing::Threaded,
            &Window::Offset {
                skip: skip as u64,
                limit,
            },
        )
        .await
        .expect("threaded page");
    let end = (skip + limit).min(threaded.len());
    assert_eq!(slugs(&page.items), threaded[skip..end], "{skip}+{limit}");
    assert_eq!(
        page.has_next,
        end < threaded.len(),
        "more after {skip}+{limit}"
    );
    end
}

/// Moves the discussion to the per-comment layout and back, as a moderator.
async fn move_out_and_back(app: &TestApp, d: &str) {
    let token = app.moderator_token("mod-1", "Moderator");
    for layout in ["PER_COMMENT", "BUCKETED"] {
        let moved = app
            .exec_as(
                Some(&token),
                "mutation($d: ID!, $l: StorageLayout!) { migrateDiscussion(id: $d, layout: $l) { layout } }",
                json!({ "d": d, "l": layout }),
            )
            .await;
        assert_eq!(
            moved["data"]["migrateDiscussion"]["layout"],
            json!(layout),
            "{moved:#}"
        );
    }
}

/// Pages per block of the discussion's `page_blocks`.
const BLOCK_PAGES: i64 = 32;

/// Checks the discussion's blocks of pages against its pages: per block of 32, the sum of the
/// pages' `thread_total` and the first page's first key; and that the store uses them.
async fn check_page_blocks(app: &TestApp, d: &str, pages: &[Document]) {
    let mut counts: BTreeMap<i64, i64> = BTreeMap::new();
    let mut keys: BTreeMap<i64, String> = BTreeMap::new();
    for page in pages {
        let block = int(page, "page") / BLOCK_PAGES;
        *counts.entry(block).or_default() += int(page, "thread_total");
        keys.entry(block)
            .or_insert_with(|| page.get_str("first_key").expect("first key").to_owned());
    }
    let stored = raw_db(app)
        .await
        .collection::<Document>("discussions")
        .find_one(doc! { "_id": d })
        .await
        .expect("discussion")
        .expect("a discussion");
    let blocks = stored.get_document("page_blocks").expect("page blocks");
    let kept: BTreeMap<i64, i64> = blocks
        .keys()
        .map(|k| (k.parse().expect("a block"), int(blocks, k)))
        .collect();
    assert_eq!(kept, counts, "comments of the threads each block starts");
    let first_keys = stored.get_document("page_block_keys").expect("block keys");
    let kept: BTreeMap<i64, String> = first_keys
        .iter()
        .map(|(k, v)| {
            (
                k.parse().expect("a block"),
                v.as_str().expect("a key").to_owned(),
            )
        })
        .collect();
    assert_eq!(kept, keys, "first key of each block");
    assert!(
        Hints::of(&load_discussion(app.store(), d).await)
            .page_blocks
            .is_some(),
        "the counts account for every comment"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threaded_pages_read_the_headers_of_their_blocks_only() {
    let (requests, app) = PageRequests::app("bucketed_page_blocks").await;
    let d = app.discussion("threads over many blocks").await;
    // 9 × 34 comments in pages of 3: 102 pages, four blocks.
    for _ in 0..9 {
        lively_threads(&app, &d).await;
    }
    let pages = raw_pages(&app, &d).await;
    assert!(
        pages.len() as i64 > 3 * BLOCK_PAGES,
        "{} pages",
        pages.len()
    );
    check_page_blocks(&app, &d, &pages).await;
    let threaded = threaded_order(&pages);
    let total = threaded.len();

    let store = app.store();
    let layout = store.layout(Layout::Bucketed).expect("layout");
    let bounded = |reads: Vec<HeaderRead>, what: &str| {
        assert_eq!(reads.len(), 1, "{what}: one read of headers: {reads:?}");
        let (from, to) = reads[0].unwrap_or_else(|| panic!("{what}: every page's header read"));
        assert!(
            to - from <= 2 * BLOCK_PAGES,
            "{what}: headers of pages {from}..{to}"
        );
    };
    let discussion = load_discussion(store, &d).await;
    for (skip, limit) in [(0, 5), (100, 10), (150, 7), (290, 10), (total - 3, 5)] {
        requests.take_headers();
        check_threaded_window(store, &discussion, &threaded, skip, limit).await;
        bounded(requests.take_headers(), &format!("offset {skip}"));
    }
    let past = layout
        .list(
            &ReadScope::new(),
            &discussion,
            Listing::Threaded,
            &Window::Offset {
                skip: total as u64,
                limit: 5,
            },
        )
        .await
        .expect("past the end");
    assert!(past.items.is_empty() && !past.has_next);
    requests.take_headers();
    let walked = all_by_cursor(store, &discussion, Listing::Threaded, 9).await;
    assert_eq!(slugs(&walked), threaded);
    let reads = requests.take_headers();
    assert_eq!(reads.len(), total.div_ceil(9), "one read of headers a page");
    for read in reads {
        bounded(vec![read], "cursor page");
    }

    // Over GraphQL, from the discussion the request reads.
    let data = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { comments(order: THREADED, offset: 200, first: 10) { nodes { slug } } } }",
            json!({ "d": d }),
        )
        .await;
    let nodes = node_slugs(&data["discussion"]["comments"]);
    assert_eq!(nodes, threaded[200..210]);
    bounded(requests.take_headers(), "GraphQL offset 200");

    // Counts from before they were kept, or that miss a post: every page's header is read.
    let raw = raw_db(&app).await.collection::<Document>("discussions");
    for change in [
        doc! { "$inc": { "page_blocks.1": -1_i64 } },
        doc! { "$unset": { "page_blocks": "" } },
    ] {
        raw.update_one(doc! { "_id": &d }, change)
            .await
            .expect("change the counts");
        let discussion = load_discussion(store, &d).await;
        assert!(Hints::of(&discussion).page_blocks.is_none());
        assert_eq!(
            slugs(&all_by_offset(store, &discussion, Listing::Threaded, 11).await),
            threaded
        );
        assert_eq!(
            slugs(&all_by_cursor(store, &discussion, Listing::Threaded, 8).await),
            threaded
        );
        assert!(requests.take_headers().iter().all(Option::is_none));
    }

    // A move out and back in counts them again.
    move_out_and_back(&app, &d).await;
    check_page_blocks(&app, &d, &raw_pages(&app, &d).await).await;
    let discussion = load_discussion(store, &d).await;
    requests.take_headers();
    assert_eq!(
        slugs(&all_by_offset(store, &discussion, Listing::Threaded, 10).await),
        threaded
    );
    assert!(requests.take_headers().iter().all(Option::is_some));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_discussions_read_only_the_pages_of_their_thread() {
    let (requests, app) = PageRequests::app("bucketed_sub_thread_pages").await;
    let d = app.discussion("sub-discussions over many pages").await;
    let (heads, _) = lively_threads(&app, &d).await;
    let pages = raw_pages(&app, &d).await;
    let (expected, page_of) = check_thread_pages(&pages);
    let threaded = threaded_order(&pages);
    let below = |root: &str| -> Vec<String> {
        let prefix = format!("{root}/");
        threaded
            .iter()
            .filter(|slug| slug.starts_with(&prefix))
            .cloned()
            .collect()
    };
    // The pages of the root's thread from the root's own page on.
    let pages_of_thread = |root: &str| -> Vec<i64> {
        let head = root.split('/').next().expect("a head");
        expected[&page_of[head]]
            .keys()
            .copied()
            .filter(|p| *p >= page_of[root])
            .collect()
    };
    let query = "query($d: ID!, $h: String!, $s: String!) {
        head: comment(discussionId: $d, slug: $h) { slug }
        root: comment(discussionId: $d, slug: $s) {
            subDiscussion(first: 100) { totalCount nodes { slug } } } }";
    let some_reply = |head: &str| -> String {
        below(head)
            .into_iter()
            .find(|s| !below(s).is_empty())
            .expect("a reply with replies")
    };
    let mut fewer = false;
    for head in &heads {
        for root in [head.clone(), some_reply(head)] {
            requests.take();
            let data = app.ok(query, json!({ "d": d, "h": head, "s": root })).await;
            let sub = &data["root"]["subDiscussion"];
            let want = below(&root);
            let nodes = node_slugs(sub);
            assert_eq!(nodes, want, "sub-discussion of {root}");
            assert_eq!(sub["totalCount"], json!(want.len()), "count of {root}");
            // The comments and their count, each from just the pages of the thread.
            let wanted = pages_of_thread(&root);
            fewer |= wanted.len() < pages.len();
            assert_eq!(
                requests.take(),
                vec![wanted.clone(), wanted],
                "pages read for {root}"
            );
        }
    }
    assert!(
        fewer,
        "some sub-discussion reads fewer pages than there are"
    );

    // Where the thread's top-level comment was not read in the request, or its page does not
    // count all of its threads, the pages that hold the descendants are found by range.
    let head = &heads[1];
    let alone = "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) {
        subDiscussion(first: 100) { totalCount nodes { slug } } } }";
    let reply = some_reply(head);
    let data = app.ok(alone, json!({ "d": d, "s": reply })).await;
    assert_eq!(
        data["comment"]["subDiscussion"]["totalCount"],
        json!(below(&reply).len())
    );
    assert!(requests.take().is_empty(), "read by range");
    let raw = raw_db(&app).await.collection::<Document>("comment_pages");
    raw.update_one(
        doc! { "discussion_id": &d, "page": page_of[head] },
        doc! { "$unset": { "thread_pages": "" } },
    )
    .await
    .expect("unset");
    let data = app.ok(query, json!({ "d": d, "h": head, "s": head })).await;
    let nodes = node_slugs(&data["root"]["subDiscussion"]);
    assert_eq!(nodes, below(head));
    assert!(requests.take().is_empty(), "read by range");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threaded_pages_read_only_the_pages_of_their_threads() {
    let (requests, app) = PageRequests::app("bucketed_thread_pages").await;
    let d = app.discussion("threads over many pages").await;
    lively_threads(&app, &d).await;

    // What the pages say, and what it should say: the pages of each page's threads.
    let pages = raw_pages(&app, &d).await;
    let (expected, page_of) = check_thread_pages(&pages);
    let threaded = threaded_order(&pages);
    let root_of = |slug: &str| slug.split('/').next().expect("a root").to_owned();

    let store = app.store();
    let discussion = load_discussion(store, &d).await;
    let total = threaded.len();
    let mut fewer = false;
    for (skip, limit) in [(0, 4), (3, 5), (10, 6), (20, 10), (total - 3, 5)] {
        requests.take();
        let end = check_threaded_window(store, &discussion, &threaded, skip, limit).await;
        // Read: the pages holding the threads that start on the pages from the window's first
        // thread to the thread of the comment after it (or the last page).
        let first = page_of[&root_of(&threaded[skip])];
        let last = threaded
            .get(end)
            .map_or(int(pages.last().expect("pages"), "page"), |s| {
                page_of[&root_of(s)]
            });
        let mut wanted: Vec<i64> = (first..=last)
            .flat_map(|p| expected.get(&p).into_iter().flat_map(|m| m.keys().copied()))
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        fewer |= wanted.len() < pages.len();
        assert_eq!(
            requests.take(),
            vec![wanted],
            "pages read for {skip}+{limit}"
        );
    }
    assert!(
        fewer,
        "some window reads fewer pages than the discussion has"
    );

    let walked = all_by_cursor(store, &discussion, Listing::Threaded, 5).await;
    assert_eq!(slugs(&walked), threaded);

    // Pages from before the counts (none kept, or a part): read the way that does not need them.
    let raw = raw_db(&app).await.collection::<Document>("comment_pages");
    raw.update_one(
        doc! { "discussion_id": &d, "page": 0 },
        doc! { "$unset": { "thread_pages": "" } },
    )
    .await
    .expect("unset");
    let counted = *expected[&1].keys().next().expect("page 1 starts a thread");
    raw.update_one(
        doc! { "discussion_id": &d, "page": 1 },
        doc! { "$unset": { format!("thread_pages.{counted}"): "" } },
    )
    .await
    .expect("unset one");
    assert_eq!(
        slugs(&all_by_offset(store, &discussion, Listing::Threaded, 4).await),
        threaded
    );
    assert_eq!(
        slugs(&all_by_cursor(store, &discussion, Listing::Threaded, 7).await),
        threaded
    );

    // A move out and back in counts them again, as posts would have.
    move_out_and_back(&app, &d).await;
    check_thread_pages(&raw_pages(&app, &d).await);
    let discussion = load_discussion(store, &d).await;
    requests.take();
    assert_eq!(
        slugs(&all_by_offset(store, &discussion, Listing::Threaded, 4).await),
        threaded
    );
    assert!(
        !requests.take().is_empty(),
        "moved pages are read by their thread pages"
    );
}

/// Threaded pages and sub-discussion pages decode only their window from the pages they read,
/// and keep the parents those pages held: showing what each comment answers costs no command
/// more than the page itself did, even where the parent is before the window.
#[tokio::test]
async fn windows_keep_the_parents_they_read() {
    let (_requests, app) = PageRequests::app("bucketed_window_parents").await;
    let d = app.discussion("parents of windows").await;
    let (heads, _) = lively_threads(&app, &d).await;
    let pages = raw_pages(&app, &d).await;
    let parent_of: HashMap<String, Option<String>> = pages
        .iter()
        .flat_map(|page| comments(page))
        .map(|c| {
            let slug = c.get_str("slug").expect("slug").to_owned();
            (slug, c.get_str("parent").ok().map(str::to_owned))
        })
        .collect();
    let head = &heads[1];
    let first = app
        .ok(
            "query($d: ID!, $h: String!) { comment(discussionId: $d, slug: $h) {
                subDiscussion(first: 2) { pageInfo { endCursor } } } }",
            json!({ "d": d, "h": head }),
        )
        .await;
    let after = first["comment"]["subDiscussion"]["pageInfo"]["endCursor"].clone();
    let windows = [
        (
            "threaded page at an offset",
            "query($d: ID!) { discussion(id: $d) {
                comments(order: THREADED, offset: 5, first: 8) { nodes { slug FIELDS } } } }",
            json!({ "d": d }),
            vec!["discussion", "comments"],
        ),
        (
            "sub-discussion after a cursor",
            "query($d: ID!, $h: String!, $c: String!) { comment(discussionId: $d, slug: $h) {
                subDiscussion(first: 4, after: $c) { nodes { slug FIELDS } } } }",
            json!({ "d": d, "h": head, "c": after }),
            vec!["comment", "subDiscussion"],
        ),
    ];
    for (what, query, vars, path) in windows {
        let before = app.commands();
        app.ok(&query.replace("FIELDS", ""), vars.clone()).await;
        let plain = app.commands() - before;
        let before = app.commands();
        let data = app
            .ok(&query.replace("FIELDS", "parent { slug }"), vars.clone())
            .await;
        let with_parents = app.commands() - before;
        assert_eq!(with_parents, plain, "{what}: the parents cost no command");
        let nodes = path.iter().fold(&data, |value, key| &value[*key])["nodes"]
            .as_array()
            .expect("nodes")
            .clone();
        assert!(!nodes.is_empty(), "{what}: a window");
        let in_window: HashSet<&str> = nodes
            .iter()
            .map(|n| n["slug"].as_str().expect("slug"))
            .collect();
        let mut before_window = false;
        for node in &nodes {
            let slug = node["slug"].as_str().expect("slug");
            let parent = node["parent"]["slug"].as_str().map(str::to_owned);
            assert_eq!(parent, parent_of[slug], "{what}: parent of {slug}");
            before_window |= parent.as_deref().is_some_and(|p| !in_window.contains(p));
        }
        assert!(before_window, "{what}: some parent is outside the window");
    }
}

/// The sealed pages of a bucketed discussion, as its hints give them.
fn full_pages(discussion: &Discussion) -> &Option<FullPages> {
    &Hints::of(discussion).full_pages
}
