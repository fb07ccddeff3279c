//! Per-discussion sequence numbers of the per-comment layout: dense, in chronological order,
//! under concurrent writers on two servers; and pages read from them equal pages read the
//! general way.

use futures::TryStreamExt;
use mongodb::bson::{doc, Document};
use serde_json::{json, Value};
use threadql::auth::JwtKeys;
use threadql::domain::Layout;

use crate::support::{post_graphql, server_uri, unique_db, Running, Settings, SECRET};

/// Writers per server.
const WRITERS: usize = 6;
/// Posts per writer.
const POSTS: usize = 20;

/// Every slug of a listing (`comments` or `threads`), read through the API seven at a time, by
/// offset or by cursor.
async fn walk(
    client: &reqwest::Client,
    server: &Running,
    d: &str,
    field: &str,
    by_offset: bool,
) -> Vec<String> {
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let (params, args, variables) = match by_offset {
            true => ("$o: Int", "offset: $o", json!({ "d": d, "o": seen.len() })),
            false => ("$a: String", "after: $a", json!({ "d": d, "a": after })),
        };
        let query = format!(
            "query($d: ID!, {params}) {{ discussion(id: $d) {{ {field}(first: 7, {args}) {{ nodes {{ slug }} pageInfo {{ hasNextPage endCursor }} }} }} }}"
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
    let token = JwtKeys::new(SECRET).mint("u1", "Ada", &[], 600);
    let client = reqwest::Client::new();
    let d = servers[0].discussion(&token, Layout::PerComment).await;

    // Writers on both servers post top-level comments and replies to their own last comment.
    let mut writers = Vec::new();
    for w in 0..WRITERS * servers.len() {
        let (token, d) = (token.clone(), d.clone());
        let server = &servers[w % servers.len()];
        writers.push(async move {
            let mut last: Option<String> = None;
            for i in 0..POSTS {
                let parent = if i % 3 == 0 { None } else { last.as_deref() };
                last = Some(server.post(&token, &d, parent, "x").await);
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
            walk(&client, &servers[1], &d, "comments", by_offset).await,
            chronological
        );
    }
    // `threads` pages by cursor only.
    assert_eq!(
        walk(&client, &servers[0], &d, "threads", false).await,
        top_level
    );
    for server in servers {
        server.shutdown().await;
    }
}
