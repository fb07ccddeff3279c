//! Posting through the router: in the discussion's layout, through moves (waiting for one that
//! holds the discussion) and promotions (moving a discussion that outgrew its layout), and from
//! the discussions this process keeps for posting.

use std::sync::Arc;

use async_trait::async_trait;

use super::Store;
use crate::domain::{Comment, Discussion, DiscussionId, DomainError, NewComment, Slug};
use crate::store::api::{Announced, Decide, MoveStore, PostStore, Posted};
use crate::store::discussions::locked;
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::numbers;
use crate::store::shared::skeleton::revise;

/// Discussions whose metadata a process keeps for posting (past this, it starts over).
const POSTING: usize = 1024;

#[async_trait]
impl PostStore for Store {
    async fn post(&self, discussion: &Discussion, mut new: NewComment) -> StoreResult<Posted> {
        let people = self.held.people();
        let drawn = numbers::ensure(people, &mut new.number, &new.author).await?;
        let posted = self.post_numbered(discussion, &new).await;
        numbers::settle(people, posted, drawn, &new.author.id).await
    }

    fn kept(&self, id: &DiscussionId) -> Option<Arc<Discussion>> {
        let posting = self.posting.lock().unwrap_or_else(|p| p.into_inner());
        posting.get(id).cloned()
    }

    fn forget(&self, id: &DiscussionId) {
        let mut posting = self.posting.lock().unwrap_or_else(|p| p.into_inner());
        posting.remove(id);
    }

    async fn post_to(
        &self,
        id: &DiscussionId,
        new: NewComment,
    ) -> StoreResult<(Arc<Discussion>, Posted)> {
        // Only discussions whose layout posts from what the process kept are kept (see
        // `CommentStore::posts_from_kept`).
        let discussion = match self.kept(id) {
            Some(discussion) => discussion,
            None => Arc::new(self.discussions.by_id(id).await?),
        };
        self.post_from(discussion, new).await
    }

    async fn post_from(
        &self,
        discussion: Arc<Discussion>,
        new: NewComment,
    ) -> StoreResult<(Arc<Discussion>, Posted)> {
        let id = &discussion.id.clone();
        if discussion.locked {
            return Err(locked(id));
        }
        let mut new = new;
        let people = self.held.people();
        let drawn = numbers::ensure(people, &mut new.number, &new.author).await?;
        let result = self.post_found(discussion, &new).await;
        numbers::settle(people, result, drawn, &new.author.id).await
    }

    async fn change_comment(
        &self,
        discussion: &Discussion,
        slug: &Slug,
        decide: &Decide<'_>,
        announce: &Announced<'_>,
    ) -> Result<Comment, DomainError> {
        let mut discussion = discussion.clone();
        loop {
            let layout = self.layouts.get(discussion.layout);
            let revised = revise(layout, &self.clock, &discussion, slug, (decide, announce)).await;
            self.touched(&discussion.id);
            match revised {
                Err(DomainError::Moving(_)) => {
                    discussion = self.after_move(&discussion.id).await?;
                }
                other => return other,
            }
        }
    }
}

impl Store {
    /// Posts a numbered comment as [`PostStore::post_from`] does, once the discussion is known
    /// to be unlocked.
    async fn post_found(
        &self,
        discussion: Arc<Discussion>,
        new: &NewComment,
    ) -> StoreResult<(Arc<Discussion>, Posted)> {
        let id = &discussion.id.clone();
        let mut discussion = discussion;
        let result = loop {
            match self.post_numbered(&discussion, new).await {
                // The parent may have been looked for where a move just took it from (the
                // discussion as kept, or as read a moment before the move): look again where
                // the discussion is now.
                Err(StoreError::NotFound(why)) => {
                    let now = self.discussions.by_id(id).await?;
                    if now.moves == discussion.moves {
                        break Err(StoreError::NotFound(why));
                    }
                    if now.locked {
                        break Err(locked(id));
                    }
                    discussion = Arc::new(now);
                }
                other => break other,
            }
        };
        let mut posting = self.posting.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(mut posted) => {
                let now = posted.moved.take().map_or(discussion, Arc::new);
                if self.layouts.get(now.layout).posts_from_kept() {
                    if posting.len() >= POSTING && !posting.contains_key(id) {
                        posting.clear();
                    }
                    posting.insert(id.clone(), now.clone());
                } else {
                    posting.remove(id);
                }
                Ok((now, posted))
            }
            Err(err) => {
                posting.remove(id);
                Err(err)
            }
        }
    }

    /// Posts a numbered comment in the discussion's layout (see [`PostStore::post`]).
    async fn post_numbered(
        &self,
        discussion: &Discussion,
        new: &NewComment,
    ) -> StoreResult<Posted> {
        let start = discussion.moves;
        let mode = discussion.moderation;
        let guests = discussion.guests;
        let closing = discussion.closing;
        let guest = crate::domain::guest_posts::is_guest(&new.author.id);
        let mut discussion = discussion.clone();
        let mut promoted = false;
        loop {
            match self.layouts.post(&self.writer, &discussion, new).await {
                Err(StoreError::Moving(_)) => {
                    discussion = self.after_move(&discussion.id).await?;
                    if discussion.locked {
                        return Err(locked(&discussion.id));
                    }
                    // Whether to hold the comment was decided by the mode it had.
                    if discussion.moderation != mode || (guest && discussion.guests != guests) {
                        return Err(StoreError::Exhausted(format!(
                            "discussion {} changed how it moderates while the comment was posted: send it again",
                            discussion.id
                        )));
                    }
                    // Whether it was closed was decided by the closing it had.
                    if discussion.closing != closing {
                        return Err(StoreError::Exhausted(format!(
                            "discussion {} changed when it closes while the comment was posted: send it again",
                            discussion.id
                        )));
                    }
                }
                Err(StoreError::TooLarge(why)) if self.promote_embedded && !promoted => {
                    let Some(to) = self.layouts.get(discussion.layout).promotes_to() else {
                        return Err(StoreError::TooLarge(why));
                    };
                    promoted = true;
                    tracing::info!(discussion = %discussion.id, %why, from = %discussion.layout, %to, "promoting a full discussion to another layout");
                    match self
                        .migrate(&discussion.id, to, &|_| {}, &|_| Vec::new())
                        .await
                    {
                        Ok(moved) => discussion = moved.discussion,
                        // Another post is promoting it already.
                        Err(StoreError::Busy(_)) => {
                            discussion = self.after_move(&discussion.id).await?;
                        }
                        Err(err) => return Err(err),
                    }
                }
                Ok(mut posted) => {
                    self.touched(&discussion.id);
                    if discussion.moves != start {
                        posted.moved = Some(discussion);
                    }
                    return Ok(posted);
                }
                Err(err) => return Err(err),
            }
        }
    }
}
