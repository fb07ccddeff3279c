//! An author's history, for moderators: their comments across every discussion and layout
//! (held ones included), and their standing (their ban, how many comments they have, what
//! moderation counted of them). These are reads: the transport checks that its caller
//! moderates.

use std::sync::Arc;

use crate::domain::paging::Cursor;
use crate::domain::{Ban, DomainError, Micros, UserId};
use crate::store::{AuthoredComment, Tallies};

use super::Services;

/// An author's standing with the moderators.
#[derive(Debug, Clone)]
pub struct AuthorStanding {
    /// Who.
    pub user: UserId,
    /// Their ban, while it lasts.
    pub ban: Option<Arc<Ban>>,
    /// Their comments stored, held and deleted ones included.
    pub comments: u64,
    /// What moderation counted of them.
    pub tallies: Tallies,
}

impl Services {
    /// Up to `limit` of the author's comments, newest first, after `after` (a `ByAuthor`
    /// cursor), and whether more follow (see `HistoryStore::authored`).
    pub async fn authored(
        &self,
        user: &UserId,
        after: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<AuthoredComment>, bool), DomainError> {
        Ok(self
            .storage
            .history()
            .authored(user.as_str(), after, limit)
            .await?)
    }

    /// How many comments the author has stored, held ones included (see
    /// `HistoryStore::authored_count`).
    pub async fn authored_count(&self, user: &UserId) -> Result<u64, DomainError> {
        Ok(self.storage.history().authored_count(user.as_str()).await?)
    }

    /// The author's standing: their ban now (as this process knows it, see
    /// `ModerationStore::ban_of`), their comments counted and their tallies (two reads, at
    /// once: the counts are one `people` document).
    pub async fn author_standing(&self, user: &UserId) -> Result<AuthorStanding, DomainError> {
        let (ban, tallies) = tokio::try_join!(
            async { Ok::<_, DomainError>(self.storage.moderation().ban_of(user.as_str()).await?) },
            async { Ok::<_, DomainError>(self.storage.held().tallies(user.as_str()).await?) },
        )?;
        let comments = tallies.comments;
        let now = Micros::now();
        Ok(AuthorStanding {
            user: user.clone(),
            ban: ban.filter(|ban| ban.applies_at(now)),
            comments,
            tallies,
        })
    }
}
