//! Vote workflows: cast, switch or take back a vote.

use std::sync::Arc;

use super::{Caller, Services};
use crate::domain::{Comment, Discussion, DiscussionId, DomainError, Slug, Vote};

impl Services {
    /// Votes on a comment as the caller (`None` takes the vote back). Not in a locked
    /// discussion, nor in a closed one but for moderators (`FORBIDDEN`); whether the caller may vote on the comment is the store's
    /// check in the vote's own transaction. Votes emit no event.
    pub async fn vote(
        &self,
        caller: &Caller,
        id: DiscussionId,
        slug: Slug,
        vote: Option<Vote>,
    ) -> Result<(Arc<Discussion>, Comment), DomainError> {
        let discussion = self.read_discussion(&id).await?;
        if discussion.locked {
            return Err(DomainError::Forbidden(format!(
                "discussion {} is locked: it takes no votes",
                discussion.id
            )));
        }
        self.check_open(caller, &discussion)?;
        let storage = self.storage.clone();
        let voter = caller.author().id.clone();
        let on = discussion.clone();
        let write = async move {
            let comment = storage.votes().vote(&on, &slug, &voter, vote).await?;
            Ok((comment, Vec::new()))
        };
        let span = tracing::debug_span!("store.vote");
        let comment = self.run(caller, span, write).await?.value;
        Ok((discussion, comment))
    }
}
