//! `ModerationStore`: bans, the moderators seen acting, and the moderation log.

use std::sync::Arc;

use async_trait::async_trait;

use crate::domain::moderation::{Ban, LogEntry, LogFilter, Logged, UserId};
use crate::domain::paging::Cursor;
use crate::domain::{Author, Event, Micros, Page, Window};
use crate::store::shared::error::StoreResult;

/// Bans, the moderators seen acting, and the moderation log: what moderation keeps apart from
/// discussions and comments, the same in every layout.
#[async_trait]
pub trait ModerationStore: Send + Sync {
    /// The ban stored for the user with this id (a token's `sub`), expired or not, as this
    /// process knows it: read at most 5 s ago (`BAN_STATE_LIFETIME`), or as this process last
    /// stored it. At most one database command; none while the state is kept.
    async fn ban_of(&self, user: &str) -> StoreResult<Option<Arc<Ban>>>;

    /// Stores a ban, replacing the user's earlier one, with `events` in its transaction.
    async fn ban(&self, ban: &Ban, events: &[Event]) -> StoreResult<()>;

    /// Removes the user's ban; returns the ban removed (expired or not), if there was one. The
    /// events `announce` gives for the ban removed are written with the removal.
    async fn unban(
        &self,
        user: &UserId,
        announce: &(dyn for<'b> Fn(&'b Ban) -> Vec<Event> + Send + Sync),
    ) -> StoreResult<Option<Ban>>;

    /// Records that a moderator token with this author made a mutation (one write per process
    /// and moderator; none after the first).
    async fn moderator_acted(&self, moderator: &Author) -> StoreResult<()>;

    /// Whether a moderator token with this id has made a mutation on the service.
    async fn is_moderator(&self, user: &UserId) -> StoreResult<bool>;

    /// Appends an action to the moderation log; returns it with its number.
    async fn record(&self, logged: Logged) -> StoreResult<LogEntry>;

    /// One page of the moderation log in stored order (oldest first; the API lists it newest
    /// first): a range of entry numbers, or with a `filter` one action's or one moderator's
    /// entries (newest-first windows only: the first page or one before a cursor).
    async fn log_page(&self, window: &Window, filter: &LogFilter) -> StoreResult<Page<LogEntry>>;

    /// A page of the bans in force at `now`, newest first, after the `Ban` cursor `after`.
    async fn bans_page(
        &self,
        after: Option<&Cursor>,
        limit: usize,
        now: Micros,
    ) -> StoreResult<Page<Ban>>;
}
