//! The storage traits: what the API uses (`Storage` and the stores it hands out) and the
//! `CommentStore` every layout implements, one file per capability, with what they take and
//! return.

mod changes;
mod discussions;
mod events;
mod guests;
mod health;
mod held;
mod history;
mod imports;
mod layout;
mod moderation;
mod moves;
mod names;
mod notifications;
mod personal;
mod posting;
mod server;
mod storage;
mod votes;
mod webhooks;

pub use changes::{ChangeFeed, ChangeKind, CommentChange, Watched};
pub use discussions::DiscussionStore;
pub use events::EventStore;
pub use guests::GuestStore;
pub(crate) use guests::MAX_NETWORK_BANS;
pub use health::Health;
pub use held::{Claim, HeldStore, QueueEntry, Report, Tallies, Tally, Waiting};
pub use history::{AuthoredComment, HistoryStore, AUTHORED_RANGE};
pub use imports::ImportStore;
pub(crate) use layout::not_at_home;
pub use layout::CommentStore;
pub use moderation::ModerationStore;
pub use moves::{MoveStore, MoveTiming, Moved, Step};
pub use names::NameStore;
pub use notifications::{Following, NotificationStore, Person};
pub use personal::{CastVote, Forgotten, PersonalStore};
pub use posting::{Announced, Decide, PostStore, Posted};
pub use server::{KeyedGuests, ServerStore};
pub use storage::{DynStorage, Storage};
pub use votes::{Ranked, RankedOf, RankedPage, VoteStore};
pub use webhooks::{StoredEvent, WebhookStore};
