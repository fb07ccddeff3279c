//! Checks of the stored pages shared by the bucketed tests: reply counts, thread pages, blocks of
//! pages and threaded windows, and the moves and threads that set them up.

use super::*;

/// Checks every stored comment's `reply_count` against the comments stored under it; returns
/// how many comments the pages hold.
pub(super) fn check_reply_counts(pages: &[Document]) -> usize {
    let stored: Vec<&Document> = pages.iter().flat_map(|p| comments(p)).collect();
    for c in &stored {
        let slug = c.get_str("slug").expect("slug");
        let children = stored
            .iter()
            .filter(|o| o.get_str("parent").ok() == Some(slug))
            .count() as i64;
        assert_eq!(int(c, "reply_count"), children, "reply count of {slug}");
    }
    stored.len()
}

/// Each page's `thread_pages` as stored: the pages that hold the threads it starts.
pub(super) fn thread_pages_of(page: &Document) -> BTreeMap<i64, i64> {
    page.get_document("thread_pages")
        .map(|d| {
            d.keys()
                .map(|k| (k.parse().expect("a page number"), int(d, k)))
                .collect()
        })
        .unwrap_or_default()
}

/// Checks every page's `thread_pages` against the stored comments; returns them per page (the
/// pages holding the comments of the threads each page starts) and each comment's page.
pub(super) fn check_thread_pages(
    pages: &[Document],
) -> (BTreeMap<i64, BTreeMap<i64, i64>>, HashMap<String, i64>) {
    let page_of = pages_by_slug(pages);
    let mut expected: BTreeMap<i64, BTreeMap<i64, i64>> = BTreeMap::new();
    for (slug, page) in &page_of {
        let root = slug.split('/').next().expect("a root");
        *expected
            .entry(page_of[root])
            .or_default()
            .entry(*page)
            .or_default() += 1;
    }
    for page in pages {
        let n = int(page, "page");
        let kept = thread_pages_of(page);
        assert_eq!(
            kept,
            expected.get(&n).cloned().unwrap_or_default(),
            "thread pages of page {n}"
        );
        assert_eq!(kept.values().sum::<i64>(), int(page, "thread_total"));
    }
    (expected, page_of)
}

/// Four threads that stay lively while others start, so that their comments spread over the
/// pages (pages of 3): returns their top-level comments and, per thread, its deepest reply.
pub(super) async fn lively_threads(app: &TestApp, d: &str) -> (Vec<String>, Vec<String>) {
    let mut heads = Vec::new();
    for i in 0..4 {
        heads.push(app.post(d, None, &format!("thread {i}")).await);
    }
    let mut last_reply = heads.clone();
    for round in 0..6 {
        for (i, head) in heads.iter().enumerate() {
            let parent = if round % 2 == 0 { head } else { &last_reply[i] };
            last_reply[i] = app
                .post(d, Some(parent), &format!("reply {round} in {i}"))
                .await;
        }
        app.post(d, None, &format!("filler {round}")).await;
    }
    (heads, last_reply)
}

/// The slugs of the discussion's comments in threaded order (by full slug), from its pages.
pub(super) fn threaded_order(pages: &[Document]) -> Vec<String> {
    let mut threaded: Vec<(String, String)> = pages
        .iter()
        .flat_map(comments)
        .map(|c| {
            (
                c.get_str("full_slug").expect("full slug").to_owned(),
                c.get_str("slug").expect("slug").to_owned(),
            )
        })
        .collect();
    threaded.sort();
    threaded.into_iter().map(|(_, slug)| slug).collect()
}

/// Checks the threaded window `skip`, `limit` read from the store against `threaded` (the
/// expected order); returns where it ends.
pub(super) async fn check_threaded_window(
    store: &Store,
    discussion: &Discussion,
    threaded: &[String],
    skip: usize,
    limit: usize,
) -> usize {
    let page = store
        .layout(Layout::Bucketed)
        .expect("layout")
        .list(
            &ReadScope::new(),
            discussion,
            Listing::Threaded,
            &Window::Offset {
                skip: skip as u64,
                limit,
            },
        )
        .await
        .expect("threaded page");
    let end = (skip + limit).min(threaded.len());
    assert_eq!(slugs(&page.items), threaded[skip..end], "{skip}+{limit}");
    assert_eq!(
        page.has_next,
        end < threaded.len(),
        "more after {skip}+{limit}"
    );
    end
}

/// Moves the discussion to the per-comment layout and back, as a moderator.
pub(super) async fn move_out_and_back(app: &TestApp, d: &str) {
    let token = app.moderator_token("mod-1", "Moderator");
    for layout in ["PER_COMMENT", "BUCKETED"] {
        let moved = app
            .exec_as(
                Some(&token),
                "mutation($d: ID!, $l: StorageLayout!) { migrateDiscussion(id: $d, layout: $l) { layout } }",
                json!({ "d": d, "l": layout }),
            )
            .await;
        assert_eq!(
            moved["data"]["migrateDiscussion"]["layout"],
            json!(layout),
            "{moved:#}"
        );
    }
}

/// Pages per block of the discussion's `page_blocks`.
pub(super) const BLOCK_PAGES: i64 = 32;

/// Checks the discussion's blocks of pages against its pages: per block of 32, the sum of the
/// pages' `thread_total` and the first page's first key; and that the store uses them.
pub(super) async fn check_page_blocks(app: &TestApp, d: &str, pages: &[Document]) {
    let mut counts: BTreeMap<i64, i64> = BTreeMap::new();
    let mut keys: BTreeMap<i64, String> = BTreeMap::new();
    for page in pages {
        let block = int(page, "page") / BLOCK_PAGES;
        *counts.entry(block).or_default() += int(page, "thread_total");
        keys.entry(block)
            .or_insert_with(|| page.get_str("first_key").expect("first key").to_owned());
    }
    let stored = raw_db(app)
        .await
        .collection::<Document>("discussions")
        .find_one(doc! { "_id": d })
        .await
        .expect("discussion")
        .expect("a discussion");
    let blocks = stored.get_document("page_blocks").expect("page blocks");
    let kept: BTreeMap<i64, i64> = blocks
        .keys()
        .map(|k| (k.parse().expect("a block"), int(blocks, k)))
        .collect();
    assert_eq!(kept, counts, "comments of the threads each block starts");
    let first_keys = stored.get_document("page_block_keys").expect("block keys");
    let kept: BTreeMap<i64, String> = first_keys
        .iter()
        .map(|(k, v)| {
            (
                k.parse().expect("a block"),
                v.as_str().expect("a key").to_owned(),
            )
        })
        .collect();
    assert_eq!(kept, keys, "first key of each block");
    assert!(
        Hints::of(&load_discussion(app.store(), d).await)
            .page_blocks
            .is_some(),
        "the counts account for every comment"
    );
}
