//! Threaded windows: the thread totals of the page headers say which pages' threads hold the
//! window, and those pages' thread pages where the threads are.

use mongodb::bson::{doc, Bson, RawDocumentBuf};

use super::shapes::{key_time, PageInfo};
use super::stored::Stored;
use super::threads::{pages_with, FULL_SLUGS};
use super::Bucketed;
use crate::domain::paging::Cursor;
use crate::domain::{Comment, Discussion, FullSlug, Page, Span, Window};
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::scope::ReadScope;

impl Bucketed {
    /// Threaded order: the page list's thread totals say which pages' threads hold the window,
    /// and those pages' thread pages where the threads are; one query by page number fetches
    /// them (a range query on `comments.full_slug` where the thread pages are incomplete). A
    /// window from the end is the offset window that ends there, by the discussion's count; a
    /// window before a cursor, the pages back from the cursor's thread's until they hold it.
    pub(super) async fn threaded(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        window: &Window,
    ) -> StoreResult<Page<Comment>> {
        let read = match window {
            Window::FromEnd { .. } => {
                let span = window.span(Some(discussion.comment_count), None);
                match span.and_then(Span::as_offset) {
                    Some(read) => read,
                    None => return Ok(window.page(Vec::new())),
                }
            }
            other => other.clone(),
        };
        let need = read.more();
        let (pages, before) = match self.threaded_headers(discussion, &read, need).await? {
            Some(found) => found,
            None => (self.page_list(scope, &discussion.id).await?, 0),
        };
        let (span, lower, end, inner) = match &read {
            Window::Offset { skip, limit } => {
                let Some((span, inner_skip)) = thread_span(&pages, *skip - before, need) else {
                    return Ok(window.page(Vec::new()));
                };
                let first = &pages[span.0];
                (
                    span,
                    doc! { "$gte": first.first_key.as_str() },
                    None,
                    Window::Offset {
                        skip: inner_skip,
                        limit: *limit,
                    },
                )
            }
            Window::After { cursor, .. } => {
                let from = match cursor {
                    None => None,
                    Some(Cursor::Threaded(full)) => Some(full),
                    Some(_) => {
                        return Err(StoreError::Unsupported("cursor of another order".into()))
                    }
                };
                let Some(span) = thread_span_after(&pages, from, need) else {
                    return Ok(window.page(Vec::new()));
                };
                let lower = match from {
                    Some(full) => doc! { "$gt": full.as_str() },
                    None => doc! { "$gte": pages[span.0].first_key.as_str() },
                };
                (span, lower, None, read.clone())
            }
            Window::Before {
                cursor: Cursor::Threaded(to),
                ..
            } => {
                let Some(span) = thread_span_before(&pages, to, need) else {
                    return Ok(window.page(Vec::new()));
                };
                let lower = doc! { "$gte": pages[span.0].first_key.as_str() };
                (span, lower, Some(to), read.clone())
            }
            Window::Before { .. } | Window::FromEnd { .. } => {
                return Err(StoreError::Unsupported("cursor of another order".into()))
            }
        };
        let (first, last) = (&pages[span.0], &pages[span.1]);
        let upper = match end {
            Some(cursor) => cursor.as_str().to_owned(),
            None => format!("{:016}", key_time(&last.last_key) + 1),
        };
        let mut range = lower.clone();
        range.insert("$lt", upper.as_str());
        let bounds: Vec<Bson> = range
            .iter()
            .map(|(op, v)| doc! { op: ["$$c.full_slug", v.clone()] }.into())
            .collect();
        let cond = Bson::from(doc! { "$and": bounds });
        let held = self
            .in_thread_pages(discussion, &pages[span.0..=span.1], cond.clone())
            .await?;
        let docs = match held {
            Some(docs) => docs,
            None => {
                let filter = pages_with(&discussion.id, FULL_SLUGS, [Bson::from(range)]);
                self.matching_docs(filter, cond).await?
            }
        };
        // The threads of the span's pages, in threaded order; only the window is decoded.
        let (lo, hi) = (first.first_key.as_str(), last.last_key.as_str());
        let stored = Stored::new(&docs)?;
        stored.remember_homes(scope, &discussion.id);
        let in_span = stored.items().iter().filter(|item| {
            let root = item.thread();
            lo <= root && root <= hi
        });
        let picked = inner.pick(in_span, |item| item.key());
        let comments = stored.decode(scope, &discussion.id, picked)?;
        Ok(window.page(comments))
    }

