//! Threads in buckets: replies, sub-discussions, counts and direct links, each one indexed
//! aggregation per batch that returns only the matching comments, except replies read by their
//! reply counts, which take their pages whole and keep them for the request's next levels.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document, RawDocumentBuf};
use serde::de::DeserializeOwned;

use super::kept::Kept;
use super::shapes::{BATCH_SIZE, THREAD_PAGES};
use super::stored::{int_of, read_all, read_where};
use super::Bucketed;
use crate::domain::tree::Thread;
use crate::domain::{Comment, Discussion, DiscussionId, FullSlug, Page, Slug, Span, Window};
use crate::store::shared::bson::corrupt;
use crate::store::shared::error::StoreResult;
use crate::store::shared::scope::ReadScope;

impl Bucketed {
    /// Runs a pipeline whose documents hold a `comments` array; returns the comments in order.
    pub(super) async fn run(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        pipeline: Vec<Document>,
    ) -> StoreResult<Vec<Comment>> {
        let docs: Vec<RawDocumentBuf> = self.aggregate(pipeline).await?;
        read_all(scope, &docs, &discussion.id)
    }

    /// The comments whose `field` is one of `values` (one indexed query on `comments.<field>`).
    pub(super) async fn matching_in(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        field: &str,
        values: &[&str],
    ) -> StoreResult<Vec<Comment>> {
        let path = format!("comments.{field}");
        let filter = pages_with(&discussion.id, &path, values.iter().map(|v| Bson::from(*v)));
        let cond = doc! { "$in": [format!("$$c.{field}"), values] };
        self.matching(scope, discussion, filter, cond.into()).await
    }

    /// The comments matching `cond` (an expression over `$$c`) from the pages matching `filter`
    /// (see [`pages_with`]): one indexed query, and only the matching comments travel.
    pub(super) async fn matching(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        filter: Document,
        cond: Bson,
    ) -> StoreResult<Vec<Comment>> {
        let docs = self.matching_docs(filter, cond).await?;
        read_all(scope, &docs, &discussion.id)
    }

    /// The pages [`Self::matching`] reads, as read.
    pub(super) async fn matching_docs(
        &self,
        filter: Document,
        cond: Bson,
    ) -> StoreResult<Vec<RawDocumentBuf>> {
        self.aggregate(vec![
            doc! { "$match": filter },
            doc! { "$project": read_projection(doc! {
                "$filter": { "input": "$comments", "as": "c", "cond": cond },
            }) },
        ])
        .await
    }

    /// The replies of `parents` from just the pages that hold their window, where every parent
    /// was read in this request and keeps its replies per page (`reply_pages`, adding up to its
    /// `reply_count`): one query by page number, whatever the number of pages their replies
    /// span. `None` when a parent was not read or does not keep them (it had replies before
    /// they were kept): the caller then reads every page that holds a reply.
    pub(super) async fn replies_by_pages(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        parents: &[Slug],
        window: &Window,
    ) -> StoreResult<Option<HashMap<Slug, Page<Comment>>>> {
        let id = &discussion.id;
        // Per parent: the span of its replies the window reads (all of them after or before
        // a cursor), and the window over the replies its pages hold.
        let mut plans: Vec<(&Slug, Option<Window>)> = Vec::new();
        let mut wanted: Vec<i64> = Vec::new();
        for parent in parents {
            let Some(read) = scope.slot::<Kept>().seen.get(id, parent) else {
                return Ok(None);
            };
            if read.reply_count == 0 {
                plans.push((parent, None));
                continue;
            }
            let Some(pages) = scope.slot::<Kept>().reply_pages.get(id, parent) else {
                return Ok(None);
            };
            if pages.iter().map(|(_, n)| n).sum::<u64>() != read.reply_count {
                return Ok(None);
            }
            let span = match window.cursor() {
                Some(_) => Span {
                    from: 0,
                    count: u64::MAX,
                },
                None => match window.span(Some(read.reply_count), None) {
                    Some(span) => span,
                    None => return Ok(None),
                },
            };
            let (chosen, before) = reply_span(&pages, span.from, span.end());
            wanted.extend(chosen);
            let inner = match window.cursor() {
                Some(_) => Some(window.clone()),
                None => Span {
                    from: span.from - before,
                    count: span.count,
                }
                .as_offset(),
            };
            plans.push((parent, inner));
        }
        wanted.sort_unstable();
        wanted.dedup();
        let Some(docs) = self.whole_pages(scope, id, &wanted).await? else {
            return Ok(None);
        };
        let names: HashSet<&str> = parents.iter().map(Slug::as_str).collect();
        let comments = read_where(scope, &docs, id, |item| {
            item.get_str("parent")
                .is_ok_and(|parent| names.contains(parent))
        })?;
        let thread = Thread::new(comments);
        Ok(Some(
            plans
                .into_iter()
                .map(|(parent, inner)| {
                    let picked = match inner {
                        Some(inner) => inner.pick(thread.replies_of(parent), |c| c.sort_key()),
                        None => Vec::new(),
                    };
                    let page = window.page(picked.into_iter().cloned().collect());
                    (parent.clone(), page)
                })
                .collect(),
        ))
    }

