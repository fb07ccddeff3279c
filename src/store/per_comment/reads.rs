//! The per-comment reads and the compare-and-set replace of a comment.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};

use super::numbered::Numbering;
use super::sizes::remember_sizes;
use super::subtree::{self};
use super::*;
use crate::domain::tree::Listing;
use crate::domain::{
    share_all, shared_pages, Comment, Discussion, FullSlug, Layout, Page, Slug, Window,
};
use crate::store::api::CommentStore;
use crate::store::per_comment::hints::Hints;
use crate::store::shared::bson::{corrupt, int_field, to_count};
use crate::store::shared::docs::{replace_update, unchanged_filter, CommentDoc};
use crate::store::shared::error::StoreResult;
use crate::store::shared::order::cursor_filter;
use crate::store::shared::scope::ReadScope;
use crate::store::shared::writer;
/// Roots grouped by depth: roots of one depth have full slugs of one length and cannot nest, so
/// a prefix of that length names the root a descendant belongs to.
pub(super) fn roots_by_len(roots: &[FullSlug]) -> BTreeMap<usize, Vec<&FullSlug>> {
    let mut groups: BTreeMap<usize, Vec<&FullSlug>> = BTreeMap::new();
    for root in roots {
        groups.entry(root.as_str().len()).or_default().push(root);
    }
    groups
}

pub(super) fn ranges(roots: &[&FullSlug]) -> Vec<Document> {
    roots
        .iter()
        .map(|root| {
            let (lo, hi) = root.descendant_range();
            doc! { "full_slug": { "$gte": lo, "$lt": hi } }
        })
        .collect()
}

/// The filter of a guarded update of `current`: its fields as read. It names the comment's
/// `_id` first where the read that found it kept it: the development database answers a filter
/// of `discussion_id`, `slug` and more fields by reading every comment of the discussion (42 ms
/// at 20 000), and one that starts with `_id` from that document alone. Otherwise the
/// discussion comes first: `slug` alone leads no index (it read every comment of every
/// discussion).
fn guard(scope: &ReadScope, discussion: &Discussion, current: &Comment) -> StoreResult<Document> {
    let mut filter = Document::new();
    if let Some(id) = scope.slot::<Kept>().ids.get(&discussion.id, &current.slug) {
        filter.insert("_id", id);
    }
    filter.insert("discussion_id", discussion.id.as_str());
    filter.extend(unchanged_filter("", current)?);
    Ok(filter)
}

#[async_trait]
impl CommentStore for PerComment {
    fn promotes_to(&self) -> Option<Layout> {
        None
    }

    /// A post reads the discussion's thread counts first.
    fn posts_from_kept(&self) -> bool {
        false
    }

    fn ranks_in_memory(&self) -> bool {
        false
    }

    fn import_scratch(&self) -> Layout {
        Layout::Embedded
    }

    async fn replace(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        current: &Comment,
        next: &Comment,
        events: &[crate::domain::Event],
    ) -> StoreResult<bool> {
        let filter = guard(scope, discussion, current)?;
        writer::replace_outside(
            &self.writer,
            &self.discussions,
            (&discussion.id, &next.slug),
            (&self.coll, None),
            (filter, replace_update("", next)?),
            (crate::store::changes::change_mark(current, next), events),
        )
        .await
    }

    async fn replace_in(
        &self,
        session: &mut mongodb::ClientSession,
        scope: &ReadScope,
        discussion: &Discussion,
        current: &Comment,
        next: &Comment,
    ) -> StoreResult<bool> {
        let filter = guard(scope, discussion, current)?;
        writer::replace_within(
            session,
            &self.discussions,
            &discussion.id,
            &self.coll,
            (filter, replace_update("", next)?),
            crate::store::changes::change_mark(current, next),
        )
        .await
    }

