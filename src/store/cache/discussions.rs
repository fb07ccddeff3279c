//! Discussion documents through the read cache: by id, and by key (a key is remembered with the
//! generation of the discussion it named, so a change of that discussion, its key included,
//! makes the key be read again).

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;

use std::sync::atomic::Ordering;

use super::flights::{self, Flight};
use super::tracking::{covered, record, untracked};
use super::{discussion_weight, entry, Lookup, ReadCache};
use crate::domain::{Closing, Event, GuestPolicy};
use crate::domain::{
    Discussion, DiscussionId, DiscussionKey, DiscussionUpdate, ModerationMode, NewDiscussion, Page,
    Slug, Window,
};
use crate::store::api::DiscussionStore;
use crate::store::discussions::Discussions;
use crate::store::shared::error::StoreResult;

/// What a discussion document's entry is described by.
const DOCUMENT: &str = "discussion";

/// The discussions collection as the API reads it: documents of hot discussions from the
/// cache. Its own writes invalidate the discussion before they answer.
pub(crate) struct CachedDiscussions {
    inner: Discussions,
    cache: Arc<ReadCache>,
}

impl CachedDiscussions {
    pub(crate) fn new(inner: Discussions, cache: Arc<ReadCache>) -> Self {
        Self { inner, cache }
    }

    /// Stores what the database gave for a lookup (when there is one).
    fn keep(&self, lookup: Option<Lookup>, found: &Discussion) {
        if let Some(lookup) = lookup {
            self.cache
                .put(lookup, found.clone(), discussion_weight(found));
        }
    }

    /// Runs a write of discussion `id` and forgets what was read of it, whether it was made
    /// or not (it may have been made and its answer lost).
    async fn writing<T>(
        &self,
        id: &DiscussionId,
        write: impl std::future::Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        let written = write.await;
        self.cache.invalidate(id);
        written
    }
}

#[async_trait]
impl DiscussionStore for CachedDiscussions {
    async fn add(&self, new: NewDiscussion, events: &[Event]) -> StoreResult<Discussion> {
        self.inner.add(new, events).await
    }

    async fn ensure(&self, new: NewDiscussion, events: &[Event]) -> StoreResult<Discussion> {
        self.inner.ensure(new, events).await
    }

    /// Each document is one lookup, which counts towards its discussion's admission: a request
    /// reads a discussion's document once. Of concurrent misses of one document, one reads it
    /// and the others take it (if it has not changed meanwhile; else they read it too).
    async fn by_ids(&self, ids: &[DiscussionId]) -> StoreResult<Vec<Discussion>> {
        let mut found = Vec::with_capacity(ids.len());
        let mut missing = Vec::new();
        let mut lookups = Vec::new();
        let mut leads = Vec::new();
        let mut waits = Vec::new();
        for id in ids {
            let lookup = self.cache.lookup_with(id, DOCUMENT.into(), true);
            if let Some(cached) = lookup
                .as_ref()
                .and_then(|l| self.cache.get::<Discussion>(l))
            {
                found.push(cached);
                continue;
            }
            match lookup {
                Some(lookup) if lookup.admitted => match self.cache.flights.join(&lookup.key) {
                    Flight::Lead(lead) => {
                        missing.push(id.clone());
                        leads.push((id.clone(), lead));
                    }
                    Flight::Wait(waiting) => waits.push((id.clone(), lookup, waiting)),
                },
                lookup => {
                    missing.push(id.clone());
                    lookups.push((id.clone(), lookup));
                }
            }
        }
        if !missing.is_empty() {
            // Under the generations the lookups took, unless the cache was bypassed.
            let read = match lookups.iter().all(|(_, lookup)| lookup.is_some()) {
                true => covered(self.inner.by_ids(&missing)).await?,
                false => self.inner.by_ids(&missing).await?,
            };
            if read.len() < missing.len() {
                // A discussion that is not there: no generation says when it comes.
                untracked();
            }
            for (id, lookup) in lookups {
                if let Some(doc) = read.iter().find(|d| d.id == id) {
                    self.keep(lookup, doc);
                }
            }
            for (id, lead) in leads {
                // Not found: the lead is dropped, and its waiters read for themselves.
                if let Some(doc) = read.iter().find(|d| d.id == id) {
                    let stored = entry(doc.clone(), discussion_weight(doc));
                    self.cache
                        .entries
                        .insert(lead.key().clone(), stored.clone());
                    lead.land(stored);
                }
            }
            found.extend(read);
        }
        let mut again = Vec::new();
        let mut again_lookups = Vec::new();
        for (id, lookup, waiting) in waits {
            let landed = flights::wait(waiting)
                .await
                .filter(|_| self.cache.current(&lookup.key));
            match landed.and_then(|e| e.value.downcast_ref::<Discussion>().cloned()) {
                Some(doc) => {
                    self.cache.stats.shared.fetch_add(1, Ordering::Relaxed);
                    found.push(doc);
                }
                None => {
                    again.push(id);
                    again_lookups.push(lookup);
                }
            }
        }
        if !again.is_empty() {
            let read = covered(self.inner.by_ids(&again)).await?;
            if read.len() < again.len() {
                untracked();
            }
            for (id, lookup) in again.iter().zip(again_lookups) {
                if let Some(doc) = read.iter().find(|d| &d.id == id) {
                    self.keep(Some(lookup), doc);
                }
            }
            found.extend(read);
        }
        Ok(found)
    }

