//! Threaded pages and sub-discussions read only the pages of their threads (through the thread
//! counts and the blocks of pages), and windows keep the parents they read.

use super::*;

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