    async fn list(
        &self,
        _scope: &ReadScope,
        discussion: &Discussion,
        listing: Listing,
        window: &Window,
    ) -> StoreResult<Page<Arc<Comment>>> {
        let numbered = match listing {
            Listing::Chronological => Some(Numbering::ALL),
            Listing::Threads => Some(Numbering::THREADS),
            Listing::Threaded => None,
        };
        if let (Some(numbering), true) = (numbered, Hints::of(discussion).sequenced) {
            if let Some(page) = self.numbered_page(discussion, numbering, window).await? {
                return Ok(page.shared());
            }
        }
        if let (Listing::Threaded, true, Some(blocks)) = (
            listing,
            Hints::of(discussion).sequenced,
            Hints::of(discussion).thread_blocks.as_deref(),
        ) {
            if let Some(page) = self.threaded_page(discussion, blocks, window).await? {
                return Ok(page.shared());
            }
        }
        let mut filter = doc! { "discussion_id": discussion.id.as_str() };
        let fields: &[&str] = match listing {
            Listing::Chronological => &["posted", "slug"],
            Listing::Threaded => &["full_slug"],
            Listing::Threads => {
                filter.insert("parent", Bson::Null);
                &["posted", "slug"]
            }
        };
        self.find_page(discussion, filter, fields, window)
            .await
            .map(Page::shared)
    }

    /// Comments by slug; where the discussion keeps subtree sizes, the request remembers each
    /// one's replies' sizes (a page of its sub-discussion then starts from them).
    async fn by_slugs(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        slugs: &[Slug],
    ) -> StoreResult<Vec<Arc<Comment>>> {
        let slugs: Vec<&str> = slugs.iter().map(Slug::as_str).collect();
        let docs: Vec<CommentDoc> = self
            .coll
            .find(doc! { "discussion_id": discussion.id.as_str(), "slug": { "$in": slugs } })
            .await?
            .try_collect()
            .await?;
        Ok(share_all(read_docs(scope, discussion, docs)))
    }

    fn home_of(&self, scope: &ReadScope, discussion: &Discussion, slug: &Slug) -> Option<Bson> {
        scope.slot::<Kept>().ids.get(&discussion.id, slug)
    }

    /// Comments by document id where their homes give one (50 by id: 1.9 ms on the development
    /// database, 2.9 ms by slug, at 1 000 or 100 000 comments), the others by slug.
    async fn by_homes(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        wanted: &[(Slug, Option<Bson>)],
    ) -> StoreResult<Vec<Arc<Comment>>> {
        let ids: Vec<&Bson> = wanted
            .iter()
            .filter_map(|(_, home)| home.as_ref())
            .collect();
        let mut found = Vec::new();
        if !ids.is_empty() {
            let docs: Vec<CommentDoc> = self
                .coll
                .find(doc! { "_id": { "$in": ids }, "discussion_id": discussion.id.as_str() })
                .await?
                .try_collect()
                .await?;
            found = read_docs(scope, discussion, docs);
        }
        let mut found = share_all(found);
        let rest = crate::store::api::not_at_home(wanted, &found);
        found.retain(|c| wanted.iter().any(|(slug, _)| slug == &c.slug));
        if !rest.is_empty() {
            found.extend(self.by_slugs(scope, discussion, &rest).await?);
        }
        Ok(found)
    }

    async fn replies(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        parents: &[Slug],
        window: &Window,
    ) -> StoreResult<HashMap<Slug, Page<Arc<Comment>>>> {
        let mut result: HashMap<Slug, Page<Comment>> =
            parents.iter().map(|p| (p.clone(), Page::empty())).collect();
        if parents.is_empty() {
            return Ok(shared_pages(result));
        }
        // The replies of one comment whose replies' sizes the request read: the page ends (a
        // backward one starts) at a known reply, so the read stops at its time instead of
        // reading every reply.
        let bound = match parents {
            [parent] => scope
                .slot::<Kept>()
                .reply_sizes
                .get(&discussion.id, parent)
                .and_then(|sizes| subtree::replies_bound(&sizes, window)),
            _ => None,
        };
        let mut pages = self
            .replies_read(discussion, parents, window, bound)
            .await?;
        let full = |pages: &[(String, Page<Comment>)]| {
            pages
                .iter()
                .any(|(_, p)| p.has_next && p.items.len() == window.limit())
        };
        if bound.is_some() && !full(&pages) {
            // The sizes promised more replies before the bound than there are: read them all.
            pages = self.replies_read(discussion, parents, window, None).await?;
        }
        for (parent, page) in pages {
            result.insert(Slug::from_stored(parent), page);
        }
        Ok(shared_pages(result))
    }

