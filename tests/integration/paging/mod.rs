//! Newest-first order and backward paging (`last`/`before`): the contract cases every layout runs
//! (see `contract`), the arguments refused, and pages read the general way where a discussion
//! lacks the counts that bound them. What the contract cases' pages hold is in `pages`, what
//! they cost in `costs`; here what they share, and the rest.

mod costs;
mod pages;

use mongodb::bson::{doc, Document};
use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::contract::{
    assert_exactly_once, at, collect_by_cursor, collect_by_offset, slugs_of, CONN,
};
use crate::model::{build_tree, Model};
use crate::support::{error_code, finds, server_uri, Settings, TestApp};
pub(crate) use costs::newest_and_backward_pages_cost_what_forward_pages_cost_case;
pub(crate) use pages::{
    backward_pages_at_the_edges_case, newest_and_backward_pages_match_the_model_case,
};

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
