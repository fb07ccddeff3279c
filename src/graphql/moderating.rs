//! Moderators' reads: the moderation log, the bans in force and the reserved names.

use async_graphql::{Context, Object, ID};
use tracing::Instrument as _;

use super::error::OrGql;
use super::query::moderator_reading;
use super::types::{BanConnection, ModerationAction, ModerationLogConnection, ReservedNameNode};
use super::{store, Limits};
use crate::domain::{CursorKind, DomainError, LogFilter, Micros, PageArgs, UserId};
use crate::service::MAX_RESERVED_NAMES;

/// Moderators' reads.
#[derive(Default)]
pub(super) struct ModerationQuery;

#[Object]
impl ModerationQuery {
    /// What moderators did, newest first: every approval and rejection, mode set, lock and
    /// unlock, pin and unpin, move, ban and lifted ban, and every edit or delete of a comment by
    /// a moderator who did not write it.
    /// Paged forward (`first`/`after`, toward older entries) or backward (`last`/`before`,
    /// toward newer ones; the oldest entries without `before`). Moderators only.
    /// `action` keeps one kind of action and `moderatorId` one moderator's; a filtered log
    /// pages forward only (`last`/`before` with a filter are `BAD_USER_INPUT`).
    #[allow(clippy::too_many_arguments)]
    async fn moderation_log(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
        action: Option<ModerationAction>,
        moderator_id: Option<ID>,
    ) -> async_graphql::Result<Option<ModerationLogConnection>> {
        moderator_reading(ctx, "the moderation log")?;
        let filter = LogFilter {
            action: action.map(Into::into),
            moderator: moderator_id
                .as_deref()
                .map(|id| UserId::parse(id))
                .transpose()
                .gql()?,
        };
        if !filter.is_empty() && (last.is_some() || before.is_some()) {
            return Err(DomainError::bad_input(
                "a filtered moderation log pages forward only: `first` and `after`",
            ))
            .gql();
        }
        let paging = ctx.data_unchecked::<Limits>().paging(
            &PageArgs {
                first,
                after,
                last,
                before,
                offset: None,
            },
            CursorKind::ModerationLog,
        )?;
        let page = store(ctx)
            .moderation()
            .log_page(&paging.window, &filter)
            .instrument(tracing::debug_span!("store.moderationLog"))
            .await
            .gql()?;
        Ok(Some(ModerationLogConnection(paging.finish(page))))
    }

    /// Every reserved display name, by name (at most 10 000). Moderators only.
    async fn reserved_names(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<Vec<ReservedNameNode>>> {
        moderator_reading(ctx, "the reserved names")?;
        let names = store(ctx)
            .names()
            .all(MAX_RESERVED_NAMES)
            .instrument(tracing::debug_span!("store.reservedNames"))
            .await
            .gql()?;
        Ok(Some(names.into_iter().map(ReservedNameNode).collect()))
    }

    /// The bans in force now, newest first (a ban that has ended is left out, even before it
    /// is lifted). Paged forward by `first`/`after`. Moderators only.
    async fn bans(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<BanConnection> {
        moderator_reading(ctx, "the bans")?;
        let (cursor, limit) =
            ctx.data_unchecked::<Limits>()
                .forward(first, after, CursorKind::Bans)?;
        let page = store(ctx)
            .moderation()
            .bans_page(cursor.as_ref(), limit, Micros::now())
            .instrument(tracing::debug_span!("store.bans"))
            .await
            .gql()?;
        Ok(BanConnection(page))
    }
}
