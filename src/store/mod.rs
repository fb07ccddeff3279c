//! The storage layer: the traits the API uses, the router over the three layouts, and the only
//! code that talks to MongoDB. Each layout is a folder that owns everything it knows; what the
//! layouts share, and each feature kept outside them, has a folder of its own.

mod api;
pub mod bucketed;
mod cache;
mod changes;
mod discussions;
pub mod embedded;
mod events;
mod guests;
pub mod moderation;
mod moves;
mod notifications;
pub mod per_comment;
mod personal;
mod router;
mod server;
mod shared;
mod votes;
mod webhooks;

pub use api::AuthoredComment;
pub use api::{
    Announced, ChangeFeed, ChangeKind, Claim, CommentChange, CommentStore, Decide, DiscussionStore,
    DynStorage, EventStore, Following, GuestStore, Health, HeldStore, HistoryStore, ImportStore,
    KeyedGuests, ModerationStore, MoveStore, MoveTiming, Moved, NameStore, NotificationStore,
    Person, PostStore, Posted, QueueEntry, Ranked, RankedOf, RankedPage, Report, ServerStore, Step,
    Storage, StoredEvent, Tallies, Tally, VoteStore, Waiting, Watched, WebhookStore,
};
pub use api::{CastVote, Forgotten, PersonalStore, AUTHORED_RANGE};
pub(crate) use cache::tracking::untracked as untracked_read;
pub use cache::tracking::{recording, Freshness, Reads};
pub use discussions::Discussions;
pub use events::Retention;
pub use router::{shard, Store};
pub use shared::connect::StoreConfig;
pub use shared::embedded_db;
pub use shared::error::{StoreError, StoreResult};
pub use shared::metrics::CommandCounter;
pub use shared::scope::ReadScope;

pub use crate::domain::tree::Listing;
