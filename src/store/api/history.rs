//! `HistoryStore`: one author's comments across every discussion and layout, held ones
//! included, and how many there are.

use std::sync::Arc;

use async_trait::async_trait;

use crate::domain::paging::Cursor;
use crate::domain::{Comment, Discussion};
use crate::store::shared::error::StoreResult;

/// One comment of an author's history.
#[derive(Debug, Clone)]
pub struct AuthoredComment {
    /// Its discussion, as a metadata read gives it.
    pub discussion: Arc<Discussion>,
    /// The comment as stored (a held one with its submission time as `posted`).
    pub comment: Comment,
    /// Whether it is held (stored outside the layouts until a moderator publishes it).
    pub held: bool,
    /// Its number among the author's comments (see [`HistoryStore::authored`]).
    pub number: u64,
}

impl AuthoredComment {
    /// Its position in its author's history (see [`HistoryStore::authored`]).
    pub fn cursor(&self) -> Cursor {
        Cursor::ByAuthor(self.number)
    }
}

/// One author's comments wherever they are stored.
#[async_trait]
pub trait HistoryStore: Send + Sync {
    /// Up to `limit` comments of the author with this id, across every discussion, held ones
    /// included (deleted ones as their tombstones), newest first: by their numbers among the
    /// author's comments (the order they were stored in), descending; strictly after `after`
    /// (a `ByAuthor` cursor) when given. Also whether more may follow (true when numbers
    /// below the page are left: they may all be gaps). One database command reads the
    /// comments of `limit` numbers (a first page's from the author's counter, in the same
    /// command); a page takes more rounds only over gaps (numbers whose writes failed) and the
    /// copies moves between layouts leave behind (those are never listed).
    async fn authored(
        &self,
        author: &str,
        after: Option<&Cursor>,
        limit: usize,
    ) -> StoreResult<(Vec<AuthoredComment>, bool)>;

    /// How many comments the author with this id has stored, held ones included: the
    /// numbers drawn less the gaps counted (see `shared::numbers`). One point read.
    async fn authored_count(&self, author: &str) -> StoreResult<u64>;

    /// The last number drawn for the author with this id (0: none): the top of the range a
    /// walk through all their comments reads. One point read.
    async fn numbers_drawn(&self, author: &str) -> StoreResult<u64>;

    /// The author's comments numbered in `numbers` (at most [`AUTHORED_RANGE`] of them),
    /// newest first, held ones included, copies left by moves left out: one database command
    /// whatever the author's other comments. What a walk through every comment of one person
    /// (their export, their erasure) reads, range by range.
    async fn authored_range(
        &self,
        author: &str,
        numbers: std::ops::Range<u64>,
    ) -> StoreResult<Vec<AuthoredComment>>;
}

/// The widest range [`HistoryStore::authored_range`] reads.
pub const AUTHORED_RANGE: u64 = 1_024;