    /// Pages `wanted` (page numbers in order, none twice) whole, in that order, each read at
    /// most once per request: the pages this request read whole already come from its scope
    /// ([`crate::store::ReadScope`]'s `whole_pages`), the others come in one query by page
    /// number (see [`Self::page_docs`]). Reading a page whole costs the server about what filtering
    /// its comments costs (it loads the page either way), so a tree, whose levels read the
    /// same pages again, reads each page once. `None` when a page is
    /// gone (see [`Self::page_docs`]).
    pub(super) async fn whole_pages(
        &self,
        scope: &ReadScope,
        id: &DiscussionId,
        wanted: &[i64],
    ) -> StoreResult<Option<Vec<Arc<RawDocumentBuf>>>> {
        let mut found: HashMap<i64, Arc<RawDocumentBuf>> = HashMap::new();
        let mut missing = Vec::new();
        for &page in wanted {
            match scope.slot::<Kept>().whole_pages.get(id, page) {
                Some(doc) => {
                    found.insert(page, doc);
                }
                None => missing.push(page),
            }
        }
        if !missing.is_empty() {
            // Where the comments were found and the comments; not the page's thread counts,
            // which only reads that may return top-level comments use.
            let projection = doc! { "_id": 1, "page": 1, "comments": 1 };
            let Some(read) = self
                .by_numbers::<RawDocumentBuf>(id, &missing, projection)
                .await?
            else {
                return Ok(None);
            };
            for doc in read {
                let page = int_of(&doc, "page").ok_or_else(|| corrupt("a page's number"))?;
                let doc = Arc::new(doc);
                scope
                    .slot::<Kept>()
                    .whole_pages
                    .keep(id, page, Arc::clone(&doc));
                found.insert(page, doc);
            }
        }
        Ok(wanted.iter().map(|page| found.remove(page)).collect())
    }

    /// Pages `wanted` (page numbers in order, none twice) as read, with just their comments
    /// matching `cond` (an expression over `$$c`): one query by page number, sorted on it: the
    /// `{discussion_id, page}` index then bounds it to these pages (an `_id $in` beside
    /// `discussion_id`, or a `page $in` without the sort, may leave a planner reading all of the
    /// discussion's pages). `None` when a page is gone (the discussion moved away
    /// meanwhile): the caller then reads the way that does not depend on the counts that named
    /// the pages. `homes`: whether to project the pages' thread counts too, for the top-level
    /// comments among them (see [`read_projection`]; replies and descendants are none).
    pub(super) async fn page_docs(
        &self,
        id: &DiscussionId,
        wanted: &[i64],
        cond: Bson,
        homes: bool,
    ) -> StoreResult<Option<Vec<RawDocumentBuf>>> {
        if wanted.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let comments = doc! { "$filter": { "input": "$comments", "as": "c", "cond": cond } };
        let projection = if homes {
            read_projection(comments)
        } else {
            doc! { "_id": 1, "page": 1, "comments": comments }
        };
        self.by_numbers(id, wanted, projection).await
    }

