//! The Mutation root: every mutation needs a valid bearer token.

use async_graphql::{Context, InputObject, Object, ID};

use super::error::OrGql;
use super::loaders::{CommentKey, Loaders, RepliesKey, SubDiscussionCountKey, SubDiscussionKey};
use super::query::load_discussion;
use super::types::{CommentNode, DiscussionNode, StorageLayout};
use super::{auth, store, Limits, RequestScope};
use crate::auth::{AuthState, Viewer};
use crate::domain::{CommentText, DiscussionId, DiscussionTitle, DomainError, NewComment, Slug};

/// The caller, or `UNAUTHENTICATED`.
fn viewer<'a>(ctx: &Context<'a>) -> async_graphql::Result<&'a Viewer> {
    match auth(ctx) {
        AuthState::Authenticated(viewer) => Ok(viewer),
        AuthState::Anonymous => Err(DomainError::Unauthenticated(
            "this needs a signed-in user: send `Authorization: Bearer <token>` (mint a development token with `threadql token`)".into(),
        ))
        .gql(),
        AuthState::Rejected(why) => Err(DomainError::Unauthenticated(why.clone())).gql(),
    }
}

/// Forgets what this request has read, so fields resolved after a write see it.
fn forget_reads(ctx: &Context<'_>) {
    ctx.data_unchecked::<RequestScope>().0.clear();
    let loaders = ctx.data_unchecked::<Loaders>();
    loaders.clear::<DiscussionId>();
    loaders.clear::<CommentKey>();
    loaders.clear::<RepliesKey>();
    loaders.clear::<SubDiscussionKey>();
    loaders.clear::<SubDiscussionCountKey>();
}

/// A new discussion.
#[derive(InputObject)]
pub struct CreateDiscussionInput {
    /// Its title (1–300 characters).
    pub title: String,
    /// How to store its comments; the server's default when omitted.
    pub layout: Option<StorageLayout>,
}

/// A new comment.
#[derive(InputObject)]
pub struct PostCommentInput {
    /// The discussion to post in.
    pub discussion_id: ID,
    /// The comment to reply to; omit for a top-level comment.
    pub parent_slug: Option<String>,
    /// The text.
    pub text: String,
}

/// Writes.
pub struct Mutation;

#[Object]
impl Mutation {
    /// Creates a discussion.
    async fn create_discussion(
        &self,
        ctx: &Context<'_>,
        input: CreateDiscussionInput,
    ) -> async_graphql::Result<DiscussionNode> {
        viewer(ctx)?;
        let title = DiscussionTitle::parse(&input.title).gql()?;
        let layout = input
            .layout
            .map(Into::into)
            .unwrap_or(ctx.data_unchecked::<Limits>().default_layout);
        let store = store(ctx);
        store.layout(layout).gql()?;
        let discussion = store.discussions.create(title, layout).await.gql()?;
        Ok(DiscussionNode(discussion.into()))
    }

    /// Posts a comment: top-level, or a reply when `parentSlug` is given. A reply deeper than the
    /// depth cap attaches to the deepest allowed ancestor (see the returned `parentSlug`).
    async fn post_comment(
        &self,
        ctx: &Context<'_>,
        input: PostCommentInput,
    ) -> async_graphql::Result<CommentNode> {
        let viewer = viewer(ctx)?;
        let limits = ctx.data_unchecked::<Limits>();
        let text = CommentText::parse(&input.text, limits.max_text_chars).gql()?;
        let parent = input
            .parent_slug
            .as_deref()
            .map(Slug::parse)
            .transpose()
            .gql()?;
        let discussion = load_discussion(ctx, &input.discussion_id).await?;
        let posted = store(ctx)
            .layout(discussion.layout)
            .gql()?
            .post_comment(
                &discussion,
                NewComment {
                    parent,
                    author: viewer.author.clone(),
                    text,
                },
            )
            .await
            .gql()?;
        forget_reads(ctx);
        if posted.reattached {
            tracing::info!(
                discussion = %discussion.id,
                slug = %posted.comment.slug,
                "reply was deeper than the depth cap: attached to the deepest allowed ancestor"
            );
        }
        Ok(CommentNode::new(discussion, posted.comment))
    }
}
