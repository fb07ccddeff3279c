//! Votes through the router: cast in the discussion's layout once a move that holds it is over,
//! and ranked pages through the read cache.

use std::collections::HashMap;

use async_trait::async_trait;

use super::Store;
use crate::domain::{Comment, Discussion, DiscussionId, DomainError, Slug, Vote, Window};
use crate::store::api::{Ranked, RankedPage, VoteStore};
use crate::store::cache::weight;
use crate::store::shared::error::StoreResult;
use crate::store::shared::scope::ReadScope;

impl Store {
    /// Casts a vote (checking that the voter may vote when `checked`), in the layout the
    /// discussion has once a move that holds it is over.
    async fn cast(
        &self,
        discussion: &Discussion,
        (slug, voter): (&Slug, &str),
        vote: Option<Vote>,
        checked: bool,
    ) -> Result<Comment, DomainError> {
        let mut discussion = discussion.clone();
        loop {
            let layout = self.layouts.get(discussion.layout);
            let cast = crate::store::votes::cast(
                &self.votes,
                (layout, &self.writer),
                &discussion,
                (slug, voter),
                vote,
                checked,
            );
            let cast = cast.await;
            self.touched(&discussion.id);
            match cast {
                Err(DomainError::Moving(_)) => {
                    discussion = self.after_move(&discussion.id).await?;
                }
                other => return other,
            }
        }
    }
}

#[async_trait]
impl VoteStore for Store {
    async fn vote(
        &self,
        discussion: &Discussion,
        slug: &Slug,
        voter: &str,
        vote: Option<Vote>,
    ) -> Result<Comment, DomainError> {
        self.cast(discussion, (slug, voter), vote, true).await
    }

    async fn restore_vote(
        &self,
        discussion: &Discussion,
        slug: &Slug,
        voter: &str,
        vote: Vote,
    ) -> Result<Comment, DomainError> {
        self.cast(discussion, (slug, voter), Some(vote), false)
            .await
    }

    async fn votes_of(
        &self,
        voter: &str,
        comments: &[(DiscussionId, Slug)],
    ) -> StoreResult<HashMap<(DiscussionId, Slug), Vote>> {
        self.votes.votes_of(voter, comments).await
    }

    async fn votes_in(
        &self,
        discussion: &DiscussionId,
        after: Option<(&Slug, &str)>,
        limit: usize,
    ) -> StoreResult<Vec<(Slug, String, Vote)>> {
        self.votes.votes_in(discussion, after, limit).await
    }

    async fn ranked(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        list: Ranked<'_>,
        window: &Window,
    ) -> StoreResult<RankedPage> {
        let layout = self.layouts.get(discussion.layout);
        let read =
            crate::store::votes::ranked_page(&self.votes, layout, scope, discussion, list, window);
        match &self.cache {
            Some(cached) => {
                let describe = || format!("ranked {list:?} {window:?}");
                let weigh = |ranked: &RankedPage| 64 + weight(&ranked.page.items);
                cached
                    .cache
                    .through(discussion, describe, read, weigh)
                    .await
            }
            None => read.await,
        }
    }
}
