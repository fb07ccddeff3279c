//! `PostStore`: posting comments (in whatever layout their discussion has, through moves and
//! promotions) and changing posted ones, with what they take and return.

use std::sync::Arc;

use async_trait::async_trait;

use crate::domain::{
    Comment, Discussion, DiscussionId, DomainError, Event, Micros, NewComment, Slug,
};
use crate::store::shared::error::StoreResult;

/// What a change makes of a comment read at a given time: the new comment, `None` when nothing
/// changes, or why it may not be made.
pub type Decide<'a> =
    dyn Fn(&Comment, Micros) -> Result<Option<Comment>, DomainError> + Send + Sync + 'a;

/// The events a change announces, from the comment as read and as it becomes: written to the
/// event log in the change's own transaction.
pub type Announced<'a> = dyn Fn(&Comment, &Comment) -> Vec<Event> + Send + Sync + 'a;

/// The result of posting a comment.
#[derive(Debug, Clone)]
pub struct Posted {
    /// The stored comment.
    pub comment: Comment,
    /// True when the requested parent was too deep and the comment went to an ancestor.
    pub reattached: bool,
    /// The discussion as it is after the post, when the post met a move of it to another layout
    /// (or made one).
    pub moved: Option<Discussion>,
}

/// Posting comments and changing posted ones, in the layout each discussion has.
#[async_trait]
pub trait PostStore: Send + Sync {
    /// Posts a comment in the discussion's layout. A post that meets a move of the discussion
    /// to another layout waits for it and is posted in the new layout; one that does not fit an
    /// embedded discussion moves it to the bucketed layout first, where the store is configured
    /// to promote.
    async fn post(&self, discussion: &Discussion, new: NewComment) -> StoreResult<Posted>;

    /// Posts a comment to the discussion `id` (`NOT_FOUND` when there is none, `Locked` while
    /// it is locked), as [`PostStore::post`] does; returns the discussion as the post found it
    /// (in the layout the comment went to) with the comment. An embedded or bucketed discussion
    /// this process posted to lately is not read first: the post's own write checks that it is
    /// still unlocked and has not moved (`open_for_posts`), and a refused post reads it.
    async fn post_to(
        &self,
        id: &DiscussionId,
        new: NewComment,
    ) -> StoreResult<(Arc<Discussion>, Posted)>;

    /// The discussion `id` as this process kept it for posting, when it did (see
    /// [`PostStore::post_to`]): what a post may decide by without reading it.
    fn kept(&self, id: &DiscussionId) -> Option<Arc<Discussion>>;

    /// Forgets what this process kept of the discussion for posting (after a change of it
    /// that posts decide by, such as its moderation mode).
    fn forget(&self, id: &DiscussionId);

    /// Posts a comment as [`PostStore::post_to`] does, to `discussion` as the caller read it (or
    /// as [`PostStore::kept`] gave it): the post's own write checks that it is still unlocked,
    /// has not moved and moderates as it did.
    async fn post_from(
        &self,
        discussion: Arc<Discussion>,
        new: NewComment,
    ) -> StoreResult<(Arc<Discussion>, Posted)>;

    /// Changes a posted comment of `discussion`: reads it, lets `decide` say what it becomes (it
    /// gets the time of the change), and writes that unless the comment changed meanwhile, in
    /// which case it reads again. The events `announce` gives for the change that is made are
    /// written with it. Returns the comment as it is afterwards.
    async fn change_comment(
        &self,
        discussion: &Discussion,
        slug: &Slug,
        decide: &Decide<'_>,
        announce: &Announced<'_>,
    ) -> Result<Comment, DomainError>;
}
