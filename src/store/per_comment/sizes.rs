//! Sub-discussion pages bounded by the subtree sizes each comment carries.

use std::collections::HashMap;

use futures::TryStreamExt;
use mongodb::bson::{doc, Document};

use super::subtree::{self, Head, Plan};
use super::*;
use crate::domain::{Comment, Cursor, Discussion, DiscussionId, FullSlug, Page, Slug, Window};
use crate::store::per_comment::hints::Hints;
use crate::store::shared::docs::CommentDoc;
use crate::store::shared::error::StoreResult;
use crate::store::shared::scope::ReadScope;
impl PerComment {
    /// A page of `root`'s sub-discussion in a discussion whose comments carry subtree sizes,
    /// read as a range that ends where the sizes say the page ends (see `subtree`). A backward
    /// page is the same walk over the runs before its cursor (or over the whole sub-discussion,
    /// from its end), where the sizes say how many comments they hold. `None` when the sizes
    /// cannot answer (another discussion, a cursor outside the sub-discussion or of another
    /// order, a comment without sizes, nothing after the start, a page shorter than the sizes
    /// promised); the caller then reads the page the general way.
    pub(super) async fn sized_sub_page(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        root: &FullSlug,
        window: &Window,
    ) -> StoreResult<Option<Page<Comment>>> {
        if !Hints::of(discussion).subtree_sizes {
            return Ok(None);
        }
        let (after, before) = match window {
            Window::Offset { .. } | Window::FromEnd { .. } | Window::After { cursor: None, .. } => {
                (None, None)
            }
            Window::After {
                cursor: Some(Cursor::Threaded(after)),
                ..
            } => (Some(after), None),
            Window::Before {
                cursor: Cursor::Threaded(before),
                ..
            } => (None, Some(before)),
            Window::After { .. } | Window::Before { .. } => return Ok(None),
        };
        let parents = match before {
            Some(before) => subtree::parents_before(root, before),
            None => subtree::parents_after(root, after),
        };
        let Some(parents) = parents else {
            return Ok(None);
        };
        let Some(replies) = self.reply_heads(scope, discussion, &parents).await? else {
            return Ok(None);
        };
        let replies = replies.into_iter().flatten();
        let mut heads: Vec<Head> = match before {
            Some(before) => subtree::heads_before(replies.collect(), before),
            None => replies
                .filter(|head| after.is_none_or(|after| head.full_slug > *after))
                .collect(),
        };
        heads.sort_by(|a, b| a.full_slug.cmp(&b.full_slug));
        if heads.is_empty() && before.is_none() {
            return Ok(None);
        }
        // Where the page lies among the runs (which hold just what is past the cursor).
        let len: Option<u64> = heads.iter().map(|head| head.size).sum();
        let Some(span) = window.without_cursor().span(len, None) else {
            return Ok(None);
        };
        if span.count == 0 {
            return Ok(Some(window.page(Vec::new())));
        }
        let (skip, take) = (span.from, span.count);
        let mut deeper = 0;
        let (from, skip, to, expected) = loop {
            match subtree::plan(&heads, skip, take, deeper < subtree::MAX_DEEPER) {
                Plan::Deeper(wide) => {
                    let parents: Vec<FullSlug> =
                        wide.iter().map(|&i| heads[i].full_slug.clone()).collect();
                    let Some(replies) = self.reply_heads(scope, discussion, &parents).await? else {
                        return Ok(None);
                    };
                    heads = subtree::widen(heads, &wide, replies);
                    deeper += 1;
                }
                Plan::Read {
                    from,
                    skip,
                    to,
                    expected,
                } => break (from, skip, to, expected),
            }
        };
        let lower = heads[from].full_slug.as_str();
        let upper = match (to, before) {
            (Some(last), _) => heads[last].end(),
            (None, Some(before)) => before.as_str().to_owned(),
            (None, None) => root.descendant_range().1,
        };
        self.threaded_range(
            discussion,
            doc! { "$gte": lower, "$lt": upper },
            (skip, take),
            expected,
            false,
            window,
        )
        .await
    }

    /// The replies of each of `parents` as heads of their subtrees, in threaded order, from the
    /// parents' `reply_sizes`: those this request read already, and the others in one query on
    /// the full slug index (an `$or` of equalities: one index point each). `None` when one of
    /// them is missing or keeps no sizes.
    pub(super) async fn reply_heads(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        parents: &[FullSlug],
    ) -> StoreResult<Option<Vec<Vec<Head>>>> {
        let id = &discussion.id;
        let missing: Vec<&FullSlug> = parents
            .iter()
            .filter(|p| {
                scope
                    .slot::<Kept>()
                    .reply_sizes
                    .get(id, &p.slug())
                    .is_none()
            })
            .collect();
        if !missing.is_empty() {
            let branches: Vec<Document> = missing
                .iter()
                .map(|full| doc! { "discussion_id": id.as_str(), "full_slug": full.as_str() })
                .collect();
            let docs: Vec<CommentDoc> = self
                .coll
                .find(doc! { "$or": branches })
                .await?
                .try_collect()
                .await?;
            for mut doc in docs {
                remember_sizes(scope, id, &mut doc);
            }
        }
        let mut out = Vec::with_capacity(parents.len());
        for parent in parents {
            let Some(sizes) = scope.slot::<Kept>().reply_sizes.get(id, &parent.slug()) else {
                return Ok(None);
            };
            out.push(
                sizes
                    .into_iter()
                    .map(|(full, size)| Head::whole(full, i64::try_from(size).ok().map(|n| n - 1)))
                    .collect(),
            );
        }
        Ok(Some(out))
    }

    /// The sizes of `roots`' sub-discussions as their comments carry them (from the roots read
    /// in this request, or one query). `None` when the discussion does not keep them or a root
    /// does not carry them.
    pub(super) async fn stored_sizes(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
    ) -> StoreResult<Option<HashMap<FullSlug, u64>>> {
        if !Hints::of(discussion).subtree_sizes || roots.is_empty() {
            return Ok(None);
        }
        let Some(replies) = self.reply_heads(scope, discussion, roots).await? else {
            return Ok(None);
        };
        Ok(Some(
            roots
                .iter()
                .cloned()
                .zip(
                    replies
                        .iter()
                        .map(|heads| heads.iter().filter_map(|h| h.size).sum()),
                )
                .collect(),
        ))
    }
}

/// Remembers in the request's scope the sizes of a stored comment's replies' subtrees, where
/// it carries them: a comment with its own size whose replies' sizes add up to it (one from
/// before the discussion kept sizes has none, and is read the general way).
pub(super) fn remember_sizes(scope: &ReadScope, id: &DiscussionId, doc: &mut CommentDoc) {
    let Some(descendants) = doc.descendants else {
        return;
    };
    let full = FullSlug::from_stored(doc.full_slug.clone());
    let sizes = subtree::reply_sizes(&full, doc.reply_sizes.take().as_ref());
    let total: u64 = sizes.iter().map(|(_, n)| n).sum();
    if i64::try_from(total).ok() == Some(descendants) {
        scope
            .slot::<Kept>()
            .reply_sizes
            .remember(id, Slug::from_stored(doc.slug.clone()), sizes);
    }
}
