//! What newest-first and backward pages cost, against every layout: each the commands of its
//! forward counterpart.

use super::*;

/// The commands a query sends, but those the driver sends on its own ("other"): the read
/// cache's change feed sends its getMores when it will, and one landed inside a count on a
/// loaded CI machine.
async fn query_commands(app: &TestApp, query: &str, vars: Value) -> u64 {
    let before = app.store().commands().snapshot();
    let data = app.ok(&format!("{query} {CONN}"), vars).await;
    assert!(data.is_object());
    crate::support::diff(&before, &app.store().commands().snapshot())
        .iter()
        .filter(|(name, _)| *name != "other")
        .map(|(_, n)| n)
        .sum()
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
