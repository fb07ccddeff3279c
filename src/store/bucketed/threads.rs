//! Threads in buckets: replies, sub-discussions, counts and direct links, each one indexed
//! aggregation per batch that returns only the matching comments.

use std::collections::{HashMap, HashSet};

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};

use super::shapes::{comments_of, BATCH_SIZE};
use super::Bucketed;
use crate::domain::{Comment, Discussion, DiscussionId, FullSlug};
use crate::store::bson::{as_i64, corrupt};
use crate::store::{ReadScope, StoreResult};

impl Bucketed {
    /// Runs a pipeline whose documents hold a `comments` array; returns the comments in order.
    pub(super) async fn run(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        pipeline: Vec<Document>,
    ) -> StoreResult<Vec<Comment>> {
        let docs: Vec<Document> = self
            .pages
            .aggregate(pipeline)
            .batch_size(BATCH_SIZE)
            .await?
            .try_collect()
            .await?;
        let mut out = Vec::new();
        for doc in &docs {
            let comments = comments_of(doc, &discussion.id)?;
            if let (Some(page), Some(number)) = (doc.get("_id"), doc.get("page").and_then(as_i64)) {
                scope.pages_of.remember(&comments, page, number);
            }
            out.extend(comments);
        }
        scope.seen.remember(&out);
        Ok(out)
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
        let pipeline = vec![
            doc! { "$match": filter },
            doc! { "$project": { "_id": 1, "page": 1, "comments": {
                "$filter": { "input": "$comments", "as": "c", "cond": cond },
            } } },
        ];
        self.run(scope, discussion, pipeline).await
    }

    /// How many descendants each root has: only the matching full slugs travel.
    pub(super) async fn descendant_counts(
        &self,
        discussion: &Discussion,
        roots: &[FullSlug],
    ) -> StoreResult<HashMap<FullSlug, u64>> {
        let mut counts: HashMap<FullSlug, u64> = roots.iter().map(|r| (r.clone(), 0)).collect();
        if roots.is_empty() {
            return Ok(counts);
        }
        let (query, cond) = descendant_ranges(&discussion.id, roots);
        // Only the full slugs travel: a count needs nothing else.
        let pipeline = vec![
            doc! { "$match": query },
            doc! { "$project": { "_id": 0, "s": { "$map": {
                "input": { "$filter": { "input": "$comments", "as": "c", "cond": cond } },
                "as": "c",
                "in": "$$c.full_slug",
            } } } },
        ];
        let docs: Vec<Document> = self
            .pages
            .aggregate(pipeline)
            .batch_size(BATCH_SIZE)
            .await?
            .try_collect()
            .await?;
        let wanted: HashSet<&str> = roots.iter().map(FullSlug::as_str).collect();
        for doc in &docs {
            for full in doc.get_array("s").map_err(corrupt)? {
                let Bson::String(full) = full else { continue };
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
}

/// The indexed array field of the full slugs, which descendant ranges query.
pub(super) const FULL_SLUGS: &str = "comments.full_slug";

/// A filter for the pages of discussion `id` holding a comment whose array field `path` (an
/// indexed one: `comments.slug`, `comments.parent` or `comments.full_slug`) matches any of
/// `conds` (values or ranges): an `$or` with one branch per condition, each naming the
/// discussion, so that every branch is one index range and the pages read are the ones that
/// match. The development database answers a multikey query that matches more than one page in
/// any other form (`$in`, a range, or an `$or` it can fold into one query) by reading every page
/// of the collection (140 ms at 300 pages, measured, whatever the discussion); so a single
/// condition gets a second branch that matches nothing (no slug or full slug is empty). On
/// MongoDB each branch is the same index range the plain query would use.
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
const NO_SLUG: &str = "";

/// The pages holding descendants of `roots` (see [`pages_with`]), and the same ranges as a
/// condition on `$$c`.
pub(super) fn descendant_ranges(id: &DiscussionId, roots: &[FullSlug]) -> (Document, Bson) {
    let mut ranges = Vec::new();
    let mut cond = Vec::new();
    for root in roots {
        let (lo, hi) = root.descendant_range();
        ranges.push(Bson::from(doc! { "$gte": &lo, "$lt": &hi }));
        cond.push(doc! { "$and": [
            { "$gte": ["$$c.full_slug", &lo] },
            { "$lt": ["$$c.full_slug", &hi] },
        ] });
    }
    (
        pages_with(id, FULL_SLUGS, ranges),
        doc! { "$or": cond }.into(),
    )
}
