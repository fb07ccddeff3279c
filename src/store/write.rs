//! The write skeletons every layout shares: posting (placement under the depth cap, a fresh slug
//! and time per attempt, counters, giving up as a retryable conflict) and changing a posted
//! comment (read, decide, compare-and-set, retry).

use async_trait::async_trait;

use super::{CommentStore, Posted, ReadScope, StoreError, StoreResult};
use crate::domain::slug::MonotonicClock;
use crate::domain::{
    Comment, Discussion, DomainError, FullSlug, Micros, NewComment, Placement, Slug, SlugPart,
};

/// How often a write is tried before it gives up with a retryable `CONFLICT`: each refused try
/// (a slug collision, a concurrent write that changed what the write relied on) starts afresh.
pub(super) const ATTEMPTS: usize = 32;

/// What one try to store a new comment did.
pub(super) enum Attempt {
    /// The comment is stored.
    Stored,
    /// Refused (slug taken, or a guard saw a concurrent write); the layout refreshed its state.
    /// The next try draws a new slug part.
    Retry,
    /// Not stored, but the layout moved on (e.g. to the next bucket after a full one): the next
    /// try keeps the slug part and takes a new time.
    Moved,
}

/// How often a post may move on (see [`Attempt::Moved`]) before it gives up.
const MOVES: usize = 10_000;

/// A parent as a post needs it: where the reply goes.
pub(super) struct ParentPaths {
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
pub(super) trait PostSteps: Send + Sync {
    /// What the layout carries between tries (positions, the current page…).
    type State: Send + Sync;

    /// Finds the requested parent (`NotFound` when it does not exist) and reads what the
    /// layout needs before writing.
    async fn prepare(
        &self,
        discussion: &Discussion,
        parent: Option<&Slug>,
    ) -> StoreResult<(Option<ParentPaths>, Self::State)>;

    /// A time the new comment under `parent` must come after, when the layout orders by it.
    fn floor(&self, _state: &Self::State, _parent: Option<&Slug>) -> Option<Micros> {
        None
    }

    /// Tries to store `comment`.
    async fn attempt(
        &self,
        discussion: &Discussion,
        comment: &Comment,
        state: &mut Self::State,
    ) -> StoreResult<Attempt>;

    /// Counts a stored comment (replies of its parent, comments of the discussion) where the
    /// write did not already.
    async fn count(
        &self,
        discussion: &Discussion,
        comment: &Comment,
        state: &Self::State,
    ) -> StoreResult<()>;
}

/// Posts `new` through a layout's steps: the placement under the depth cap, a fresh slug part and
/// time for every try, the counters, and a retryable `Exhausted` when every try was refused.
pub(super) async fn post<S: PostSteps>(
    steps: &S,
    clock: &MonotonicClock,
    max_depth: usize,
    discussion: &Discussion,
    new: &NewComment,
) -> StoreResult<Posted> {
    let (parent, mut state) = steps.prepare(discussion, new.parent.as_ref()).await?;
    let parent = parent.as_ref().map(|p| (&p.slug, &p.full_slug));
    let (mut refused, mut moved) = (0, 0);
    let mut part = SlugPart::generate();
    while refused < ATTEMPTS && moved < MOVES {
        // The placement's parent does not depend on the time; the time must follow the floor
        // of the parent the comment really goes to.
        let target = Placement::new(parent, max_depth, Micros(0), &part).parent;
        let posted = match steps.floor(&state, target.as_ref()) {
            Some(floor) => clock.now_after(floor),
            None => clock.now(),
        };
        let placement = Placement::new(parent, max_depth, posted, &part);
        let reattached = placement.reattached;
        let comment = placement.into_comment(discussion.id.clone(), posted, new);
        match steps.attempt(discussion, &comment, &mut state).await? {
            Attempt::Stored => {
                steps.count(discussion, &comment, &state).await?;
                return Ok(Posted {
                    comment,
                    reattached,
                });
            }
            Attempt::Retry => {
                tracing::debug!(discussion = %discussion.id, "post refused by a guard: retrying");
                refused += 1;
                part = SlugPart::generate();
            }
            Attempt::Moved => moved += 1,
        }
    }
    Err(StoreError::Exhausted(format!(
        "the post to discussion {} met concurrent writes {refused} times and moved on {moved} times",
        discussion.id
    )))
}

/// What a change makes of a comment read at a given time: the new comment, `None` when nothing
/// changes, or why it may not be made.
pub type Decide<'a> =
    dyn Fn(&Comment, Micros) -> Result<Option<Comment>, DomainError> + Send + Sync + 'a;

/// Changes a posted comment: reads it, lets `decide` say what it becomes (or that nothing
/// changes, or why not), and writes that only if nobody changed the comment in between; a lost
/// race reads again, up to [`ATTEMPTS`] times. `decide` gets a time strictly after every earlier
/// version of the comment.
pub(super) async fn revise(
    layout: &dyn CommentStore,
    clock: &MonotonicClock,
    discussion: &Discussion,
    slug: &Slug,
    decide: &Decide<'_>,
) -> Result<Comment, DomainError> {
    for _ in 0..ATTEMPTS {
        let current = layout
            .by_slugs(&ReadScope::new(), discussion, std::slice::from_ref(slug))
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| {
                DomainError::not_found(format!("no comment {slug} in discussion {}", discussion.id))
            })?;
        let now = clock.now_after(current.edited.unwrap_or(current.posted));
        let Some(next) = decide(&current, now)? else {
            return Ok(current);
        };
        if layout.replace(discussion, &current, &next).await? {
            return Ok(next);
        }
        tracing::debug!(discussion = %discussion.id, %slug, "comment changed while being changed: retrying");
    }
    Err(StoreError::Exhausted(format!(
        "comment {slug} in discussion {} kept changing during {ATTEMPTS} tries",
        discussion.id
    ))
    .into())
}
