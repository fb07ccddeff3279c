//! `ReadScope`: what one request has read, in named parts, so a layout reads a document once.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use mongodb::bson::{Bson, RawDocumentBuf};
use tokio::sync::OnceCell;

use super::bucketed::PageInfo;
use crate::domain::tree::Thread;
use crate::domain::{Comment, DiscussionId, FullSlug, Slug};

/// Values loaded at most once per discussion; concurrent callers share one load.
pub struct Memo<V> {
    cells: Mutex<HashMap<DiscussionId, Arc<OnceCell<Arc<V>>>>>,
}

impl<V> Default for Memo<V> {
    fn default() -> Self {
        Self {
            cells: Mutex::default(),
        }
    }
}

impl<V: Send + Sync> Memo<V> {
    /// The value for `id`, loading it with `load` the first time it is asked for.
    pub async fn get_or_load<E, F, Fut>(&self, id: &DiscussionId, load: F) -> Result<Arc<V>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
    {
        let cell = self
            .cells
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(id.clone())
            .or_default()
            .clone();
        cell.get_or_try_init(|| async { load().await.map(Arc::new) })
            .await
            .cloned()
    }

    /// The value for `id` if it was loaded already (never loads).
    pub fn peek(&self, id: &DiscussionId) -> Option<Arc<V>> {
        let cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
        cells.get(id)?.get().cloned()
    }
}

/// What one request has read. Each layout that reads whole documents keeps them in a part of
/// its own; a write in the request replaces the scope with a fresh one (never clears parts).
#[derive(Default)]
pub struct ReadScope {
    /// Embedded layout: whole discussion documents, as threads.
    pub(super) documents: Memo<Thread>,
    /// Bucketed layout: each discussion's list of pages (without their comments).
    pub(super) page_lists: Memo<Vec<PageInfo>>,
    /// Bucketed layout: comments read so far (direct links and parents need no second read).
    pub(super) seen: Seen,
    /// Bucketed layout: the page (its `_id` and number) each comment read so far was found in.
    pub(super) pages_of: PagesOf,
    /// Bucketed layout: for comments read so far that keep them, their direct replies per page
    /// (page number, replies there), in page order.
    pub(super) reply_pages: ReplyPages,
    /// Bucketed layout: for top-level comments read so far whose page counts where the threads
    /// it starts are (completely), the numbers of the pages that hold those threads.
    pub(super) thread_homes: BySlug<Vec<i64>>,
    /// Bucketed layout: whole pages read so far by the reads that read pages whole (the levels
    /// of a tree read the same pages again and again).
    pub(super) whole_pages: WholePages,
    /// Per-comment layout: for comments read so far that keep them, their replies with the size
    /// of each one's subtree (the reply included), in threaded order.
    pub(super) reply_sizes: BySlug<Vec<(FullSlug, u64)>>,
}

/// Values kept per comment read so far, by discussion and slug.
pub struct BySlug<V> {
    values: Mutex<HashMap<(DiscussionId, Slug), V>>,
}

impl<V> Default for BySlug<V> {
    fn default() -> Self {
        Self {
            values: Mutex::default(),
        }
    }
}

impl<V: Clone> BySlug<V> {
    /// Keeps `value` for the comment `slug`.
    pub fn remember(&self, id: &DiscussionId, slug: Slug, value: V) {
        let mut map = self.values.lock().unwrap_or_else(|p| p.into_inner());
        map.insert((id.clone(), slug), value);
    }

    /// What was kept for the comment `slug`, if anything.
    pub fn get(&self, id: &DiscussionId, slug: &Slug) -> Option<V> {
        let map = self.values.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&(id.clone(), slug.clone())).cloned()
    }
}

impl BySlug<Comment> {
    /// Remembers comments as read.
    pub fn remember_all(&self, comments: &[Comment]) {
        let mut map = self.values.lock().unwrap_or_else(|p| p.into_inner());
        for c in comments {
            map.insert((c.discussion_id.clone(), c.slug.clone()), c.clone());
        }
    }
}

/// Comments already read.
pub type Seen = BySlug<Comment>;

/// Where comments were found: the `_id` and number of their page.
pub type PagesOf = BySlug<(Bson, i64)>;

/// Direct replies per page (page number, replies there), in page order.
pub type ReplyPages = BySlug<Vec<(i64, u64)>>;

/// Whole pages read so far, by discussion and page number, up to [`WholePages::KEPT_BYTES`]
/// per request (a tree of 400 comments at 100 000 lies on about 40 pages of 55 KB; a page of
/// 100 comments of the longest text allowed is several MB).
#[derive(Default)]
pub struct WholePages {
    kept: Mutex<KeptPages>,
}

#[derive(Default)]
struct KeptPages {
    docs: HashMap<(DiscussionId, i64), Arc<RawDocumentBuf>>,
    bytes: usize,
}

impl WholePages {
    /// How many bytes of pages one request keeps at most; pages read past them are not kept.
    pub const KEPT_BYTES: usize = 8 << 20;

    /// Page `page` of discussion `id`, if this request read it whole and kept it.
    pub fn get(&self, id: &DiscussionId, page: i64) -> Option<Arc<RawDocumentBuf>> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.docs.get(&(id.clone(), page)).cloned()
    }

    /// Keeps page `page` of discussion `id` as read, unless that would pass
    /// [`Self::KEPT_BYTES`].
    pub fn keep(&self, id: &DiscussionId, page: i64, doc: Arc<RawDocumentBuf>) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let size = doc.as_bytes().len();
        if kept.bytes.saturating_add(size) <= Self::KEPT_BYTES {
            kept.bytes += size;
            if let Some(old) = kept.docs.insert((id.clone(), page), doc) {
                kept.bytes -= old.as_bytes().len();
            }
        }
    }
}

impl ReadScope {
    /// A fresh, empty scope.
    pub fn new() -> Self {
        Self::default()
    }
}

#[cfg(test)]
mod tests {
    use mongodb::bson::{doc, spec::BinarySubtype, Binary};

    use super::*;

    /// A page document of about `bytes` bytes.
    fn page(number: i64, bytes: usize) -> Arc<RawDocumentBuf> {
        let filler = Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![0; bytes],
        };
        let doc = doc! { "page": number, "comments": filler };
        Arc::new(RawDocumentBuf::from_document(&doc).expect("a page"))
    }

    #[test]
    fn whole_pages_are_kept_up_to_the_byte_budget() {
        let pages = WholePages::default();
        let id = DiscussionId::generate();
        let other = DiscussionId::generate();
        let quarter = WholePages::KEPT_BYTES / 4 - 100;
        for n in 0..3 {
            pages.keep(&id, n, page(n, quarter));
        }
        // Keeping a page again replaces it and counts it once.
        pages.keep(&id, 0, page(0, quarter));
        pages.keep(&other, 0, page(0, quarter));
        for n in 0..3 {
            assert!(pages.get(&id, n).is_some(), "page {n}");
        }
        assert!(pages.get(&other, 0).is_some());
        assert!(pages.get(&other, 1).is_none(), "a page never read");
        // A fifth quarter passes the budget: read, not kept.
        pages.keep(&id, 3, page(3, quarter));
        assert!(pages.get(&id, 3).is_none());
        // A small page still fits.
        pages.keep(&id, 4, page(4, 10));
        assert!(pages.get(&id, 4).is_some());
    }
}
