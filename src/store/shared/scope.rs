//! `ReadScope`: what one request has read, one slot per layout, so a layout reads a document
//! once per request; and the memo types layouts keep in their slots.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use crate::domain::{Comment, DiscussionId, Slug};

/// Values loaded at most once per discussion; concurrent callers share one load.
pub(crate) struct Memo<V> {
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
    pub(crate) async fn get_or_load<E, F, Fut>(
        &self,
        id: &DiscussionId,
        load: F,
    ) -> Result<Arc<V>, E>
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
    pub(crate) fn peek(&self, id: &DiscussionId) -> Option<Arc<V>> {
        let cells = self.cells.lock().unwrap_or_else(|p| p.into_inner());
        cells.get(id)?.get().cloned()
    }
}

/// What one request has read, in one slot per layout: each layout defines what its slot keeps
/// (a type of its own) and takes it with `ReadScope::slot`. A write in the request replaces the
/// scope with a fresh one (never clears slots).
#[derive(Default)]
pub struct ReadScope {
    slots: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

/// Values kept per comment read so far, by discussion and slug.
pub(crate) struct BySlug<V> {
    values: Mutex<HashMap<(DiscussionId, Slug), V>>,
}

impl<V> Default for BySlug<V> {
    fn default() -> Self {
        Self {
            values: Mutex::default(),
        }
    }
}

impl<V: Clone> BySlug<V> {
    /// Keeps `value` for the comment `slug`.
    pub(crate) fn remember(&self, id: &DiscussionId, slug: Slug, value: V) {
        let mut map = self.values.lock().unwrap_or_else(|p| p.into_inner());
        map.insert((id.clone(), slug), value);
    }

    /// What was kept for the comment `slug`, if anything.
    pub(crate) fn get(&self, id: &DiscussionId, slug: &Slug) -> Option<V> {
        let map = self.values.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&(id.clone(), slug.clone())).cloned()
    }
}

impl BySlug<Comment> {
    /// Remembers comments as read.
    pub(crate) fn remember_all(&self, comments: &[Comment]) {
        let mut map = self.values.lock().unwrap_or_else(|p| p.into_inner());
        for c in comments {
            map.insert((c.discussion_id.clone(), c.slug.clone()), c.clone());
        }
    }
}

impl ReadScope {
    /// A fresh, empty scope.
    pub fn new() -> Self {
        Self::default()
    }

    /// The slot of type `T` (a layout's), empty the first time it is asked for.
    pub(crate) fn slot<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(
                slots
                    .entry(TypeId::of::<T>())
                    .or_insert_with(|| Arc::new(T::default())),
            )
        };
        // Slots are keyed by their type, so the downcast cannot fail; were it to, the request
        // would only read again.
        slot.downcast::<T>().unwrap_or_default()
    }
}
