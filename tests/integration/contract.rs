//! The contract suite: the same cases, unchanged, against every storage layout.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::model::build_tree;
use crate::paging::{
    backward_pages_at_the_edges_case, newest_and_backward_pages_cost_what_forward_pages_cost_case,
    newest_and_backward_pages_match_the_model_case,
};
use crate::support::{error_code, now, sign, sign_with, Claims, Settings, TestApp};

/// Instantiates every contract case for one layout (optionally with custom settings).
macro_rules! contract_suite {
    ($module:ident, settings = $settings:expr) => {
        mod $module {
            use super::*;

            fn settings() -> Settings {
                $settings
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn orders_and_paging_match_the_model() {
                orders_and_paging_match_the_model_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tree_reads_match_the_model() {
                tree_reads_match_the_model_case(settings()).await;
            }

            // Batches run in the request's task once a level's keys are all in, so the count is
            // exact on the multi-threaded runtime too (see docs/ARCHITECTURE.md).
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn nested_tree_query_has_bounded_round_trips() {
                nested_tree_query_has_bounded_round_trips_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_wide_tree_level_is_one_round_trip() {
                a_wide_tree_level_is_one_round_trip_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn concurrent_replies_are_all_stored() {
                concurrent_replies_are_all_stored_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn bad_inputs_get_clear_errors() {
                bad_inputs_get_clear_errors_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mutations_need_a_valid_token() {
                mutations_need_a_valid_token_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn replies_beyond_the_depth_cap_attach_to_an_ancestor() {
                replies_beyond_the_depth_cap_attach_to_an_ancestor_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn writes_are_visible_within_one_request() {
                writes_are_visible_within_one_request_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn comment_fields_are_complete() {
                comment_fields_are_complete_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn keyed_discussions_keep_their_key_everywhere() {
                crate::keys::keyed_discussions_keep_their_key_everywhere_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn moderation_modes_are_kept_everywhere() {
                crate::moderation::moderation_modes_are_kept_everywhere_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_workflow_emits_its_events_in_order() {
                crate::events::every_workflow_emits_its_events_in_order_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_locked_discussion_takes_no_held_post() {
                crate::events::a_locked_discussion_takes_no_held_post_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn held_comments_are_hidden_until_approved() {
                crate::held::held_comments_are_hidden_until_approved_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn rejected_comments_stay_in_place() {
                crate::reports::rejected_comments_stay_in_place_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn reports_hold_a_comment_at_the_threshold() {
                crate::reports::reports_hold_a_comment_at_the_threshold_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn listed_words_hold_posts_and_edits() {
                crate::reports::listed_words_hold_posts_and_edits_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn newest_and_backward_pages_match_the_model() {
                newest_and_backward_pages_match_the_model_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn newest_and_backward_pages_cost_what_forward_pages_cost() {
                newest_and_backward_pages_cost_what_forward_pages_cost_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn backward_pages_at_the_edges() {
                backward_pages_at_the_edges_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn votes_follow_the_rules() {
                crate::votes::votes_follow_the_rules_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ranked_orders_match_the_model() {
                crate::votes::ranked_orders_match_the_model_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ranked_cursors_belong_to_their_order() {
                crate::votes::ranked_cursors_belong_to_their_order_case(settings()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn html_is_stored_with_each_comment() {
                crate::probe::markdown::html_is_stored_with_each_comment_case(settings()).await;
            }
        }
    };
    ($module:ident, $layout:expr) => {
        contract_suite!($module, settings = Settings::new($layout));
    };
}

contract_suite!(per_comment, Layout::PerComment);
contract_suite!(embedded, Layout::Embedded);
contract_suite!(bucketed, Layout::Bucketed);
contract_suite!(
    bucketed_small_pages,
    settings = Settings {
        bucket_size: 3,
        ..Settings::new(Layout::Bucketed)
    }
);

pub(crate) const CONN: &str = "fragment Conn on CommentConnection { totalCount edges { cursor node { slug } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } }";

pub(crate) fn at<'a>(data: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(data, |v, k| &v[*k])
}

pub(crate) fn slugs_of(conn: &Value) -> Vec<String> {
    conn["edges"]
        .as_array()
        .unwrap_or_else(|| panic!("not a connection: {conn:#}"))
        .iter()
        .map(|e| e["node"]["slug"].as_str().expect("slug").to_owned())
        .collect()
}

/// Pages through a connection with `first`/`after`; checks sizes and page info, returns slugs.
pub(crate) async fn collect_by_cursor(
    app: &TestApp,
    query: &str,
    vars: Value,
    path: &[&str],
    size: usize,
) -> Vec<String> {
    let query = format!("{query} {CONN}");
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    for round in 0..10_000 {
        let mut v = vars.clone();
        v["first"] = json!(size);
        v["after"] = json!(after);
        let data = app.ok(&query, v).await;
        let conn = at(&data, path);
        let page = slugs_of(conn);
        let info = &conn["pageInfo"];
        assert_eq!(info["hasPreviousPage"], json!(round > 0));
        let has_next = info["hasNextPage"].as_bool().expect("hasNextPage");
        if has_next {
            assert_eq!(page.len(), size, "a page before the last is full");
        } else {
            assert!(page.len() <= size);
        }
        if let Some(last) = conn["edges"].as_array().and_then(|e| e.last()) {
            assert_eq!(info["endCursor"], last["cursor"]);
        }
        out.extend(page);
        if !has_next {
            return out;
        }
        after = info["endCursor"].as_str().map(str::to_owned);
    }
    panic!("paging never ended");
}

/// Pages through a connection with `first`/`offset`; returns slugs.
pub(crate) async fn collect_by_offset(
    app: &TestApp,
    query: &str,
    vars: Value,
    path: &[&str],
    size: usize,
) -> Vec<String> {
    let query = format!("{query} {CONN}");
    let mut out = Vec::new();
    loop {
        let mut v = vars.clone();
        v["first"] = json!(size);
        v["offset"] = json!(out.len());
        let data = app.ok(&query, v).await;
        let conn = at(&data, path);
        let page = slugs_of(conn);
        let has_next = conn["pageInfo"]["hasNextPage"]
            .as_bool()
            .expect("hasNextPage");
        assert_eq!(conn["pageInfo"]["hasPreviousPage"], json!(!out.is_empty()));
        assert_eq!(
            has_next,
            page.len() == size && conn["totalCount"].as_u64() > Some((out.len() + size) as u64)
        );
        let done = page.len() < size || !has_next;
        out.extend(page);
        if done {
            return out;
        }
    }
}

pub(crate) fn assert_exactly_once(seq: &[String], expected: &[String], what: &str) {
    let unique: HashSet<&String> = seq.iter().collect();
    assert_eq!(unique.len(), seq.len(), "{what}: a comment appears twice");
    assert_eq!(seq, expected, "{what}: wrong order or set");
}

pub(crate) async fn orders_and_paging_match_the_model_case(settings: Settings) {
    let app = TestApp::with("orders_paging", settings).await;
    let d = app.discussion("ordering").await;
    let model = build_tree(&app, &d, 210, 6, 7).await;
    assert!((0..model.slugs.len()).map(|i| model.depth(i)).max() >= Some(5));
    let vars = json!({ "d": d });

    let cursor_q = "query($d: ID!, $first: Int, $after: String, $order: CommentOrder) { discussion(id: $d) { comments(order: $order, first: $first, after: $after) { ...Conn } } }";
    let offset_q = "query($d: ID!, $first: Int, $offset: Int, $order: CommentOrder) { discussion(id: $d) { comments(order: $order, first: $first, offset: $offset) { ...Conn } } }";
    let path = ["discussion", "comments"];
    for (order, expected) in [
        ("CHRONOLOGICAL", model.chronological()),
        ("THREADED", model.threaded()),
    ] {
        let mut v = vars.clone();
        v["order"] = json!(order);
        for size in [1, 17, 100] {
            let by_cursor = collect_by_cursor(&app, cursor_q, v.clone(), &path, size).await;
            assert_exactly_once(
                &by_cursor,
                &expected,
                &format!("{order} by cursor, pages of {size}"),
            );
        }
        for size in [23, 100] {
            let by_offset = collect_by_offset(&app, offset_q, v.clone(), &path, size).await;
            assert_exactly_once(
                &by_offset,
                &expected,
                &format!("{order} by offset, pages of {size}"),
            );
        }
    }

    let threads_cursor = "query($d: ID!, $first: Int, $after: String) { discussion(id: $d) { threads(first: $first, after: $after) { ...Conn } } }";
    let threads_offset = "query($d: ID!, $first: Int, $offset: Int) { discussion(id: $d) { threads(first: $first, offset: $offset) { ...Conn } } }";
    let tpath = ["discussion", "threads"];
    let expected = model.threads();
    let by_cursor = collect_by_cursor(&app, threads_cursor, vars.clone(), &tpath, 9).await;
    assert_exactly_once(&by_cursor, &expected, "threads by cursor");
    let by_offset = collect_by_offset(&app, threads_offset, vars.clone(), &tpath, 9).await;
    assert_exactly_once(&by_offset, &expected, "threads by offset");

    let data = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { commentCount comments(first: 0) { totalCount edges { cursor } pageInfo { hasNextPage } } threads(first: 0) { totalCount } } }",
            vars.clone(),
        )
        .await;
    assert_eq!(data["discussion"]["commentCount"], json!(model.slugs.len()));
    assert_eq!(
        data["discussion"]["comments"]["totalCount"],
        json!(model.slugs.len())
    );
    assert_eq!(data["discussion"]["comments"]["edges"], json!([]));
    assert_eq!(
        data["discussion"]["comments"]["pageInfo"]["hasNextPage"],
        json!(true)
    );
    assert_eq!(
        data["discussion"]["threads"]["totalCount"],
        json!(expected.len())
    );

    // An offset past the end is an empty page, not an error.
    let data = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { comments(offset: 100000) { edges { cursor } pageInfo { hasNextPage } } } }",
            vars,
        )
        .await;
    assert_eq!(data["discussion"]["comments"]["edges"], json!([]));
    assert_eq!(
        data["discussion"]["comments"]["pageInfo"]["hasNextPage"],
        json!(false)
    );
}

pub(crate) async fn tree_reads_match_the_model_case(settings: Settings) {
    let app = TestApp::with("tree_reads", settings).await;
    let d = app.discussion("tree").await;
    let model = build_tree(&app, &d, 90, 5, 11).await;

    // Replies, reply counts, sub-discussions and parents of every comment, one direct link each.
    let q = "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) {
        slug text depth parentSlug replyCount
        replies(first: 100) { totalCount nodes { slug } }
        subDiscussion(first: 100) { totalCount nodes { slug } }
        parent { slug }
    } }";
    for i in 0..model.slugs.len() {
        let data = app.ok(q, json!({ "d": d, "s": model.slugs[i] })).await;
        let c = &data["comment"];
        assert_eq!(c["slug"], json!(model.slugs[i]));
        assert_eq!(c["text"], json!(model.texts[i]));
        assert_eq!(c["depth"], json!(model.depth(i)));
        let parent = model.parents[i].map(|p| model.slugs[p].clone());
        assert_eq!(c["parentSlug"], json!(parent));
        assert_eq!(
            c["parent"]["slug"],
            parent.map_or(Value::Null, |p| json!(p))
        );
        let replies = model.replies(i);
        assert_eq!(c["replyCount"], json!(replies.len()));
        assert_eq!(c["replies"]["totalCount"], json!(replies.len()));
        let got: Vec<String> = c["replies"]["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|n| n["slug"].as_str().expect("slug").to_owned())
            .collect();
        assert_eq!(got, replies, "replies of {}", model.slugs[i]);
        let descendants = model.descendants(i);
        assert_eq!(c["subDiscussion"]["totalCount"], json!(descendants.len()));
        let got: Vec<String> = c["subDiscussion"]["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|n| n["slug"].as_str().expect("slug").to_owned())
            .collect();
        assert_eq!(got, descendants, "sub-discussion of {}", model.slugs[i]);
    }

    // The same through the discussion's direct link field.
    let last = model.slugs.last().expect("comments");
    let data = app
        .ok(
            "query($d: ID!, $s: String!) { discussion(id: $d) { comment(slug: $s) { slug } } }",
            json!({ "d": d, "s": last }),
        )
        .await;
    assert_eq!(data["discussion"]["comment"]["slug"], json!(last));

    // Sub-discussions and replies page by cursor with no gaps or repeats.
    let biggest = (0..model.slugs.len())
        .max_by_key(|&i| model.descendants(i).len())
        .expect("comments");
    let sub_q = "query($d: ID!, $s: String!, $first: Int, $after: String) { comment(discussionId: $d, slug: $s) { subDiscussion(first: $first, after: $after) { ...Conn } } }";
    let got = collect_by_cursor(
        &app,
        sub_q,
        json!({ "d": d, "s": model.slugs[biggest] }),
        &["comment", "subDiscussion"],
        4,
    )
    .await;
    assert_exactly_once(
        &got,
        &model.descendants(biggest),
        "sub-discussion by cursor",
    );
    let busiest = (0..model.slugs.len())
        .max_by_key(|&i| model.replies(i).len())
        .expect("comments");
    let rep_q = "query($d: ID!, $s: String!, $first: Int, $after: String) { comment(discussionId: $d, slug: $s) { replies(first: $first, after: $after) { ...Conn } } }";
    let got = collect_by_cursor(
        &app,
        rep_q,
        json!({ "d": d, "s": model.slugs[busiest] }),
        &["comment", "replies"],
        2,
    )
    .await;
    assert_exactly_once(&got, &model.replies(busiest), "replies by cursor");

    // Batched: every thread's sub-discussion and replies in one query.
    let data = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { threads(first: 100) { nodes { slug
                subDiscussion(first: 3) { totalCount nodes { slug } pageInfo { hasNextPage } }
                replies(first: 2) { nodes { slug replies(first: 2) { nodes { slug } } } }
            } } } }",
            json!({ "d": d }),
        )
        .await;
    for node in data["discussion"]["threads"]["nodes"]
        .as_array()
        .expect("threads")
    {
        let i = model.index(node["slug"].as_str().expect("slug"));
        let descendants = model.descendants(i);
        assert_eq!(
            node["subDiscussion"]["totalCount"],
            json!(descendants.len())
        );
        let got: Vec<String> = node["subDiscussion"]["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|n| n["slug"].as_str().expect("slug").to_owned())
            .collect();
        assert_eq!(got, descendants.iter().take(3).cloned().collect::<Vec<_>>());
        assert_eq!(
            node["subDiscussion"]["pageInfo"]["hasNextPage"],
            json!(descendants.len() > 3)
        );
        let replies = model.replies(i);
        for (k, r) in node["replies"]["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .enumerate()
        {
            assert_eq!(r["slug"], json!(replies[k]));
            let j = model.index(&replies[k]);
            let grand: Vec<String> = r["replies"]["nodes"]
                .as_array()
                .expect("nodes")
                .iter()
                .map(|n| n["slug"].as_str().expect("slug").to_owned())
                .collect();
            assert_eq!(
                grand,
                model.replies(j).into_iter().take(2).collect::<Vec<_>>()
            );
        }
    }

    // Parent chain from the deepest comment back to the top.
    let deepest = (0..model.slugs.len())
        .max_by_key(|&i| model.depth(i))
        .expect("comments");
    let data = app
        .ok(
            "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { slug parent { slug parent { slug parent { slug parent { slug } } } } } }",
            json!({ "d": d, "s": model.slugs[deepest] }),
        )
        .await;
    let mut node = &data["comment"];
    let mut at_model = Some(deepest);
    for _ in 0..5 {
        match at_model {
            Some(i) => assert_eq!(node["slug"], json!(model.slugs[i])),
            None => assert!(node.is_null()),
        }
        at_model = at_model.and_then(|i| model.parents[i]);
        node = &node["parent"];
    }
}

pub(crate) async fn nested_tree_query_has_bounded_round_trips_case(settings: Settings) {
    let app = TestApp::with("round_trips", settings).await;
    let d = app.discussion("round trips").await;
    // Page sizes keep the query under the complexity limit, which costs each connection by
    // the items it may return (20 × 10 × 10 × 5 leaves).
    let q = "query($d: ID!) { discussion(id: $d) { title threads(first: 20) { totalCount nodes { slug replyCount
        replies(first: 10) { totalCount nodes { slug parent { slug }
            replies(first: 10) { nodes { slug
                replies(first: 5) { nodes { slug text } } } } } } } } } }";
    let levels = 3;
    let mut costs = Vec::new();
    for size in [40, 160] {
        let model = build_tree(&app, &d, size, 5, size as u64).await;
        assert_eq!(model.slugs.len(), size);
        let before = app.commands();
        let data = app.ok(q, json!({ "d": d })).await;
        let cost = app.commands() - before;
        assert!(!data["discussion"]["threads"]["nodes"]
            .as_array()
            .expect("nodes")
            .is_empty());
        eprintln!("tree query cost: {cost} commands for {size} comments");
        costs.push(cost);
    }
    // discussion + threads page + one query per reply level; `parent` of a reply is known.
    let bound = levels as u64 + 2;
    for cost in &costs {
        assert!(*cost <= bound, "a tree query of {levels} reply levels cost {cost} commands (bound {bound}); costs {costs:?}");
    }
    assert!(
        costs[1] <= costs[0],
        "round trips grew with the discussion: {costs:?}"
    );
}

/// Posts one comment under each parent (top-level when `None`), ten at a time.
async fn post_under(app: &TestApp, d: &str, parents: &[Option<String>]) -> Vec<String> {
    let mut slugs = Vec::new();
    for chunk in parents.chunks(10) {
        let posts = chunk.iter().map(|p| app.post(d, p.as_deref(), "wide"));
        slugs.extend(futures::future::join_all(posts).await);
    }
    slugs
}

pub(crate) async fn a_wide_tree_level_is_one_round_trip_case(settings: Settings) {
    let app = TestApp::with("wide_level", settings).await;
    let d = app.discussion("wide level").await;
    // 20 threads with 6 replies each: the second reply level has 120 parents, more than a
    // cursor's default first batch (101 documents).
    let threads = post_under(&app, &d, &vec![None; 20]).await;
    let level1: Vec<Option<String>> = threads
        .iter()
        .flat_map(|t| std::iter::repeat_n(Some(t.clone()), 6))
        .collect();
    let replies = post_under(&app, &d, &level1).await;
    let level2: Vec<Option<String>> = replies.iter().cloned().map(Some).collect();
    post_under(&app, &d, &level2).await;
    let q = "query($d: ID!) { discussion(id: $d) { threads(first: 20) { nodes { slug
        replies(first: 10) { nodes { slug replies(first: 10) { nodes { slug } } } } } } } }";
    let before = app.commands();
    let data = app.ok(q, json!({ "d": d })).await;
    let cost = app.commands() - before;
    let leaves: usize = data["discussion"]["threads"]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .flat_map(|t| {
            t["replies"]["nodes"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|r| r["replies"]["nodes"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(leaves, 120);
    // discussion + threads page + one query per reply level.
    assert!(
        cost <= 4,
        "a two-level tree with 120 parents in a level cost {cost} commands"
    );
}

pub(crate) async fn concurrent_replies_are_all_stored_case(settings: Settings) {
    let app = Arc::new(TestApp::with("concurrent_replies", settings).await);
    let d = app.discussion("race").await;
    let root = app.post(&d, None, "root").await;
    let other = app.post(&d, None, "other").await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let (app, d, parent) = (
            app.clone(),
            d.clone(),
            if i % 4 == 3 {
                other.clone()
            } else {
                root.clone()
            },
        );
        tasks.push(tokio::spawn(async move {
            (
                parent.clone(),
                app.post(&d, Some(&parent), &format!("reply {i}")).await,
            )
        }));
    }
    let mut slugs = HashSet::new();
    for task in tasks {
        let (parent, slug) = task.await.expect("task");
        assert!(
            slug.starts_with(&format!("{parent}/")),
            "{slug} is not under {parent}"
        );
        slugs.insert(slug);
    }
    assert_eq!(slugs.len(), 20, "20 distinct slugs");
    let data = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { commentCount threads { nodes { slug replyCount replies(first: 100) { nodes { slug } } } } } }",
            json!({ "d": d }),
        )
        .await;
    assert_eq!(data["discussion"]["commentCount"], json!(22));
    let threads = data["discussion"]["threads"]["nodes"]
        .as_array()
        .expect("threads");
    let mut stored = HashSet::new();
    for t in threads {
        let expected = if t["slug"] == json!(root) { 15 } else { 5 };
        assert_eq!(t["replyCount"], json!(expected));
        let replies = t["replies"]["nodes"].as_array().expect("replies");
        assert_eq!(replies.len(), expected);
        stored.extend(
            replies
                .iter()
                .map(|r| r["slug"].as_str().expect("slug").to_owned()),
        );
    }
    assert_eq!(stored, slugs);
}

pub(crate) async fn bad_inputs_get_clear_errors_case(settings: Settings) {
    let max_text = settings.max_text_chars;
    let app = TestApp::with("bad_inputs", settings).await;
    let d = app.discussion("bad inputs").await;
    let top = app.post(&d, None, "top").await;
    let post = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }";
    let data = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { comments { edges { cursor } } } }",
            json!({ "d": d }),
        )
        .await;
    let chrono_cursor = data["discussion"]["comments"]["edges"][0]["cursor"].clone();
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        ("unknown discussion", post, json!({ "d": "0123456789abcdef01234567", "t": "hi" }), "NOT_FOUND"),
        ("malformed discussion id", post, json!({ "d": "not-an-id", "t": "hi" }), "BAD_USER_INPUT"),
        ("unknown parent", post, json!({ "d": d, "p": "zzzzzzzz", "t": "hi" }), "NOT_FOUND"),
        ("regex parent", post, json!({ "d": d, "p": ".*", "t": "hi" }), "BAD_USER_INPUT"),
        ("empty text", post, json!({ "d": d, "t": "" }), "BAD_USER_INPUT"),
        ("blank text", post, json!({ "d": d, "t": " \n\t " }), "BAD_USER_INPUT"),
        ("text over the limit", post, json!({ "d": d, "t": "x".repeat(max_text + 1) }), "BAD_USER_INPUT"),
        ("unknown discussion (read)", "query($d: ID!) { discussion(id: $d) { id } }", json!({ "d": "0123456789abcdef01234567" }), "NOT_FOUND"),
        ("malformed id (read)", "query($d: ID!) { discussion(id: $d) { id } }", json!({ "d": "{\"$gt\": \"\"}" }), "BAD_USER_INPUT"),
        ("first over the cap", "query($d: ID!) { discussion(id: $d) { comments(first: 101) { totalCount } } }", json!({ "d": d }), "BAD_USER_INPUT"),
        ("negative first", "query($d: ID!) { discussion(id: $d) { comments(first: -1) { totalCount } } }", json!({ "d": d }), "BAD_USER_INPUT"),
        ("negative offset", "query($d: ID!) { discussion(id: $d) { comments(offset: -3) { totalCount } } }", json!({ "d": d }), "BAD_USER_INPUT"),
        ("offset and after", "query($d: ID!) { discussion(id: $d) { comments(offset: 1, after: \"YQ\") { totalCount } } }", json!({ "d": d }), "BAD_USER_INPUT"),
        ("malformed cursor", "query($d: ID!) { discussion(id: $d) { comments(after: \"%%%not-base64\") { totalCount } } }", json!({ "d": d }), "BAD_USER_INPUT"),
        ("cursor of another order", "query($d: ID!, $c: String) { discussion(id: $d) { comments(order: THREADED, after: $c) { totalCount } } }", json!({ "d": d, "c": chrono_cursor }), "BAD_USER_INPUT"),
        ("first over the cap (replies)", "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { replies(first: 1000) { totalCount } } }", json!({ "d": d, "s": top }), "BAD_USER_INPUT"),
        ("wrong argument type", "query($d: ID!) { discussion(id: $d) { comments(first: \"ten\") { totalCount } } }", json!({ "d": d }), "GRAPHQL_VALIDATION_FAILED"),
        ("wrong variable type", "query($d: ID!, $n: Int) { discussion(id: $d) { comments(first: $n) { totalCount } } }", json!({ "d": d, "n": "ten" }), "BAD_USER_INPUT"),
        ("syntax error", "query { discussion(id: ", json!({}), "GRAPHQL_PARSE_FAILED"),
    ];
    for (what, query, vars, code) in cases {
        let response = app.exec(query, vars).await;
        assert_eq!(error_code(&response), code, "{what}: {response:#}");
        let message = response["errors"][0]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            !message.is_empty() && !message.contains("internal"),
            "{what}: unclear message {message:?}"
        );
    }
    for slug in [
        ".*",
        "(",
        "\\",
        "$",
        "^abc",
        "a|b",
        "abcdefgh/.*",
        "[a-z]+",
        "{\"$ne\": 1}",
    ] {
        for query in [
            "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { slug } }",
            "query($d: ID!, $s: String!) { discussion(id: $d) { comment(slug: $s) { slug } } }",
        ] {
            let response = app.exec(query, json!({ "d": d, "s": slug })).await;
            assert_eq!(
                error_code(&response),
                "BAD_USER_INPUT",
                "slug {slug:?}: {response:#}"
            );
        }
    }
    // A well-formed slug that does not exist.
    let response = app
        .exec(
            "query($d: ID!) { comment(discussionId: $d, slug: \"abcdefgh\") { slug } }",
            json!({ "d": d }),
        )
        .await;
    assert_eq!(error_code(&response), "NOT_FOUND");
    // Nothing was stored by the failed posts.
    let data = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { commentCount } }",
            json!({ "d": d }),
        )
        .await;
    assert_eq!(data["discussion"]["commentCount"], json!(1));
}

pub(crate) async fn mutations_need_a_valid_token_case(settings: Settings) {
    let app = TestApp::with("tokens", settings).await;
    let d = app.discussion("tokens").await;
    let post = "mutation($d: ID!) { postComment(input: {discussionId: $d, text: \"hi\"}) { slug author { id name } } }";
    let vars = json!({ "d": d });
    let expired = sign(&Claims {
        exp: now() - 600,
        ..Claims::new("u1", "Ada")
    });
    let forged = sign_with(
        jsonwebtoken::Algorithm::HS256,
        &Claims::new("u1", "Ada"),
        "not-the-secret",
    );
    for (what, token) in [
        ("missing", None),
        ("expired", Some(expired.as_str())),
        ("forged", Some(forged.as_str())),
        ("garbage", Some("abc.def.ghi")),
    ] {
        let response = app.exec_as(token, post, vars.clone()).await;
        assert_eq!(
            error_code(&response),
            "UNAUTHENTICATED",
            "{what} token: {response:#}"
        );
    }
    let response = app
        .exec_as(
            None,
            "mutation { createDiscussion(input: {title: \"x\"}) { id } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&response), "UNAUTHENTICATED");
    // Reads are public; the author comes from the token, never from the request.
    let token = app.token("user-42", "Grace");
    let response = app.exec_as(Some(&token), post, vars.clone()).await;
    assert_eq!(
        response["data"]["postComment"]["author"],
        json!({ "id": "user-42", "name": "Grace" })
    );
    let response = app
        .exec_as(
            None,
            "query($d: ID!) { discussion(id: $d) { commentCount } }",
            vars,
        )
        .await;
    assert_eq!(response["data"]["discussion"]["commentCount"], json!(1));
}

async fn replies_beyond_the_depth_cap_attach_to_an_ancestor_case(mut settings: Settings) {
    settings.max_depth = 3;
    let app = TestApp::with("depth_cap", settings).await;
    let d = app.discussion("deep").await;
    let mut chain = vec![app.post(&d, None, "level 0").await];
    for level in 1..6 {
        let parent = chain.last().expect("chain").clone();
        chain.push(app.post(&d, Some(&parent), &format!("level {level}")).await);
    }
    let q =
        "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { depth parentSlug } }";
    for (i, slug) in chain.iter().enumerate() {
        let data = app.ok(q, json!({ "d": d, "s": slug })).await;
        assert_eq!(data["comment"]["depth"], json!(i.min(2)), "comment {i}");
    }
    // Replies past the cap became replies of the deepest allowed ancestor (depth 1).
    let data = app.ok(q, json!({ "d": d, "s": chain[5] })).await;
    assert_eq!(data["comment"]["parentSlug"], json!(chain[1]));
    let data = app
        .ok("query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { replyCount subDiscussion { totalCount } } }", json!({ "d": d, "s": chain[1] }))
        .await;
    assert_eq!(data["comment"]["replyCount"], json!(4));
    assert_eq!(data["comment"]["subDiscussion"]["totalCount"], json!(4));
}

pub(crate) async fn comment_fields_are_complete_case(settings: Settings) {
    let app = TestApp::with("fields", settings).await;
    let d = app.discussion("fields").await;
    let top = app.post(&d, None, "Hello *world* — ünïcödé ✓").await;
    let data = app
        .ok(
            "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { id discussionId slug fullSlug parentSlug depth posted editedAt deleted author { id name } text parent { slug } replyCount } discussion(id: $d) { id title layout createdAt commentCount } }",
            json!({ "d": d, "s": top }),
        )
        .await;
    let c = &data["comment"];
    assert_eq!(c["id"], json!(format!("{d}:{top}")));
    assert_eq!(c["discussionId"], json!(d));
    assert_eq!(c["text"], json!("Hello *world* — ünïcödé ✓"));
    assert_eq!(c["author"], json!({ "id": "u1", "name": "Ada" }));
    assert_eq!(c["deleted"], json!(false));
    assert_eq!(c["editedAt"], Value::Null);
    assert_eq!(c["parent"], Value::Null);
    assert_eq!(c["depth"], json!(0));
    let full = c["fullSlug"].as_str().expect("fullSlug");
    assert!(full.ends_with(&format!(":{top}")), "{full}");
    assert!(c["posted"].as_str().expect("posted").starts_with("20"));
    assert_eq!(data["discussion"]["title"], json!("fields"));
    assert_eq!(data["discussion"]["commentCount"], json!(1));
}

pub(crate) async fn writes_are_visible_within_one_request_case(settings: Settings) {
    let app = TestApp::with("read_your_writes", settings).await;
    let d = app.discussion("read your writes").await;
    let top = app.post(&d, None, "top").await;
    // Mutations run one after the other; each one's fields see the writes before it.
    let data = app
        .ok(
            "mutation($d: ID!, $p: String!) {
                first: postComment(input: {discussionId: $d, parentSlug: $p, text: \"one\"}) { parent { replyCount } }
                second: postComment(input: {discussionId: $d, parentSlug: $p, text: \"two\"}) { parent { replyCount replies { totalCount nodes { text } } } }
            }",
            json!({ "d": d, "p": top }),
        )
        .await;
    assert_eq!(data["first"]["parent"]["replyCount"], json!(1));
    assert_eq!(data["second"]["parent"]["replyCount"], json!(2));
    assert_eq!(
        data["second"]["parent"]["replies"]["nodes"],
        json!([{ "text": "one" }, { "text": "two" }])
    );
}
