//! `ReadScope`: what one request has read, in named parts, so a layout reads a document once.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use mongodb::bson::Bson;
use tokio::sync::OnceCell;

use super::bucketed::PageInfo;
use crate::domain::tree::Thread;
use crate::domain::{Comment, DiscussionId, Slug};

/// Values loaded at most once per discussion; concurrent callers share one load.
pub struct Memo<V> {
    cells: Mutex<HashMap<DiscussionId, Arc<OnceCell<Arc<V>>>>>,
}

impl<V> Default for Memo<V> {
    fn default() -> Self {
        Self {
            cells: Mutex::default(),
        }
    }
}

impl<V: Send + Sync> Memo<V> {
    /// The value for `id`, loading it with `load` the first time it is asked for.
    pub async fn get_or_load<E, F, Fut>(&self, id: &DiscussionId, load: F) -> Result<Arc<V>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
    {
        let cell = self
            .cells
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(id.clone())
            .or_default()
            .clone();
        cell.get_or_try_init(|| async { load().await.map(Arc::new) })
            .await
            .cloned()
    }

    /// The value for `id` if it was loaded already (never loads).
    pub fn peek(&self, id: &DiscussionId) -> Option<Arc<V>> {
        let cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
        cells.get(id)?.get().cloned()
    }
}

/// Comments already read, by discussion and slug.
#[derive(Default)]
pub struct Seen {
    comments: Mutex<HashMap<(DiscussionId, Slug), Comment>>,
}

impl Seen {
    /// Remembers comments.
    pub fn remember(&self, comments: &[Comment]) {
        let mut map = self.comments.lock().unwrap_or_else(|p| p.into_inner());
        for c in comments {
            map.insert((c.discussion_id.clone(), c.slug.clone()), c.clone());
        }
    }

    /// A comment read before, if any.
    pub fn get(&self, id: &DiscussionId, slug: &Slug) -> Option<Comment> {
        let map = self.comments.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&(id.clone(), slug.clone())).cloned()
    }
}

/// What one request has read. Each layout that reads whole documents keeps them in a part of
/// its own; a write in the request replaces the scope with a fresh one (never clears parts).
#[derive(Default)]
pub struct ReadScope {
    /// Embedded layout: whole discussion documents, as threads.
    pub(super) documents: Memo<Thread>,
    /// Bucketed layout: each discussion's list of pages (without their comments).
    pub(super) page_lists: Memo<Vec<PageInfo>>,
    /// Bucketed layout: comments read so far (direct links and parents need no second read).
    pub(super) seen: Seen,
    /// Bucketed layout: the page (its `_id` and number) each comment read so far was found in.
    pub(super) pages_of: PagesOf,
}

/// Where comments were found: the `_id` and number of their page, by discussion and slug.
#[derive(Default)]
pub struct PagesOf {
    pages: Mutex<HashMap<(DiscussionId, Slug), (Bson, i64)>>,
}

impl PagesOf {
    /// Remembers that `comments` are in page `number`, whose `_id` is `page`.
    pub fn remember(&self, comments: &[Comment], page: &Bson, number: i64) {
        let mut map = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        for c in comments {
            map.insert(
                (c.discussion_id.clone(), c.slug.clone()),
                (page.clone(), number),
            );
        }
    }

    /// The page a comment was found in, if it was read.
    pub fn get(&self, id: &DiscussionId, slug: &Slug) -> Option<(Bson, i64)> {
        let map = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&(id.clone(), slug.clone())).cloned()
    }
}

impl ReadScope {
    /// A fresh, empty scope.
    pub fn new() -> Self {
        Self::default()
    }
}
