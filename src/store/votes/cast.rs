//! Casting a vote: the vote, the discussion's ranking, the comment's tally and its counters in
//! its layout, in one transaction.

use mongodb::ClientSession;

use super::book::VoteBook;
use crate::domain::{Comment, Slug, Vote};
use crate::store::shared::error::StoreError;

/// How often a vote is tried when concurrent votes (from other processes) keep changing what
/// it read, before it gives up with a retryable `CONFLICT`.
const VOTE_ATTEMPTS: u32 = 200;

/// What one try of a vote did.
enum Tried {
    /// The vote was already so: nothing to write.
    Same(Comment),
    /// The comment changed since it was read: read it again.
    Changed,
    /// Stored.
    Stored(Comment),
}

/// Casts a vote (see `VoteStore::vote`): in this process's turn for the discussion, reads the
/// comment, checks that the voter may vote on it (when `checked`), then writes the vote, the discussion's
/// ranking, the comment's tally and its counters in one transaction (in that order within one
/// session, without transactions). A try that meets a concurrent change starts again after a
/// short random wait.
pub(crate) async fn cast(
    book: &VoteBook,
    (layout, writer): (
        &dyn crate::store::api::CommentStore,
        &crate::store::shared::writer::Writer,
    ),
    discussion: &crate::domain::Discussion,
    (slug, voter): (&Slug, &str),
    vote: Option<Vote>,
    checked: bool,
) -> Result<Comment, crate::domain::DomainError> {
    use mongodb::error::TRANSIENT_TRANSACTION_ERROR;
    let _turn = writer.turn(&discussion.id).await;
    for round in 0..VOTE_ATTEMPTS {
        let scope = crate::store::shared::scope::ReadScope::new();
        let current = layout
            .by_slugs(&scope, discussion, std::slice::from_ref(slug))
            .await?
            .into_iter()
            .next()
            .map(std::sync::Arc::unwrap_or_clone)
            .ok_or_else(|| {
                crate::domain::DomainError::not_found(format!(
                    "no comment {slug} in discussion {}",
                    discussion.id
                ))
            })?;
        if checked {
            crate::domain::ranking::may_vote(&current, voter)?;
        }
        let mut session = writer
            .client
            .start_session()
            .await
            .map_err(StoreError::from)?;
        if writer.transactions {
            session
                .start_transaction()
                .await
                .map_err(StoreError::from)?;
        }
        let tried = async {
            let before = book
                .vote_of(&mut session, &discussion.id, slug, voter)
                .await?;
            if before == vote {
                return Ok::<_, StoreError>(Tried::Same(current.clone()));
            }
            let counted = current.votes.after(before, vote, 0);
            let seq = book
                .next_number(
                    &mut session,
                    &discussion.id,
                    (current.votes, counted),
                    current.parent.is_none(),
                )
                .await?;
            let next = Comment {
                votes: current.votes.after(before, vote, seq),
                ..current.clone()
            };
            if !layout
                .replace_in(&mut session, &scope, discussion, &current, &next)
                .await?
            {
                return Ok(Tried::Changed);
            }
            let at = writer.clock.now();
            book.set_vote(&mut session, (&discussion.id, slug, voter), vote, at)
                .await?;
            let home = layout.home_of(&scope, discussion, slug);
            book.set_tally(&mut session, &next, home).await?;
            Ok(Tried::Stored(next))
        }
        .await;
        match tried {
            Ok(Tried::Same(comment)) => {
                abort(&mut session, writer).await;
                return Ok(comment);
            }
            Ok(Tried::Stored(next)) => {
                if writer.transactions {
                    crate::store::shared::transactions::commit(&mut session, &writer.commands)
                        .await?;
                }
                return Ok(next);
            }
            Ok(Tried::Changed) => abort(&mut session, writer).await,
            Err(StoreError::Db(e)) if e.contains_label(TRANSIENT_TRANSACTION_ERROR) => {
                abort(&mut session, writer).await;
            }
            Err(err) => {
                abort(&mut session, writer).await;
                return Err(err.into());
            }
        }
        tracing::debug!(discussion = %discussion.id, %slug, round, "a concurrent vote changed the comment: trying again");
        crate::store::shared::transactions::pause(round).await;
    }
    Err(StoreError::Exhausted(format!(
        "votes on comment {slug} in discussion {} kept colliding during {VOTE_ATTEMPTS} tries",
        discussion.id
    ))
    .into())
}

/// Ends a vote's transaction without committing it (nothing to end without transactions).
async fn abort(session: &mut ClientSession, writer: &crate::store::shared::writer::Writer) {
    if writer.transactions {
        crate::store::shared::transactions::abort(session, &writer.commands).await;
    }
}
