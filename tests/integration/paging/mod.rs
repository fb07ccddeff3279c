//! Newest-first order and backward paging (`last`/`before`): the contract cases every layout runs
//! (see `contract`), the arguments refused, and pages read the general way where a discussion
//! lacks the counts that bound them.

use mongodb::bson::{doc, Document};
use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::contract::{
    assert_exactly_once, at, collect_by_cursor, collect_by_offset, slugs_of, CONN,
};
use crate::model::{build_tree, Model};
use crate::support::{error_code, finds, server_uri, Settings, TestApp};

/// A discussion's comments, every paging argument a variable.
const COMMENTS: &str = "query($d: ID!, $order: CommentOrder = CHRONOLOGICAL, $first: Int, $after: String, $last: Int, $before: String, $offset: Int) { discussion(id: $d) { comments(order: $order, first: $first, after: $after, last: $last, before: $before, offset: $offset) { ...Conn } } }";
/// A discussion's threads.
const THREADS: &str = "query($d: ID!, $order: CommentOrder = CHRONOLOGICAL, $first: Int, $after: String, $last: Int, $before: String, $offset: Int) { discussion(id: $d) { threads(order: $order, first: $first, after: $after, last: $last, before: $before, offset: $offset) { ...Conn } } }";
/// A comment's replies.
const REPLIES: &str = "query($d: ID!, $s: String!, $order: CommentOrder = CHRONOLOGICAL, $first: Int, $after: String, $last: Int, $before: String) { comment(discussionId: $d, slug: $s) { replies(order: $order, first: $first, after: $after, last: $last, before: $before) { ...Conn } } }";
/// A comment's sub-discussion.
const SUB: &str = "query($d: ID!, $s: String!, $first: Int, $after: String, $last: Int, $before: String) { comment(discussionId: $d, slug: $s) { subDiscussion(first: $first, after: $after, last: $last, before: $before) { ...Conn } } }";

const COMMENTS_PATH: [&str; 2] = ["discussion", "comments"];
const THREADS_PATH: [&str; 2] = ["discussion", "threads"];
const REPLIES_PATH: [&str; 2] = ["comment", "replies"];
const SUB_PATH: [&str; 2] = ["comment", "subDiscussion"];

fn reversed(list: &[String]) -> Vec<String> {
    list.iter().rev().cloned().collect()
}

/// Pages through a connection backward with `last`/`before`, from its end; checks each page's
/// size and page info (`hasPreviousPage` exact: the walk must end exactly at the start, which
/// the caller checks; `hasNextPage` true once a `before` is given). Returns the slugs in the
/// connection's order.
pub(crate) async fn collect_backward(
    app: &TestApp,
    query: &str,
    vars: Value,
    path: &[&str],
    size: usize,
) -> Vec<String> {
    let query = format!("{query} {CONN}");
    let mut pages: Vec<Vec<String>> = Vec::new();
    let mut before: Option<String> = None;
    for round in 0..10_000 {
        let mut v = vars.clone();
        v["last"] = json!(size);
        v["before"] = json!(before);
        let data = app.ok(&query, v).await;
        let conn = at(&data, path);
        let page = slugs_of(conn);
        let info = &conn["pageInfo"];
        assert_eq!(info["hasNextPage"], json!(round > 0), "{info}");
        let has_previous = info["hasPreviousPage"].as_bool().expect("hasPreviousPage");
        if has_previous {
            assert_eq!(page.len(), size, "a page after the first is full");
        } else {
            assert!(page.len() <= size);
        }
        let edges = conn["edges"].as_array().expect("edges");
        if let (Some(first), Some(last)) = (edges.first(), edges.last()) {
            assert_eq!(info["startCursor"], first["cursor"]);
            assert_eq!(info["endCursor"], last["cursor"]);
        }
        pages.push(page);
        if !has_previous {
            return pages.into_iter().rev().flatten().collect();
        }
        before = info["startCursor"].as_str().map(str::to_owned);
    }
    panic!("paging never ended");
}

async fn delete(app: &TestApp, d: &str, slug: &str) {
    app.ok(
        "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { deleted } }",
        json!({ "d": d, "s": slug }),
    )
    .await;
}

/// The comment with the most direct replies, and the one with the most descendants.
fn busiest_and_biggest(model: &Model) -> (usize, usize) {
    let busiest = (0..model.slugs.len())
        .max_by_key(|&i| model.replies(i).len())
        .expect("comments");
    let biggest = (0..model.slugs.len())
        .max_by_key(|&i| model.descendants(i).len())
        .expect("comments");
    (busiest, biggest)
}

