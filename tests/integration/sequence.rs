//! Per-discussion sequence numbers of the per-comment layout: dense, in chronological order,
//! under concurrent writers on two servers; and pages read from them equal pages read the
//! general way.

use futures::TryStreamExt;
use mongodb::bson::{doc, Document};
use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::support::{
    finds, post_graphql, server_uri, token, unique_db, Running, Settings, TestApp,
};

/// Writers per server.
const WRITERS: usize = 6;
/// Posts per writer.
const POSTS: usize = 20;

/// Every slug of a listing (`comments` or `threads`, `comments(order: THREADED)` with the field
/// `threaded`), read through the API seven at a time, by offset or by cursor.
async fn listing_slugs(
    client: &reqwest::Client,
    server: &Running,
    d: &str,
    field: &str,
    by_offset: bool,
) -> Vec<String> {
    let (field, order) = match field {
        "threaded" => ("comments", "order: THREADED, "),
        other => (other, ""),
    };
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let (params, args, variables) = match by_offset {
            true => ("$o: Int", "offset: $o", json!({ "d": d, "o": seen.len() })),
            false => ("$a: String", "after: $a", json!({ "d": d, "a": after })),
        };
        let query = format!(
            "query($d: ID!, {params}) {{ discussion(id: $d) {{ {field}({order}first: 7, {args}) {{ nodes {{ slug }} pageInfo {{ hasNextPage endCursor }} }} }} }}"
        );
        let (_, body) = post_graphql(client, server, None, &query, variables).await;
        let connection = &body["data"]["discussion"][field];
        let nodes = connection["nodes"]
            .as_array()
            .unwrap_or_else(|| panic!("{body}"));
        seen.extend(nodes.iter().map(|n| n["slug"].as_str().unwrap().to_owned()));
        if connection["pageInfo"]["hasNextPage"] != Value::Bool(true) {
            return seen;
        }
        after = connection["pageInfo"]["endCursor"]
            .as_str()
            .map(str::to_owned);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_are_dense_and_chronological_under_concurrent_writers() {
    let config = Settings::new(Layout::PerComment).config(&unique_db("sequence"));
    let database = config.database.clone();
    let servers = [
        Running::start(config.clone()).await,
        Running::start(config).await,
    ];
    let token = token("u1", "Ada");
    let client = reqwest::Client::new();
    let d = servers[0].discussion(&token, Layout::PerComment).await;

    // Writers on both servers post top-level comments, replies to their own last comment
    // (depth 1 and 2) and replies to the first thread of the writer before them (so that threads
    // grow while later ones begin).
    let first_threads: Vec<tokio::sync::OnceCell<String>> = (0..WRITERS * servers.len())
        .map(|_| tokio::sync::OnceCell::new())
        .collect();
    let mut writers = Vec::new();
    for w in 0..WRITERS * servers.len() {
        let (token, d, first_threads) = (token.clone(), d.clone(), &first_threads);
        let server = &servers[w % servers.len()];
        writers.push(async move {
            let mut last: Option<String> = None;
            for i in 0..POSTS {
                let earlier = first_threads[(w + first_threads.len() - 1) % first_threads.len()]
                    .get()
                    .cloned();
                let parent = match (i % 5, earlier) {
                    (0, _) => None,
                    (4, Some(earlier)) => Some(earlier),
                    _ => last.clone(),
                };
                let slug = server.post(&token, &d, parent.as_deref(), "x").await;
                if parent.is_none() {
                    let _ = first_threads[w].set(slug.clone());
                }
                last = Some(slug);
            }
        });
    }
    futures::future::join_all(writers).await;

    let comments: Vec<Document> = mongodb::Client::with_uri_str(server_uri())
        .await
        .unwrap()
        .database(&database)
        .collection::<Document>("comments")
        .find(doc! { "discussion_id": &d })
        .sort(doc! { "posted": 1, "slug": 1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let total = WRITERS * servers.len() * POSTS;
    assert_eq!(comments.len(), total);
    // In chronological order the numbers are 1, 2, 3… and the top-level ones 1, 2, 3… too.
    let seqs: Vec<i64> = comments.iter().map(|c| c.get_i64("seq").unwrap()).collect();
    assert_eq!(seqs, (1..=total as i64).collect::<Vec<_>>());
    let threads: Vec<i64> = comments
        .iter()
        .filter(|c| c.get("parent").is_some_and(|p| p.as_null().is_some()))
        .map(|c| c.get_i64("thread_seq").unwrap())
        .collect();
    assert_eq!(threads, (1..=threads.len() as i64).collect::<Vec<_>>());
    assert!(comments
        .iter()
        .filter(|c| c.get_str("parent").is_ok())
        .all(|c| c.get("thread_seq").is_none()));

    // Every comment carries its thread's number; each thread's total and each block's count
    // (on the discussion) are exact.
    let thread_of: std::collections::HashMap<&str, i64> = comments
        .iter()
        .filter_map(|c| Some((c.get_str("slug").ok()?, c.get_i64("thread_seq").ok()?)))
        .collect();
    let mut totals: std::collections::BTreeMap<i64, i64> = Default::default();
    for c in &comments {
        let slug = c.get_str("slug").unwrap();
        let root = slug.split('/').next().unwrap();
        assert_eq!(c.get_i64("thread").unwrap(), thread_of[root], "{c}");
        *totals.entry(thread_of[root]).or_default() += 1;
    }
    for c in comments.iter().filter(|c| c.get("thread_seq").is_some()) {
        let thread = c.get_i64("thread_seq").unwrap();
        assert_eq!(c.get_i64("thread_total").unwrap(), totals[&thread], "{c}");
    }
    // And every comment's subtree size.
    let mut below: std::collections::HashMap<String, i64> = Default::default();
    for c in &comments {
        let slug = c.get_str("slug").unwrap();
        for (i, _) in slug.match_indices('/') {
            *below.entry(slug[..i].to_owned()).or_default() += 1;
        }
    }
    for c in &comments {
        let slug = c.get_str("slug").unwrap();
        let expected = below.get(slug).copied().unwrap_or(0);
        assert_eq!(c.get_i64("descendants").unwrap(), expected, "{c}");
    }
    let stored = mongodb::Client::with_uri_str(server_uri())
        .await
        .unwrap()
        .database(&database)
        .collection::<Document>("discussions")
        .find_one(doc! { "_id": &d })
        .await
        .unwrap()
        .unwrap();
    let mut blocks: std::collections::BTreeMap<String, i64> = Default::default();
    for (thread, total) in &totals {
        *blocks.entry(((thread - 1) / 32).to_string()).or_default() += total;
    }
    let stored_blocks: std::collections::BTreeMap<String, i64> = stored
        .get_document("thread_blocks")
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_i64().unwrap()))
        .collect();
    assert_eq!(stored_blocks, blocks);
    assert!(blocks.len() >= 2, "the test spans blocks: {blocks:?}");

    // Pages read from the numbers (by offset and by cursor, all comments and threads) are the
    // chronological order.
    let chronological: Vec<String> = comments
        .iter()
        .map(|c| c.get_str("slug").unwrap().to_owned())
        .collect();
    let top_level: Vec<String> = comments
        .iter()
        .filter(|c| c.get_str("parent").is_err())
        .map(|c| c.get_str("slug").unwrap().to_owned())
        .collect();
    for by_offset in [true, false] {
        assert_eq!(
            listing_slugs(&client, &servers[1], &d, "comments", by_offset).await,
            chronological
        );
    }
    // `threads` pages by cursor only.
    assert_eq!(
        listing_slugs(&client, &servers[0], &d, "threads", false).await,
        top_level
    );
    // Threaded pages, read from the thread counts, are the `full_slug` order.
    let mut threaded: Vec<(&str, &str)> = comments
        .iter()
        .map(|c| (c.get_str("full_slug").unwrap(), c.get_str("slug").unwrap()))
        .collect();
    threaded.sort();
    let threaded: Vec<String> = threaded.into_iter().map(|(_, s)| s.to_owned()).collect();
    for by_offset in [true, false] {
        assert_eq!(
            listing_slugs(&client, &servers[1], &d, "threaded", by_offset).await,
            threaded
        );
    }
    for server in servers {
        server.shutdown().await;
    }
}

/// The full slugs of a connection's nodes.
fn full_slugs(connection: &Value) -> Vec<String> {
    connection["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["fullSlug"].as_str().unwrap().to_owned())
        .collect()
}

/// Threaded pages of a sequenced discussion read the threads the page touches (the top-level
/// comments of the blocks it spans, then one range of `full_slug`), whatever the offset or
/// cursor; and they equal the `full_slug` order at every offset, the end included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threaded_pages_read_only_the_threads_they_touch() {
    let app = TestApp::new("threaded_pages", Layout::PerComment).await;
    let d = app.discussion("threads").await;
    // 70 threads (three blocks) of 1 to 4 comments: chains and siblings.
    for t in 0..70 {
        let root = app.post(&d, None, "root").await;
        let mut last = root.clone();
        for r in 0..t % 4 {
            let parent = if r % 2 == 0 {
                root.clone()
            } else {
                last.clone()
            };
            last = app.post(&d, Some(&parent), "reply").await;
        }
    }
    let everything = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { commentCount comments(order: THREADED, first: 100, offset: 0) { nodes { fullSlug } } } }",
            json!({ "d": d }),
        )
        .await;
    let total = everything["discussion"]["commentCount"].as_u64().unwrap() as usize;
    assert_eq!(total, (0..70).map(|t| 1 + t % 4).sum::<usize>());

    let page = |offset: usize, after: Option<String>| {
        let (params, args, vars) = match after {
            Some(a) => ("$a: String", "after: $a", json!({ "d": d, "a": a })),
            None => ("$o: Int", "offset: $o", json!({ "d": d, "o": offset })),
        };
        let query = format!(
            "query($d: ID!, {params}) {{ discussion(id: $d) {{ comments(order: THREADED, first: 10, {args}) {{ nodes {{ slug fullSlug }} pageInfo {{ hasNextPage endCursor }} }} }} }}"
        );
        (query, vars)
    };

    // Cursors: the discussion, the cursor's thread, the threads after it, the page.
    let mut by_cursor = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let (query, vars) = page(0, after.clone());
        let before = finds(&app);
        let data = app.ok(&query, vars).await;
        let expected = if after.is_some() { 4 } else { 3 };
        assert_eq!(finds(&app) - before, expected, "after {after:?}");
        let connection = &data["discussion"]["comments"];
        by_cursor.extend(full_slugs(connection));
        if connection["pageInfo"]["hasNextPage"] != json!(true) {
            break;
        }
        after = connection["pageInfo"]["endCursor"]
            .as_str()
            .map(str::to_owned);
    }
    let mut sorted = by_cursor.clone();
    sorted.sort();
    assert_eq!(by_cursor.len(), total);
    assert_eq!(by_cursor, sorted);
    // Offsets: the discussion, the blocks' top-level comments, the page.
    for offset in (0..=total + 5).step_by(3) {
        let (query, vars) = page(offset, None);
        let before = finds(&app);
        let data = app.ok(&query, vars).await;
        let nodes = full_slugs(&data["discussion"]["comments"]);
        let expected = &by_cursor[offset.min(total)..(offset + 10).min(total)];
        assert_eq!(nodes, expected, "offset {offset}");
        if offset < total {
            assert_eq!(finds(&app) - before, 3, "offset {offset}");
        }
    }
}

