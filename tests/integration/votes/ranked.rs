//! Ranked orders against every layout: votes cast in patterns, each order's pages (forward,
//! backward, by offset) matching a model, and cursors that belong to the order they came from.

use super::*;

/// A vote pattern of the ranked case: upvotes and downvotes a comment ends with. Equal patterns
/// tie in every order; equal scores tie in TOP; one-sided ones tie at 0 in CONTROVERSIAL.
const PATTERNS: [(usize, usize); 14] = [
    (0, 0),
    (1, 0),
    (0, 1),
    (1, 1),
    (2, 0),
    (2, 1),
    (1, 2),
    (3, 1),
    (2, 2),
    (3, 3),
    (4, 1),
    (5, 2),
    (0, 2),
    (6, 3),
];
/// The users who vote in the ranked cases.
const VOTERS: usize = 12;

/// One vote of a plan: who votes what.
type Step = (String, Option<Vote>);

/// Casts votes on `slugs` so that each ends on a pattern, with some switches and removals on
/// the way; returns what each comment should end with.
pub(crate) async fn cast_patterns(
    app: &TestApp,
    d: &str,
    slugs: &[String],
    seed: u64,
) -> HashMap<String, (u64, u64)> {
    let mut rng = Rng::new(seed);
    let mut plans: Vec<(String, Vec<Step>)> = Vec::new();
    for (i, slug) in slugs.iter().enumerate() {
        let (up, down) = PATTERNS[rng.below(PATTERNS.len())];
        let voter = |k: usize| format!("v{}", (i + k) % VOTERS);
        let mut steps = Vec::new();
        // Noise first: one user who switches sides, one who votes and takes it back.
        if rng.below(3) == 0 {
            steps.push((voter(up + down), Some(Vote::Down)));
            steps.push((voter(up + down + 1), Some(Vote::Up)));
            steps.push((voter(up + down), Some(Vote::Up)));
            steps.push((voter(up + down + 1), None));
            steps.push((voter(up + down), None));
        }
        for k in 0..up + down {
            let vote = if k < up { Vote::Up } else { Vote::Down };
            if rng.below(4) == 0 {
                // Switched into place.
                let other = if vote == Vote::Up {
                    Vote::Down
                } else {
                    Vote::Up
                };
                steps.push((voter(k), Some(other)));
            }
            steps.push((voter(k), Some(vote)));
        }
        plans.push((slug.clone(), steps));
    }
    let mut expected = HashMap::new();
    for chunk in plans.chunks(10) {
        let runs = chunk.iter().map(|(slug, steps)| async move {
            let mut tally = Tally::default();
            for (user, vote) in steps {
                let answer = vote_ok(app, user, d, slug, *vote).await;
                tally.set(user, *vote);
                let (up, down) = tally.counts();
                assert_eq!(
                    answer["upvotes"],
                    json!(up),
                    "{slug} after {user}: {answer}"
                );
                assert_eq!(
                    answer["downvotes"],
                    json!(down),
                    "{slug} after {user}: {answer}"
                );
            }
            (slug.clone(), tally.counts())
        });
        expected.extend(join_all(runs).await);
    }
    expected
}

/// Checks one ranked list against its model: forward by cursor, backward, by offset and single
/// pages at offsets (where the list takes `offset`), the final items by `last`, totalCount.
pub(crate) async fn check_ranked_list(
    app: &TestApp,
    query: &str,
    path: &[&str],
    vars: &Value,
    expected: &[String],
    what: &str,
) {
    let n = expected.len();
    for size in [1, 7, 50] {
        let got = collect_by_cursor(app, query, vars.clone(), path, size).await;
        assert_exactly_once(
            &got,
            expected,
            &format!("{what} by cursor, pages of {size}"),
        );
    }
    for size in [7, 50] {
        let got = collect_backward(app, query, vars.clone(), path, size).await;
        assert_exactly_once(&got, expected, &format!("{what} backward, pages of {size}"));
    }
    // `replies` pages by cursor only.
    let offsets: &[usize] = if query.contains("$offset") {
        &[0, 3, n.saturating_sub(2), n, n + 10]
    } else {
        &[]
    };
    if !offsets.is_empty() {
        let got = collect_by_offset(app, query, vars.clone(), path, 7).await;
        assert_exactly_once(&got, expected, &format!("{what} by offset"));
    }
    for &offset in offsets {
        let got = page(
            app,
            query,
            with(vars, &json!({ "first": 5, "offset": offset })),
            path,
        )
        .await;
        let slice = expected[offset.min(n)..(offset + 5).min(n)].to_vec();
        assert_eq!(
            got,
            (slice, offset > 0 && n > 0, offset + 5 < n),
            "{what} first 5 at offset {offset}"
        );
    }
    for last in [1, 5, 100] {
        let got = page(app, query, with(vars, &json!({ "last": last })), path).await;
        assert_eq!(
            got,
            (expected[n.saturating_sub(last)..].to_vec(), n > last, false),
            "{what} last {last}"
        );
    }
    let data = app
        .ok(
            &format!("{query} {}", crate::contract::CONN),
            with(vars, &json!({ "first": 0 })),
        )
        .await;
    assert_eq!(at(&data, path)["totalCount"], json!(n), "{what} totalCount");
}

