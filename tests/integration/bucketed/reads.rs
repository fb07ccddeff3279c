//! Replies and tree levels read only the pages that hold them, once per request, and what a
//! process remembers of where comments live never misleads it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_read_only_the_pages_that_hold_their_window() {
    let (requests, app) = PageRequests::app("bucketed_reply_pages").await;
    let d = app.discussion("replies over many pages").await;
    let parent = app.post(&d, None, "the parent").await;
    // Each reply lands two comments after the one before: 12 replies over 9 pages of 3.
    let mut replies = Vec::new();
    for i in 0..12 {
        app.post(&d, None, &format!("filler {i}")).await;
        replies.push(app.post(&d, Some(&parent), &format!("reply {i}")).await);
    }
    let page_of = pages_by_slug(&raw_pages(&app, &d).await);
    let store = app.store();
    let discussion = load_discussion(store, &d).await;
    let layout = store.layout(Layout::Bucketed).expect("layout");
    let parent_slug = Slug::parse(&parent).expect("slug");
    for (skip, limit) in [(0, 2), (0, 12), (5, 3), (10, 5), (12, 3)] {
        let scope = ReadScope::new();
        layout
            .by_slugs(&scope, &discussion, std::slice::from_ref(&parent_slug))
            .await
            .expect("parent");
        requests.take();
        let page = layout
            .replies(
                &scope,
                &discussion,
                std::slice::from_ref(&parent_slug),
                &Window::Offset { skip, limit },
            )
            .await
            .expect("replies")
            .remove(&parent_slug)
            .expect("a page");
        let end = (skip as usize + limit).min(replies.len());
        let expected = &replies[(skip as usize).min(end)..end];
        assert_eq!(slugs(&page.items), expected, "replies {skip}+{limit}");
        assert_eq!(
            page.has_next,
            end < replies.len(),
            "more after {skip}+{limit}"
        );
        // Only the pages of replies skip..skip+limit+1 (one more says whether more follow).
        let mut pages: Vec<i64> = replies
            [(skip as usize).min(replies.len())..(end + 1).min(replies.len())]
            .iter()
            .map(|s| page_of[s])
            .collect();
        pages.dedup();
        let asked = requests.take();
        if pages.is_empty() {
            assert!(asked.is_empty(), "no page to read, yet {asked:?}");
        } else {
            assert_eq!(asked, vec![pages], "pages read for replies {skip}+{limit}");
        }
    }
    // Cursor windows read every page of the parent's replies and agree with the offsets.
    let mut walked: Vec<Comment> = Vec::new();
    loop {
        let scope = ReadScope::new();
        layout
            .by_slugs(&scope, &discussion, std::slice::from_ref(&parent_slug))
            .await
            .expect("parent");
        let cursor = walked.last().map(|c| Cursor::Chronological {
            posted: c.posted,
            slug: c.slug.clone(),
        });
        let page = layout
            .replies(
                &scope,
                &discussion,
                std::slice::from_ref(&parent_slug),
                &Window::After { cursor, limit: 5 },
            )
            .await
            .expect("replies")
            .remove(&parent_slug)
            .expect("a page");
        walked.extend(page.items.into_iter().map(std::sync::Arc::unwrap_or_clone));
        if !page.has_next {
            break;
        }
    }
    assert_eq!(slugs(&walked), replies);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_levels_of_a_tree_read_each_page_once_per_request() {
    let (requests, app) = PageRequests::app("bucketed_tree_pages_once").await;
    let d = app.discussion("a tree over many pages").await;
    let root = app.post(&d, None, "the root").await;
    // Six replies, each answered right away and again after two fillers: a reply's own
    // replies lie on its page and on the next ones (pages of 3).
    let mut replies = Vec::new();
    let mut answers: HashMap<String, Vec<String>> = HashMap::new();
    for i in 0..6 {
        let reply = app.post(&d, Some(&root), &format!("reply {i}")).await;
        let first = app.post(&d, Some(&reply), &format!("answer {i}a")).await;
        app.post(&d, None, &format!("filler {i}")).await;
        let second = app.post(&d, Some(&reply), &format!("answer {i}b")).await;
        answers.insert(reply.clone(), vec![first, second]);
        replies.push(reply);
    }
    let page_of = pages_by_slug(&raw_pages(&app, &d).await);
    let store = app.store();
    let discussion = load_discussion(store, &d).await;
    let layout = store.layout(Layout::Bucketed).expect("layout");
    let root_slug = Slug::parse(&root).expect("slug");
    let window = Window::After {
        cursor: None,
        limit: 10,
    };
    let requests = &requests;
    let levels = |scope: ReadScope| {
        let (root_slug, window, discussion) = (&root_slug, &window, &discussion);
        async move {
            layout
                .by_slugs(&scope, discussion, std::slice::from_ref(root_slug))
                .await
                .expect("root");
            requests.take();
            let first = layout
                .replies(&scope, discussion, std::slice::from_ref(root_slug), window)
                .await
                .expect("replies")
                .remove(root_slug)
                .expect("a page");
            let read_first = requests.take();
            let parents: Vec<Slug> = first.items.iter().map(|c| c.slug.clone()).collect();
            let second = layout
                .replies(&scope, discussion, &parents, window)
                .await
                .expect("replies of replies");
            (first, read_first, second, requests.take())
        }
    };
    let (first, read_first, second, read_second) = levels(ReadScope::new()).await;
    assert_eq!(slugs(&first.items), replies);
    for reply in &replies {
        let got = &second[&Slug::parse(reply).expect("slug")];
        assert_eq!(slugs(&got.items), answers[reply], "answers to {reply}");
        assert!(!got.has_next);
    }
    let mut first_pages: Vec<i64> = replies.iter().map(|s| page_of[s]).collect();
    first_pages.dedup();
    assert_eq!(
        read_first,
        vec![first_pages.clone()],
        "pages of the first level"
    );
    // The second level asks only for the pages the first did not read, in one query.
    let mut second_pages: Vec<i64> = answers
        .values()
        .flatten()
        .map(|s| page_of[s])
        .filter(|page| !first_pages.contains(page))
        .collect();
    second_pages.sort_unstable();
    second_pages.dedup();
    assert!(!second_pages.is_empty() && second_pages.len() < 6);
    assert_eq!(read_second, vec![second_pages], "pages of the second level");
    // Another request reads its pages again, and gets the same answers.
    let (again, read_again, second_again, _) = levels(ReadScope::new()).await;
    assert_eq!(slugs(&again.items), replies);
    assert_eq!(read_again, vec![first_pages]);
    assert_eq!(second_again.len(), second.len());
    for (parent, page) in &second {
        assert_eq!(slugs(&second_again[parent].items), slugs(&page.items));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_through_the_api_does_not_read_a_discussion_it_posted_to() {
    let app = TestApp::with("bucketed_api_post_cost", settings(100)).await;
    let d = app.discussion("api post cost").await;
    let root = app.post(&d, None, "first").await;
    // A comment another process posted: this one has not seen it.
    let other = Store::connect(&store_config(&app.database, &settings(100)))
        .await
        .expect("connect");
    let discussion = load_discussion(&other, &d).await;
    let unseen = post_in(&other, Layout::Bucketed, &discussion, None, "elsewhere").await;
    let unseen = unseen.to_string();
    const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }";
    let posts = [
        (None, false),
        (Some(root.clone()), false),
        (Some(unseen.clone()), true),
        (Some(unseen.clone()), false),
    ];
    for (parent, read) in posts {
        let before = app.store().commands().snapshot();
        let response = app
            .exec(POST, json!({ "d": d, "p": parent, "t": "warm" }))
            .await;
        assert!(
            response["data"]["postComment"]["slug"].is_string(),
            "{response:#}"
        );
        let spent = diff(&before, &app.store().commands().snapshot());
        // A post's slug is guarded in the pages command; a reply reads its parent and its
        // thread's root the first time the process meets them. Its event is one insert; the
        // author's number is drawn before.
        let read = u64::from(read);
        let expected: BTreeMap<String, u64> = [
            ("findAndModify", 1),
            ("aggregate", read),
            ("update", 2),
            ("insert", 1),
            ("commitTransaction", 1),
        ]
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        assert_eq!(spent, expected, "a warm post under {parent:?}");
    }
    // Locked meanwhile (by anyone): the post's own transaction sees it.
    let raw = raw_db(&app).await.collection::<Document>("discussions");
    raw.update_one(doc! { "_id": &d }, doc! { "$set": { "locked": true } })
        .await
        .expect("lock");
    let response = app
        .exec(POST, json!({ "d": d, "p": root, "t": "too late" }))
        .await;
    assert_eq!(
        response["errors"][0]["extensions"]["code"],
        json!("FORBIDDEN"),
        "{response:#}"
    );
    let stored: i64 = raw_pages(&app, &d)
        .await
        .iter()
        .map(|p| int(p, "count"))
        .sum();
    assert_eq!(stored, 6, "nothing of the refused post stays");
}

/// What a process remembers of where comments live is checked by the reply's own pages command:
/// a comment that is not where it was remembered (here moved behind the store's back) costs the
/// post a retry from a read, and counts the reply where the comment is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_comment_not_where_the_process_remembered_it_is_read_again() {
    let app = TestApp::with("bucketed_stale_location", settings(3)).await;
    let d = app.discussion("stale location").await;
    let mut posted = Vec::new();
    for text in ["a", "b", "c", "d"] {
        posted.push(app.post(&d, None, text).await);
    }
    let pages = raw_pages(&app, &d).await;
    assert_eq!(pages.len(), 2);
    let moved = comments(&pages[0])
        .into_iter()
        .find(|c| c.get_str("slug") == Ok(posted[0].as_str()))
        .expect("the first comment is on page 0")
        .clone();
    let raw = raw_db(&app).await.collection::<Document>("comment_pages");
    raw.update_one(
        doc! { "_id": pages[0].get("_id").expect("id") },
        doc! { "$pull": { "comments": { "slug": &posted[0] } }, "$inc": { "count": -1 } },
    )
    .await
    .expect("take it off page 0");
    raw.update_one(
        doc! { "_id": pages[1].get("_id").expect("id") },
        doc! {
            "$push": { "comments": { "$each": [moved], "$sort": { "posted": 1, "slug": 1 } } },
            "$inc": { "count": 1 },
        },
    )
    .await
    .expect("put it on page 1");
    let before = app.store().commands().snapshot();
    let reply = app.post(&d, Some(&posted[0]), "to the moved one").await;
    let spent = diff(&before, &app.store().commands().snapshot());
    assert_eq!(spent.get("abortTransaction"), Some(&1), "{spent:?}");
    assert_eq!(spent.get("aggregate"), Some(&1), "{spent:?}");
    let pages = raw_pages(&app, &d).await;
    let count_of = |page: &Document, slug: &str| {
        comments(page)
            .into_iter()
            .find(|c| c.get_str("slug") == Ok(slug))
            .map(|c| int(c, "reply_count"))
    };
    assert_eq!(count_of(&pages[1], &posted[0]), Some(1));
    assert!(comments(&pages[0])
        .iter()
        .all(|c| int(c, "reply_count") == 0));
    let stored: Vec<String> = pages
        .iter()
        .flat_map(|p| comments(p))
        .map(|c| c.get_str("slug").expect("slug").to_owned())
        .collect();
    assert_eq!(
        stored.iter().filter(|s| **s == reply).count(),
        1,
        "stored once"
    );
    // And again: now it knows where the comment is (page 1 is full after this one, so the post
    // goes on to page 2 on its second try).
    let before = app.store().commands().snapshot();
    app.post(&d, Some(&posted[0]), "once more").await;
    let spent = diff(&before, &app.store().commands().snapshot());
    assert_eq!(spent.get("aggregate"), None, "{spent:?}");
    let pages = raw_pages(&app, &d).await;
    assert_eq!(count_of(&pages[1], &posted[0]), Some(2));
}

