//! A person's erasure: their own (`deleteMyAccount`) and a moderator's (`eraseUser`). Their
//! export is `GET /me/export` (`http::personal`).

use async_graphql::{Context, Object, ID};

use super::error::OrGql;
use super::inbox::signed_in;
use super::mutation::{forget_reads, moderator};
use super::services;
use crate::domain::{Reason, UserId};

/// Erasure; merged into [`super::Mutation`].
#[derive(Default)]
pub(super) struct PersonalMutation;

#[Object]
impl PersonalMutation {
    /// Erases everything this service keeps of the signed-in person: each of their comments
    /// becomes a tombstone without text, revisions or name (`[deleted]`, under an opaque id of
    /// its own), held ones are removed, their votes are taken back (counts and ranks follow),
    /// and their reports, follows, notifications and settings are removed; other people's
    /// replies stay. A ban does not stop it. `confirm` must be their own user id (`BAD_USER_INPUT` otherwise, and
    /// nothing is erased). Recorded as `user.erased`, naming nobody. Sending it again finishes
    /// an erasure that was cut short. True when done.
    async fn delete_my_account(
        &self,
        ctx: &Context<'_>,
        confirm: String,
    ) -> async_graphql::Result<Option<bool>> {
        // A ban does not stop it: a banned person may still have their data erased.
        let viewer = signed_in(ctx)?;
        services(ctx)
            .erase_me(&viewer.author, &confirm)
            .await
            .gql()?;
        forget_reads(ctx);
        Ok(Some(true))
    }

    /// Erases a person's data as `deleteMyAccount` does, with an optional `reason` for the
    /// moderation log (which names nobody). A ban of theirs is kept while it lasts. Moderators
    /// only.
    async fn erase_user(
        &self,
        ctx: &Context<'_>,
        user_id: ID,
        reason: Option<String>,
    ) -> async_graphql::Result<Option<bool>> {
        let caller = moderator(ctx).await?;
        let user = UserId::parse(&user_id).gql()?;
        let reason = reason.as_deref().map(Reason::parse).transpose().gql()?;
        services(ctx)
            .erase_user(&caller, user, reason)
            .await
            .gql()?;
        forget_reads(ctx);
        Ok(Some(true))
    }
}