    /// The pages that hold the descendants of `roots`, where each root and its thread's
    /// top-level comment were read in this request from pages that say so: the top-level
    /// comment's page counts where the threads it starts are (`thread_homes`), and a root's
    /// descendants were posted to its own page or later ones. `None` otherwise: the caller then
    /// reads the pages that hold them by range.
    pub(super) fn descendant_pages(
        scope: &ReadScope,
        id: &DiscussionId,
        roots: &[FullSlug],
    ) -> Option<Vec<i64>> {
        let mut wanted = Vec::new();
        for root in roots {
            let slug = root.slug();
            let (_, from) = scope.slot::<Kept>().pages_of.get(id, &slug)?;
            let homes = scope
                .slot::<Kept>()
                .thread_homes
                .get(id, &slug.ancestor_at(0))?;
            wanted.extend(homes.into_iter().filter(|page| *page >= from));
        }
        wanted.sort_unstable();
        wanted.dedup();
        Some(wanted)
    }

    /// The pages that hold the descendants of `roots`, as read (only the descendants
    /// travel): just the pages of their threads (see [`Self::descendant_pages`]) where this
    /// request knows them, else the pages a range on the full slugs finds (a multikey range,
    /// which also matches pages where different comments satisfy each bound).
    pub(super) async fn descendant_docs(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
    ) -> StoreResult<Vec<RawDocumentBuf>> {
        let id = &discussion.id;
        let cond = descendant_cond(roots);
        if let Some(wanted) = Self::descendant_pages(scope, id, roots) {
            if let Some(found) = self.page_docs(id, &wanted, cond.clone(), false).await? {
                return Ok(found);
            }
        }
        self.matching_docs(descendant_query(id, roots), cond).await
    }

    /// How many descendants each root has: only the matching full slugs travel, from the pages
    /// [`Self::descendants`] would read.
    pub(super) async fn descendant_counts(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
    ) -> StoreResult<HashMap<FullSlug, u64>> {
        let mut counts: HashMap<FullSlug, u64> = roots.iter().map(|r| (r.clone(), 0)).collect();
        if roots.is_empty() {
            return Ok(counts);
        }
        let id = &discussion.id;
        let cond = descendant_cond(roots);
        // Only the full slugs travel: a count needs nothing else.
        let project = doc! { "_id": 0, "s": { "$map": {
            "input": { "$filter": { "input": "$comments", "as": "c", "cond": cond } },
            "as": "c",
            "in": "$$c.full_slug",
        } } };
        let mut docs: Option<Vec<RawDocumentBuf>> = None;
        if let Some(wanted) = Self::descendant_pages(scope, id, roots) {
            docs = self.by_numbers(id, &wanted, project.clone()).await?;
        }
        let docs = match docs {
            Some(docs) => docs,
            None => {
                let query = descendant_query(id, roots);
                self.aggregate(vec![doc! { "$match": query }, doc! { "$project": project }])
                    .await?
            }
        };
        let wanted: HashSet<&str> = roots.iter().map(FullSlug::as_str).collect();
        for doc in &docs {
            for full in doc.get_array("s").map_err(corrupt)? {
                let Some(full) = full.map_err(corrupt)?.as_str() else {
                    continue;
                };
                // Every proper prefix that ends at a segment boundary is an ancestor.
                for (i, _) in full.match_indices('/') {
                    let ancestor = &full[..i];
                    if wanted.contains(ancestor) {
                        let key = FullSlug::from_stored(ancestor.to_owned());
                        *counts.entry(key).or_default() += 1;
                    }
                }
            }
        }
        Ok(counts)
    }

    /// Pages `wanted` of discussion `id` (page numbers in order, none twice) as `projection`
    /// makes them, read by page number and sorted on it (see [`Self::page_docs`]); `None` when a
    /// page is gone.
    pub(super) async fn by_numbers<T>(
        &self,
        id: &DiscussionId,
        wanted: &[i64],
        projection: Document,
    ) -> StoreResult<Option<Vec<T>>>
    where
        T: DeserializeOwned + Send + Sync,
    {
        let docs = self
            .aggregate(vec![
                doc! { "$match": { "discussion_id": id.as_str(), "page": { "$in": wanted } } },
                doc! { "$sort": { "page": 1 } },
                doc! { "$project": projection },
            ])
            .await?;
        Ok((docs.len() == wanted.len()).then_some(docs))
    }