/// Another server moves the discussion out of the layout and back while this one remembers where
/// its comments were (and posts from the discussion as it kept it): its next replies are stored
/// once and counted where their parents are now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_by_another_server_does_not_mislead_what_this_one_remembers() {
    let app = TestApp::with("bucketed_known_moved", settings(3)).await;
    let d = app.discussion("known moved").await;
    let mut posted = Vec::new();
    for text in ["a", "b", "c", "d", "e"] {
        posted.push(app.post(&d, None, text).await);
    }
    let reply = app.post(&d, Some(&posted[3]), "remembered").await;
    let other = Store::connect(&store_config(&app.database, &settings(3)))
        .await
        .expect("connect");
    let id = DiscussionId::parse(&d).expect("id");
    for layout in [Layout::PerComment, Layout::Bucketed] {
        other
            .moves()
            .migrate(&id, layout, &|_| {}, &|_| Vec::new())
            .await
            .expect("move");
    }
    let before = app.store().commands().snapshot();
    app.post(&d, Some(&reply), "after the move").await;
    let spent = diff(&before, &app.store().commands().snapshot());
    // It tried from what it remembered, which the post's own transaction refused (the
    // discussion moved), then read the parent where the discussion is now.
    assert!(
        spent.get("abortTransaction").is_some_and(|n| *n >= 1),
        "{spent:?}"
    );
    assert_eq!(spent.get("aggregate"), Some(&1), "{spent:?}");
    app.post(&d, Some(&posted[0]), "to the first").await;
    app.post(&d, Some(&reply), "again").await;
    let pages = raw_pages(&app, &d).await;
    check_thread_pages(&pages);
    assert_eq!(check_reply_counts(&pages), 9, "each post stored once");
    let discussion = load_discussion(app.store(), &d).await;
    assert_eq!(discussion.comment_count, 9);
    assert_eq!(discussion.moves, 2);
}