pub(crate) async fn newest_and_backward_pages_match_the_model_case(settings: Settings) {
    let app = TestApp::with("newest_backward", settings).await;
    let d = app.discussion("newest and backward").await;
    let model = build_tree(&app, &d, 150, 6, 13).await;
    // Deleted comments keep their places in every order and direction.
    let deleted = [0, 7, 40, 149];
    for i in deleted {
        delete(&app, &d, &model.slugs[i]).await;
    }
    let vars = json!({ "d": d });
    let chronological = model.chronological();

    // Comments, in each order: backward from the end visits the list in reverse.
    for (order, expected) in [
        ("CHRONOLOGICAL", chronological.clone()),
        ("NEWEST", reversed(&chronological)),
        ("THREADED", model.threaded()),
    ] {
        let mut v = vars.clone();
        v["order"] = json!(order);
        for size in [1, 3, 17, 100] {
            let got = collect_backward(&app, COMMENTS, v.clone(), &COMMENTS_PATH, size).await;
            assert_exactly_once(&got, &expected, &format!("{order} backward by {size}"));
        }
    }
    // NEWEST forward, by cursor and by offset, is the reverse of CHRONOLOGICAL.
    let mut newest = vars.clone();
    newest["order"] = json!("NEWEST");
    for size in [1, 3, 17, 100] {
        let got = collect_by_cursor(&app, COMMENTS, newest.clone(), &COMMENTS_PATH, size).await;
        assert_exactly_once(
            &got,
            &reversed(&chronological),
            &format!("NEWEST by cursor, pages of {size}"),
        );
    }
    for size in [23, 100] {
        let got = collect_by_offset(&app, COMMENTS, newest.clone(), &COMMENTS_PATH, size).await;
        assert_exactly_once(
            &got,
            &reversed(&chronological),
            &format!("NEWEST by offset, pages of {size}"),
        );
    }

    // Threads, oldest and newest first, both directions.
    let threads = model.threads();
    let mut oldest = vars.clone();
    oldest["order"] = json!("CHRONOLOGICAL");
    for size in [1, 4, 9] {
        let got = collect_backward(&app, THREADS, oldest.clone(), &THREADS_PATH, size).await;
        assert_exactly_once(&got, &threads, &format!("threads backward by {size}"));
        let got = collect_by_cursor(&app, THREADS, newest.clone(), &THREADS_PATH, size).await;
        assert_exactly_once(&got, &reversed(&threads), "newest threads by cursor");
        let got = collect_backward(&app, THREADS, newest.clone(), &THREADS_PATH, size).await;
        assert_exactly_once(&got, &reversed(&threads), "newest threads backward");
        let got = collect_by_offset(&app, THREADS, newest.clone(), &THREADS_PATH, size).await;
        assert_exactly_once(&got, &reversed(&threads), "newest threads by offset");
    }

    // Replies and sub-discussions of the busiest and the biggest comments.
    let (busiest, biggest) = busiest_and_biggest(&model);
    let replies = model.replies(busiest);
    assert!(replies.len() >= 4, "a comment with replies: {replies:?}");
    let at_busiest = json!({ "d": d, "s": model.slugs[busiest] });
    let mut newest_replies = at_busiest.clone();
    newest_replies["order"] = json!("NEWEST");
    for size in [1, 2, 3] {
        let got = collect_backward(&app, REPLIES, at_busiest.clone(), &REPLIES_PATH, size).await;
        assert_exactly_once(&got, &replies, &format!("replies backward by {size}"));
        let got =
            collect_by_cursor(&app, REPLIES, newest_replies.clone(), &REPLIES_PATH, size).await;
        assert_exactly_once(&got, &reversed(&replies), "newest replies by cursor");
        let got =
            collect_backward(&app, REPLIES, newest_replies.clone(), &REPLIES_PATH, size).await;
        assert_exactly_once(&got, &reversed(&replies), "newest replies backward");
    }
    let descendants = model.descendants(biggest);
    let at_biggest = json!({ "d": d, "s": model.slugs[biggest] });
    for size in [1, 4, 100] {
        let got = collect_backward(&app, SUB, at_biggest.clone(), &SUB_PATH, size).await;
        assert_exactly_once(
            &got,
            &descendants,
            &format!("sub-discussion backward by {size}"),
        );
    }

    // The tombstones read as tombstones in newest-first and backward pages.
    let data = app
        .ok(
            "query($d: ID!) { discussion(id: $d) {
                newest: comments(order: NEWEST, first: 1) { nodes { slug deleted text } }
                oldest: comments(last: 1, order: NEWEST) { nodes { slug deleted text } }
            } }",
            vars.clone(),
        )
        .await;
    for (field, i) in [("newest", 149), ("oldest", 0)] {
        let node = &data["discussion"][field]["nodes"][0];
        assert_eq!(node["slug"], json!(model.slugs[i]), "{field}");
        assert_eq!(node["deleted"], json!(true), "{field}");
        assert_eq!(node["text"], Value::Null, "{field}");
    }
}

