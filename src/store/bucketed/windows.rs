//! Listing windows over buckets: the page list, offset walks that read only the pages they
//! need, streams from a cursor, and threaded windows found through thread totals.

use mongodb::bson::{doc, from_document, Bson, Document, RawDocumentBuf};

use super::hints::{FullPages, Hints};
use super::kept::Kept;
use super::shapes::{block_pages, key_time, order_key, PageInfo, BATCH_SIZE, THREAD_PAGES};
use super::stored::{int_of, read_first, read_last, Stored};
use super::threads::{pages_with, read_projection, FULL_SLUGS};
use super::Bucketed;
use crate::domain::paging::Cursor;
use crate::domain::{
    Comment, Discussion, DiscussionId, FullSlug, Micros, Page, Slug, Span, Window,
};
use crate::store::shared::bson::corrupt;
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::order::{after_cond, before_cond};
use crate::store::shared::scope::ReadScope;
use futures::TryStreamExt;
use std::sync::Arc;

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

    /// The start of a chronological listing (or of the top-level comments), after `after`:
    /// pages in order from the first whose last key follows the cursor, cut after `need` items.
    pub(super) async fn stream(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        after: Option<(Micros, &Slug)>,
        top_level: bool,
        need: usize,
    ) -> StoreResult<Vec<Comment>> {
        let mut matcher = doc! { "discussion_id": discussion.id.as_str() };
        let mut conds: Vec<Bson> = Vec::new();
        let mut from = Some(0_i64);
        if let Some((posted, slug)) = after {
            matcher.insert("last_key", doc! { "$gt": order_key(posted, slug) });
            let cursor = Cursor::Chronological {
                posted,
                slug: slug.clone(),
            };
            conds.push(after_cond(&cursor, "c").into());
            from = self.page_of(discussion, posted, slug, false).await?;
        }
        if top_level {
            conds.push(doc! { "$eq": ["$$c.parent", Bson::Null] }.into());
        }
        if let Some(from) = from {
            let found = self
                .pages_near(scope, discussion, (from, false), &conds, need, top_level)
                .await?;
            if let Some(found) = found {
                return Ok(found);
            }
        }
        if top_level {
            matcher.insert("roots", doc! { "$gt": 0 });
        }
        let mut pipeline = vec![
            doc! { "$match": matcher },
            doc! { "$sort": { "last_key": 1 } },
        ];
        pipeline.push(if conds.is_empty() {
            doc! { "$project": { "_id": 0, "comments": 1 } }
        } else {
            doc! { "$project": { "_id": 0, "comments": {
                "$filter": { "input": "$comments", "as": "c", "cond": { "$and": conds } },
            } } }
        });
        pipeline.extend([
            doc! { "$unwind": "$comments" },
            doc! { "$limit": i64::try_from(need).unwrap_or(i64::MAX) },
        ]);
        self.run(scope, discussion, pipeline).await
    }

    /// The end of a chronological listing (or of the top-level comments), before `before`
    /// (from the end without one): the mirror of [`Self::stream`], pages in reverse order from
    /// the cursor's page (or the last page), cut after `need` items. Returns them in stored
    /// order.
    pub(super) async fn stream_back(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        before: Option<(Micros, &Slug)>,
        top_level: bool,
        need: usize,
    ) -> StoreResult<Vec<Comment>> {
        let mut conds: Vec<Bson> = Vec::new();
        let to = match before {
            None => Hints::of(discussion).last_page,
            Some((posted, slug)) => {
                let cursor = Cursor::Chronological {
                    posted,
                    slug: slug.clone(),
                };
                conds.push(before_cond(&cursor, "c").into());
                self.page_of(discussion, posted, slug, true).await?
            }
        };
        if top_level {
            conds.push(doc! { "$eq": ["$$c.parent", Bson::Null] }.into());
        }
        if let Some(to) = to {
            let found = self
                .pages_near(scope, discussion, (to, true), &conds, need, top_level)
                .await?;
            if let Some(found) = found {
                return Ok(found);
            }
        }
        // Every page, from the last: the order index read backwards, each page's comments
        // reversed, so that the first `need` are the last ones.
        let mut matcher = doc! { "discussion_id": discussion.id.as_str() };
        if top_level {
            matcher.insert("roots", doc! { "$gt": 0 });
        }
        let comments = match conds.is_empty() {
            true => Bson::from("$comments"),
            false => Bson::from(doc! { "$filter": {
                "input": "$comments", "as": "c", "cond": { "$and": conds },
            } }),
        };
        let pipeline = vec![
            doc! { "$match": matcher },
            doc! { "$sort": { "last_key": -1 } },
            doc! { "$project": { "_id": 0, "comments": { "$reverseArray": comments } } },
            doc! { "$unwind": "$comments" },
            doc! { "$limit": i64::try_from(need).unwrap_or(i64::MAX) },
        ];
        let mut found = self.run(scope, discussion, pipeline).await?;
        found.reverse();
        Ok(found)
    }

    /// The page that holds the comment `slug` (found with the slug index), when the cursor
    /// `(posted, slug)` is that comment's place in it: from that page on lies every comment
    /// after the cursor, and up to it every comment before it (pages hold disjoint, increasing
    /// runs of keys). `None` for a cursor that names no comment or not its position. `backward`:
    /// the cursor must not follow the page's last key (else not precede its first key).
    pub(super) async fn page_of(
        &self,
        discussion: &Discussion,
        posted: Micros,
        slug: &Slug,
        backward: bool,
    ) -> StoreResult<Option<i64>> {
        let found = self
            .pages
            .find_one(doc! {
                "discussion_id": discussion.id.as_str(), "comments.slug": slug.as_str(),
            })
            .projection(doc! { "_id": 0, "page": 1, "first_key": 1, "last_key": 1 })
            .await?;
        let key = order_key(posted, slug);
        Ok(found
            .filter(|d| match backward {
                true => d.get_str("last_key").is_ok_and(|last| key.as_str() <= last),
                false => d
                    .get_str("first_key")
                    .is_ok_and(|first| key.as_str() >= first),
            })
            .and_then(|d| d.get("page").and_then(crate::store::shared::bson::as_i64)))
    }

    /// The first `need` comments (or top-level comments) that pass `conds` from page `at` on
    /// (the last `need` up to page `at`, `backward`), read from a bounded range of page
    /// numbers: the database reads those pages only, however many the discussion has. The
    /// range is wide enough when pages are full and, for top-level comments, twice what the
    /// discussion's share of them says. `None` when the range still held too few and pages lie
    /// beyond it (pages of an older, smaller size, threads started unevenly, or a cursor late
    /// in its page, early backward): the caller then streams on, which costs one more command.
    /// The comments come in stored order.
    pub(super) async fn pages_near(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        (at, backward): (i64, bool),
        conds: &[Bson],
        need: usize,
        top_level: bool,
    ) -> StoreResult<Option<Vec<Comment>>> {
        let per_page = self.cap.unsigned_abs();
        let pages = if top_level {
            if discussion.thread_count == 0 {
                return Ok(None);
            }
            // need × comments per thread × 2, in pages.
            let spread = (need as u64)
                .saturating_mul(discussion.comment_count.max(1))
                .saturating_mul(2);
            spread.div_ceil(discussion.thread_count.saturating_mul(per_page).max(1))
        } else {
            (need as u64).div_ceil(per_page)
        };
        let span = i64::try_from(pages).unwrap_or(i64::MAX / 4) + 1;
        // Pages `from..to`.
        let (from, to) = match backward {
            false => (at, at.saturating_add(span)),
            true => ((at - span + 1).max(0), at.saturating_add(1)),
        };
        let comments = if conds.is_empty() {
            Bson::from("$comments")
        } else {
            Bson::from(doc! { "$filter": {
                "input": "$comments", "as": "c", "cond": { "$and": conds },
            } })
        };
        let docs: Vec<RawDocumentBuf> = self
            .aggregate(vec![
                doc! { "$match": {
                    "discussion_id": discussion.id.as_str(),
                    "page": { "$gte": from, "$lt": to },
                } },
                doc! { "$sort": { "page": 1 } },
                doc! { "$project": read_projection(comments) },
            ])
            .await?;
        let out = match backward {
            false => read_first(scope, &docs, &discussion.id, need)?,
            true => read_last(scope, &docs, &discussion.id, need)?,
        };
        // Page numbers have no gaps and start at 0: when the range's last page is missing,
        // there is no later one; no page precedes page 0.
        let beyond = match backward {
            false => docs.last().and_then(|d| int_of(d, "page")) == Some(to - 1),
            true => from > 0,
        };
        if out.len() < need && beyond {
            return Ok(None);
        }
        Ok(Some(out))
    }

    /// The seed's skip/limit walk: the page list says which pages hold the window (or, in posting
    /// order where the sealed pages are all of one size, arithmetic does); one query `$slice`s
    /// just those pages.
    pub(super) async fn walk(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        top_level: bool,
        skip: u64,
        need: u64,
    ) -> StoreResult<Vec<Comment>> {
        let slices = match Hints::of(discussion).full_pages {
            Some(full) if !top_level => uniform_slices(full, skip, need),
            _ => {
                let pages = self.page_list(scope, &discussion.id).await?;
                window_slices(&pages, top_level, skip, need)
            }
        };
        if slices.is_empty() {
            return Ok(Vec::new());
        }
        let input = if top_level {
            Bson::from(doc! { "$filter": {
                "input": "$comments", "as": "c", "cond": { "$eq": ["$$c.parent", Bson::Null] },
            } })
        } else {
            Bson::from("$comments")
        };
        let branches: Vec<Bson> = slices
            .iter()
            .map(|s| {
                doc! {
                    "case": { "$eq": ["$page", s.page] },
                    "then": { "$slice": [input.clone(), to_i64(s.skip), to_i64(s.take)] },
                }
                .into()
            })
            .collect();
        let pages_wanted: Vec<i64> = slices.iter().map(|s| s.page).collect();
        let pipeline = vec![
            doc! { "$match": { "discussion_id": discussion.id.as_str(), "page": { "$in": pages_wanted } } },
            doc! { "$sort": { "page": 1 } },
            doc! { "$project": { "_id": 0, "comments": {
                "$switch": { "branches": branches, "default": [] },
            } } },
        ];
        self.run(scope, discussion, pipeline).await
    }

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

