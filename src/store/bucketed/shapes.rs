//! The stored shapes of the bucketed layout: page headers, the discussion's write target, and
//! the order key pages are bounded by.

use mongodb::bson::{doc, Bson, Document};
use serde::Deserialize;

use crate::domain::{Comment, DiscussionId, Micros, Slug};
use crate::store::shared::bson::as_i64;
use crate::store::shared::docs::owned_comment_of;
use crate::store::shared::error::StoreResult;

/// Documents per reply batch: large, so that a read is one command however many pages it returns.
pub(super) const BATCH_SIZE: u32 = 100_000;
/// Field set on a page once the discussion has moved on from it: no post may land there later,
/// whatever bucket size the poster runs with.
pub(super) const SEALED: &str = "sealed";

/// Discussion fields this layout keeps: the page new comments go to, and the last key of the
/// page before it (every later comment must sort after it).
pub(super) const NUM_PAGES: &str = "num_comment_pages";
pub(super) const FLOOR: &str = "comment_pages_floor";
/// Discussion field: its pages' `_id`s are `<discussion>:<page>` (set for every discussion
/// created or moved into this layout since pages were keyed), so that a write to one page is an
/// `_id` lookup.
pub(super) const KEYED: &str = "keyed_pages";

/// Discussion fields: set where the sizes of the discussion's sealed pages are tracked, and the
/// smallest and largest of them (read as [`super::hints::FullPages`]).
pub(super) const SIZED: &str = "sized_pages";
pub(super) const SEALED_MIN: &str = "sealed_min";
pub(super) const SEALED_MAX: &str = "sealed_max";

/// Discussion fields: per block of [`BLOCK_PAGES`] consecutive pages, the comments of the
/// threads started there (`{"<block>": n}`, counted with `comment_count`) and the smallest order
/// key of the block's comments (`{"<block>": key}`), read as [`super::hints::Hints::page_blocks`].
pub(super) const PAGE_BLOCKS: &str = "page_blocks";
pub(super) const BLOCK_KEYS: &str = "page_block_keys";
/// Pages per block.
pub(super) const BLOCK_PAGES: i64 = 32;

/// The block of page `page`.
pub(super) fn block_of(page: i64) -> i64 {
    page.max(0) / BLOCK_PAGES
}

/// The pages of blocks `first..=last`, as a range of page numbers `[from, to)`.
pub(super) fn block_pages(first: usize, last: usize) -> (i64, i64) {
    let at =
        |block: usize| i64::try_from(block).unwrap_or(i64::MAX / BLOCK_PAGES - 1) * BLOCK_PAGES;
    (at(first), at(last) + BLOCK_PAGES)
}

/// The `_id` of a keyed page.
pub(super) fn page_id(id: &DiscussionId, page: i64) -> String {
    format!("{id}:{page}")
}

/// A filter for page `page` of the discussion: by `_id` too where its pages are keyed, and `_id`
/// first, so that the read is a point lookup on the `_id` index whatever index a planner would
/// pick for `discussion_id`. The shard key stays in the filter either way.
pub(super) fn page_filter(id: &DiscussionId, page: i64, keyed: bool) -> Document {
    let mut filter = Document::new();
    if keyed {
        filter.insert("_id", page_id(id, page));
    }
    filter.insert("discussion_id", id.as_str());
    filter.insert("page", page);
    filter
}

/// The chronological sort key of a comment as one string: fixed-width time, then slug.
pub(super) fn order_key(posted: Micros, slug: &Slug) -> String {
    format!("{:016}:{}", posted.0.max(0), slug)
}

/// The time part of an order key (or of a full slug).
pub(super) fn key_time(key: &str) -> i64 {
    key.get(..16).and_then(|t| t.parse().ok()).unwrap_or(0)
}