/// The commands a query sends.
async fn query_commands(app: &TestApp, query: &str, vars: Value) -> u64 {
    let before = app.commands();
    let data = app.ok(&format!("{query} {CONN}"), vars).await;
    assert!(data.is_object());
    app.commands() - before
}

/// The cursors of a connection's edges (its first 100 items).
async fn cursors(app: &TestApp, query: &str, vars: Value, path: &[&str]) -> Vec<String> {
    let mut v = vars;
    v["first"] = json!(100);
    let data = app.ok(&format!("{query} {CONN}"), v).await;
    at(&data, path)["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| e["cursor"].as_str().expect("cursor").to_owned())
        .collect()
}

/// Asserts that every query costs what the first (a forward page) costs.
async fn same_cost(app: &TestApp, what: &str, query: &str, pages: &[(&str, Value)]) {
    let mut costs = Vec::new();
    for (name, vars) in pages {
        costs.push((*name, query_commands(app, query, vars.clone()).await));
    }
    let forward = costs[0].1;
    for (name, n) in &costs {
        assert_eq!(
            *n, forward,
            "{what}: {name} costs {n} commands, the forward page {forward}: {costs:?}"
        );
    }
}

pub(crate) async fn newest_and_backward_pages_cost_what_forward_pages_cost_case(
    settings: Settings,
) {
    let app = TestApp::with("paging_costs", settings).await;
    let d = app.discussion("costs").await;
    let model = build_tree(&app, &d, 120, 5, 21).await;
    let with = |order: &str, extra: Value| {
        let mut v = json!({ "d": d, "order": order });
        for (k, x) in extra.as_object().expect("arguments") {
            v[k] = x.clone();
        }
        v
    };
    // Lists in stored order and newest first: first and final pages, a page on either side of
    // a cursor in the middle, and an offset page.
    for (what, query, path) in [
        ("comments", COMMENTS, &COMMENTS_PATH),
        ("threads", THREADS, &THREADS_PATH),
    ] {
        let oldest = cursors(&app, query, with("CHRONOLOGICAL", json!({})), path).await;
        let newest = cursors(&app, query, with("NEWEST", json!({})), path).await;
        let mid = oldest.len() / 2;
        // The same comment's cursor in newest-first order.
        let newest_mid = newest[oldest.len() - 1 - mid].clone();
        same_cost(
            &app,
            &format!("{what}: first pages"),
            query,
            &[
                ("first", with("CHRONOLOGICAL", json!({ "first": 10 }))),
                ("newest first", with("NEWEST", json!({ "first": 10 }))),
                ("last", with("CHRONOLOGICAL", json!({ "last": 10 }))),
                ("newest last", with("NEWEST", json!({ "last": 10 }))),
            ],
        )
        .await;
        same_cost(
            &app,
            &format!("{what}: cursor pages"),
            query,
            &[
                (
                    "after",
                    with(
                        "CHRONOLOGICAL",
                        json!({ "first": 10, "after": oldest[mid] }),
                    ),
                ),
                (
                    "before",
                    with(
                        "CHRONOLOGICAL",
                        json!({ "last": 10, "before": oldest[mid] }),
                    ),
                ),
                (
                    "newest after",
                    with("NEWEST", json!({ "first": 10, "after": newest_mid })),
                ),
                (
                    "newest before",
                    with("NEWEST", json!({ "last": 10, "before": newest_mid })),
                ),
            ],
        )
        .await;
        same_cost(
            &app,
            &format!("{what}: offset pages"),
            query,
            &[
                (
                    "offset",
                    with("CHRONOLOGICAL", json!({ "first": 10, "offset": mid })),
                ),
                (
                    "newest offset",
                    with("NEWEST", json!({ "first": 10, "offset": mid })),
                ),
            ],
        )
        .await;
    }
    // Threaded order.
    let threaded = cursors(&app, COMMENTS, with("THREADED", json!({})), &COMMENTS_PATH).await;
    let mid = threaded[threaded.len() / 2].clone();
    same_cost(
        &app,
        "threaded: first pages",
        COMMENTS,
        &[
            ("first", with("THREADED", json!({ "first": 10 }))),
            ("last", with("THREADED", json!({ "last": 10 }))),
        ],
    )
    .await;
    same_cost(
        &app,
        "threaded: cursor pages",
        COMMENTS,
        &[
            (
                "after",
                with("THREADED", json!({ "first": 10, "after": mid })),
            ),
            (
                "before",
                with("THREADED", json!({ "last": 10, "before": mid })),
            ),
        ],
    )
    .await;

    // Replies and sub-discussions.
    let (busiest, biggest) = busiest_and_biggest(&model);
    let at_comment = |i: usize, order: &str, extra: Value| {
        let mut v = with(order, extra);
        v["s"] = json!(model.slugs[i]);
        v
    };
    let oldest = cursors(
        &app,
        REPLIES,
        at_comment(busiest, "CHRONOLOGICAL", json!({})),
        &REPLIES_PATH,
    )
    .await;
    let newest = cursors(
        &app,
        REPLIES,
        at_comment(busiest, "NEWEST", json!({})),
        &REPLIES_PATH,
    )
    .await;
    let mid = oldest.len() / 2;
    let newest_mid = newest[oldest.len() - 1 - mid].clone();
    same_cost(
        &app,
        "replies: first pages",
        REPLIES,
        &[
            (
                "first",
                at_comment(busiest, "CHRONOLOGICAL", json!({ "first": 2 })),
            ),
            (
                "newest first",
                at_comment(busiest, "NEWEST", json!({ "first": 2 })),
            ),
            (
                "last",
                at_comment(busiest, "CHRONOLOGICAL", json!({ "last": 2 })),
            ),
            (
                "newest last",
                at_comment(busiest, "NEWEST", json!({ "last": 2 })),
            ),
        ],
    )
    .await;
    same_cost(
        &app,
        "replies: cursor pages",
        REPLIES,
        &[
            (
                "after",
                at_comment(
                    busiest,
                    "CHRONOLOGICAL",
                    json!({ "first": 2, "after": oldest[mid] }),
                ),
            ),
            (
                "before",
                at_comment(
                    busiest,
                    "CHRONOLOGICAL",
                    json!({ "last": 2, "before": oldest[mid] }),
                ),
            ),
            (
                "newest after",
                at_comment(
                    busiest,
                    "NEWEST",
                    json!({ "first": 2, "after": newest_mid }),
                ),
            ),
            (
                "newest before",
                at_comment(
                    busiest,
                    "NEWEST",
                    json!({ "last": 2, "before": newest_mid }),
                ),
            ),
        ],
    )
    .await;
    let sub = cursors(
        &app,
        SUB,
        at_comment(biggest, "CHRONOLOGICAL", json!({})),
        &SUB_PATH,
    )
    .await;
    let mid = sub[sub.len() / 2].clone();
    same_cost(
        &app,
        "sub-discussion: first pages",
        SUB,
        &[
            (
                "first",
                at_comment(biggest, "CHRONOLOGICAL", json!({ "first": 4 })),
            ),
            (
                "last",
                at_comment(biggest, "CHRONOLOGICAL", json!({ "last": 4 })),
            ),
        ],
    )
    .await;
    same_cost(
        &app,
        "sub-discussion: cursor pages",
        SUB,
        &[
            (
                "after",
                at_comment(
                    biggest,
                    "CHRONOLOGICAL",
                    json!({ "first": 4, "after": mid }),
                ),
            ),
            (
                "before",
                at_comment(
                    biggest,
                    "CHRONOLOGICAL",
                    json!({ "last": 4, "before": mid }),
                ),
            ),
        ],
    )
    .await;
}

/// One page of a connection: its slugs, `hasPreviousPage` and `hasNextPage`.
pub(crate) async fn page(
    app: &TestApp,
    query: &str,
    vars: Value,
    path: &[&str],
) -> (Vec<String>, bool, bool) {
    let data = app.ok(&format!("{query} {CONN}"), vars).await;
    let conn = at(&data, path);
    let info = &conn["pageInfo"];
    (
        slugs_of(conn),
        info["hasPreviousPage"].as_bool().expect("hasPreviousPage"),
        info["hasNextPage"].as_bool().expect("hasNextPage"),
    )
}

pub(crate) async fn backward_pages_at_the_edges_case(settings: Settings) {
    let app = TestApp::with("paging_edges", settings).await;
    // An empty discussion: every list is empty from either end, in either order.
    let empty = app.discussion("empty").await;
    for (query, path, order) in [
        (COMMENTS, &COMMENTS_PATH, "CHRONOLOGICAL"),
        (COMMENTS, &COMMENTS_PATH, "NEWEST"),
        (COMMENTS, &COMMENTS_PATH, "THREADED"),
        (THREADS, &THREADS_PATH, "CHRONOLOGICAL"),
        (THREADS, &THREADS_PATH, "NEWEST"),
    ] {
        for args in [
            json!({ "last": 5 }),
            json!({ "first": 5 }),
            json!({ "last": 0 }),
            json!({ "first": 5, "offset": 0 }),
        ] {
            let mut v = json!({ "d": empty, "order": order });
            for (k, x) in args.as_object().expect("arguments") {
                v[k] = x.clone();
            }
            let got = page(&app, query, v, path).await;
            assert_eq!(got, (vec![], false, false), "{order} {args} of nothing");
        }
    }

    let d = app.discussion("edges").await;
    let model = build_tree(&app, &d, 30, 4, 5).await;
    let (busiest, biggest) = busiest_and_biggest(&model);
    let chronological = model.chronological();
    let lists: Vec<(&str, &[&str; 2], Value, Vec<String>)> = vec![
        (
            COMMENTS,
            &COMMENTS_PATH,
            json!({ "d": d, "order": "CHRONOLOGICAL" }),
            chronological.clone(),
        ),
        (
            COMMENTS,
            &COMMENTS_PATH,
            json!({ "d": d, "order": "NEWEST" }),
            reversed(&chronological),
        ),
        (
            COMMENTS,
            &COMMENTS_PATH,
            json!({ "d": d, "order": "THREADED" }),
            model.threaded(),
        ),
        (
            THREADS,
            &THREADS_PATH,
            json!({ "d": d, "order": "CHRONOLOGICAL" }),
            model.threads(),
        ),
        (
            THREADS,
            &THREADS_PATH,
            json!({ "d": d, "order": "NEWEST" }),
            reversed(&model.threads()),
        ),
        (
            REPLIES,
            &REPLIES_PATH,
            json!({ "d": d, "s": model.slugs[busiest], "order": "CHRONOLOGICAL" }),
            model.replies(busiest),
        ),
        (
            REPLIES,
            &REPLIES_PATH,
            json!({ "d": d, "s": model.slugs[busiest], "order": "NEWEST" }),
            reversed(&model.replies(busiest)),
        ),
        (
            SUB,
            &SUB_PATH,
            json!({ "d": d, "s": model.slugs[biggest] }),
            model.descendants(biggest),
        ),
    ];
    for (query, path, vars, expected) in lists {
        assert!(expected.len() >= 2, "{vars}: {expected:?}");
        let with = |extra: Value| {
            let mut v = vars.clone();
            for (k, x) in extra.as_object().expect("arguments") {
                v[k] = x.clone();
            }
            v
        };
        // `last: 0`: no items, but the list has some before the (empty) page.
        let got = page(&app, query, with(json!({ "last": 0 })), path).await;
        assert_eq!(got, (vec![], true, false), "{vars} last 0");
        // More than the list holds: all of it, nothing before.
        let got = page(&app, query, with(json!({ "last": 100 })), path).await;
        assert_eq!(got, (expected.clone(), false, false), "{vars} last 100");
        // The final two, and the two before them.
        let n = expected.len();
        let got = page(&app, query, with(json!({ "last": 2 })), path).await;
        assert_eq!(
            got,
            (expected[n - 2..].to_vec(), n > 2, false),
            "{vars} last 2"
        );
        let all = cursors(&app, query, vars.clone(), path).await;
        let got = page(
            &app,
            query,
            with(json!({ "last": 2, "before": all[n - 2] })),
            path,
        )
        .await;
        assert_eq!(
            got,
            (expected[n.saturating_sub(4)..n - 2].to_vec(), n > 4, true),
            "{vars} before the final two"
        );
        // Before the first item: nothing, and nothing before it.
        let got = page(
            &app,
            query,
            with(json!({ "last": 3, "before": all[0] })),
            path,
        )
        .await;
        assert_eq!(got, (vec![], false, true), "{vars} before the first");
        // Before the second: just the first.
        let got = page(
            &app,
            query,
            with(json!({ "last": 3, "before": all[1] })),
            path,
        )
        .await;
        assert_eq!(
            got,
            (vec![expected[0].clone()], false, true),
            "{vars} before the second"
        );
        // After the last (forward): nothing after it.
        let got = page(
            &app,
            query,
            with(json!({ "first": 3, "after": all[n - 1] })),
            path,
        )
        .await;
        assert_eq!(got, (vec![], true, false), "{vars} after the last");
    }
    // Newest first from an offset past the end is empty.
    let got = page(
        &app,
        COMMENTS,
        json!({ "d": d, "order": "NEWEST", "first": 5, "offset": 1000 }),
        &COMMENTS_PATH,
    )
    .await;
    assert_eq!(got, (vec![], true, false));

    // The discussion list pages backward too.
    for i in 0..5 {
        app.discussion(&format!("more {i}")).await;
    }
    let list = "query($first: Int, $after: String, $last: Int, $before: String) { discussions(first: $first, after: $after, last: $last, before: $before) { totalCount edges { cursor node { id } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }";
    let ids = |data: &Value| -> Vec<String> {
        data["discussions"]["edges"]
            .as_array()
            .expect("edges")
            .iter()
            .map(|e| e["node"]["id"].as_str().expect("id").to_owned())
            .collect()
    };
    let all = app.ok(list, json!({ "first": 100 })).await;
    let forward = ids(&all);
    assert_eq!(forward.len(), 7);
    let mut backward: Vec<Vec<String>> = Vec::new();
    let mut before: Option<String> = None;
    loop {
        let data = app.ok(list, json!({ "last": 3, "before": before })).await;
        let info = &data["discussions"]["pageInfo"];
        assert_eq!(info["hasNextPage"], json!(before.is_some()));
        backward.push(ids(&data));
        if info["hasPreviousPage"] != json!(true) {
            break;
        }
        before = info["startCursor"].as_str().map(str::to_owned);
    }
    let backward: Vec<String> = backward.into_iter().rev().flatten().collect();
    assert_eq!(backward, forward);
    let data = app.ok(list, json!({ "last": 0 })).await;
    assert_eq!(ids(&data), Vec::<String>::new());
    assert_eq!(
        data["discussions"]["pageInfo"]["hasPreviousPage"],
        json!(true)
    );
}

/// Every paging argument that cannot be honoured is refused with `BAD_USER_INPUT` and a message
/// saying why, on every connection; nothing of the list is read for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_arguments_that_cannot_be_honoured_are_refused() {
    let app = TestApp::new("paging_refused", Layout::PerComment).await;
    let d = app.discussion("refused").await;
    let top = app.post(&d, None, "top").await;
    app.post(&d, Some(&top), "reply").await;
    let cursor_of = |order: &'static str| {
        let app = &app;
        let d = d.clone();
        async move {
            let data = app
                .ok(
                    "query($d: ID!, $o: CommentOrder!) { discussion(id: $d) { comments(order: $o, first: 1) { edges { cursor } } } }",
                    json!({ "d": d, "o": order }),
                )
                .await;
            data["discussion"]["comments"]["edges"][0]["cursor"]
                .as_str()
                .expect("cursor")
                .to_owned()
        }
    };
    let chronological = cursor_of("CHRONOLOGICAL").await;
    let newest = cursor_of("NEWEST").await;
    let threaded = cursor_of("THREADED").await;
    let discussions = app
        .ok("{ discussions(first: 1) { edges { cursor } } }", json!({}))
        .await["discussions"]["edges"][0]["cursor"]
        .as_str()
        .expect("cursor")
        .to_owned();
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        (
            "first and last",
            COMMENTS,
            json!({ "first": 2, "last": 2 }),
            "not both",
        ),
        ("negative last", COMMENTS, json!({ "last": -1 }), "negative"),
        (
            "last over the max",
            COMMENTS,
            json!({ "last": 101 }),
            "at most 100",
        ),
        (
            "before and offset",
            COMMENTS,
            json!({ "before": chronological, "offset": 1 }),
            "`offset`",
        ),
        (
            "last and offset",
            COMMENTS,
            json!({ "last": 2, "offset": 1 }),
            "`offset`",
        ),
        (
            "after and before",
            COMMENTS,
            json!({ "after": chronological, "before": chronological }),
            "not both",
        ),
        (
            "first and before",
            COMMENTS,
            json!({ "first": 2, "before": chronological }),
            "`before`",
        ),
        (
            "last and after",
            COMMENTS,
            json!({ "last": 2, "after": chronological }),
            "`after`",
        ),
        (
            "a NEWEST cursor in a CHRONOLOGICAL list",
            COMMENTS,
            json!({ "order": "CHRONOLOGICAL", "last": 2, "before": newest }),
            "NEWEST",
        ),
        (
            "a CHRONOLOGICAL cursor in a NEWEST list",
            COMMENTS,
            json!({ "order": "NEWEST", "first": 2, "after": chronological }),
            "CHRONOLOGICAL",
        ),
        (
            "a THREADED cursor in a NEWEST list",
            COMMENTS,
            json!({ "order": "NEWEST", "last": 2, "before": threaded }),
            "THREADED",
        ),
        (
            "a discussion cursor in a comment list",
            COMMENTS,
            json!({ "last": 2, "before": discussions }),
            "discussion list",
        ),
        (
            "a garbage cursor",
            COMMENTS,
            json!({ "last": 2, "before": "%%%not-base64" }),
            "malformed",
        ),
        (
            "a cursor of an unknown kind",
            COMMENTS,
            json!({ "last": 2, "before": "eHwxfGFiY2RlZmdo" }),
            "malformed",
        ),
        (
            "a forged cursor",
            COMMENTS,
            json!({ "before": "Y3wxfC4q" }),
            "malformed",
        ),
        (
            "THREADED threads",
            THREADS,
            json!({ "order": "THREADED" }),
            "every order but THREADED",
        ),
        (
            "negative last (threads)",
            THREADS,
            json!({ "last": -5 }),
            "negative",
        ),
        (
            "first and last (threads)",
            THREADS,
            json!({ "first": 1, "last": 1 }),
            "not both",
        ),
        (
            "THREADED replies",
            REPLIES,
            json!({ "s": top, "order": "THREADED" }),
            "every order but THREADED",
        ),
        (
            "first and last (replies)",
            REPLIES,
            json!({ "s": top, "first": 1, "last": 1 }),
            "not both",
        ),
        (
            "last over the max (replies)",
            REPLIES,
            json!({ "s": top, "last": 1000 }),
            "at most 100",
        ),
        (
            "a threaded cursor in replies",
            REPLIES,
            json!({ "s": top, "last": 1, "before": threaded }),
            "THREADED",
        ),
        (
            "first and last (sub-discussion)",
            SUB,
            json!({ "s": top, "first": 1, "last": 1 }),
            "not both",
        ),
        (
            "a NEWEST cursor in a sub-discussion",
            SUB,
            json!({ "s": top, "last": 1, "before": newest }),
            "NEWEST",
        ),
    ];
    for (what, query, args, says) in cases {
        let mut vars = json!({ "d": d });
        for (k, x) in args.as_object().expect("arguments") {
            vars[k] = x.clone();
        }
        let before = app.commands();
        let response = app.exec(&format!("{query} {CONN}"), vars).await;
        assert_eq!(
            error_code(&response),
            "BAD_USER_INPUT",
            "{what}: {response:#}"
        );
        let message = response["errors"][0]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            message.contains(says),
            "{what}: {message:?} does not say {says:?}"
        );
        // The discussion (and the comment) is read; nothing of its list.
        let reads = if query == COMMENTS || query == THREADS {
            1
        } else {
            2
        };
        assert!(app.commands() - before <= reads, "{what}: read the list");
    }
    let list = "query($first: Int, $last: Int, $before: String) { discussions(first: $first, last: $last, before: $before) { totalCount } }";
    for (what, vars, says) in [
        (
            "first and last (discussions)",
            json!({ "first": 1, "last": 1 }),
            "not both",
        ),
        (
            "a comment cursor in the discussion list",
            json!({ "last": 1, "before": chronological }),
            "CHRONOLOGICAL",
        ),
        (
            "negative last (discussions)",
            json!({ "last": -1 }),
            "negative",
        ),
    ] {
        let response = app.exec(list, vars).await;
        assert_eq!(
            error_code(&response),
            "BAD_USER_INPUT",
            "{what}: {response:#}"
        );
        let message = response["errors"][0]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(message.contains(says), "{what}: {message:?}");
    }
}

