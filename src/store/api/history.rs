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
}

impl AuthoredComment {
    /// Its position in its author's history (see [`HistoryStore::authored`]).
    pub fn cursor(&self) -> Cursor {
        Cursor::ByAuthor(
            self.comment.posted,
            self.discussion.id.clone(),
            self.comment.slug.clone(),
        )
    }
}

/// One author's comments wherever they are stored.
#[async_trait]
pub trait HistoryStore: Send + Sync {
    /// Up to `limit` comments of the author with this id, across every discussion, held ones
    /// included (deleted ones as their tombstones), newest first: by posting time (a held
    /// comment's submission time), then discussion id, then slug, all descending; strictly
    /// after `after` (a `ByAuthor` cursor) when given. Also whether more follow. One database
    /// command; more only when a page's every comment is a copy a move between layouts left
    /// behind (those are never listed).
    async fn authored(
        &self,
        author: &str,
        after: Option<&Cursor>,
        limit: usize,
    ) -> StoreResult<(Vec<AuthoredComment>, bool)>;

    /// How many comments the author with this id has, held ones included, counted up to `cap`
    /// (`cap` when there are at least that many). One database command.
    async fn authored_count(&self, author: &str, cap: u64) -> StoreResult<u64>;
}
