//! The reserved names' writes: each field parses its arguments, checks its caller (a
//! moderator) once, and calls one service workflow.

use async_graphql::{Context, Object};

use super::error::OrGql;
use super::mutation::moderator;
use super::services;
use super::types::ReservedNameNode;
use crate::domain::{DisplayName, Reason};

/// Reserving and releasing display names; merged into [`super::Mutation`].
#[derive(Default)]
pub(super) struct NameMutation;

#[Object]
impl NameMutation {
    /// Reserves a display name (1 to 64 visible characters, no control or bidirectional
    /// characters), with an optional `reason`: from then on a token whose `name` is this name,
    /// in any spelling that differs only in case, width (NFKC) or invisible characters, is
    /// refused with `UNAUTHENTICATED` on every request, at once on this server and within 5 s
    /// on the others. A name a user carries now may be reserved too: that user's token is then
    /// refused until the site gives them another name. Reserving a reserved name replaces its
    /// reason; `[deleted]` and `[hidden]` are always reserved (`BAD_USER_INPUT`). At most
    /// 10 000 names. Recorded in the moderation log. Moderators only.
    async fn reserve_name(
        &self,
        ctx: &Context<'_>,
        name: String,
        reason: Option<String>,
    ) -> async_graphql::Result<Option<ReservedNameNode>> {
        let caller = moderator(ctx).await?;
        let name = DisplayName::parse(&name).gql()?;
        let reason = reason.as_deref().map(Reason::parse).transpose().gql()?;
        let reserved = services(ctx)
            .reserve_name(&caller, name, reason)
            .await
            .gql()?;
        Ok(Some(ReservedNameNode(reserved)))
    }

    /// Releases a reserved name (given in any spelling that reserves it): true when it was
    /// reserved, false when it was not, which changes nothing. Takes effect at once on this
    /// server and within 5 s on the others. Recorded in the moderation log when it was
    /// reserved. Moderators only.
    async fn release_name(
        &self,
        ctx: &Context<'_>,
        name: String,
    ) -> async_graphql::Result<Option<bool>> {
        let caller = moderator(ctx).await?;
        let name = DisplayName::parse(&name).gql()?;
        let released = services(ctx)
            .release_name(&caller, name.as_str())
            .await
            .gql()?;
        Ok(Some(released))
    }
}
