//! `NameStore`: the display names moderators reserve.

use async_trait::async_trait;

use crate::domain::{Event, ReservedName};
use crate::store::shared::error::StoreResult;

/// The names moderators reserved, one per name key (`domain::name_key`): a small collection,
/// read whole (each process keeps a copy) and written by key.
#[async_trait]
pub trait NameStore: Send + Sync {
    /// Stores a reservation, replacing one of the same key (its reason, moderator and time),
    /// with `events` in its transaction.
    async fn reserve(&self, reserved: &ReservedName, events: &[Event]) -> StoreResult<()>;

    /// Removes the reservation of this key; returns it, if there was one. The events
    /// `announce` gives for it are written with the removal.
    async fn release(
        &self,
        key: &str,
        announce: &(dyn for<'r> Fn(&'r ReservedName) -> Vec<Event> + Send + Sync),
    ) -> StoreResult<Option<ReservedName>>;

    /// How many names are reserved.
    async fn count(&self) -> StoreResult<u64>;

    /// Every reservation, by key (at most `limit`; the service keeps the collection under it).
    async fn all(&self, limit: u64) -> StoreResult<Vec<ReservedName>>;

    /// [`NameStore::all`], for a process's background read of the list: not counted in the
    /// store's command counter (it would land inside the counts of unrelated requests).
    async fn poll(&self, limit: u64) -> StoreResult<Vec<ReservedName>>;
}