/// A discussion without thread counts (created before they were kept) posts without them and
/// reads its threaded pages the general way, with the same results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discussion_without_thread_counts_reads_threaded_pages_the_general_way() {
    let app = TestApp::new("threaded_without_counts", Layout::PerComment).await;
    let d = app.discussion("from before").await;
    let mut roots = Vec::new();
    for t in 0..6 {
        let root = app.post(&d, None, "root").await;
        app.post(&d, Some(&root), &format!("reply {t}")).await;
        roots.push(root);
    }
    let db = mongodb::Client::with_uri_str(server_uri())
        .await
        .unwrap()
        .database(&app.database);
    db.collection::<Document>("discussions")
        .update_one(
            doc! { "_id": &d },
            doc! { "$unset": { "thread_blocks": "" } },
        )
        .await
        .unwrap();
    // Posts go on without the counts.
    app.post(&d, Some(&roots[0]), "late reply").await;
    app.post(&d, None, "late thread").await;
    let stored = db
        .collection::<Document>("discussions")
        .find_one(doc! { "_id": &d })
        .await
        .unwrap()
        .unwrap();
    assert!(stored.get("thread_blocks").is_none(), "{stored}");

    let mut expected: Vec<String> = db
        .collection::<Document>("comments")
        .find(doc! { "discussion_id": &d })
        .await
        .unwrap()
        .try_collect::<Vec<Document>>()
        .await
        .unwrap()
        .iter()
        .map(|c| c.get_str("full_slug").unwrap().to_owned())
        .collect();
    expected.sort();
    assert_eq!(expected.len(), 14);
    for offset in [0_usize, 5, 13] {
        let before = finds(&app);
        let data = app
            .ok(
                "query($d: ID!, $o: Int) { discussion(id: $d) { comments(order: THREADED, first: 5, offset: $o) { nodes { fullSlug } } } }",
                json!({ "d": d, "o": offset }),
            )
            .await;
        // The discussion, then the page the general way.
        assert_eq!(finds(&app) - before, 2, "offset {offset}");
        let nodes = full_slugs(&data["discussion"]["comments"]);
        assert_eq!(
            nodes,
            expected[offset..(offset + 5).min(14)],
            "offset {offset}"
        );
    }
}
