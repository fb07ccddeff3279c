//! `DiscussionStore`: discussion metadata, shared by every layout.

use std::collections::HashMap;

use async_trait::async_trait;

use crate::domain::{
    Closing, Discussion, DiscussionId, DiscussionKey, DiscussionTitle, DiscussionUpdate, Event,
    GuestPolicy, Layout, ModerationMode, NewDiscussion, Page, Slug, Window,
};
use crate::store::shared::error::StoreResult;

/// Discussion metadata: creation, lookup (by id or by the host page's key), listing, locking.
#[async_trait]
pub trait DiscussionStore: Send + Sync {
    /// Creates a discussion with the given layout (no key, no URL).
    async fn create(&self, title: DiscussionTitle, layout: Layout) -> StoreResult<Discussion> {
        self.add(NewDiscussion::new(title, layout), &[]).await
    }

    /// Creates a discussion, with `events` in its transaction; `KeyTaken` when another
    /// discussion has its key.
    async fn add(&self, new: NewDiscussion, events: &[Event]) -> StoreResult<Discussion>;

    /// The discussion with the key of `new`, as it is (its title, URL and layout are kept), or
    /// `new`, created with it. Concurrent calls with one key, from any number of processes,
    /// give one discussion. Without a key, the same as [`DiscussionStore::add`]. `events` are
    /// written only when this call creates it.
    async fn ensure(&self, new: NewDiscussion, events: &[Event]) -> StoreResult<Discussion>;

    /// The discussions with these ids (missing ones are left out).
    async fn by_ids(&self, ids: &[DiscussionId]) -> StoreResult<Vec<Discussion>>;

    /// The discussions of `ids` (repeats and all), by id, in one read (missing ones are left
    /// out).
    async fn by_ids_map(
        &self,
        ids: &[DiscussionId],
    ) -> StoreResult<HashMap<DiscussionId, Discussion>> {
        let mut ids = ids.to_vec();
        ids.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        ids.dedup();
        Ok(self
            .by_ids(&ids)
            .await?
            .into_iter()
            .map(|d| (d.id.clone(), d))
            .collect())
    }

    /// The discussions with these keys (unknown ones are left out), in one database command.
    async fn by_keys(&self, keys: &[DiscussionKey]) -> StoreResult<Vec<Discussion>>;

    /// One page of discussions, oldest first.
    async fn list(&self, window: &Window) -> StoreResult<Page<Discussion>>;

    /// How many discussions exist.
    async fn count(&self) -> StoreResult<u64>;

    /// Pins the comment `slug` (last in pin order) or unpins it; pinning a pinned comment and
    /// unpinning one that is not pinned change nothing. `PinsFull` past
    /// [`Discussion::MAX_PINNED`]. Whether the comment exists is the caller's to check.
    async fn set_pinned(
        &self,
        id: &DiscussionId,
        slug: &Slug,
        pinned: bool,
        events: &[Event],
    ) -> StoreResult<Discussion>;

    /// Opens or closes a discussion for posting; returns it as it is now (`NotFound` if unknown).
    /// `events` are written with the change (as for every setter here).
    async fn set_locked(
        &self,
        id: &DiscussionId,
        locked: bool,
        events: &[Event],
    ) -> StoreResult<Discussion>;

    /// Sets a discussion's title and page address as `update` says; returns it as it is now
    /// (`NotFound` if unknown).
    async fn update(
        &self,
        id: &DiscussionId,
        update: &DiscussionUpdate,
        events: &[Event],
    ) -> StoreResult<Discussion>;

    /// Sets how a discussion moderates new comments; returns it as it is now (`NotFound` if
    /// unknown).
    async fn set_moderation(
        &self,
        id: &DiscussionId,
        mode: ModerationMode,
        events: &[Event],
    ) -> StoreResult<Discussion>;

    /// Sets whether a discussion takes guests' comments (`None`: the server's default);
    /// returns it as it is now (`NotFound` if unknown).
    async fn set_guests(
        &self,
        id: &DiscussionId,
        policy: Option<GuestPolicy>,
        events: &[Event],
    ) -> StoreResult<Discussion>;

    /// Sets when a discussion closes to new comments (`None`: as the server's default says);
    /// returns it as it is now (`NotFound` if unknown).
    async fn set_closing(
        &self,
        id: &DiscussionId,
        closing: Option<Closing>,
        events: &[Event],
    ) -> StoreResult<Discussion>;
}
