//! `Storage`, everything the API layer needs from storage, as the router provides it: one
//! accessor per capability, each a narrow trait.

use std::sync::Arc;

use super::{
    ChangeFeed, CommentStore, DiscussionStore, EventStore, GuestStore, Health, HeldStore,
    HistoryStore, ImportStore, ModerationStore, MoveStore, NameStore, NotificationStore, PostStore,
    ServerStore, VoteStore, WebhookStore,
};
use crate::domain::Layout;
use crate::store::shared::error::StoreResult;

/// Everything the API layer needs from storage, one capability per accessor: a caller holds
/// (or passes on) the narrow trait it uses.
pub trait Storage: Send + Sync {
    /// Discussion metadata, shared by every layout.
    fn discussions(&self) -> &dyn DiscussionStore;

    /// Bans, the moderators seen acting, and the moderation log.
    fn moderation(&self) -> &dyn ModerationStore;

    /// The display names moderators reserved.
    fn names(&self) -> &dyn NameStore;

    /// Held comments (waiting for a moderator), shared by every layout.
    fn held(&self) -> &dyn HeldStore;

    /// One author's comments across discussions and layouts.
    fn history(&self) -> &dyn HistoryStore;

    /// The implementation of a layout (`Unsupported` when it is not available).
    fn layout(&self, layout: Layout) -> StoreResult<&dyn CommentStore>;

    /// Posting comments and changing posted ones.
    fn posting(&self) -> &dyn PostStore;

    /// Votes and ranked lists.
    fn votes(&self) -> &dyn VoteStore;

    /// Moves between layouts.
    fn moves(&self) -> &dyn MoveStore;

    /// Imports, and the record of what they brought in.
    fn imports(&self) -> &dyn ImportStore;

    /// Whether the database answers, and the store's metrics.
    fn health(&self) -> &dyn Health;

    /// The feed of posts and changes.
    fn changes(&self) -> &dyn ChangeFeed;

    /// The installation's own settings: its key, the migrations of its data.
    fn server(&self) -> &dyn ServerStore;

    /// What guest posting keeps (spent proofs of work).
    fn guests(&self) -> &dyn GuestStore;

    /// The event log.
    fn events(&self) -> &dyn EventStore;

    /// A person's own records (their export and erasure).
    fn personal(&self) -> &dyn super::PersonalStore;

    /// Webhook endpoints and their deliveries.
    fn webhooks(&self) -> &dyn WebhookStore;

    /// Inboxes, follows and people's settings.
    fn notifications(&self) -> &dyn NotificationStore;

    /// Whether what an execution read is still current (the read cache's generations); `None`
    /// without the read cache, when nothing can tell.
    fn freshness(&self) -> Option<&dyn crate::store::Freshness> {
        None
    }
}

/// Storage as the API layer holds it.
pub type DynStorage = Arc<dyn Storage>;
