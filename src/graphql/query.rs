//! The Query root: discussions, direct links, and the federation entity resolvers.

use std::sync::Arc;

use async_graphql::{Context, Object, ID};
use tracing::Instrument as _;

use super::error::OrGql;
use super::types::{comment_by_slug, CommentNode, DiscussionConnection, DiscussionNode, PageInfo};
use super::{reads, store, Limits};
use crate::domain::paging::Cursor;
use crate::domain::{CursorKind, Discussion, DiscussionId, DomainError, PageArgs};

/// Loads a discussion by client-supplied id: `BAD_USER_INPUT` if malformed, `NOT_FOUND` if unknown.
pub(super) async fn load_discussion(
    ctx: &Context<'_>,
    id: &str,
) -> async_graphql::Result<Arc<Discussion>> {
    let id = DiscussionId::parse(id).gql()?;
    reads(ctx)
        .loader
        .load_one(id.clone())
        .await
        .gql()?
        .ok_or_else(|| DomainError::not_found(format!("no discussion {id}")))
        .gql()
}

/// Reads.
pub struct Query;

#[Object]
impl Query {
    /// A discussion by id (`NOT_FOUND` when there is none).
    async fn discussion(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> async_graphql::Result<Option<DiscussionNode>> {
        Ok(Some(DiscussionNode(load_discussion(ctx, &id).await?)))
    }

    /// All discussions, oldest first.
    async fn discussions(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<Option<DiscussionConnection>> {
        let window = ctx.data_unchecked::<Limits>().window(
            &PageArgs {
                first,
                after,
                offset: None,
            },
            CursorKind::Discussion,
        )?;
        let page = store(ctx)
            .discussions()
            .list(&window)
            .instrument(tracing::debug_span!("store.discussionList"))
            .await
            .gql()?;
        let cursor = |d: &Discussion| Cursor::of_discussion(d).encode();
        Ok(Some(DiscussionConnection {
            page_info: PageInfo {
                has_next_page: page.has_next,
                has_previous_page: matches!(
                    window,
                    crate::domain::Window::After {
                        cursor: Some(_),
                        ..
                    }
                ),
                start_cursor: page.items.first().map(cursor),
                end_cursor: page.items.last().map(cursor),
            },
            page: crate::domain::Page {
                items: page.items.into_iter().map(Arc::new).collect(),
                has_next: page.has_next,
            },
        }))
    }

    /// A comment by discussion and slug: the target of a direct link.
    async fn comment(
        &self,
        ctx: &Context<'_>,
        discussion_id: ID,
        slug: String,
    ) -> async_graphql::Result<Option<CommentNode>> {
        let discussion = load_discussion(ctx, &discussion_id).await?;
        comment_by_slug(ctx, discussion, &slug).await.map(Some)
    }

    /// Federation: a discussion entity by key.
    #[graphql(entity)]
    async fn find_discussion_by_id(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> async_graphql::Result<Option<DiscussionNode>> {
        let Ok(id) = DiscussionId::parse(&id) else {
            return Ok(None);
        };
        let found = reads(ctx).loader.load_one(id).await.gql()?;
        Ok(found.map(DiscussionNode))
    }

    /// Federation: a comment entity by key.
    #[graphql(entity)]
    async fn find_comment_by_discussion_id_and_slug(
        &self,
        ctx: &Context<'_>,
        discussion_id: ID,
        slug: String,
    ) -> async_graphql::Result<Option<CommentNode>> {
        let discussion = match load_discussion(ctx, &discussion_id).await {
            Ok(d) => d,
            Err(_) => return Ok(None),
        };
        Ok(comment_by_slug(ctx, discussion, &slug).await.ok())
    }
}
