//! The layouts' reads through the read cache.

use std::collections::HashMap;
use std::sync::Arc;

use mongodb::bson::Bson;

use super::{weight, ReadCache};
use crate::domain::tree::Listing;
use crate::domain::{Comment, Discussion, FullSlug, Layout, Page, Slug, Window};
use crate::store::api::CommentStore;
use crate::store::router::registry::Layouts;
use crate::store::shared::error::StoreResult;
use crate::store::shared::scope::ReadScope;

/// A layout's reads through the cache (what the API reads with); writes, and reads the store
/// makes for its own writes, go to the layout itself.
pub(crate) struct CachedLayout {
    layouts: Arc<Layouts>,
    layout: Layout,
    cache: Arc<ReadCache>,
}

impl CachedLayout {
    pub(crate) fn new(layouts: Arc<Layouts>, layout: Layout, cache: Arc<ReadCache>) -> Self {
        Self {
            layouts,
            layout,
            cache,
        }
    }

    fn inner(&self) -> &dyn CommentStore {
        self.layouts.get(self.layout)
    }
}

/// A batch of keys as a set: a request's dataloader gathers a level's keys in no fixed order,
/// and the result (a map, or comments in the discussion's order) does not depend on it.
fn set<T: std::fmt::Display + Ord>(keys: &[T]) -> String {
    let mut sorted: Vec<&T> = keys.iter().collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    for key in sorted {
        out.push_str(&key.to_string());
        out.push(' ');
    }
    out
}

fn page_weight(page: &Page<Arc<Comment>>) -> usize {
    64 + weight(&page.items)
}

#[async_trait::async_trait]
impl CommentStore for CachedLayout {
    fn promotes_to(&self) -> Option<Layout> {
        self.inner().promotes_to()
    }

    fn posts_from_kept(&self) -> bool {
        self.inner().posts_from_kept()
    }

    fn ranks_in_memory(&self) -> bool {
        self.inner().ranks_in_memory()
    }

    fn import_scratch(&self) -> Layout {
        self.inner().import_scratch()
    }

    async fn replace(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        current: &Comment,
        next: &Comment,
        events: &[crate::domain::Event],
    ) -> StoreResult<bool> {
        self.inner()
            .replace(scope, discussion, current, next, events)
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
        self.inner()
            .replace_in(session, scope, discussion, current, next)
            .await
    }

    async fn list(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        listing: Listing,
        window: &Window,
    ) -> StoreResult<Page<Arc<Comment>>> {
        let read = self.inner().list(scope, discussion, listing, window);
        self.cache
            .through(
                discussion,
                || format!("list {listing:?} {window:?}"),
                read,
                page_weight,
            )
            .await
    }

    async fn list_shallow(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        listing: Listing,
        window: &Window,
    ) -> StoreResult<Page<Arc<Comment>>> {
        let read = self
            .inner()
            .list_shallow(scope, discussion, listing, window);
        self.cache
            .through(
                discussion,
                || format!("shallow {listing:?} {window:?}"),
                read,
                page_weight,
            )
            .await
    }

    async fn posted_after(
        &self,
        discussion: &Discussion,
        after: Option<&Comment>,
        limit: usize,
    ) -> StoreResult<Page<Arc<Comment>>> {
        self.inner().posted_after(discussion, after, limit).await
    }

    async fn by_slugs(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        slugs: &[Slug],
    ) -> StoreResult<Vec<Arc<Comment>>> {
        let read = self.inner().by_slugs(scope, discussion, slugs);
        self.cache
            .through(
                discussion,
                || format!("slugs {}", set(slugs)),
                read,
                |found: &Vec<Arc<Comment>>| weight(found),
            )
            .await
    }

    fn home_of(&self, scope: &ReadScope, discussion: &Discussion, slug: &Slug) -> Option<Bson> {
        self.inner().home_of(scope, discussion, slug)
    }

    async fn by_homes(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        wanted: &[(Slug, Option<Bson>)],
    ) -> StoreResult<Vec<Arc<Comment>>> {
        self.inner().by_homes(scope, discussion, wanted).await
    }

    async fn replies(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        parents: &[Slug],
        window: &Window,
    ) -> StoreResult<HashMap<Slug, Page<Arc<Comment>>>> {
        let read = self.inner().replies(scope, discussion, parents, window);
        self.cache
            .through(
                discussion,
                || format!("replies {} {window:?}", set(parents)),
                read,
                |pages: &HashMap<_, Page<Arc<Comment>>>| pages.values().map(page_weight).sum(),
            )
            .await
    }

    async fn sub_discussions(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
        window: &Window,
    ) -> StoreResult<HashMap<FullSlug, Page<Arc<Comment>>>> {
        let read = self
            .inner()
            .sub_discussions(scope, discussion, roots, window);
        self.cache
            .through(
                discussion,
                || format!("subs {} {window:?}", set(roots)),
                read,
                |pages: &HashMap<_, Page<Arc<Comment>>>| pages.values().map(page_weight).sum(),
            )
            .await
    }

    async fn sub_discussion_counts(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
    ) -> StoreResult<HashMap<FullSlug, u64>> {
        let read = self.inner().sub_discussion_counts(scope, discussion, roots);
        self.cache
            .through(
                discussion,
                || format!("counts {}", set(roots)),
                read,
                |counts: &HashMap<_, u64>| 64 + counts.len() * 96,
            )
            .await
    }
}
