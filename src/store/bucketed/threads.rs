//! Threads in buckets: replies, sub-discussions, counts and direct links, each one indexed
//! aggregation per batch that returns only the matching comments.

use std::collections::{HashMap, HashSet};

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};

use super::shapes::{comments_of, BATCH_SIZE};
use super::Bucketed;
use crate::domain::{Comment, Discussion, FullSlug};
use crate::store::bson::corrupt;
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
            out.extend(comments_of(doc, &discussion.id)?);
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
        let filter = doc! { &path: { "$in": values } };
        let cond = doc! { "$in": [format!("$$c.{field}"), values] };
        self.matching(scope, discussion, (&path, filter), cond.into())
            .await
    }

    /// The comments matching `cond` (an expression over `$$c`) from the pages matching `filter`
    /// on the indexed array field `path`: one indexed query, and only the matching comments
    /// travel.
    pub(super) async fn matching(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        (path, filter): (&str, Document),
        cond: Bson,
    ) -> StoreResult<Vec<Comment>> {
        let mut matcher = doc! { "discussion_id": discussion.id.as_str() };
        matcher.extend(filter);
        let pipeline = vec![
            doc! { "$match": matcher },
            by_index(path),
            doc! { "$project": { "_id": 0, "comments": {
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
        let (query, cond) = descendant_ranges(roots);
        let mut matcher = doc! { "discussion_id": discussion.id.as_str() };
        matcher.extend(query);
        // Only the full slugs travel: a count needs nothing else.
        let pipeline = vec![
            doc! { "$match": matcher },
            by_index(FULL_SLUGS),
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

/// A `$sort` on the indexed field a `$match` on pages filters by. The order of pages does not
/// matter to the callers (they order comments themselves); the stage names the index to use.
/// The development database otherwise answers a `$in`, `$or` or range on a multikey field (and a
/// range of page numbers) by reading the whole collection: 120-200 ms whatever the discussion's
/// size, where the sorted form reads only the matching keys (1-5 ms, measured). On MongoDB the
/// same index serves the filter and the order.
pub(super) fn by_index(path: &str) -> Document {
    doc! { "$sort": { path: 1 } }
}

/// The `$or` of full-slug ranges, as a query on pages and as a condition on `$$c`.
pub(super) fn descendant_ranges(roots: &[FullSlug]) -> (Document, Bson) {
    let mut query = Vec::new();
    let mut cond = Vec::new();
    for root in roots {
        let (lo, hi) = root.descendant_range();
        query.push(doc! { FULL_SLUGS: { "$gte": &lo, "$lt": &hi } });
        cond.push(doc! { "$and": [
            { "$gte": ["$$c.full_slug", &lo] },
            { "$lt": ["$$c.full_slug", &hi] },
        ] });
    }
    (doc! { "$or": query }, doc! { "$or": cond }.into())
}
