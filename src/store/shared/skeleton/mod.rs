//! The write skeletons every layout shares: posting a comment and changing a posted one.

mod change;
mod post;

pub(crate) use change::revise;
pub(crate) use post::{post, Waiting};

use async_trait::async_trait;
use mongodb::bson::Bson;
use mongodb::ClientSession;

use crate::domain::{Comment, Discussion, FullSlug, Micros, Slug, SlugPart};
use crate::store::shared::error::StoreResult;

/// How often a write is tried before it gives up with a retryable `CONFLICT`: each refused try
/// (a slug collision, a concurrent write that changed what the write relied on) starts afresh.
pub(crate) const ATTEMPTS: usize = 32;

/// What one try to store a new comment did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The comment is stored.
    Stored,
    /// Refused (slug taken, or a guard saw a concurrent write); the layout refreshed its state.
    /// The next try draws a new slug part.
    Retry,
    /// Not stored, but the layout moved on (e.g. to the next bucket after a full one): the next
    /// try keeps the slug part and takes a new time.
    Moved,
}

/// A parent as a post needs it: where the reply goes.
pub(crate) struct ParentPaths {
    /// The parent's slug.
    pub slug: Slug,
    /// The parent's full slug.
    pub full_slug: FullSlug,
}

impl From<&Comment> for ParentPaths {
    fn from(c: &Comment) -> Self {
        Self {
            slug: c.slug.clone(),
            full_slug: c.full_slug.clone(),
        }
    }
}

/// The steps of a post that differ by layout; [`post`] runs them.
#[async_trait]
pub(crate) trait PostSteps: Send + Sync {
    /// What the layout carries between tries (positions, the current page…).
    type State: Send + Sync;

    /// Finds the requested parent (`NotFound` when it does not exist) and reads what the
    /// layout needs before writing. `part` is the slug part the first try will use (a layout
    /// that checks slugs itself can look it up in the same read).
    async fn prepare(
        &self,
        discussion: &Discussion,
        parent: Option<&Slug>,
        part: &SlugPart,
    ) -> StoreResult<(Option<ParentPaths>, Self::State)>;

    /// A time the new comment under `parent` must come after, when the layout orders by it.
    fn floor(&self, _state: &Self::State, _parent: Option<&Slug>) -> Option<Micros> {
        None
    }

    /// How the layout's posts run: in a transaction or not, one at a time or grouped.
    fn policy(&self) -> PostPolicy<'_, Self::State>;

    /// Brings what `prepare` read up to date with what this process learned while the post
    /// waited for its turn (without a database command).
    fn after_turn(&self, _discussion: &Discussion, _state: &mut Self::State) {}

    /// Where a stored post's comment is (see [`crate::store::CommentStore::home_of`]), kept
    /// with its event so that its webhook deliveries read it there; `None` when the layout
    /// has no such thing or does not know it.
    fn home(&self, _discussion: &Discussion, _state: &Self::State) -> Option<Bson> {
        None
    }

    /// Tries to store every comment of `group` (one comment unless the layout groups posts),
    /// setting each one's outcome; a layout may store some and not others (those try again).
    /// A layout implements this or [`PostSteps::attempt`], each defined by the other.
    async fn attempt_group(
        &self,
        discussion: &Discussion,
        group: &mut [Try<'_, Self::State>],
        session: &mut ClientSession,
    ) -> StoreResult<()> {
        for one in group.iter_mut() {
            one.outcome = self
                .attempt(discussion, one.comment, &mut *one.state, session)
                .await?;
        }
        Ok(())
    }

    /// Counts the comments of `group` that were stored, in the same transaction.
    async fn count_group(
        &self,
        discussion: &Discussion,
        group: &[Try<'_, Self::State>],
        session: &mut ClientSession,
    ) -> StoreResult<()> {
        for one in group.iter().filter(|t| t.outcome == Attempt::Stored) {
            self.count(discussion, one.comment, &*one.state, session)
                .await?;
        }
        Ok(())
    }

    /// Tries to store `comment`. Writes that must land together with the counters go through
    /// `session` (inside the post's transaction). A grouping layout's is a group of one.
    async fn attempt(
        &self,
        discussion: &Discussion,
        comment: &Comment,
        state: &mut Self::State,
        session: &mut ClientSession,
    ) -> StoreResult<Attempt> {
        let mut one = [Try {
            comment,
            state,
            outcome: Attempt::Retry,
        }];
        self.attempt_group(discussion, &mut one, session).await?;
        Ok(one[0].outcome)
    }

    /// Learns what the layout keeps about a comment this process stored (and committed).
    fn stored(&self, _discussion: &Discussion, _comment: &Comment, _state: &Self::State) {}

    /// Counts a stored comment (replies of its parent, comments of the discussion) where the
    /// write did not already, in the same transaction as the comment (nothing, for a layout
    /// whose write counts everything or that counts in [`PostSteps::count_group`]).
    async fn count(
        &self,
        _discussion: &Discussion,
        _comment: &Comment,
        _state: &Self::State,
        _session: &mut ClientSession,
    ) -> StoreResult<()> {
        Ok(())
    }
}

/// How a layout's posts run. This process's posts to one discussion always take turns
/// (transactions that write the same documents abort each other instead of waiting, and the
/// layouts' guarded single-document writes would refuse each other), and each post makes its
/// read (`prepare`) before its turn, so that the read overlaps the post ahead of it: what
/// `prepare` reads cannot be changed by another post, or a change is caught by the try (and
/// [`PostSteps::after_turn`] brings it up to date).
pub(crate) struct PostPolicy<'a, S> {
    /// Whether a post's writes run in one transaction, where the deployment has them. A layout
    /// whose try is one single-document write needs none.
    pub(crate) transaction: bool,
    /// Where this process's posts to one discussion wait to be stored together, when the
    /// layout stores several comments in one try ([`PostSteps::attempt_group`]); `None` stores
    /// them one at a time.
    pub(crate) grouping: Option<&'a post::Waiting<S>>,
}

/// One comment of a try: what to store, the layout's state for it, and what became of it.
pub(crate) struct Try<'a, S> {
    /// The comment as this try would store it.
    pub comment: &'a Comment,
    /// What the layout carries for this post.
    pub state: &'a mut S,
    /// Set by the layout's attempt.
    pub outcome: Attempt,
}
