//! `VoteStore`: votes, and the ranked lists they give, with what they take and return.

use std::collections::HashMap;

use async_trait::async_trait;

use crate::domain::{
    Comment, Discussion, DiscussionId, DomainError, Page, Rank, Slug, Vote, Window,
};
use crate::store::shared::error::StoreResult;
use crate::store::shared::scope::ReadScope;

/// A ranked list: which comments, in which order.
#[derive(Debug, Clone, Copy)]
pub struct Ranked<'a> {
    /// The order.
    pub rank: Rank,
    /// The comments.
    pub of: RankedOf<'a>,
}

/// The comments of a ranked list.
#[derive(Debug, Clone, Copy)]
pub enum RankedOf<'a> {
    /// Every comment of the discussion.
    Comments,
    /// Its top-level comments.
    Threads,
    /// The direct replies of this comment.
    Replies(&'a Comment),
}

/// A page of a ranked list.
#[derive(Debug, Clone)]
pub struct RankedPage {
    /// The page, in the list's order.
    pub page: Page<std::sync::Arc<Comment>>,
    /// The walk its cursors belong to: the discussion's vote number when the walk's first page
    /// was read.
    pub walk: u64,
}

/// Votes (casting, restoring, reading) and ranked lists.
#[async_trait]
pub trait VoteStore: Send + Sync {
    /// Casts `vote` (or takes back the vote, with `None`) as the user `voter` on the comment
    /// `slug`: the vote, the comment's counters (where its layout keeps it), its tally and the
    /// discussion's ranking change in one transaction. Voting as one already voted changes
    /// nothing. Returns the comment as it is afterwards. Whether the voter may vote is
    /// [`crate::domain::ranking::may_vote`]; a locked discussion is the caller's to refuse.
    async fn vote(
        &self,
        discussion: &Discussion,
        slug: &Slug,
        voter: &str,
        vote: Option<Vote>,
    ) -> Result<Comment, DomainError>;

    /// Casts a vote as [`VoteStore::vote`] does, without asking whether the voter may vote (an
    /// import restoring the votes a discussion had, some of them on comments deleted since).
    async fn restore_vote(
        &self,
        discussion: &Discussion,
        slug: &Slug,
        voter: &str,
        vote: Vote,
    ) -> Result<Comment, DomainError>;

    /// The votes of `voter` on these comments, in one database command.
    async fn votes_of(
        &self,
        voter: &str,
        comments: &[(DiscussionId, Slug)],
    ) -> StoreResult<HashMap<(DiscussionId, Slug), Vote>>;

    /// Up to `limit` votes cast in the discussion (comment slug, voter, vote), by slug and then
    /// voter, after `after`: what an export reads, page by page.
    async fn votes_in(
        &self,
        discussion: &DiscussionId,
        after: Option<(&Slug, &str)>,
        limit: usize,
    ) -> StoreResult<Vec<(Slug, String, Vote)>>;

    /// One page of a ranked list of the discussion (see `store::votes`), with the walk its
    /// cursors belong to.
    async fn ranked(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        list: Ranked<'_>,
        window: &Window,
    ) -> StoreResult<RankedPage>;
}
