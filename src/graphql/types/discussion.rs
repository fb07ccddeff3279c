//! The `Discussion` object: its fields, its comment lists and direct links to its comments.

use std::sync::Arc;

use async_graphql::{ComplexObject, Context, Object, SimpleObject, ID};
use chrono::{DateTime, Utc};
use tracing::Instrument as _;

use super::DiscussionNode;
use super::{
    CommentConnection, CommentNode, CommentOrder, ModerationMode, PageInfo, StorageLayout, Total,
};
use crate::domain::paging::Cursor;
use crate::domain::{CursorKind, Discussion, DomainError, PageArgs, Paging, Rank, Slug};
use crate::graphql::error::OrGql;
use crate::graphql::loaders::{CommentKey, DiscussionRef};
use crate::graphql::{reads, store, Limits};
use crate::store::{Listing, Ranked, RankedOf};

/// The paging of a list of comments, under the configured limits.
fn paging(ctx: &Context<'_>, args: &PageArgs, kind: CursorKind) -> async_graphql::Result<Paging> {
    ctx.data_unchecked::<Limits>().paging(args, kind)
}

#[Object(name = "Discussion")]
impl DiscussionNode {
    /// The discussion's id.
    async fn id(&self) -> ID {
        ID(self.0.id.to_string())
    }

    /// Its title.
    async fn title(&self) -> &str {
        &self.0.title
    }

    /// The host page's own identifier for it (an article id, a path…), unique among
    /// discussions; null when it was created without one. See `ensureDiscussion`.
    async fn key(&self) -> Option<&str> {
        self.0.key.as_ref().map(|k| k.as_str())
    }

    /// The address of the page it belongs to, when known (an absolute http or https URL).
    async fn url(&self) -> Option<&str> {
        self.0.url.as_deref()
    }

    /// How its comments are stored.
    async fn layout(&self) -> StorageLayout {
        self.0.layout.into()
    }

    /// How many comments it holds, deleted ones included (a deleted comment keeps its place).
    async fn comment_count(&self) -> u64 {
        self.0.comment_count
    }

    /// Whether a moderator locked it: no new comments or replies, no edits by authors.
    async fn locked(&self) -> bool {
        self.0.locked
    }

