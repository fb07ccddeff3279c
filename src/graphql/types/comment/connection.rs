//! Pages of comments: their edges, their page info and where their total comes from.

use std::sync::Arc;

use async_graphql::{Context, Object, SimpleObject};
use tracing::Instrument as _;

use super::CommentNode;
use crate::domain::paging::Cursor;
use crate::domain::{Comment, CursorKind, Discussion, DiscussionId, Page, Paging, Queue, Rank};
use crate::graphql::error::OrGql;
use crate::graphql::loaders::{CommentKey, DiscussionRef, SubDiscussionCountKey};
use crate::graphql::{reads, store};

/// Where a connection's `totalCount` comes from. A connection whose total is counted on demand
/// is listed in `cost::COUNTED`, so that asking for it costs what counting reads.
pub enum Total {
    /// Already known (a counter kept with the data).
    Known(u64),
    /// Counted on demand, batched.
    SubDiscussion(SubDiscussionCountKey),
    /// The size of a moderator queue (in one discussion, or all), counted on demand.
    Queue(Queue, Option<DiscussionId>),
    /// One author's comments, held ones included, counted on demand up to 10 000.
    ByAuthor(crate::domain::UserId),
    /// The comments of a ranked list of every comment (`threads`: of the top-level ones) of a
    /// discussion: those it counts less its placeholders, which ranked lists leave out, counted
    /// on demand.
    Ranked {
        /// The discussion.
        discussion: Arc<Discussion>,
        /// Whether the list is of top-level comments only.
        threads: bool,
    },
}

/// A page of comments: each with its cursor, and where the page stands.
pub struct CommentConnection {
    edges: Vec<(String, CommentNode)>,
    has_next_page: bool,
    has_previous_page: bool,
    total: Total,
}

impl CommentConnection {
    /// The connection of a page a store read for `paging` (in stored order).
    pub(in crate::graphql) fn new(
        discussion: &Arc<Discussion>,
        page: Page<Arc<Comment>>,
        kind: CursorKind,
        paging: &Paging,
        total: Total,
    ) -> Self {
        Self::with_parent(discussion, page, kind, paging, total, None)
    }

    /// The connection of the replies of `parent` (so each node knows its parent).
    pub(super) fn with_parent(
        discussion: &Arc<Discussion>,
        page: Page<Arc<Comment>>,
        kind: CursorKind,
        paging: &Paging,
        total: Total,
        parent: Option<&Arc<Comment>>,
    ) -> Self {
        let cursor = |comment: &Comment| Cursor::of_comment(comment, kind).encode_for(kind);
        Self::paged(discussion, paging.finish(page), total, parent, cursor)
    }

    /// The connection of a page in the connection's order, each comment with the cursor
    /// `cursor` gives it (and, for replies, its known parent).
    fn paged(
        discussion: &Arc<Discussion>,
        page: crate::domain::Paged<Arc<Comment>>,
        total: Total,
        parent: Option<&Arc<Comment>>,
        cursor: impl Fn(&Comment) -> String,
    ) -> Self {
        let parent = parent.cloned();
        let edges = page
            .items
            .into_iter()
            .map(|comment| {
                let cursor = cursor(&comment);
                let node = CommentNode {
                    discussion: discussion.clone(),
                    comment,
                    known_parent: parent.clone(),
                    held: false,
                    guest_token: None,
                };
                (cursor, node)
            })
            .collect();
        Self {
            edges,
            has_next_page: page.has_next_page,
            has_previous_page: page.has_previous_page,
            total,
        }
    }

    /// The connection of a page of a ranked list read for `paging` (in stored order), whose
    /// cursors belong to the walk `walk`.
    pub(crate) fn ranked(
        discussion: &Arc<Discussion>,
        (page, walk): (Page<Arc<Comment>>, u64),
        rank: Rank,
        paging: &Paging,
        total: Total,
        parent: Option<&Arc<Comment>>,
    ) -> Self {
        let kind = CursorKind::Ranked(rank);
        let cursor = |comment: &Comment| Cursor::ranked(rank, comment, walk).encode_for(kind);
        Self::paged(discussion, paging.finish(page), total, parent, cursor)
    }