/// One entry of a discussion's page list: everything but the comments.
#[derive(Debug, Clone, Deserialize)]
pub struct PageInfo {
    pub(super) page: i64,
    pub(super) count: i64,
    /// Top-level comments in the page.
    #[serde(default)]
    pub(super) roots: i64,
    /// Comments in the threads whose top-level comment is in the page.
    #[serde(default)]
    pub(super) thread_total: i64,
    /// Smallest and largest order key in the page.
    #[serde(default)]
    pub(super) first_key: String,
    #[serde(default)]
    pub(super) last_key: String,
    /// Where the comments of those threads are: `{"<page>": n, …}`, counted with
    /// `thread_total` (pages written before it was kept have none, or a partial one).
    #[serde(default)]
    pub(super) thread_pages: Option<Document>,
}

/// A page list entry of `count` comments (`roots` of them top-level, each thread within the
/// page), for the window tests.
#[cfg(test)]
pub(super) fn test_page(page: i64, count: i64, roots: i64) -> PageInfo {
    PageInfo {
        page,
        count,
        roots,
        thread_total: count,
        thread_pages: None,
        first_key: String::new(),
        last_key: String::new(),
    }
}

impl PageInfo {
    pub(super) fn weight(&self, top_level: bool) -> u64 {
        u64::try_from(if top_level { self.roots } else { self.count }).unwrap_or(0)
    }

    /// The pages that hold the comments of the threads this page's top-level comments start,
    /// when `thread_pages` accounts for every one of them (it adds up to `thread_total`).
    pub(super) fn thread_page_numbers(&self) -> Option<Vec<i64>> {
        thread_page_numbers(self.thread_pages.as_ref(), self.thread_total)
    }
}

/// The pages named by a page's `thread_pages` (`stored`), when it accounts for every comment of
/// the threads the page starts (it adds up to the page's `thread_total`).
pub(super) fn thread_page_numbers(
    stored: Option<&Document>,
    thread_total: i64,
) -> Option<Vec<i64>> {
    let stored = match stored {
        Some(stored) => stored,
        None if thread_total == 0 => return Some(Vec::new()),
        None => return None,
    };
    let mut total = 0_i64;
    let mut pages = Vec::with_capacity(stored.len());
    for (page, n) in stored {
        let n = as_i64(n)?;
        let page = page.parse::<i64>().ok()?;
        total = total.checked_add(n)?;
        if n > 0 {
            pages.push(page);
        }
    }
    (total == thread_total).then_some(pages)
}

/// Page field: where the comments of the threads a page's top-level comments start are,
/// `{"<page>": n, …}`; one `$inc` in the statement that counts the comment in `thread_total`.
pub(super) const THREAD_PAGES: &str = "thread_pages";

/// The path of a page's count in `thread_pages`.
pub(super) fn thread_page_path(page: i64) -> String {
    format!("{THREAD_PAGES}.{page}")
}

/// Where a post goes next: the current page, and the key every new comment must follow.
#[derive(Debug, Clone)]
pub(super) struct Target {
    pub(super) page: i64,
    pub(super) floor: String,
    /// Whether the discussion's pages are keyed (see [`KEYED`]).
    pub(super) keyed: bool,
}

impl Target {
    /// The discussion fields a target is read from.
    pub(super) fn projection() -> Document {
        doc! { NUM_PAGES: 1, FLOOR: 1, KEYED: 1 }
    }

    pub(super) fn from_doc(doc: Option<Document>) -> Self {
        let doc = doc.unwrap_or_default();
        let page = doc.get(NUM_PAGES).and_then(as_i64).unwrap_or(0);
        let floor = doc.get_str(FLOOR).unwrap_or_default().to_owned();
        let keyed = doc.get_bool(KEYED).unwrap_or(false);
        Self { page, floor, keyed }
    }

    /// The floor's time: a new comment must be posted strictly after it.
    pub(super) fn floor_time(&self) -> Micros {
        if self.floor.is_empty() {
            Micros(-1)
        } else {
            Micros(key_time(&self.floor))
        }
    }
}

/// The comment elements of a document's `comments` field (taken out of it): an array, or one
/// comment after `$unwind`.
pub(super) fn comment_items(doc: &mut Document) -> Vec<Bson> {
    match doc.remove("comments") {
        Some(Bson::Array(items)) => items,
        Some(one @ Bson::Document(_)) => vec![one],
        _ => Vec::new(),
    }
}

