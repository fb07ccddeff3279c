//! Page headers (no comments): the discussion's page list, once per request, and just the
//! headers a threaded window needs, found from the discussion's blocks of pages.

use std::sync::Arc;

use futures::TryStreamExt;
use mongodb::bson::{doc, from_document, Document};

use super::hints::Hints;
use super::kept::Kept;
use super::shapes::{block_pages, PageInfo, BATCH_SIZE, THREAD_PAGES};
use super::Bucketed;
use crate::domain::paging::Cursor;
use crate::domain::{Discussion, DiscussionId, FullSlug, Window};
use crate::store::shared::bson::corrupt;
use crate::store::shared::error::StoreResult;
use crate::store::shared::scope::ReadScope;

impl Bucketed {
    /// The discussion's page list (no comments), once per request.
    pub(super) async fn page_list(
        &self,
        scope: &ReadScope,
        id: &DiscussionId,
    ) -> StoreResult<Arc<Vec<PageInfo>>> {
        scope
            .slot::<Kept>()
            .page_lists
            .get_or_load(id, || async {
                self.headers(doc! { "discussion_id": id.as_str() }).await
            })
            .await
    }

    /// The headers (no comments) of the pages `filter` matches, in page order.
    pub(super) async fn headers(&self, filter: Document) -> StoreResult<Vec<PageInfo>> {
        let docs: Vec<Document> = self
            .pages
            .find(filter)
            .projection(doc! {
                "_id": 0, "page": 1, "count": 1, "roots": 1, "thread_total": 1,
                "first_key": 1, "last_key": 1, THREAD_PAGES: 1,
            })
            .sort(doc! { "page": 1 })
            .batch_size(BATCH_SIZE)
            .await?
            .try_collect()
            .await?;
        docs.into_iter()
            .map(|d| from_document::<PageInfo>(d).map_err(corrupt))
            .collect()
    }

    /// The headers of just the pages a threaded window needs, found from the discussion's
    /// blocks of pages (see `Discussion::page_blocks`): the blocks that hold the window (for a
    /// cursor, from the block of the cursor's thread on, or back from it for a backward window),
    /// read as one bounded range of page numbers; with the threaded comments before them.
    /// `None` where the discussion keeps no blocks, or the pages read do not hold the window
    /// (posts came since the discussion was read): the caller then reads every page's header.
    pub(super) async fn threaded_headers(
        &self,
        discussion: &Discussion,
        window: &Window,
        need: u64,
    ) -> StoreResult<Option<(Arc<Vec<PageInfo>>, u64)>> {
        let Some(blocks) = &Hints::of(discussion).page_blocks else {
            return Ok(None);
        };
        let Some(final_block) = blocks.len().checked_sub(1) else {
            return Ok(Some((Arc::default(), 0)));
        };
        let totals: Vec<u64> = blocks.iter().map(|b| b.threaded).collect();
        let start = match window {
            Window::Offset { skip, .. } => Start::Skip(*skip),
            Window::After { cursor: None, .. } => Start::Skip(0),
            Window::After {
                cursor: Some(Cursor::Threaded(from)),
                ..
            } => Start::After(from.ancestor_at(0)),
            Window::Before {
                cursor: Cursor::Threaded(to),
                ..
            } => Start::Before(to.ancestor_at(0)),
            Window::After { .. } | Window::Before { .. } | Window::FromEnd { .. } => {
                return Ok(None)
            }
        };
        // The block of the page holding a cursor's top-level comment.
        let block_of = |root: &FullSlug| {
            blocks
                .partition_point(|b| b.first_key.as_str() <= root.as_str())
                .saturating_sub(1)
        };
        let (first, last, before) = match &start {
            Start::Skip(skip) => match crate::store::shared::blocks::span(&totals, *skip, need) {
                Some(span) => (span.first, span.last, span.before),
                None => return Ok(Some((Arc::default(), 0))),
            },
            Start::After(root) => {
                // The block of the page holding the cursor's top-level comment, and the blocks
                // after it until they hold a page.
                let first = block_of(root);
                let (mut last, mut gathered) = (first, 0);
                while gathered < need && last < final_block {
                    last += 1;
                    gathered += totals[last];
                }
                (first, last, 0)
            }
            Start::Before(root) => {
                // The mirror image: the blocks before it until they hold a page.
                let last = block_of(root);
                let (mut first, mut gathered) = (last, 0);
                while gathered < need && first > 0 {
                    first -= 1;
                    gathered += totals[first];
                }
                (first, last, 0)
            }
        };
        let (from, to) = block_pages(first, last);
        let headers = self
            .headers(doc! {
                "discussion_id": discussion.id.as_str(),
                "page": { "$gte": from, "$lt": to },
            })
            .await?;
        let total = |pages: &[PageInfo]| -> u64 {
            pages
                .iter()
                .map(|p| u64::try_from(p.thread_total).unwrap_or(0))
                .sum()
        };
        let held = match &start {
            Start::Skip(skip) => total(&headers) >= skip - before + need,
            Start::After(root) => {
                let Some(at) = headers
                    .iter()
                    .position(|p| p.last_key.as_str() >= root.as_str())
                else {
                    return Ok(None);
                };
                total(&headers[at + 1..]) >= need
            }
            Start::Before(root) => {
                let Some(at) = headers
                    .iter()
                    .position(|p| p.last_key.as_str() >= root.as_str())
                else {
                    // Every page read is before the cursor's thread: the blocks end there.
                    return Ok((last == final_block).then(|| (Arc::new(headers), before)));
                };
                total(&headers[..at]) >= need || first == 0
            }
        };
        Ok((held || last == final_block).then(|| (Arc::new(headers), before)))
    }
}

/// Where a threaded window starts: after this many comments, or after the thread of this
/// top-level comment's page (a cursor); or where it ends, backward: before it.
pub(super) enum Start {
    Skip(u64),
    After(FullSlug),
    Before(FullSlug),
}