    /// A connection of nodes already made, each with its cursor (a moderator queue's page).
    pub(crate) fn of_edges(
        edges: Vec<(String, CommentNode)>,
        has_next_page: bool,
        has_previous_page: bool,
        total: Total,
    ) -> Self {
        Self {
            edges,
            has_next_page,
            has_previous_page,
            total,
        }
    }
}

/// One comment in a page, with its cursor.
pub struct CommentEdge {
    cursor: String,
    node: CommentNode,
}

#[Object]
impl CommentEdge {
    /// Pass it as `after` to continue after this comment, or as `before` to page back from it.
    async fn cursor(&self) -> &str {
        &self.cursor
    }

    /// The comment.
    async fn node(&self) -> &CommentNode {
        &self.node
    }
}

/// Where a page stands in its list.
#[derive(SimpleObject)]
pub struct PageInfo {
    /// Whether more items follow this page: exact when paging forward (`first`); when paging
    /// backward (`last`), true exactly when `before` was given.
    pub has_next_page: bool,
    /// Whether items precede this page: exact when paging backward (`last`); when paging
    /// forward, true exactly when `after` or an `offset` above 0 was given.
    pub has_previous_page: bool,
    /// The cursor of the first item of the page: pass it as `before` for the previous page.
    pub start_cursor: Option<String>,
    /// The cursor of the last item of the page: pass it as `after` for the next page.
    pub end_cursor: Option<String>,
}

#[Object]
impl CommentConnection {
    /// The comments with their cursors.
    async fn edges(&self) -> Vec<CommentEdge> {
        self.edges
            .iter()
            .map(|(cursor, node)| CommentEdge {
                cursor: cursor.clone(),
                node: node.clone(),
            })
            .collect()
    }

    /// The comments.
    async fn nodes(&self) -> Vec<CommentNode> {
        self.edges.iter().map(|(_, node)| node.clone()).collect()
    }

    /// Where this page stands.
    async fn page_info(&self) -> PageInfo {
        PageInfo {
            has_next_page: self.has_next_page,
            has_previous_page: self.has_previous_page,
            start_cursor: self.edges.first().map(|(cursor, _)| cursor.clone()),
            end_cursor: self.edges.last().map(|(cursor, _)| cursor.clone()),
        }
    }

    /// How many comments the whole list holds.
    async fn total_count(&self, ctx: &Context<'_>) -> async_graphql::Result<u64> {
        match &self.total {
            Total::Known(n) => Ok(*n),
            Total::SubDiscussion(key) => Ok(reads(ctx)
                .loader
                .load_one(key.clone())
                .await
                .gql()?
                .unwrap_or(0)),
            Total::Queue(queue, discussion) => store(ctx)
                .held()
                .queue_size(*queue, discussion.as_ref())
                .instrument(tracing::debug_span!("store.queueSize"))
                .await
                .gql(),
            Total::ByAuthor(user) => crate::graphql::services(ctx)
                .authored_count(user)
                .instrument(tracing::debug_span!("store.authoredCount"))
                .await
                .gql(),
            Total::Ranked {
                discussion,
                threads,
            } => {
                let listed = match threads {
                    true => discussion.thread_count,
                    false => discussion.comment_count,
                };
                let placeholders = store(ctx)
                    .held()
                    .placeholders(&discussion.id)
                    .instrument(tracing::debug_span!("store.placeholders"))
                    .await
                    .gql()?;
                if placeholders.is_empty() {
                    return Ok(listed);
                }
                let keys = placeholders.into_iter().map(|slug| CommentKey {
                    discussion: DiscussionRef(discussion.clone()),
                    slug,
                });
                let found = reads(ctx).loader.load_many(keys).await.gql()?;
                let hidden = found
                    .values()
                    .filter(|c| !c.standing.is_public() && (!threads || c.parent.is_none()))
                    .count();
                Ok(listed.saturating_sub(hidden as u64))
            }
        }
    }
}
