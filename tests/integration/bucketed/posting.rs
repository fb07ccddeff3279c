//! Posting into buckets: many writers lose and duplicate nothing, a post costs a known number of
//! commands, a process that missed page changes still posts in order, and pages are keyed.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_writers_lose_and_duplicate_nothing() {
    const TASKS: usize = 16;
    const POSTS: usize = 200;
    const CAP: i64 = 10;
    let app = TestApp::with("bucketed_writers", settings(CAP as u32)).await;
    let d = app.discussion("contention").await;
    let discussion = Arc::new(load_discussion(app.store(), &d).await);
    // The change feed reports every post, those stored together included.
    let mut feed = open_feed(app.store()).await;
    let before = app.store().commands().snapshot();
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (store, discussion) = (app.store().clone(), discussion.clone());
        tasks.push(tokio::spawn(async move {
            let mut mine: Vec<Slug> = Vec::new();
            for i in 0..POSTS {
                // Every third post replies to one of the task's earlier comments, at any depth.
                let parent = (i % 3 == 2).then(|| mine[(i / 2 + task * 7) % mine.len()].clone());
                let posted = store
                    .posting()
                    .post(
                        &discussion,
                        NewComment {
                            parent: parent.clone(),
                            author: Author {
                                id: format!("u{task}"),
                                name: format!("writer {task}"),
                            },
                            text: CommentText::parse(&format!("{task}/{i}"), 100).expect("text"),
                            html: format!("<p>{task}/{i}</p>\n"),
                            part: None,
                            announce: None,
                            number: None,
                        },
                    )
                    .await
                    .expect("post");
                assert_eq!(posted.comment.parent, parent);
                mine.push(posted.comment.slug);
            }
            mine
        }));
    }
    let mut posted: HashSet<String> = HashSet::new();
    for task in tasks {
        for slug in task.await.expect("task") {
            assert!(
                posted.insert(slug.to_string()),
                "slug {slug} handed out twice"
            );
        }
    }
    let total = TASKS * POSTS;
    assert_eq!(posted.len(), total);
    let after = app.store().commands().snapshot();
    let used: BTreeMap<&String, u64> = after
        .iter()
        .map(|(k, v)| (k, v - before.get(k).copied().unwrap_or(0)))
        .collect();
    eprintln!("{total} posts by {TASKS} writers into pages of {CAP}: commands {used:?}");
    // Posts that waited for the discussion's turn were stored together: fewer transactions
    // than posts, and each post still read its parent once.
    assert!(
        used[&"commitTransaction".to_owned()] < total as u64,
        "posts waiting for their turn are stored together"
    );
    assert_eq!(
        posts_reported(&mut feed, &d, total).await,
        posted,
        "the feed reports exactly the posted comments"
    );

    // The raw pages: numbered 0..n, never empty, never over the cap, full but for the last,
    // counts equal to the arrays, arrays sorted, pages in order and disjoint.
    let pages = raw_pages(&app, &d).await;
    let mut stored: HashMap<String, Document> = HashMap::new();
    let mut last_key: Option<(i64, String)> = None;
    let mut thread_total = 0;
    let mut roots = 0;
    let mut overfilled = 0;
    for (n, page) in pages.iter().enumerate() {
        assert_eq!(int(page, "page"), n as i64, "page numbers have no gaps");
        let items = comments(page);
        assert_eq!(int(page, "count"), items.len() as i64, "count of page {n}");
        assert!(!items.is_empty(), "page {n} is empty");
        if items.len() as i64 > CAP {
            overfilled += 1;
        }
        if n + 1 < pages.len() {
            assert_eq!(items.len() as i64, CAP, "page {n} before the last is full");
        }
        let page_roots = items
            .iter()
            .filter(|c| matches!(c.get("parent"), Some(Bson::Null) | None))
            .count() as i64;
        assert_eq!(int(page, "roots"), page_roots);
        roots += page_roots;
        thread_total += int(page, "thread_total");
        for c in &items {
            let key = key_of(c);
            if let Some(prev) = &last_key {
                assert!(*prev < key, "page {n}: {prev:?} is not before {key:?}");
            }
            last_key = Some(key);
            let slug = c.get_str("slug").expect("slug").to_owned();
            assert!(
                stored.insert(slug.clone(), (*c).clone()).is_none(),
                "{slug} stored twice"
            );
        }
    }
    eprintln!("{} pages, {overfilled} over the cap of {CAP}", pages.len());
    assert_eq!(overfilled, 0);
    assert_eq!(stored.len(), total, "every comment stored exactly once");
    assert_eq!(
        stored.keys().cloned().collect::<HashSet<_>>(),
        posted,
        "the stored comments are the posted ones"
    );
    assert_eq!(thread_total, total as i64, "thread totals add up");
    check_thread_pages(&pages);
    check_page_blocks(&app, &d, &pages).await;

    // Reply counts agree with the stored parents.
    let mut children: HashMap<&str, i64> = HashMap::new();
    for c in stored.values() {
        if let Ok(parent) = c.get_str("parent") {
            *children.entry(parent).or_default() += 1;
        }
    }
    for (slug, c) in &stored {
        let expected = children.get(slug.as_str()).copied().unwrap_or(0);
        assert_eq!(int(c, "reply_count"), expected, "reply count of {slug}");
    }
    // So do the replies per page each parent keeps.
    let mut per_page: HashMap<String, BTreeMap<String, i64>> = HashMap::new();
    for page in &pages {
        for c in comments(page) {
            if let Ok(parent) = c.get_str("parent") {
                *per_page
                    .entry(parent.to_owned())
                    .or_default()
                    .entry(int(page, "page").to_string())
                    .or_default() += 1;
            }
        }
    }
    for (slug, c) in &stored {
        let kept: BTreeMap<String, i64> = c
            .get_document("reply_pages")
            .map(|d| d.keys().map(|k| (k.clone(), int(d, k))).collect())
            .unwrap_or_default();
        assert_eq!(
            kept,
            per_page.remove(slug).unwrap_or_default(),
            "replies per page of {slug}"
        );
    }

    // The discussion's counters and page number.
    let raw = raw_db(&app)
        .await
        .collection::<Document>("discussions")
        .find_one(doc! { "_id": &d })
        .await
        .expect("find")
        .expect("discussion");
    assert_eq!(int(&raw, "comment_count"), total as i64);
    assert_eq!(int(&raw, "thread_count"), roots);
    assert_eq!(int(&raw, "num_comment_pages"), pages.len() as i64 - 1);
    assert_eq!(int(&raw, "sealed_min"), CAP, "every sealed page is full");
    assert_eq!(int(&raw, "sealed_max"), CAP);

    // Every comment is reachable by slug and appears exactly once in every listing.
    let store = app.store();
    let discussion = load_discussion(store, &d).await;
    let layout = store.layout(Layout::Bucketed).expect("layout");
    let all: Vec<Slug> = posted
        .iter()
        .map(|s| Slug::parse(s).expect("slug"))
        .collect();
    for chunk in all.chunks(500) {
        let found = layout
            .by_slugs(&ReadScope::new(), &discussion, chunk)
            .await
            .expect("by slugs");
        assert_eq!(found.len(), chunk.len());
    }
    let chronological: Vec<String> = stored
        .values()
        .map(|c| (key_of(c), c.get_str("slug").expect("slug").to_owned()))
        .collect::<BTreeMap<_, _>>()
        .into_values()
        .collect();
    assert_eq!(
        slugs(&all_by_cursor(store, &discussion, Listing::Chronological, 100).await),
        chronological
    );
    assert_eq!(
        slugs(&all_by_offset(store, &discussion, Listing::Chronological, 77).await),
        chronological
    );
    let threaded: Vec<String> = stored
        .values()
        .map(|c| {
            (
                c.get_str("full_slug").expect("full").to_owned(),
                c.get_str("slug").expect("slug").to_owned(),
            )
        })
        .collect::<BTreeMap<_, _>>()
        .into_values()
        .collect();
    assert_eq!(
        slugs(&all_by_cursor(store, &discussion, Listing::Threaded, 100).await),
        threaded
    );
    assert_eq!(
        slugs(&all_by_offset(store, &discussion, Listing::Threaded, 100).await),
        threaded
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_costs_four_commands_and_a_reply_to_a_comment_unknown_to_the_process_five() {
    let app = TestApp::with("bucketed_post_cost", settings(100)).await;
    let d = app.discussion("post cost").await;
    let store = app.store();
    let discussion = load_discussion(store, &d).await;
    // The first post of a process also reads where posts go; later ones remember it.
    let root = post_in(store, Layout::Bucketed, &discussion, None, "first").await;
    let mut parent = root.clone();
    let mut costs = Vec::new();
    for depth in 0..5 {
        let before = store.commands().snapshot();
        let top = post_in(
            store,
            Layout::Bucketed,
            &discussion,
            None,
            &format!("top {depth}"),
        )
        .await;
        let top_cost = diff(&before, &store.commands().snapshot());
        let before = store.commands().snapshot();
        parent = post_in(
            store,
            Layout::Bucketed,
            &discussion,
            Some(&parent),
            &format!("reply {depth}"),
        )
        .await;
        let reply_cost = diff(&before, &store.commands().snapshot());
        assert_eq!(top.depth(), 0);
        assert_eq!(parent.depth(), depth + 1);
        costs.push((top_cost, reply_cost));
    }
    eprintln!("post costs (top-level, reply) by depth: {costs:?}");
    let expected = |commands: &[(&str, u64)]| -> BTreeMap<String, u64> {
        commands
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect()
    };
    for (top, reply) in &costs {
        // A post: one update command on the pages (the guard that finds its slug anywhere in
        // the discussion, then the push, and for a reply its counters), the discussion's
        // counters, and the commit of their transaction (the development database has
        // transactions); before them, the author's number is drawn. The process stored the parent, so it knows where it and its thread's
        // root are.
        assert_eq!(
            top,
            &expected(&[
                ("update", 2),
                ("commitTransaction", 1),
                ("findAndModify", 1)
            ])
        );
        assert_eq!(
            reply,
            &expected(&[
                ("update", 2),
                ("commitTransaction", 1),
                ("findAndModify", 1)
            ])
        );
    }
    // Another process knows none of these comments: its first reply to one reads it and its
    // thread's root; the next reply there, and a reply to its own reply, do not.
    let other = Store::connect(&store_config(&app.database, &settings(100)))
        .await
        .expect("connect");
    post_in(&other, Layout::Bucketed, &discussion, None, "warm").await;
    let mut other_costs = Vec::new();
    let mut reply_to = parent.clone();
    for text in ["other 1", "other 2", "other 3"] {
        let before = other.commands().snapshot();
        let posted = post_in(&other, Layout::Bucketed, &discussion, Some(&reply_to), text).await;
        other_costs.push(diff(&before, &other.commands().snapshot()));
        if text == "other 2" {
            reply_to = posted;
        }
    }
    assert_eq!(
        other_costs,
        vec![
            expected(&[
                ("aggregate", 1),
                ("update", 2),
                ("commitTransaction", 1),
                ("findAndModify", 1)
            ]),
            expected(&[
                ("update", 2),
                ("commitTransaction", 1),
                ("findAndModify", 1)
            ]),
            expected(&[
                ("update", 2),
                ("commitTransaction", 1),
                ("findAndModify", 1)
            ]),
        ]
    );
    // The reply counters landed with the push.
    let pages = raw_pages(&app, &d).await;
    assert_eq!(check_reply_counts(&pages), 15);
    assert_eq!(int(&pages[0], "thread_total"), 15);
    check_thread_pages(&pages);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_missed_page_changes_still_posts_in_order() {
    let app = TestApp::with("bucketed_stale_target", settings(5)).await;
    let d = app.discussion("stale target").await;
    let other = Store::connect(&store_config(&app.database, &settings(5)))
        .await
        .expect("connect");
    let discussion = load_discussion(app.store(), &d).await;
    let mut posted = Vec::new();
    for i in 0..3 {
        posted.push(
            post_in(
                app.store(),
                Layout::Bucketed,
                &discussion,
                None,
                &format!("a {i}"),
            )
            .await,
        );
    }
    // Another process fills page 0 and two more; this one still remembers page 0.
    for i in 0..12 {
        posted.push(
            post_in(
                &other,
                Layout::Bucketed,
                &discussion,
                None,
                &format!("b {i}"),
            )
            .await,
        );
    }
    for i in 0..4 {
        let parent = posted[i * 3].clone();
        posted.push(
            post_in(
                app.store(),
                Layout::Bucketed,
                &discussion,
                Some(&parent),
                &format!("c {i}"),
            )
            .await,
        );
    }
    let counts: Vec<i64> = raw_pages(&app, &d)
        .await
        .iter()
        .map(|p| int(p, "count"))
        .collect();
    assert_eq!(counts, vec![5, 5, 5, 4]);
    let discussion = load_discussion(app.store(), &d).await;
    assert_eq!(discussion.comment_count, 19);
    let strings: Vec<String> = posted.iter().map(ToString::to_string).collect();
    for size in [1, 4, 5, 7] {
        let by_offset = all_by_offset(app.store(), &discussion, Listing::Chronological, size).await;
        assert_eq!(slugs(&by_offset), strings, "offset pages of {size}");
        let by_cursor = all_by_cursor(app.store(), &discussion, Listing::Chronological, size).await;
        assert_eq!(slugs(&by_cursor), strings, "cursor pages of {size}");
    }
}

/// New discussions' pages are keyed `<discussion>:<page>` (a write to one page is an `_id`
/// lookup); a discussion from before keyed pages (no `keyed_pages` on it) keeps posting into
/// pages with generated ids, with the same counts and order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_are_keyed_and_discussions_from_before_still_post() {
    let app = TestApp::with("bucketed_keyed_pages", settings(5)).await;
    let keyed = app.discussion("keyed").await;
    let legacy = app.discussion("from before").await;
    raw_db(&app)
        .await
        .collection::<Document>("discussions")
        .update_one(
            doc! { "_id": &legacy },
            doc! { "$unset": { "keyed_pages": "" } },
        )
        .await
        .expect("unset");
    for d in [&keyed, &legacy] {
        let mut posted: Vec<String> = Vec::new();
        for i in 0..17 {
            let parent = match i % 3 {
                0 => None,
                1 => posted.last().cloned(),
                _ => posted.get(i / 2).cloned(),
            };
            posted.push(app.post(d, parent.as_deref(), &format!("c {i}")).await);
        }
        let pages = raw_pages(&app, d).await;
        assert_eq!(
            pages.iter().map(|p| int(p, "count")).collect::<Vec<_>>(),
            [5, 5, 5, 2]
        );
        for page in &pages {
            let id = page.get("_id").expect("_id");
            match d == &keyed {
                true => assert_eq!(
                    id,
                    &Bson::String(format!("{d}:{}", int(page, "page"))),
                    "{page}"
                ),
                false => assert!(matches!(id, Bson::ObjectId(_)), "{page}"),
            }
        }
        // Reply counts and thread totals landed on the right pages.
        check_reply_counts(&pages);
        let totals: i64 = pages.iter().map(|p| int(p, "thread_total")).sum();
        assert_eq!(totals, 17);
        // Both orders read back everything that was posted.
        let data = app
            .ok(
                "query($d: ID!) { discussion(id: $d) { commentCount comments(first: 100) { nodes { slug } } } }",
                json!({ "d": d }),
            )
            .await;
        assert_eq!(data["discussion"]["commentCount"], 17);
        let listed: Vec<String> = data["discussion"]["comments"]["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|n| n["slug"].as_str().expect("slug").to_owned())
            .collect();
        assert_eq!(listed, posted);
    }
}
