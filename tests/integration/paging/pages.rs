//! What newest-first and backward pages hold, against every layout: every list, order and
//! direction against the model, and the edges (empty lists, `last: 0`, more than the list holds,
//! before the first item and after the last, offsets past the end, the discussion list).

use super::*;

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
