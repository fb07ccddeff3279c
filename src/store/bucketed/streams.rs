//! Chronological streams from a cursor, forward or back: from the page that holds the cursor's
//! comment, through a bounded range of page numbers, else in the order index.

use mongodb::bson::{doc, Bson, RawDocumentBuf};

use super::hints::Hints;
use super::shapes::order_key;
use super::stored::{int_of, read_first, read_last};
use super::threads::read_projection;
use super::Bucketed;
use crate::domain::paging::Cursor;
use crate::domain::{Comment, Discussion, Micros, Slug};
use crate::store::shared::error::StoreResult;
use crate::store::shared::order::{after_cond, before_cond};
use crate::store::shared::scope::ReadScope;

impl Bucketed {
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
}