/// The contract case: each ranked order of `comments`, `threads` and `replies`, walked every
/// way, equals the model built from the counters of the chronological list.
pub(crate) async fn ranked_orders_match_the_model_case(settings: Settings) {
    let app = TestApp::with("ranked_model", settings).await;
    let moderator = app.moderator_token("m", "Mo");
    let d = app.discussion("ranked").await;
    let model = build_tree(&app, &d, 60, 3, 29).await;
    let expected = cast_patterns(&app, &d, &model.slugs, 31).await;
    // Tombstones keep their votes; a rejected placeholder leaves every ranked list.
    for i in [4, 21, 50] {
        app.ok(DELETE, json!({ "d": d, "s": model.slugs[i] })).await;
    }
    let rejected = &model.slugs[9];
    let answer = app
        .exec_as(Some(&moderator), REJECT, json!({ "d": d, "s": rejected }))
        .await;
    assert_eq!(
        answer["data"]["rejectComment"]["status"], "REJECTED",
        "{answer:#}"
    );

    let all = listed(&app, &d).await;
    assert_eq!(all.len(), model.slugs.len());
    for c in &all {
        assert_eq!(
            (c.up, c.down),
            expected[&c.slug],
            "the counters of {} are the votes cast",
            c.slug
        );
    }
    let comments = members(&all, |_| true);
    assert_eq!(comments.len(), model.slugs.len() - 1);
    assert_eq!(
        comments.iter().filter(|c| c.deleted).count(),
        3,
        "tombstones stay in"
    );
    assert!(comments.iter().all(|c| &c.slug != rejected));
    let threads = members(&all, |c| c.parent.is_none());
    let busiest = (0..model.slugs.len())
        .filter(|&i| i != 9)
        .max_by_key(|&i| model.replies(i).len())
        .expect("comments");
    let busy = model.slugs[busiest].clone();
    let replies = members(&all, |c| c.parent.as_deref() == Some(busy.as_str()));
    assert!(replies.len() >= 4, "a busy comment: {}", replies.len());
    assert!(threads.len() >= 5, "several threads: {}", threads.len());
    let mut distinct: Vec<(u64, u64)> = comments.iter().map(|c| (c.up, c.down)).collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(
        distinct.len() >= 8 && distinct.len() < comments.len() / 2,
        "values both differ and tie: {distinct:?}"
    );

    for rank in Rank::ALL {
        let order = rank_name(rank);
        let lists = [
            (
                COMMENTS,
                &COMMENTS_PATH,
                json!({ "d": d, "order": order }),
                &comments,
                "comments",
            ),
            (
                THREADS,
                &THREADS_PATH,
                json!({ "d": d, "order": order }),
                &threads,
                "threads",
            ),
            (
                REPLIES,
                &REPLIES_PATH,
                json!({ "d": d, "s": busy, "order": order }),
                &replies,
                "replies",
            ),
        ];
        for (query, path, vars, members, name) in lists {
            let model = ranked(members, rank);
            check_ranked_list(&app, query, path, &vars, &model, &format!("{order} {name}")).await;
        }
    }
}

/// A cursor of the first item of a list.
async fn first_cursor(app: &TestApp, query: &str, path: &[&str], vars: Value) -> String {
    let data = app
        .ok(
            &format!("{query} {}", crate::contract::CONN),
            with(&vars, &json!({ "first": 2 })),
        )
        .await;
    at(&data, path)["edges"][0]["cursor"]
        .as_str()
        .unwrap_or_else(|| panic!("a cursor: {data:#}"))
        .to_owned()
}