async fn raw_discussions(app: &TestApp) -> mongodb::Collection<Document> {
    mongodb::Client::with_uri_str(server_uri())
        .await
        .expect("client")
        .database(&app.database)
        .collection::<Document>("discussions")
}

/// Walks every list of a discussion backward and newest first, and checks it against the model.
async fn check_every_list(app: &TestApp, d: &str, model: &Model, what: &str) {
    let chronological = model.chronological();
    for (order, expected) in [
        ("CHRONOLOGICAL", chronological.clone()),
        ("NEWEST", reversed(&chronological)),
        ("THREADED", model.threaded()),
    ] {
        let v = json!({ "d": d, "order": order });
        let got = collect_backward(app, COMMENTS, v.clone(), &COMMENTS_PATH, 7).await;
        assert_exactly_once(&got, &expected, &format!("{what}: {order} backward"));
        let got = collect_by_cursor(app, COMMENTS, v.clone(), &COMMENTS_PATH, 7).await;
        assert_exactly_once(&got, &expected, &format!("{what}: {order} forward"));
        let got = collect_by_offset(app, COMMENTS, v, &COMMENTS_PATH, 7).await;
        assert_exactly_once(&got, &expected, &format!("{what}: {order} by offset"));
    }
    let threads = model.threads();
    let v = json!({ "d": d, "order": "NEWEST" });
    let got = collect_by_cursor(app, THREADS, v.clone(), &THREADS_PATH, 3).await;
    assert_exactly_once(
        &got,
        &reversed(&threads),
        &format!("{what}: newest threads"),
    );
    let got = collect_backward(app, THREADS, v, &THREADS_PATH, 3).await;
    assert_exactly_once(
        &got,
        &reversed(&threads),
        &format!("{what}: newest threads backward"),
    );
    let (busiest, biggest) = busiest_and_biggest(model);
    let v = json!({ "d": d, "s": model.slugs[busiest], "order": "NEWEST" });
    let got = collect_by_cursor(app, REPLIES, v, &REPLIES_PATH, 2).await;
    assert_exactly_once(
        &got,
        &reversed(&model.replies(busiest)),
        &format!("{what}: newest replies"),
    );
    let v = json!({ "d": d, "s": model.slugs[biggest] });
    let got = collect_backward(app, SUB, v, &SUB_PATH, 3).await;
    assert_exactly_once(
        &got,
        &model.descendants(biggest),
        &format!("{what}: sub-discussion backward"),
    );
}

