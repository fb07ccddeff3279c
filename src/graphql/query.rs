//! The Query root: discussions, direct links, and the federation entity resolvers.

use std::sync::Arc;

use async_graphql::{Context, Object, ID};
use tracing::Instrument as _;

use super::error::OrGql;
use super::loaders::{CommentKey, DiscussionRef};
use super::types::{
    comment_by_slug, CommentConnection, CommentNode, DiscussionConnection, DiscussionNode,
    ModerationQueue, PageInfo, Total,
};
use super::{auth, reads, store, Limits};
use crate::auth::AuthState;
use crate::domain::paging::Cursor;
use crate::domain::{
    CursorKind, Discussion, DiscussionId, DiscussionKey, DomainError, PageArgs, Queue,
};
use crate::store::{QueueEntry, Waiting};

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

/// Refuses a read that is for moderators unless the caller is one (`FORBIDDEN`, or
/// `UNAUTHENTICATED` without a valid token).
pub(super) fn moderator_reading(ctx: &Context<'_>, what: &str) -> async_graphql::Result<()> {
    match auth(ctx) {
        AuthState::Authenticated(viewer) if viewer.moderator => Ok(()),
        AuthState::Authenticated(_) => Err(DomainError::Forbidden(format!(
            "only moderators (a token with the `moderator` role) may read {what}"
        )))
        .gql(),
        AuthState::Anonymous => Err(DomainError::Unauthenticated(format!(
            "{what} are for moderators: send `Authorization: Bearer <token>`"
        )))
        .gql(),
        AuthState::Rejected(why) => Err(DomainError::Unauthenticated(why.clone())).gql(),
    }
}

/// The nodes of a queue page, each with its cursor: held comments as stored, public ones read
/// from their layouts (one batched read per discussion and layout). An entry whose discussion
/// or comment is gone (deleted since) is left out.
async fn queue_nodes(
    ctx: &Context<'_>,
    entries: Vec<QueueEntry>,
) -> async_graphql::Result<Vec<(String, CommentNode)>> {
    let ids: Vec<DiscussionId> = entries
        .iter()
        .map(|e| match &e.waiting {
            Waiting::Held(held) => held.comment.discussion_id.clone(),
            Waiting::Public { discussion, .. } => discussion.clone(),
        })
        .collect();
    let discussions = reads(ctx).loader.load_many(ids).await.gql()?;
    let keys: Vec<CommentKey> = entries
        .iter()
        .filter_map(|e| match &e.waiting {
            Waiting::Public { discussion, slug } => Some(CommentKey {
                discussion: DiscussionRef(discussions.get(discussion)?.clone()),
                slug: slug.clone(),
            }),
            Waiting::Held(_) => None,
        })
        .collect();
    let comments = reads(ctx).loader.load_many(keys.clone()).await.gql()?;
    let mut nodes = Vec::with_capacity(entries.len());
    for entry in entries {
        let cursor = Cursor::Queue {
            since: entry.since,
            key: entry.key,
        }
        .encode();
        let node = match entry.waiting {
            Waiting::Held(held) => discussions
                .get(&held.comment.discussion_id)
                .map(|d| CommentNode::held(d.clone(), *held)),
            Waiting::Public { discussion, slug } => keys
                .iter()
                .find(|k| k.discussion.0.id == discussion && k.slug == slug)
                .and_then(|k| Some((k.discussion.0.clone(), comments.get(k)?.clone())))
                .map(|(d, c)| CommentNode::new(d, c)),
        };
        if let Some(node) = node {
            nodes.push((cursor, node));
        }
    }
    Ok(nodes)
}

/// Most keys one `discussionsByKeys` takes.
const MAX_KEYS: usize = 100;

/// Loads discussions by client-supplied keys, in their order (null where unknown): one
/// database command for them all. `BAD_USER_INPUT` for a malformed key, which `name` names by
/// its position (the argument as the caller wrote it).
async fn load_keyed(
    ctx: &Context<'_>,
    keys: &[String],
    name: impl Fn(usize) -> String,
) -> async_graphql::Result<Vec<Option<DiscussionNode>>> {
    let keys = keys
        .iter()
        .enumerate()
        .map(|(n, key)| {
            DiscussionKey::parse(key)
                .map_err(|e| DomainError::bad_input(format!("{}: {e}", name(n))))
                .gql()
        })
        .collect::<async_graphql::Result<Vec<_>>>()?;
    let found = reads(ctx)
        .loader
        .load_many(keys.iter().cloned())
        .await
        .gql()?;
    Ok(keys
        .iter()
        .map(|key| found.get(key).cloned().map(DiscussionNode))
        .collect())
}

