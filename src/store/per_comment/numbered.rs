//! Pages read as bounded ranges of the numbers a sequenced discussion gives its comments and threads.

use futures::TryStreamExt;
use mongodb::bson::{doc, Document};

use super::thread_blocks;
use super::*;
use crate::domain::{Comment, Cursor, Discussion, FullSlug, Page, Window};
use crate::store::shared::bson::{as_i64, to_count};
use crate::store::shared::docs::CommentDoc;
use crate::store::shared::error::StoreResult;
use crate::store::shared::order::sort_toward;
/// A sequence that numbers comments of a listing in its order.
#[derive(Clone, Copy)]
pub(super) struct Numbering {
    /// The comments' field.
    field: &'static str,
    /// Whether it numbers top-level comments only.
    top_level: bool,
}

impl Numbering {
    /// Every comment, in posting (chronological) order.
    pub(super) const ALL: Numbering = Numbering {
        field: "seq",
        top_level: false,
    };
    /// Top-level comments, in posting order.
    pub(super) const THREADS: Numbering = Numbering {
        field: "thread_seq",
        top_level: true,
    };

    /// How many comments the discussion numbered this way (as the request read it).
    pub(super) fn total(self, discussion: &Discussion) -> u64 {
        match self.top_level {
            true => discussion.thread_count,
            false => discussion.comment_count,
        }
    }
}

impl PerComment {
    /// A page of a sequenced discussion read as one bounded range of its numbers: the numbers
    /// of the window's span (see `Window::span`): an offset window's from the start, a window
    /// from the end's from the total the request read, a cursor window's from the cursor's
    /// comment's number (found by its slug). `None` when the numbers cannot answer (a cursor
    /// that names no numbered comment, or a range with a number missing); the caller then reads
    /// the page the general way.
    pub(super) async fn numbered_page(
        &self,
        discussion: &Discussion,
        numbering: Numbering,
        window: &Window,
    ) -> StoreResult<Option<Page<Comment>>> {
        let field = numbering.field;
        let total = numbering.total(discussion);
        let at = match window.cursor() {
            None => None,
            Some(Cursor::Chronological { posted, slug }) => {
                let found = self
                    .raw
                    .find_one(
                        doc! { "discussion_id": discussion.id.as_str(), "slug": slug.as_str() },
                    )
                    .projection(doc! { field: 1, "posted": 1 })
                    .await?;
                // The cursor must be that comment's position (a cursor is the client's input).
                let number = found
                    .filter(|d| d.get_i64("posted").ok() == Some(posted.0))
                    .and_then(|d| d.get_i64(field).ok())
                    .and_then(|n| u64::try_from(n).ok())
                    .filter(|n| *n > 0);
                match number {
                    // Numbers count from 1: the comment numbered n is item n - 1.
                    Some(number) => Some(number - 1),
                    None => return Ok(None),
                }
            }
            Some(_) => return Ok(None),
        };
        let Some(span) = window.span(Some(total), at) else {
            return Ok(None);
        };
        if span.count == 0 {
            return Ok(Some(window.page(Vec::new())));
        }
        let (after, last) = (to_i64(span.from), to_i64(span.end()));
        let docs: Vec<CommentDoc> = self
            .coll
            .find(doc! {
                "discussion_id": discussion.id.as_str(),
                field: { "$gt": after, "$lte": last },
            })
            .sort(doc! { field: 1 })
            .await?
            .try_collect()
            .await?;
        // Every number up to the total the request knows must be there (a post that failed
        // without its transaction could leave one out).
        let expected = span.count.min(total.saturating_sub(span.from));
        Ok(complete_page(discussion, docs, expected, window))
    }
}

impl PerComment {
    /// A threaded page of a discussion that keeps block counts of its threads, read as one
    /// range of whole threads (see `thread_blocks`). `None` when the counts cannot answer (a
    /// cursor that names no thread, a thread or a comment missing from what they promise); the
    /// caller then reads the page the general way.
    pub(super) async fn threaded_page(
        &self,
        discussion: &Discussion,
        blocks: &[u64],
        window: &Window,
    ) -> StoreResult<Option<Page<Comment>>> {
        let (range, skip, want, expected) = match window {
            Window::Offset { .. } | Window::After { cursor: None, .. } | Window::FromEnd { .. } => {
                let Some(span) = window.span(Some(discussion.comment_count), None) else {
                    return Ok(None);
                };
                if span.count == 0 {
                    return Ok(Some(window.page(Vec::new())));
                }
                let (skip, want) = (span.from, span.count);
                let Some(span) = crate::store::shared::blocks::span(blocks, skip, want) else {
                    return Ok(None);
                };
                let (first, _) = thread_blocks::threads_of(span.first);
                let (_, last) = thread_blocks::threads_of(span.last);
                let Some(roots) = self.roots(discussion, first, last).await? else {
                    return Ok(None);
                };
                let Some(cut) = thread_blocks::cut(&roots, skip - span.before, want) else {
                    return Ok(None);
                };
                let lo = roots[cut.first].full_slug.as_str().to_owned();
                let (_, hi) = roots[cut.last].full_slug.descendant_range();
                (doc! { "$gte": lo, "$lt": hi }, cut.skip, want, cut.expected)
            }
            Window::After {
                cursor: Some(Cursor::Threaded(after)),
                ..
            } => {
                let want = window.more();
                let root = after.ancestor_at(0);
                let Some(thread) = self.thread_number(discussion, &root).await? else {
                    return Ok(None);
                };
                let next = i64::try_from(want).unwrap_or(i64::MAX / 2);
                let Some(later) = self.roots(discussion, thread + 1, thread + next).await? else {
                    return Ok(None);
                };
                let taken = thread_blocks::cover(&later, want);
                let (_, hi) = match taken {
                    0 => root.descendant_range(),
                    n => later[n - 1].full_slug.descendant_range(),
                };
                let promised: u64 = later[..taken].iter().map(|r| r.total).sum();
                (
                    doc! { "$gt": after.as_str(), "$lt": hi },
                    0,
                    want,
                    promised.min(want),
                )
            }
            Window::Before {
                cursor: Cursor::Threaded(before),
                ..
            } => {
                // The mirror image: the threads before the cursor's, from the last one back
                // until they hold a page, and the cursor's own thread up to the cursor.
                let want = window.more();
                let root = before.ancestor_at(0);
                let Some(thread) = self.thread_number(discussion, &root).await? else {
                    return Ok(None);
                };
                let back = i64::try_from(want).unwrap_or(i64::MAX / 2);
                let earlier = match thread > 1 {
                    true => {
                        self.roots(discussion, (thread - back).max(1), thread - 1)
                            .await?
                    }
                    false => Some(Vec::new()),
                };
                let Some(earlier) = earlier else {
                    return Ok(None);
                };
                let taken = thread_blocks::cover_back(&earlier, want);
                let lo = match taken {
                    0 => root.as_str().to_owned(),
                    n => earlier[earlier.len() - n].full_slug.as_str().to_owned(),
                };
                let promised: u64 = earlier[earlier.len() - taken..]
                    .iter()
                    .map(|r| r.total)
                    .sum();
                (
                    doc! { "$gte": lo, "$lt": before.as_str() },
                    0,
                    want,
                    promised.min(want),
                )
            }
            Window::After { .. } | Window::Before { .. } => return Ok(None),
        };
        let from_end = matches!(window, Window::Before { .. });
        self.threaded_range(discussion, range, (skip, want), expected, from_end, window)
            .await
    }