    /// Whether the signed-in viewer follows it (null without a token).
    async fn viewer_follows(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<bool>> {
        let crate::auth::AuthState::Authenticated(viewer) = crate::graphql::auth(ctx) else {
            return Ok(None);
        };
        let key = crate::graphql::loaders::ViewerFollowKey {
            user: viewer.author.id.clone(),
            discussion: self.0.id.clone(),
        };
        Ok(Some(reads(ctx).loader.load_one(key).await.gql()?.is_some()))
    }

    /// How it moderates new comments: what a moderator set with `setModeration`, else the
    /// server's default (`THREADQL_MODERATION`).
    async fn moderation(&self, ctx: &Context<'_>) -> ModerationMode {
        self.0
            .moderation
            .unwrap_or(ctx.data_unchecked::<Limits>().default_moderation)
            .into()
    }

    /// Whether it takes comments from people without an account: what a moderator set with
    /// `setGuestPolicy`, else the server's default (`THREADQL_GUESTS`).
    async fn guests(&self, ctx: &Context<'_>) -> super::GuestPolicy {
        crate::graphql::services(ctx).guest_policy(&self.0).into()
    }

    /// When it closes to new comments, replies, edits and votes (moderators may still act;
    /// deleting stays possible): what a moderator set with `setDiscussionClosing`, else
    /// `THREADQL_AUTO_CLOSE_AFTER` after its creation; null: never.
    async fn closes_at(&self, ctx: &Context<'_>) -> Option<chrono::DateTime<chrono::Utc>> {
        crate::graphql::services(ctx)
            .closes_at(&self.0)
            .map(|at| at.to_datetime())
    }

    /// How many of its comments wait for a moderator, for moderators; null for everyone else.
    async fn pending_count(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<u64>> {
        match crate::graphql::auth(ctx) {
            crate::auth::AuthState::Authenticated(viewer) if viewer.moderator => {
                let counted = crate::graphql::store(ctx)
                    .held()
                    .queue_size(crate::domain::Queue::Pending, Some(&self.0.id))
                    .instrument(tracing::debug_span!("store.pendingCount"))
                    .await
                    .gql()?;
                Ok(Some(counted))
            }
            _ => Ok(None),
        }
    }

    /// When it was created.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created.to_datetime()
    }

    /// Its comments, oldest first, newest first or threaded. Paged forward by `first` with
    /// `after` or `offset`, or backward by `last` with `before` (the final ones without it).
    #[allow(
        clippy::too_many_arguments,
        reason = "each GraphQL argument is one (Relay's paging arguments are field arguments)"
    )]
    async fn comments(
        &self,
        ctx: &Context<'_>,
        #[graphql(default)] order: CommentOrder,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
        offset: Option<i32>,
    ) -> async_graphql::Result<CommentConnection> {
        let (listing, kind) = match order {
            CommentOrder::Chronological => (Listing::Chronological, CursorKind::Chronological),
            CommentOrder::Newest => (Listing::Chronological, CursorKind::Newest),
            CommentOrder::Threaded => (Listing::Threaded, CursorKind::Threaded),
            CommentOrder::Top | CommentOrder::Best | CommentOrder::Controversial => {
                (Listing::Chronological, order.of_siblings("comments")?)
            }
        };
        let paging = paging(
            ctx,
            &PageArgs {
                first,
                after,
                last,
                before,
                offset,
            },
            kind,
        )?;
        if let CursorKind::Ranked(rank) = kind {
            return self.ranked(ctx, rank, RankedOf::Comments, &paging).await;
        }
        let page = store(ctx)
            .layout(self.0.layout)
            .gql()?
            .list(&reads(ctx).scope, &self.0, listing, &paging.window)
            .instrument(tracing::debug_span!("store.list"))
            .await
            .gql()?;
        Ok(CommentConnection::new(
            &self.0,
            page,
            kind,
            &paging,
            Total::Known(self.0.comment_count),
        ))
    }

    /// Its top-level comments, oldest first (or newest first: `order: NEWEST`). Paged like
    /// `comments`.
    #[allow(
        clippy::too_many_arguments,
        reason = "each GraphQL argument is one (Relay's paging arguments are field arguments)"
    )]
    async fn threads(
        &self,
        ctx: &Context<'_>,
        #[graphql(default)] order: CommentOrder,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
        offset: Option<i32>,
    ) -> async_graphql::Result<CommentConnection> {
        let kind = order.of_siblings("threads")?;
        let paging = paging(
            ctx,
            &PageArgs {
                first,
                after,
                last,
                before,
                offset,
            },
            kind,
        )?;
        if let CursorKind::Ranked(rank) = kind {
            return self.ranked(ctx, rank, RankedOf::Threads, &paging).await;
        }
        let layout = store(ctx).layout(self.0.layout).gql()?;
        let scope = &reads(ctx).scope;
        let window = &paging.window;
        let page = if reads_below_nodes(ctx) {
            layout
                .list(scope, &self.0, Listing::Threads, window)
                .instrument(tracing::debug_span!("store.threads"))
                .await
        } else {
            layout
                .list_shallow(scope, &self.0, Listing::Threads, window)
                .instrument(tracing::debug_span!("store.threads"))
                .await
        }
        .gql()?;
        Ok(CommentConnection::new(
            &self.0,
            page,
            kind,
            &paging,
            Total::Known(self.0.thread_count),
        ))
    }

    /// Its pinned comments, in the order they were pinned (at most 5). A pinned comment that
    /// was deleted since is left out. One database read for them all.
    async fn pinned_comments(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<CommentNode>> {
        let keys = self.0.pinned.iter().map(|slug| CommentKey {
            discussion: DiscussionRef(self.0.clone()),
            slug: slug.clone(),
        });
        let mut found = reads(ctx).loader.load_many(keys).await.gql()?;
        Ok(self
            .0
            .pinned
            .iter()
            .filter_map(|slug| {
                let key = CommentKey {
                    discussion: DiscussionRef(self.0.clone()),
                    slug: slug.clone(),
                };
                found.remove(&key)
            })
            .filter(|comment| !comment.deleted)
            .map(|comment| CommentNode::new(self.0.clone(), comment))
            .collect())
    }

    /// One comment by slug (a direct link).
    async fn comment(&self, ctx: &Context<'_>, slug: String) -> async_graphql::Result<CommentNode> {
        comment_by_slug(ctx, self.0.clone(), &slug).await
    }
}

impl DiscussionNode {
    /// A page of a ranked list of its comments (`of`: every comment, or its threads).
    async fn ranked(
        &self,
        ctx: &Context<'_>,
        rank: Rank,
        of: RankedOf<'_>,
        paging: &Paging,
    ) -> async_graphql::Result<CommentConnection> {
        let ranked = store(ctx)
            .votes()
            .ranked(
                &reads(ctx).scope,
                &self.0,
                Ranked { rank, of },
                &paging.window,
            )
            .instrument(tracing::debug_span!("store.ranked"))
            .await
            .gql()?;
        let total = Total::Ranked {
            discussion: self.0.clone(),
            threads: matches!(of, RankedOf::Threads),
        };
        Ok(CommentConnection::ranked(
            &self.0,
            (ranked.page, ranked.walk),
            rank,
            paging,
            total,
            None,
        ))
    }
}