    /// The comments matching `cond` from the pages that hold the threads `span`'s pages start,
    /// read by page number: `None` when a page's `thread_pages` does not account for all of its
    /// threads' comments (written before they were counted), or a page it names is gone.
    ///
    /// A range on the multikey `comments.full_slug` is no substitute: it matches every page
    /// with one comment after the range's start and another before its end (most later pages,
    /// three times the pages that hold the threads, in a large discussion), and a page is fetched
    /// once per index entry in the range.
    pub(super) async fn in_thread_pages(
        &self,
        discussion: &Discussion,
        span: &[PageInfo],
        cond: Bson,
    ) -> StoreResult<Option<Vec<RawDocumentBuf>>> {
        let mut wanted = Vec::new();
        for page in span {
            let Some(pages) = page.thread_page_numbers() else {
                return Ok(None);
            };
            wanted.extend(pages);
        }
        wanted.sort_unstable();
        wanted.dedup();
        self.page_docs(&discussion.id, &wanted, cond, true).await
    }
}

/// The pages whose threads hold threaded items `skip..skip + need`, and the offset of the
/// window inside their threads.
pub(super) fn thread_span(
    pages: &[PageInfo],
    skip: u64,
    need: u64,
) -> Option<((usize, usize), u64)> {
    let mut before = 0_u64;
    let mut first: Option<(usize, u64)> = None;
    for (i, page) in pages.iter().enumerate() {
        let stop = before + u64::try_from(page.thread_total).unwrap_or(0);
        if first.is_none() && stop > skip {
            first = Some((i, skip - before));
        }
        if let Some((start, inner)) = first {
            if stop >= skip.saturating_add(need) || i + 1 == pages.len() {
                return Some(((start, i), inner));
            }
        }
        before = stop;
    }
    None
}

/// The pages whose threads hold the `need` threaded items after `from`: from the page holding
/// `from`'s top-level comment, until the pages after it hold enough.
pub(super) fn thread_span_after(
    pages: &[PageInfo],
    from: Option<&FullSlug>,
    need: u64,
) -> Option<(usize, usize)> {
    let start = match from {
        None => 0,
        Some(full) => {
            let root = full.ancestor_at(0);
            pages
                .iter()
                .position(|p| p.last_key.as_str() >= root.as_str())?
        }
    };
    if start >= pages.len() {
        return None;
    }
    let mut gathered = if from.is_none() {
        u64::try_from(pages[start].thread_total).unwrap_or(0)
    } else {
        0
    };
    let mut end = start;
    while gathered < need && end + 1 < pages.len() {
        end += 1;
        gathered += u64::try_from(pages[end].thread_total).unwrap_or(0);
    }
    Some((start, end))
}

/// The pages whose threads hold the `need` threaded items before `to`: back from the page
/// holding `to`'s top-level comment (the last page when every page is before it), until the
/// pages before it hold enough. `None` without pages.
pub(super) fn thread_span_before(
    pages: &[PageInfo],
    to: &FullSlug,
    need: u64,
) -> Option<(usize, usize)> {
    let root = to.ancestor_at(0);
    let end = pages
        .iter()
        .position(|p| p.last_key.as_str() >= root.as_str())
        .or_else(|| pages.len().checked_sub(1))?;
    let (mut start, mut gathered) = (end, 0_u64);
    while gathered < need && start > 0 {
        start -= 1;
        gathered += u64::try_from(pages[start].thread_total).unwrap_or(0);
    }
    Some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::bucketed::shapes::test_page as page;

    #[test]
    fn thread_spans_cover_the_window() {
        let pages = [page(0, 10, 1), page(1, 10, 1), page(2, 10, 1)];
        assert_eq!(thread_span(&pages, 0, 5), Some(((0, 0), 0)));
        assert_eq!(thread_span(&pages, 8, 5), Some(((0, 1), 8)));
        assert_eq!(thread_span(&pages, 25, 50), Some(((2, 2), 5)));
        assert_eq!(thread_span(&pages, 30, 5), None);
    }

    #[test]
    fn thread_spans_before_a_cursor_reach_back_until_they_hold_a_page() {
        let keyed = |n: i64, first: &str, last: &str| PageInfo {
            first_key: first.into(),
            last_key: last.into(),
            ..page(n, 10, 1)
        };
        let pages = [
            keyed(0, "01:a", "03:c"),
            keyed(1, "04:d", "06:f"),
            keyed(2, "07:g", "09:i"),
        ];
        let at = |raw: &str| FullSlug::from_stored(raw.to_owned());
        assert_eq!(
            thread_span_before(&pages, &at("08:h/10:x"), 5),
            Some((1, 2))
        );
        assert_eq!(thread_span_before(&pages, &at("08:h"), 15), Some((0, 2)));
        assert_eq!(thread_span_before(&pages, &at("02:b"), 15), Some((0, 0)));
        // After every page: from the last one back.
        assert_eq!(thread_span_before(&pages, &at("99:z"), 5), Some((1, 2)));
        assert_eq!(thread_span_before(&[], &at("99:z"), 5), None);
    }
}