    /// The number of the thread whose top-level comment is `root`; `None` when there is no such
    /// comment or it carries no number.
    async fn thread_number(
        &self,
        discussion: &Discussion,
        root: &FullSlug,
    ) -> StoreResult<Option<i64>> {
        let found = self
            .raw
            .find_one(doc! { "discussion_id": discussion.id.as_str(), "full_slug": root.as_str() })
            .projection(doc! { "thread_seq": 1 })
            .await?;
        Ok(found.and_then(|d| d.get_i64("thread_seq").ok()))
    }

    /// The comments in `range` of `full_slug`, in threaded order, `skip` of them skipped and at
    /// most `want` read: the range's first ones, or its last ones `from_end` (a range that ends
    /// where a backward page ends). The page of `window`, or `None` when fewer than `expected`
    /// came back (see [`complete_page`]).
    pub(super) async fn threaded_range(
        &self,
        discussion: &Discussion,
        range: Document,
        (skip, want): (u64, u64),
        expected: u64,
        from_end: bool,
        window: &Window,
    ) -> StoreResult<Option<Page<Comment>>> {
        let mut docs: Vec<CommentDoc> = self
            .coll
            .find(doc! { "discussion_id": discussion.id.as_str(), "full_slug": range })
            .sort(sort_toward(&["full_slug"], from_end))
            .skip(skip)
            .limit(i64::try_from(want).unwrap_or(i64::MAX))
            .await?
            .try_collect()
            .await?;
        if from_end {
            docs.reverse();
        }
        Ok(complete_page(discussion, docs, expected, window))
    }

    /// The top-level comments numbered `first ..= last` (fewer past the discussion's last
    /// thread), with their thread totals. `None` when one is missing or carries no total: the
    /// counts cannot be trusted then.
    pub(super) async fn roots(
        &self,
        discussion: &Discussion,
        first: i64,
        last: i64,
    ) -> StoreResult<Option<Vec<thread_blocks::Root>>> {
        let docs: Vec<Document> = self
            .raw
            .find(doc! {
                "discussion_id": discussion.id.as_str(),
                "thread_seq": { "$gte": first, "$lte": last },
            })
            .projection(doc! { "_id": 0, "thread_seq": 1, "thread_total": 1, "full_slug": 1 })
            .sort(doc! { "thread_seq": 1 })
            .await?
            .try_collect()
            .await?;
        let known = i64::try_from(discussion.thread_count).unwrap_or(i64::MAX);
        let complete = i64::try_from(docs.len()).unwrap_or(i64::MAX) > last.min(known) - first;
        let mut roots = Vec::with_capacity(docs.len());
        for (expected, doc) in (first..).zip(docs) {
            let thread = doc.get_i64("thread_seq").ok();
            let total = doc.get("thread_total").and_then(as_i64);
            let full_slug = doc.get_str("full_slug").ok();
            match (thread, total, full_slug) {
                (Some(thread), Some(total), Some(full_slug)) if thread == expected => {
                    roots.push(thread_blocks::Root {
                        thread,
                        total: to_count(total),
                        full_slug: FullSlug::from_stored(full_slug.to_owned()),
                    });
                }
                _ => return Ok(None),
            }
        }
        Ok(complete.then_some(roots))
    }
}

/// The page of `docs` (read for `window`, up to `limit + 1`, in stored order), or `None` when
/// fewer than `expected` came back: the counts that bounded the read promised more, and the
/// caller reads the general way.
pub(super) fn complete_page(
    discussion: &Discussion,
    docs: Vec<CommentDoc>,
    expected: u64,
    window: &Window,
) -> Option<Page<Comment>> {
    if (docs.len() as u64) < expected {
        return None;
    }
    let items = docs
        .into_iter()
        .map(|d| d.into_comment(&discussion.id))
        .collect();
    Some(window.page(items))
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
