//! An author's history, for moderators: `Query.commentsByAuthor` (their comments across every
//! discussion) and `Query.authorStanding` (their ban and what moderation counted of them).

use async_graphql::{Context, Object, ID};
use tracing::Instrument as _;

use super::error::OrGql;
use super::events::page_size;
use super::query::moderator_reading;
use super::types::{BanNode, CommentConnection, CommentNode, Total};
use super::{services, Limits};
use crate::domain::paging::Cursor;
use crate::domain::{CursorKind, Held, UserId};
use crate::service::AuthorStanding;

/// An author's history; merged into [`super::Query`].
#[derive(Default)]
pub(super) struct HistoryQuery;

#[Object]
impl HistoryQuery {
    /// One author's comments across every discussion, newest first (in the order they were
    /// posted or submitted). Held comments are included (their `status` is PENDING or
    /// REJECTED), deleted ones as their tombstones. Paged forward by `first`/`after`; each
    /// page reads one range of the author's comments by their numbers, whatever they wrote.
    /// `totalCount` is `authorStanding.comments`. Moderators only.
    async fn comments_by_author(
        &self,
        ctx: &Context<'_>,
        user_id: ID,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<Option<CommentConnection>> {
        moderator_reading(ctx, "an author's comments")?;
        let user = UserId::parse(&user_id).gql()?;
        let limit = page_size(first, ctx.data_unchecked::<Limits>())?;
        let after = after
            .as_deref()
            .map(|text| Cursor::decode(text, CursorKind::ByAuthor))
            .transpose()
            .gql()?;
        let (comments, more) = services(ctx)
            .authored(&user, after.as_ref(), limit)
            .instrument(tracing::debug_span!("store.commentsByAuthor"))
            .await
            .gql()?;
        let edges = comments
            .into_iter()
            .map(|authored| {
                let cursor = authored.cursor().encode();
                let node = match authored.held {
                    true => CommentNode::held(
                        authored.discussion,
                        Held {
                            comment: authored.comment,
                        },
                    ),
                    false => CommentNode::new(authored.discussion, authored.comment),
                };
                (cursor, node)
            })
            .collect();
        Ok(Some(CommentConnection::of_edges(
            edges,
            more,
            after.is_some(),
            Total::ByAuthor(user),
        )))
    }

    /// An author's standing with the moderators: their ban, and counts of their comments
    /// and of what moderators did with them. Moderators only.
    async fn author_standing(
        &self,
        ctx: &Context<'_>,
        user_id: ID,
    ) -> async_graphql::Result<AuthorStandingNode> {
        moderator_reading(ctx, "an author's standing")?;
        let user = UserId::parse(&user_id).gql()?;
        let standing = services(ctx)
            .author_standing(&user)
            .instrument(tracing::debug_span!("store.authorStanding"))
            .await
            .gql()?;
        Ok(AuthorStandingNode(standing))
    }
}

/// An author's standing with the moderators.
pub(super) struct AuthorStandingNode(AuthorStanding);

#[Object(name = "AuthorStanding")]
impl AuthorStandingNode {
    /// The author (a token's `sub`).
    async fn user_id(&self) -> ID {
        ID(self.0.user.to_string())
    }

    /// Their ban while it lasts; null when they are not banned.
    async fn ban(&self) -> Option<BanNode> {
        self.0.ban.as_ref().map(|ban| BanNode(ban.as_ref().clone()))
    }

    /// Their comments, held ones included (deleted ones too).
    async fn comments(&self) -> u64 {
        self.0.comments
    }

    /// How many of their comments a moderator approved (published a held one, or restored a
    /// hidden one).
    async fn approved(&self) -> u64 {
        self.0.tallies.approved
    }

    /// How many times a moderator rejected one of their comments (each time one became
    /// REJECTED).
    async fn rejected(&self) -> u64 {
        self.0.tallies.rejected
    }

    /// How many reports were counted against their comments.
    async fn reported(&self) -> u64 {
        self.0.tallies.reported
    }
}