    async fn sub_discussions(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
        window: &Window,
    ) -> StoreResult<HashMap<FullSlug, Page<Arc<Comment>>>> {
        let mut result: HashMap<FullSlug, Page<Comment>> = HashMap::new();
        for (len, group) in roots_by_len(roots) {
            if let [root] = group.as_slice() {
                if let Some(page) = self.sized_sub_page(scope, discussion, root, window).await? {
                    result.insert((*root).clone(), page);
                    continue;
                }
                let (lo, hi) = root.descendant_range();
                let mut filter = doc! {
                    "discussion_id": discussion.id.as_str(),
                    "full_slug": { "$gte": lo, "$lt": hi },
                };
                if let Some(cursor) = cursor_filter(window) {
                    filter = doc! { "$and": [filter, cursor] };
                }
                let page = self
                    .find_page(discussion, filter, &["full_slug"], &window.without_cursor())
                    .await?;
                result.insert((*root).clone(), page);
                continue;
            }
            let mut filter = doc! {
                "discussion_id": discussion.id.as_str(),
                "$or": ranges(&group),
            };
            if let Some(cursor) = cursor_filter(window) {
                filter = doc! { "$and": [filter, cursor] };
            }
            let direction = if window.is_backward() { -1 } else { 1 };
            let pipeline = vec![
                doc! { "$match": filter },
                doc! { "$sort": { "full_slug": direction } },
                doc! { "$group": {
                    "_id": { "$substrBytes": ["$full_slug", 0, i64::try_from(len).unwrap_or(0)] },
                    "items": { "$firstN": { "input": "$$ROOT", "n": group_take(window) } },
                } },
            ];
            for (root, page) in self
                .grouped_pages(discussion, pipeline, group.len(), window)
                .await?
            {
                result.insert(FullSlug::from_stored(root), page);
            }
        }
        for root in roots {
            result.entry(root.clone()).or_insert_with(Page::empty);
        }
        Ok(shared_pages(result))
    }

    async fn sub_discussion_counts(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
    ) -> StoreResult<HashMap<FullSlug, u64>> {
        if let Some(counts) = self.stored_sizes(scope, discussion, roots).await? {
            return Ok(counts);
        }
        let mut result: HashMap<FullSlug, u64> = roots.iter().map(|r| (r.clone(), 0)).collect();
        for (len, group) in roots_by_len(roots) {
            let pipeline = vec![
                doc! { "$match": {
                    "discussion_id": discussion.id.as_str(),
                    "$or": ranges(&group),
                } },
                doc! { "$group": {
                    "_id": { "$substrBytes": ["$full_slug", 0, i64::try_from(len).unwrap_or(0)] },
                    "n": { "$sum": 1 },
                } },
            ];
            let groups: Vec<Document> = self
                .raw
                .aggregate(pipeline)
                .batch_size(first_batch(group.len()))
                .await?
                .try_collect()
                .await?;
            for group in groups {
                let root = group.get_str("_id").map_err(corrupt)?.to_owned();
                result.insert(
                    FullSlug::from_stored(root),
                    to_count(int_field(&group, "n")?),
                );
            }
        }
        Ok(result)
    }
}

/// Comments read by slug or id, remembered as [`CommentStore::by_slugs`] says.
fn read_docs(scope: &ReadScope, discussion: &Discussion, docs: Vec<CommentDoc>) -> Vec<Comment> {
    docs.into_iter()
        .map(|mut d| {
            if Hints::of(discussion).subtree_sizes {
                remember_sizes(scope, &discussion.id, &mut d);
            }
            if let Some(id) = d.id.take() {
                let slug = Slug::from_stored(d.slug.clone());
                scope.slot::<Kept>().ids.remember(&discussion.id, slug, id);
            }
            d.into_comment(&discussion.id)
        })
        .collect()
}
