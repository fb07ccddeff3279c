//! The change skeleton: read a comment, decide what it becomes, compare-and-set, retry.

use crate::domain::slug::MonotonicClock;
use crate::domain::{Comment, Discussion, DomainError, Slug};
use crate::store::api::{Announced, CommentStore, Decide};
use crate::store::shared::error::StoreError;
use crate::store::shared::scope::ReadScope;

/// How often a change is tried: a try loses to a concurrent change of the comment, or (with
/// transactions) to any concurrent write that marks the discussion, which posts do too; with
/// the waits between them, these tries span a couple of seconds of contention.
const CHANGE_ATTEMPTS: u32 = 100;

/// Changes a posted comment: reads it, lets `decide` say what it becomes (or that nothing
/// changes, or why not), and writes that only if nobody changed the comment in between; a lost
/// race reads again after a short random wait, up to [`CHANGE_ATTEMPTS`] times. `decide` gets a time strictly after every earlier
/// version of the comment. The events `announce` gives are written with the change made.
pub(crate) async fn revise(
    layout: &dyn CommentStore,
    clock: &MonotonicClock,
    discussion: &Discussion,
    slug: &Slug,
    (decide, announce): (&Decide<'_>, &Announced<'_>),
) -> Result<Comment, DomainError> {
    for round in 0..CHANGE_ATTEMPTS {
        let scope = ReadScope::new();
        let current = layout
            .by_slugs(&scope, discussion, std::slice::from_ref(slug))
            .await?
            .into_iter()
            .next()
            .map(std::sync::Arc::unwrap_or_clone)
            .ok_or_else(|| {
                DomainError::not_found(format!("no comment {slug} in discussion {}", discussion.id))
            })?;
        let now = clock.now_after(current.edited.unwrap_or(current.posted));
        let Some(next) = decide(&current, now)? else {
            return Ok(current);
        };
        let events = announce(&current, &next);
        if layout
            .replace(&scope, discussion, &current, &next, &events)
            .await?
        {
            return Ok(next);
        }
        tracing::debug!(discussion = %discussion.id, %slug, "comment changed while being changed: retrying");
        crate::store::shared::transactions::pause(round).await;
    }
    Err(StoreError::Exhausted(format!(
        "comment {slug} in discussion {} kept changing during {CHANGE_ATTEMPTS} tries",
        discussion.id
    ))
    .into())
}