/// Reads: discussions, comments, moderation; merged into [`super::Query`].
#[derive(Default)]
pub(super) struct CoreQuery;

#[Object]
impl CoreQuery {
    /// A discussion by id (`NOT_FOUND` when there is none).
    async fn discussion(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> async_graphql::Result<Option<DiscussionNode>> {
        Ok(Some(DiscussionNode(load_discussion(ctx, &id).await?)))
    }

    /// The discussion with this key (the host page's own identifier for it), or null when
    /// there is none. The key is composed (NFC) first. `BAD_USER_INPUT` for a key no
    /// discussion can have (empty, over 512 characters, control or invisible characters).
    async fn discussion_by_key(
        &self,
        ctx: &Context<'_>,
        key: String,
    ) -> async_graphql::Result<Option<DiscussionNode>> {
        Ok(
            load_keyed(ctx, std::slice::from_ref(&key), |_| "key".to_owned())
                .await?
                .pop()
                .flatten(),
        )
    }

    /// The discussions with these keys, in the same order, null where a key has none (a key
    /// given twice gives its discussion twice): what an index page needs to show each
    /// article's comment count, in one database command. At most 100 keys (`BAD_USER_INPUT`
    /// past it, and for a malformed key).
    async fn discussions_by_keys(
        &self,
        ctx: &Context<'_>,
        keys: Vec<String>,
    ) -> async_graphql::Result<Vec<Option<DiscussionNode>>> {
        if keys.len() > MAX_KEYS {
            return Err(DomainError::bad_input(format!(
                "discussionsByKeys takes at most {MAX_KEYS} keys (got {}): ask in pages",
                keys.len()
            )))
            .gql();
        }
        load_keyed(ctx, &keys, |n| format!("keys[{n}]")).await
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
        let page = store(ctx)
            .discussions()
            .list(&paging.window)
            .instrument(tracing::debug_span!("store.discussionList"))
            .await
            .gql()?;
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
            cursors: None,
            total: None,
        }))
    }

    /// The comments waiting in a moderators' queue, oldest first (by when they entered it):
    /// across every discussion, or in `discussionId`'s. Each page is one index range.
    /// Paged forward by `first`/`after`. Moderators only.
    async fn moderation_queue(
        &self,
        ctx: &Context<'_>,
        queue: ModerationQueue,
        discussion_id: Option<ID>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<Option<CommentConnection>> {
        moderator_reading(ctx, "the moderation queues")?;
        let discussion = discussion_id
            .as_deref()
            .map(|id| DiscussionId::parse(id))
            .transpose()
            .gql()?;
        let anchored = after.is_some();
        let (after, limit) =
            ctx.data_unchecked::<Limits>()
                .forward(first, after, CursorKind::ModerationQueue)?;
        let queue: Queue = queue.into();
        let (entries, more) = store(ctx)
            .held()
            .queue_page(queue, discussion.as_ref(), after.as_ref(), limit)
            .instrument(tracing::debug_span!("store.moderationQueue"))
            .await
            .gql()?;
        let edges = queue_nodes(ctx, entries).await?;
        Ok(Some(CommentConnection::of_edges(
            edges,
            more,
            anchored,
            Total::Queue(queue, discussion),
        )))
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

    /// Federation: a discussion entity by the host page's key (null when there is none);
    /// representations of one request are read in one command.
    #[graphql(entity)]
    async fn find_discussion_by_key(
        &self,
        ctx: &Context<'_>,
        key: String,
    ) -> async_graphql::Result<Option<DiscussionNode>> {
        let Ok(key) = DiscussionKey::parse(&key) else {
            return Ok(None);
        };
        let found = reads(ctx).loader.load_one(key).await.gql()?;
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
