//! `ServerStore`: what the installation keeps about itself: its key, and the migrations of its
//! stored data.

use async_trait::async_trait;

use crate::domain::{GuestIds, ServerKey};
use crate::store::shared::error::StoreResult;

/// What a keying of guest ids did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct KeyedGuests {
    /// Passes over the data (the last one found nothing left to change).
    pub passes: u64,
    /// Discussions read (over all passes).
    pub discussions: u64,
    /// Documents changed.
    pub documents: u64,
    /// Ids changed.
    pub ids: u64,
}

/// The installation's own settings, kept in the database.
#[async_trait]
pub trait ServerStore: Send + Sync {
    /// The server key kept in the database. On the first call ever, `candidate` is stored and
    /// returned; starts racing to store theirs all return the one stored first.
    async fn server_key(&self, candidate: &ServerKey) -> StoreResult<ServerKey>;

    /// Whether every imported guest id in the database is keyed: a keying ran to its end.
    async fn guest_ids_keyed(&self) -> StoreResult<bool>;

    /// Keys every unkeyed imported guest id stored (see [`GuestIds`]): authors and editors of
    /// comments in every layout and of held comments, bans, trusted people and the users of
    /// moderation log entries. Discussion by discussion, document by document, each change on
    /// condition that the id read is still there; passes repeat until one finds nothing to
    /// change, then that is recorded. Keyed ids are never keyed again, so running it again (or
    /// after an interruption) changes only what is left. A discussion that moves between
    /// layouts meanwhile is read again by the next pass; `Busy` when one keeps moving.
    /// `progress` hears of each discussion read.
    async fn key_guest_ids(
        &self,
        ids: &GuestIds,
        progress: &(dyn Fn(KeyedGuests) + Send + Sync),
    ) -> StoreResult<KeyedGuests>;

    /// Whether every embedded discussion keeps its flat array of authors whole: an indexing
    /// of them ran to its end.
    async fn embedded_authors_indexed(&self) -> StoreResult<bool>;

    /// Writes the flat array of authors (what an author's history reads of the embedded
    /// layout) of every embedded discussion whose array does not hold all its comments (stored
    /// before the array was kept), then records that it ran. Returns how many discussions were
    /// written; one that changed while it was read is left as it is (logged), and then nothing
    /// is recorded, so the next run writes it.
    async fn index_embedded_authors(&self) -> StoreResult<u64>;

    /// Whether every stored comment has its number among its author's (see
    /// [`ServerStore::number_comments`]).
    async fn comments_numbered(&self) -> StoreResult<bool>;

    /// Numbers every comment stored without its number among its author's (by a version
    /// before comments were numbered), in every layout and among the held comments, in passes
    /// until one finds nothing to number (at most three), then records that it ran. Returns
    /// how many comments were numbered; when the last pass still met comments that changed
    /// while they were read, nothing is recorded, so the next run numbers them.
    async fn number_comments(&self) -> StoreResult<u64>;

    /// Whether the names signed-in users posted under are recorded (see
    /// [`ServerStore::record_names`]).
    async fn names_recorded(&self) -> StoreResult<bool>;

    /// Records the names the signed-in authors of every stored comment (every layout, the
    /// held comments) posted under, by a version before each post recorded its author's name,
    /// then records that it ran; returns how many authors had names recorded. Running it again
    /// adds nothing.
    async fn record_names(&self) -> StoreResult<u64>;
}