/// The comments of a document's `comments` field, decoded without copying them.
pub(super) fn comments_of(mut doc: Document, id: &DiscussionId) -> StoreResult<Vec<Comment>> {
    comment_items(&mut doc)
        .into_iter()
        .map(|item| owned_comment_of(item, id))
        .collect()
}

/// A comment's field that counts its direct replies per page: `{"<page>": n, …}`, one `$inc`
/// in the statement that counts the reply in `reply_count`.
pub(super) const REPLY_PAGES: &str = "reply_pages";

/// The path of a reply's count in its parent's `reply_pages`, under `prefix` (`comments.$.`).
pub(super) fn reply_page_path(prefix: &str, page: i64) -> String {
    format!("{prefix}{REPLY_PAGES}.{page}")
}

/// `(page, replies there)` in page order, from a stored `reply_pages` (entries that are not a
/// page number and a count are left out; the caller checks the total against `reply_count`).
pub(super) fn reply_pages_of(stored: &Document) -> Vec<(i64, u64)> {
    let mut pages: Vec<(i64, u64)> = stored
        .iter()
        .filter_map(|(page, n)| {
            let page = page.parse::<i64>().ok()?;
            let n = u64::try_from(as_i64(n)?).ok()?;
            Some((page, n))
        })
        .collect();
    pages.sort_unstable();
    pages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_page_filters_name_the_id_first_and_keep_the_shard_key() {
        let id = DiscussionId::parse("0123456789abcdef01234567").expect("id");
        let keyed = page_filter(&id, 7, true);
        let keys: Vec<&str> = keyed.keys().map(String::as_str).collect();
        assert_eq!(keys, ["_id", "discussion_id", "page"]);
        assert_eq!(keyed.get_str("_id"), Ok("0123456789abcdef01234567:7"));
        let legacy = page_filter(&id, 7, false);
        let keys: Vec<&str> = legacy.keys().map(String::as_str).collect();
        assert_eq!(keys, ["discussion_id", "page"]);
    }

    #[test]
    fn order_keys_sort_like_posted_then_slug() {
        let a = Slug::from_stored("zzzzzzzz".into());
        let b = Slug::from_stored("00000000".into());
        assert!(order_key(Micros(9), &a) < order_key(Micros(10), &b));
        assert!(order_key(Micros(10), &b) < order_key(Micros(10), &a));
        assert_eq!(key_time(&order_key(Micros(1234), &a)), 1234);
    }

    fn info(thread_total: i64, thread_pages: Option<Document>) -> PageInfo {
        PageInfo {
            page: 3,
            count: 10,
            roots: 2,
            thread_total,
            first_key: String::new(),
            last_key: String::new(),
            thread_pages,
        }
    }

    #[test]
    fn thread_pages_count_only_when_they_account_for_every_comment() {
        let kept = doc! { "3": 4_i64, "7": 1_i32, "12": 2_i64, "20": 0_i64 };
        assert_eq!(
            info(7, Some(kept.clone())).thread_page_numbers(),
            Some(vec![3, 7, 12])
        );
        // Counted before the field was kept, or only partly: not usable.
        assert_eq!(info(8, Some(kept)).thread_page_numbers(), None);
        assert_eq!(info(5, None).thread_page_numbers(), None);
        // A page that starts no thread needs none.
        assert_eq!(info(0, None).thread_page_numbers(), Some(vec![]));
        let odd = doc! { "x": 1_i64 };
        assert_eq!(info(1, Some(odd)).thread_page_numbers(), None);
    }

    #[test]
    fn blocks_group_pages_by_32() {
        assert_eq!(block_of(0), 0);
        assert_eq!(block_of(31), 0);
        assert_eq!(block_of(32), 1);
        assert_eq!(block_of(-1), 0);
        assert_eq!(block_pages(0, 0), (0, 32));
        assert_eq!(block_pages(2, 3), (64, 128));
    }
}