/// The contract case: a cursor works only in a list of its own order, and ranked lists refuse
/// the paging arguments every list refuses.
pub(crate) async fn ranked_cursors_belong_to_their_order_case(settings: Settings) {
    let app = TestApp::with("ranked_cursors", settings).await;
    let d = app.discussion("cursors").await;
    let author = app.token("author", "Lin");
    let top = app.post_as(&author, &d, None, "one").await;
    let second = app.post_as(&author, &d, None, "two").await;
    app.post_as(&author, &d, Some(&top), "reply one").await;
    app.post_as(&author, &d, Some(&top), "reply two").await;
    vote_ok(&app, "v1", &d, &second, Some(Vote::Up)).await;
    vote_ok(&app, "v2", &d, &top, Some(Vote::Down)).await;
    let at_d = json!({ "d": d });
    let mut cursors: HashMap<&str, String> = HashMap::new();
    for order in [
        "CHRONOLOGICAL",
        "NEWEST",
        "THREADED",
        "TOP",
        "BEST",
        "CONTROVERSIAL",
    ] {
        let cursor = first_cursor(
            &app,
            COMMENTS,
            &COMMENTS_PATH,
            with(&at_d, &json!({ "order": order })),
        )
        .await;
        cursors.insert(order, cursor);
    }
    // Each cursor works in its own order.
    for order in ["TOP", "BEST", "CONTROVERSIAL"] {
        let vars = with(
            &at_d,
            &json!({ "order": order, "first": 5, "after": cursors[order] }),
        );
        let (got, previous, _) = page(&app, COMMENTS, vars, &COMMENTS_PATH).await;
        assert_eq!(got.len(), 3, "{order}: after the first of four");
        assert!(previous);
    }
    let threads_top = first_cursor(
        &app,
        THREADS,
        &THREADS_PATH,
        with(&at_d, &json!({ "order": "TOP" })),
    )
    .await;
    let replies_best = first_cursor(
        &app,
        REPLIES,
        &REPLIES_PATH,
        json!({ "d": d, "s": top, "order": "BEST" }),
    )
    .await;

    let list = |order: &str, extra: Value| with(&with(&at_d, &json!({ "order": order })), &extra);
    let cases: Vec<(String, &str, Value)> = {
        let mut cases = Vec::new();
        for (mine, theirs) in [
            ("TOP", "BEST"),
            ("TOP", "CONTROVERSIAL"),
            ("BEST", "TOP"),
            ("BEST", "CONTROVERSIAL"),
            ("CONTROVERSIAL", "TOP"),
            ("CONTROVERSIAL", "BEST"),
            ("CHRONOLOGICAL", "TOP"),
            ("NEWEST", "BEST"),
            ("THREADED", "CONTROVERSIAL"),
            ("TOP", "CHRONOLOGICAL"),
            ("BEST", "NEWEST"),
            ("CONTROVERSIAL", "THREADED"),
        ] {
            cases.push((
                format!("a {mine} cursor after in a {theirs} list"),
                COMMENTS,
                list(theirs, json!({ "first": 2, "after": cursors[mine] })),
            ));
            cases.push((
                format!("a {mine} cursor before in a {theirs} list"),
                COMMENTS,
                list(theirs, json!({ "last": 2, "before": cursors[mine] })),
            ));
        }
        cases.push((
            "a TOP threads cursor in a BEST threads list".to_owned(),
            THREADS,
            list("BEST", json!({ "first": 2, "after": threads_top })),
        ));
        cases.push((
            "a BEST replies cursor in a TOP replies list".to_owned(),
            REPLIES,
            json!({ "d": d, "s": top, "order": "TOP", "first": 2, "after": replies_best }),
        ));
        for (what, extra) in [
            (
                "a garbage cursor",
                json!({ "first": 2, "after": "%%%not-base64" }),
            ),
            (
                "a garbage cursor before",
                json!({ "last": 2, "before": "YWJj" }),
            ),
            ("first and last", json!({ "first": 2, "last": 2 })),
            (
                "offset and before",
                json!({ "before": cursors["TOP"], "offset": 1 }),
            ),
            (
                "offset and after",
                json!({ "after": cursors["TOP"], "offset": 1 }),
            ),
            ("last and offset", json!({ "last": 2, "offset": 1 })),
            (
                "after and before",
                json!({ "after": cursors["TOP"], "before": cursors["TOP"] }),
            ),
            (
                "first and before",
                json!({ "first": 2, "before": cursors["TOP"] }),
            ),
            (
                "last and after",
                json!({ "last": 2, "after": cursors["TOP"] }),
            ),
            ("negative first", json!({ "first": -1 })),
            ("negative last", json!({ "last": -1 })),
            ("first over the cap", json!({ "first": 101 })),
            ("last over the cap", json!({ "last": 101 })),
            ("negative offset", json!({ "first": 2, "offset": -3 })),
        ] {
            cases.push((format!("TOP: {what}"), COMMENTS, list("TOP", extra)));
        }
        cases.push((
            "THREADED threads".to_owned(),
            THREADS,
            list("THREADED", json!({ "first": 2 })),
        ));
        cases.push((
            "THREADED replies".to_owned(),
            REPLIES,
            json!({ "d": d, "s": top, "order": "THREADED", "first": 2 }),
        ));
        cases
    };
    for (what, query, vars) in cases {
        let response = app
            .exec(&format!("{query} {}", crate::contract::CONN), vars)
            .await;
        assert_eq!(
            error_code(&response),
            "BAD_USER_INPUT",
            "{what}: {response:#}"
        );
        let message = response["errors"][0]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            !message.is_empty() && !message.contains("internal"),
            "{what}: unclear message {message:?}"
        );
    }
    // A sub-discussion has no order.
    let response = app
        .exec(
            "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { subDiscussion(order: TOP) { totalCount } } }",
            json!({ "d": d, "s": top }),
        )
        .await;
    assert_eq!(
        error_code(&response),
        "GRAPHQL_VALIDATION_FAILED",
        "{response:#}"
    );
    // An unknown order is refused before anything runs.
    let response = app
        .exec(
            "query($d: ID!) { discussion(id: $d) { comments(order: HOTTEST) { totalCount } } }",
            at_d.clone(),
        )
        .await;
    assert_eq!(
        error_code(&response),
        "GRAPHQL_VALIDATION_FAILED",
        "{response:#}"
    );
}