/// A per-comment discussion without its numbers, thread counts or subtree sizes (one from
/// before they were kept) reads newest-first and backward pages the general way, with the same
/// results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_comment_pages_without_counts_are_read_the_general_way() {
    let app = TestApp::new("paging_general_per_comment", Layout::PerComment).await;
    let d = app.discussion("from before").await;
    let model = build_tree(&app, &d, 60, 4, 3).await;
    check_every_list(&app, &d, &model, "with counts").await;
    raw_discussions(&app)
        .await
        .update_one(
            doc! { "_id": &d },
            doc! { "$unset": { "sequenced": "", "thread_blocks": "", "subtree_sizes": "" } },
        )
        .await
        .expect("forget the counts");
    let before = finds(&app);
    let data = app
        .ok(
            &format!("query($d: ID!) {{ discussion(id: $d) {{ comments(order: NEWEST, first: 5) {{ ...Conn }} }} }} {CONN}"),
            json!({ "d": d }),
        )
        .await;
    // The discussion, then one general read (a sort from the end).
    assert_eq!(finds(&app) - before, 2);
    assert_eq!(
        slugs_of(&data["discussion"]["comments"]),
        reversed(&model.chronological())[..5].to_vec()
    );
    check_every_list(&app, &d, &model, "without counts").await;
}

/// A bucketed discussion without its blocks of pages or its sealed pages' sizes reads
/// newest-first and backward pages from the page list and by streaming, with the same results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucketed_pages_without_counts_are_read_the_general_way() {
    let settings = Settings {
        bucket_size: 3,
        ..Settings::new(Layout::Bucketed)
    };
    let app = TestApp::with("paging_general_bucketed", settings).await;
    let d = app.discussion("from before").await;
    let model = build_tree(&app, &d, 60, 4, 8).await;
    check_every_list(&app, &d, &model, "with counts").await;
    raw_discussions(&app)
        .await
        .update_one(
            doc! { "_id": &d },
            doc! { "$unset": { "page_blocks": "", "page_block_keys": "", "sized_pages": "" } },
        )
        .await
        .expect("forget the counts");
    check_every_list(&app, &d, &model, "without counts").await;
}
