//! The Query root: discussions, direct links, and the federation entity resolvers.

use std::sync::Arc;

use async_graphql::{Context, Object, ID};

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

    /// All discussions, oldest first. Paged forward by `first`/`after` or backward by
    /// `last`/`before` (the newest ones without it).
    async fn discussions(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
    ) -> async_graphql::Result<Option<DiscussionConnection>> {
        let kind = CursorKind::Discussion;
        let paging = ctx.data_unchecked::<Limits>().paging(
            &PageArgs {
                first,
                after,
                last,
                before,
                offset: None,
            },
            kind,
        )?;
        let page = store(ctx).discussions().list(&paging.window).await.gql()?;
        let page = paging.finish(page);
        let cursor = |d: &Discussion| Cursor::of_discussion(d).encode_for(kind);
        Ok(Some(DiscussionConnection {
            page_info: PageInfo {
                has_next_page: page.has_next_page,
                has_previous_page: page.has_previous_page,
                start_cursor: page.items.first().map(cursor),
                end_cursor: page.items.last().map(cursor),
            },
            items: page.items.into_iter().map(Arc::new).collect(),
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
