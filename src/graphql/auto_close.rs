//! When a discussion closes, in the API: the moderators' `setDiscussionClosing` (each
//! discussion's closing time is `Discussion.closesAt`).

use async_graphql::{Context, Object, ID};
use chrono::{DateTime, Utc};

use super::error::OrGql;
use super::mutation::{forget_reads, moderator};
use super::services;
use super::types::DiscussionNode;
use crate::domain::{Closing, DiscussionId, DomainError, Micros};

/// The moderators' closing of discussions; merged into [`super::Mutation`].
#[derive(Default)]
pub(super) struct ClosingMutation;

#[Object]
impl ClosingMutation {
    /// Sets when a discussion closes to new comments, replies, edits and votes by anyone but
    /// moderators: at `closesAt` (a time past closes it at once), or never when `closesAt` is
    /// null or left out. `useDefault: true` (without `closesAt`) drops the discussion's own
    /// closing, so it follows the server's default again (`THREADQL_AUTO_CLOSE_AFTER` after
    /// its creation). Recorded in the moderation log. Moderators only.
    async fn set_discussion_closing(
        &self,
        ctx: &Context<'_>,
        id: ID,
        closes_at: Option<DateTime<Utc>>,
        #[graphql(default)] use_default: bool,
    ) -> async_graphql::Result<Option<DiscussionNode>> {
        let caller = moderator(ctx).await?;
        let id = DiscussionId::parse(&id).gql()?;
        let closing = match (closes_at, use_default) {
            (Some(_), true) => {
                return Err(DomainError::bad_input(
                    "give `closesAt` or `useDefault: true`, not both: `useDefault` follows the server's default",
                ))
                .gql()
            }
            (None, true) => None,
            (None, false) => Some(Closing::Never),
            (Some(at), false) => Some(Closing::At(Micros(at.timestamp_micros()))),
        };
        let discussion = services(ctx)
            .set_closing(&caller, id, closing)
            .await
            .gql()?;
        forget_reads(ctx);
        Ok(Some(DiscussionNode(discussion.into())))
    }
}
