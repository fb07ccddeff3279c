//! The seeds' offset walk: offset windows read only the pages that hold them, whatever the
//! discussion's size or an earlier bucket size.

use super::*;

/// A stored comment element as the layout writes it.
fn stored_element(posted: i64, slug: &str) -> Document {
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
        "comments": items.iter().map(|(p, s)| Bson::Document(stored_element(*p, s))).collect::<Vec<_>>(),
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
                // Reads only: the change feed's getMores (counted as "other") come when they
                // will, and one landed inside a count on a loaded CI machine.
                let used: u64 = diff(&before, &app.store().commands().snapshot())
                    .iter()
                    .filter(|(name, _)| *name != "other")
                    .map(|(_, n)| n)
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
            .posting()
            .post(
                &discussion,
                NewComment {
                    parent: None,
                    author: Author {
                        id: "u1".into(),
                        name: "Ada".into(),
                    },
                    text: CommentText::parse(&format!("after {i}"), 100).expect("text"),
                    html: format!("<p>after {i}</p>\n"),
                    part: None,
                    announce: None,
                    number: None,
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

/// The sealed pages of a bucketed discussion, as its hints give them.
fn full_pages(discussion: &Discussion) -> &Option<FullPages> {
    &Hints::of(discussion).full_pages
}
