//! `PersonalStore`: what the store keeps of one person beyond their comments, read for their
//! export and removed by their erasure.

use async_trait::async_trait;

use crate::domain::{DiscussionId, Event, Slug, Vote};
use crate::store::shared::error::StoreResult;

use super::Report;

/// One of a person's votes, with the key that pages on from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CastVote {
    /// The key of the next page (opaque).
    pub key: String,
    /// The comment's discussion.
    pub discussion: DiscussionId,
    /// The comment.
    pub slug: Slug,
    /// Up or down.
    pub vote: Vote,
}

/// What an erasure removed or rewrote beyond the comments.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Forgotten {
    /// Their reports, follows, notifications, settings and leftover votes (on comments gone
    /// since) removed.
    pub removed: u64,
    /// Records naming them rewritten to name nobody (the event log, the moderation log, other
    /// people's notifications and ignore lists).
    pub rewritten: u64,
}

/// A person's own records.
#[async_trait]
pub trait PersonalStore: Send + Sync {
    /// Up to `limit` of the person's votes, in the order they were first cast, after the key
    /// `after`: one range of an index by voter. (A range over every discussion: on a sharded
    /// cluster, every shard answers.)
    async fn votes_by(
        &self,
        voter: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<CastVote>>;

    /// Up to `limit` of the person's reports, by id, after the id `after`: one range of an
    /// index by reporter.
    async fn reports_by(
        &self,
        reporter: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<(String, Report)>>;

    /// Removes what the store keeps of the person but their comments and votes (which their
    /// erasure takes back one by one, so that counts follow) and their ban (kept while it
    /// lasts, so that an erased person cannot come back unbanned): their reports, follows,
    /// notifications, guest details and record as a moderator; their id in the event log, the
    /// moderation log, other people's notifications and ignore lists becomes
    /// `erasure::ERASED`; last, their `people` document (settings, address, counters). Each
    /// step is one command over an index range, and running it again does nothing more.
    /// `events` are written to the event log with the last step, in its transaction.
    async fn forget(&self, person: &str, events: &[Event]) -> StoreResult<Forgotten>;
}