    /// A key whose discussion has not changed since it was read goes to the documents by id;
    /// the others are read by key, in one command.
    async fn by_keys(&self, keys: &[DiscussionKey]) -> StoreResult<Vec<Discussion>> {
        let mut named = Vec::new();
        let mut unknown: Vec<DiscussionKey> = Vec::new();
        for key in keys {
            match self.cache.id_of_key(key) {
                Some(id) => named.push((key.clone(), id)),
                None => unknown.push(key.clone()),
            }
        }
        let mut found = Vec::new();
        if !named.is_empty() {
            let ids: Vec<DiscussionId> = named.iter().map(|(_, id)| id.clone()).collect();
            let docs = self.by_ids(&ids).await?;
            // A discussion whose key changed meanwhile is looked for by key again.
            let kept: HashSet<&DiscussionKey> =
                docs.iter().filter_map(|d| d.key.as_ref()).collect();
            unknown.extend(
                named
                    .iter()
                    .filter(|(key, _)| !kept.contains(key))
                    .map(|(key, _)| key.clone()),
            );
            found.extend(docs.into_iter().filter(|d| {
                d.key
                    .as_ref()
                    .is_some_and(|k| named.iter().any(|(key, _)| key == k))
            }));
        }
        if unknown.is_empty() {
            return Ok(found);
        }
        let mark = self.cache.mark();
        // A read by key is tracked only when every key was found and none of their
        // discussions changed while it was read (recorded below).
        let read = covered(self.inner.by_keys(&unknown)).await?;
        if mark.is_none() || read.len() < unknown.len() {
            untracked();
        }
        if let Some(mark) = &mark {
            for doc in &read {
                let Some(key) = &doc.key else { continue };
                self.cache.remember_key(mark, key, &doc.id);
                let lookup = self
                    .cache
                    .lookup_since(mark, &doc.id, DOCUMENT.into(), true);
                match &lookup {
                    Some(l) => record(&doc.id, l.key.epoch, l.key.generation),
                    None => untracked(),
                }
                self.keep(lookup, doc);
            }
        }
        found.extend(read);
        Ok(found)
    }

    async fn list(&self, window: &Window) -> StoreResult<Page<Discussion>> {
        self.inner.list(window).await
    }

    async fn count(&self) -> StoreResult<u64> {
        self.inner.count().await
    }

    async fn set_pinned(
        &self,
        id: &DiscussionId,
        slug: &Slug,
        pinned: bool,
        events: &[Event],
    ) -> StoreResult<Discussion> {
        self.writing(id, self.inner.set_pinned(id, slug, pinned, events))
            .await
    }

    async fn set_locked(
        &self,
        id: &DiscussionId,
        locked: bool,
        events: &[Event],
    ) -> StoreResult<Discussion> {
        self.writing(id, self.inner.set_locked(id, locked, events))
            .await
    }

    async fn update(
        &self,
        id: &DiscussionId,
        update: &DiscussionUpdate,
        events: &[Event],
    ) -> StoreResult<Discussion> {
        self.writing(id, self.inner.update(id, update, events))
            .await
    }

    async fn set_moderation(
        &self,
        id: &DiscussionId,
        mode: ModerationMode,
        events: &[Event],
    ) -> StoreResult<Discussion> {
        self.writing(id, self.inner.set_moderation(id, mode, events))
            .await
    }

    async fn set_guests(
        &self,
        id: &DiscussionId,
        policy: Option<GuestPolicy>,
        events: &[Event],
    ) -> StoreResult<Discussion> {
        self.writing(id, self.inner.set_guests(id, policy, events))
            .await
    }

    async fn set_closing(
        &self,
        id: &DiscussionId,
        closing: Option<Closing>,
        events: &[Event],
    ) -> StoreResult<Discussion> {
        self.writing(id, self.inner.set_closing(id, closing, events))
            .await
    }
}
