//! Ignoring people, in the API: `ignoreUser` (the list is `Viewer.ignoredUsers`; what it
//! masks is `Comment.ignoredByViewer`).

use async_graphql::{Context, Object, ID};

use super::error::OrGql;
use super::inbox::signed_in;
use super::mutation::forget_reads;
use super::services;
use crate::domain::UserId;

/// A person's own list of people they ignore; merged into [`super::Mutation`].
#[derive(Default)]
pub(super) struct IgnoreMutation;

#[Object]
impl IgnoreMutation {
    /// Ignores the user `userId` (`ignored: true`), or stops ignoring them: their comments
    /// then come back to you with `ignoredByViewer: true` and `text`, `html` and `revisions`
    /// null, the author still named; nobody else sees a difference. Answers `ignored`. Nobody
    /// ignores themselves (`BAD_USER_INPUT`) or a moderator (`FORBIDDEN`); at most 1 000
    /// people (`BAD_USER_INPUT` past it). Signed-in users only (`UNAUTHENTICATED`).
    async fn ignore_user(
        &self,
        ctx: &Context<'_>,
        user_id: ID,
        ignored: bool,
    ) -> async_graphql::Result<Option<bool>> {
        let viewer = signed_in(ctx)?;
        let target = UserId::parse(&user_id).gql()?;
        let now = services(ctx)
            .ignore_user(&viewer.author, target, ignored)
            .await
            .gql()?;
        forget_reads(ctx);
        Ok(Some(now))
    }
}