/// Whether the selection of a comment connection reads anything below its comments (their
/// replies, sub-discussions or parents), so a store should not read just the page.
fn reads_below_nodes(ctx: &Context<'_>) -> bool {
    let look = ctx.look_ahead();
    [look.field("nodes"), look.field("edges").field("node")]
        .iter()
        .any(|node| {
            ["replies", "subDiscussion", "parent"]
                .iter()
                .any(|field| node.field(field).exists())
        })
}

/// The held comment `slug` of the discussion when the caller may see it: its author or a
/// moderator (nobody else learns that it exists).
pub async fn visible_held(
    ctx: &Context<'_>,
    discussion: &Discussion,
    slug: &Slug,
) -> async_graphql::Result<Option<crate::domain::Held>> {
    let crate::auth::AuthState::Authenticated(viewer) = crate::graphql::auth(ctx) else {
        return Ok(None);
    };
    let held = crate::graphql::store(ctx)
        .held()
        .find(&discussion.id, slug)
        .await
        .gql()?;
    Ok(held.filter(|h| viewer.moderator || h.comment.author.id == viewer.author.id))
}

/// Loads a comment by client-supplied slug (a held one for its author and moderators), or fails
/// with `NOT_FOUND`.
pub async fn comment_by_slug(
    ctx: &Context<'_>,
    discussion: Arc<Discussion>,
    slug: &str,
) -> async_graphql::Result<CommentNode> {
    let slug = Slug::parse(slug).gql()?;
    let key = CommentKey {
        discussion: DiscussionRef(discussion.clone()),
        slug: slug.clone(),
    };
    if let Some(comment) = reads(ctx).loader.load_one(key).await.gql()? {
        return Ok(CommentNode::new(discussion, comment));
    }
    match visible_held(ctx, &discussion, &slug).await? {
        Some(held) => Ok(CommentNode::held(discussion, held)),
        None => Err(DomainError::not_found(format!(
            "no comment {slug} in discussion {}",
            discussion.id
        )))
        .gql(),
    }
}

/// A page of discussions.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct DiscussionConnection {
    /// Where this page stands.
    pub page_info: PageInfo,
    /// The discussions of the page, in order.
    #[graphql(skip)]
    pub items: Vec<Arc<Discussion>>,
    /// Each item's cursor, for a list with cursors of its own (else the discussion's).
    #[graphql(skip)]
    pub cursors: Option<Vec<String>>,
    /// How many the list holds, for a list that is not every discussion.
    #[graphql(skip)]
    pub total: Option<u64>,
}

/// One discussion in a page, with its cursor.
pub struct DiscussionEdge {
    discussion: Arc<Discussion>,
    cursor: Option<String>,
}

#[Object]
impl DiscussionEdge {
    /// Pass it as `after` to continue after this discussion, or as `before` to page back from it.
    async fn cursor(&self) -> String {
        match &self.cursor {
            Some(cursor) => cursor.clone(),
            None => Cursor::of_discussion(&self.discussion).encode(),
        }
    }

    /// The discussion.
    async fn node(&self) -> DiscussionNode {
        DiscussionNode(self.discussion.clone())
    }
}

#[ComplexObject]
impl DiscussionConnection {
    /// The discussions with their cursors.
    async fn edges(&self) -> Vec<DiscussionEdge> {
        self.items
            .iter()
            .enumerate()
            .map(|(i, d)| DiscussionEdge {
                discussion: d.clone(),
                cursor: self.cursors.as_ref().and_then(|c| c.get(i).cloned()),
            })
            .collect()
    }

    /// The discussions.
    async fn nodes(&self) -> Vec<DiscussionNode> {
        self.items
            .iter()
            .map(|d| DiscussionNode(d.clone()))
            .collect()
    }

    /// How many discussions the list holds (every discussion, or those followed).
    async fn total_count(&self, ctx: &Context<'_>) -> async_graphql::Result<u64> {
        if let Some(total) = self.total {
            return Ok(total);
        }
        store(ctx)
            .discussions()
            .count()
            .instrument(tracing::debug_span!("store.discussionCount"))
            .await
            .gql()
    }
}
