//! `EventStore`: the event log, read.

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::domain::{EventRecord, EventType, Micros};
use crate::store::shared::error::StoreResult;

/// The event log, as the pull feed, the webhook dispatcher and the live queue read it.
#[async_trait]
pub trait EventStore: Send + Sync {
    /// Events after `after` (by id), of `kinds` (every kind when empty), committed before
    /// `before`, oldest first, at most `limit`: one range of ids (per kind).
    async fn page(
        &self,
        after: Option<&str>,
        kinds: &[EventType],
        before: Micros,
        limit: usize,
    ) -> StoreResult<Vec<EventRecord>>;

    /// The newest events of `kinds` (not empty) with ids below `before` (every one without
    /// it), newest first, at most `limit`: one bounded range of the `{type, _id}` index per
    /// kind, read backwards.
    async fn latest(
        &self,
        kinds: &[EventType],
        before: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<EventRecord>>;

    /// The events of `kinds` committed from now on, as they are committed (on any replica).
    fn committed(&self, kinds: &[EventType]) -> BoxStream<'static, EventRecord>;
}