    /// Every document a pipeline on the pages returns, in one reply batch, as `T` (a
    /// `Document`, or a `RawDocumentBuf` for comments decoded straight from what was read).
    pub(super) async fn aggregate<T>(&self, pipeline: Vec<Document>) -> StoreResult<Vec<T>>
    where
        T: DeserializeOwned + Send + Sync,
    {
        Ok(self
            .pages
            .aggregate(pipeline)
            .batch_size(BATCH_SIZE)
            .with_type::<T>()
            .await?
            .try_collect()
            .await?)
    }
}

/// What a read of comments projects from their pages: where they were found (`_id` and page
/// number), where the threads the page starts are (`thread_total` and `thread_pages`, for
/// sub-discussions of its top-level comments), and `comments` (an expression).
pub(super) fn read_projection(comments: impl Into<Bson>) -> Document {
    doc! {
        "_id": 1, "page": 1, "thread_total": 1, THREAD_PAGES: 1, "comments": comments.into(),
    }
}

/// The pages that hold a comment's direct replies `skip..end` (of `pages`, its replies per page
/// in page order), and how many of its replies come before the first of them.
pub(super) fn reply_span(pages: &[(i64, u64)], skip: u64, end: u64) -> (Vec<i64>, u64) {
    let mut chosen = Vec::new();
    let mut before = 0;
    let mut seen = 0_u64;
    for &(page, n) in pages {
        let start = seen;
        seen = seen.saturating_add(n);
        if seen <= skip {
            before = seen;
            continue;
        }
        if start >= end {
            break;
        }
        chosen.push(page);
    }
    (chosen, before)
}

/// The indexed array field of the full slugs, which descendant ranges query.
pub(super) const FULL_SLUGS: &str = "comments.full_slug";

/// A filter for the pages of discussion `id` holding a comment whose array field `path` (an
/// indexed one: `comments.slug`, `comments.parent` or `comments.full_slug`) matches any of
/// `conds` (values or ranges): an `$or` with one branch per condition, each naming the
/// discussion, so that every branch is one index range and the pages read are the ones that
/// match. A single condition gets a second branch that matches nothing (no slug or full slug is
/// empty), so that no planner folds it into one multikey query it might answer by a scan. Each
/// branch is the same index range the plain query would use.
pub(super) fn pages_with(
    id: &DiscussionId,
    path: &str,
    conds: impl IntoIterator<Item = Bson>,
) -> Document {
    let mut branches: Vec<Document> = conds
        .into_iter()
        .map(|cond| doc! { "discussion_id": id.as_str(), path: cond })
        .collect();
    if branches.len() < 2 {
        branches.push(doc! { "discussion_id": id.as_str(), path: NO_SLUG });
    }
    doc! { "$or": branches }
}

/// A value no slug, parent or full slug has.
pub(super) const NO_SLUG: &str = "";

/// The pages holding descendants of `roots` by range (see [`pages_with`]).
pub(super) fn descendant_query(id: &DiscussionId, roots: &[FullSlug]) -> Document {
    let ranges = roots.iter().map(|root| {
        let (lo, hi) = root.descendant_range();
        Bson::from(doc! { "$gte": lo, "$lt": hi })
    });
    pages_with(id, FULL_SLUGS, ranges)
}

/// The descendants of `roots` as a condition on `$$c`.
pub(super) fn descendant_cond(roots: &[FullSlug]) -> Bson {
    let cond: Vec<Document> = roots
        .iter()
        .map(|root| {
            let (lo, hi) = root.descendant_range();
            doc! { "$and": [
                { "$gte": ["$$c.full_slug", &lo] },
                { "$lt": ["$$c.full_slug", &hi] },
            ] }
        })
        .collect();
    doc! { "$or": cond }.into()
}
