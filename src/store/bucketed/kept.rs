//! What one request has read of bucketed discussions: its slot of the request's scope.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mongodb::bson::{Bson, RawDocumentBuf};

use super::PageInfo;
use crate::domain::DiscussionId;
use crate::store::shared::scope::{BySlug, Memo};

/// The bucketed layout's slot of a request's scope.
#[derive(Default)]
pub(crate) struct Kept {
    /// Each discussion's list of pages (without their comments).
    pub(crate) page_lists: Memo<Vec<PageInfo>>,
    /// Comments read so far (direct links and parents need no second read).
    pub(crate) seen: BySlug<crate::domain::Comment>,
    /// The page (its `_id` and number) each comment read so far was found in.
    pub(crate) pages_of: BySlug<(Bson, i64)>,
    /// For comments read so far that keep them, their direct replies per page (page number,
    /// replies there), in page order.
    pub(crate) reply_pages: BySlug<Vec<(i64, u64)>>,
    /// For top-level comments read so far whose page counts where the threads it starts are
    /// (completely), the numbers of the pages that hold those threads.
    pub(crate) thread_homes: BySlug<Vec<i64>>,
    /// Whole pages read so far by the reads that read pages whole (the levels of a tree read the
    /// same pages again and again).
    pub(crate) whole_pages: WholePages,
}

/// Whole pages read so far, by discussion and page number, up to [`WholePages::KEPT_BYTES`]
/// per request (a tree of 400 comments at 100 000 lies on about 40 pages of 55 KB; a page of
/// 100 comments of the longest text allowed is several MB).
#[derive(Default)]
pub(crate) struct WholePages {
    kept: Mutex<KeptPages>,
}

#[derive(Default)]
pub(super) struct KeptPages {
    docs: HashMap<(DiscussionId, i64), Arc<RawDocumentBuf>>,
    bytes: usize,
}

impl WholePages {
    /// How many bytes of pages one request keeps at most; pages read past them are not kept.
    pub(crate) const KEPT_BYTES: usize = 8 << 20;

    /// Page `page` of discussion `id`, if this request read it whole and kept it.
    pub(crate) fn get(&self, id: &DiscussionId, page: i64) -> Option<Arc<RawDocumentBuf>> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.docs.get(&(id.clone(), page)).cloned()
    }

    /// Keeps page `page` of discussion `id` as read, unless that would pass
    /// [`Self::KEPT_BYTES`].
    pub(crate) fn keep(&self, id: &DiscussionId, page: i64, doc: Arc<RawDocumentBuf>) {
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
