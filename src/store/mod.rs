//! The storage layer: the traits the API uses, the router over the three layouts, and the only
//! code that talks to MongoDB. Each layout is a folder that owns everything it knows.

mod api;
mod blocks;
mod bson;
pub mod bucketed;
mod cache;
mod changes;
mod connect;
mod discussions;
mod docs;
pub mod embedded;
pub mod embedded_db;
mod error;
mod held;
mod imports;
mod metrics;
mod migrate;
pub mod moderation;
mod order;
pub mod per_comment;
mod ranked;
mod registry;
mod router;
mod scope;
pub mod shard;
mod skeleton;
mod votes;
mod writer;

pub use api::{
    ChangeKind, CommentChange, CommentStore, Decide, DiscussionStore, DynStorage, ModerationStore,
    MoveTiming, Moved, Posted, Ranked, RankedOf, RankedPage, Step, Storage, Watched,
};
pub use connect::StoreConfig;
pub use discussions::Discussions;
pub use error::{StoreError, StoreResult};
pub use held::{Claim, HeldStore, QueueEntry, Report, Waiting};
pub use metrics::CommandCounter;
pub use router::Store;
pub use scope::ReadScope;

pub use crate::domain::tree::Listing;