/// Where a threaded window starts: after this many comments, or after the thread of this
/// top-level comment's page (a cursor); or where it ends, backward: before it.
pub(super) enum Start {
    Skip(u64),
    After(FullSlug),
    Before(FullSlug),
}

/// Part of one page that a window needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Slice {
    page: i64,
    skip: u64,
    take: u64,
}

/// The slices of the pages that hold items `skip..skip + need` of the walk.
pub(super) fn window_slices(
    pages: &[PageInfo],
    top_level: bool,
    skip: u64,
    need: u64,
) -> Vec<Slice> {
    let end = skip.saturating_add(need);
    let mut before = 0_u64;
    let mut out = Vec::new();
    for page in pages {
        let weight = page.weight(top_level);
        let (start, stop) = (before, before + weight);
        before = stop;
        if stop <= skip || weight == 0 {
            continue;
        }
        if start >= end {
            break;
        }
        let from = skip.saturating_sub(start);
        let take = stop.min(end) - start.max(skip);
        out.push(Slice {
            page: page.page,
            skip: from,
            take,
        });
    }
    out
}

/// The slices holding items `skip..skip + need` of the posting order when pages `0..full.count`
/// hold `full.size` comments each and the rest is in page `full.count` (which may hold fewer:
/// `$slice` then returns what there is).
pub(super) fn uniform_slices(full: FullPages, skip: u64, need: u64) -> Vec<Slice> {
    let sealed = full.count.saturating_mul(full.size);
    let end = skip.saturating_add(need);
    let mut out = Vec::new();
    let mut at = skip;
    while at < end {
        let (page, offset, room) = if at < sealed && full.size > 0 {
            let page = at / full.size;
            let offset = at % full.size;
            (page, offset, full.size - offset)
        } else {
            (full.count, at - sealed, end - at)
        };
        let take = room.min(end - at);
        out.push(Slice {
            page: i64::try_from(page).unwrap_or(i64::MAX),
            skip: offset,
            take,
        });
        at += take;
    }
    out
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

pub(super) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(page: i64, count: i64, roots: i64) -> PageInfo {
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

    #[test]
    fn the_seeds_worked_example() {
        // Pages of 100, 102, 101 and 22 comments; skip 300, limit 50 (plus one to see more).
        let pages = [
            page(0, 100, 0),
            page(1, 102, 0),
            page(2, 101, 0),
            page(3, 22, 0),
        ];
        assert_eq!(
            window_slices(&pages, false, 300, 51),
            vec![
                Slice {
                    page: 2,
                    skip: 98,
                    take: 3
                },
                Slice {
                    page: 3,
                    skip: 0,
                    take: 22
                },
            ]
        );
    }

    #[test]
    fn windows_skip_whole_pages_and_empty_ones() {
        let pages = [page(0, 5, 2), page(1, 5, 0), page(2, 5, 3), page(3, 2, 1)];
        assert_eq!(
            window_slices(&pages, false, 5, 5),
            vec![Slice {
                page: 1,
                skip: 0,
                take: 5
            }]
        );
        assert_eq!(
            window_slices(&pages, true, 1, 3),
            vec![
                Slice {
                    page: 0,
                    skip: 1,
                    take: 1
                },
                Slice {
                    page: 2,
                    skip: 0,
                    take: 2
                },
            ]
        );
        assert!(window_slices(&pages, false, 17, 5).is_empty());
    }

    #[test]
    fn uniform_pages_are_cut_by_arithmetic() {
        let full = FullPages {
            count: 3,
            size: 100,
        };
        // Same window as the page list would give for three full pages and an open fourth.
        let pages = [
            page(0, 100, 0),
            page(1, 100, 0),
            page(2, 100, 0),
            page(3, 22, 0),
        ];
        for (skip, need) in [(0, 51), (99, 2), (250, 51), (290, 40), (300, 51), (310, 5)] {
            let listed: Vec<Slice> = window_slices(&pages, false, skip, need);
            let computed = uniform_slices(full, skip, need);
            // The open page's slice may ask for more than it holds: `$slice` returns what is there.
            let trimmed: Vec<Slice> = computed
                .into_iter()
                .filter_map(|s| {
                    let held = if s.page == 3 { 22 } else { 100 };
                    let take = s.take.min(held - s.skip.min(held));
                    (take > 0).then_some(Slice { take, ..s })
                })
                .collect();
            assert_eq!(trimmed, listed, "skip {skip}, need {need}");
        }
        let empty = FullPages { count: 0, size: 0 };
        assert_eq!(
            uniform_slices(empty, 7, 3),
            vec![Slice {
                page: 0,
                skip: 7,
                take: 3
            }]
        );
    }

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
