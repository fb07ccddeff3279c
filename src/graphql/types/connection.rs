//! Connections: pages of comments and of discussions, their edges and page info.

use std::sync::Arc;

use async_graphql::{ComplexObject, Context, Object, SimpleObject};
use tracing::Instrument as _;

use super::{CommentNode, DiscussionNode};
use crate::domain::paging::Cursor;
use crate::domain::{Comment, CursorKind, Discussion, Page, Paged, Paging};
use crate::graphql::error::OrGql;
use crate::graphql::loaders::SubDiscussionCountKey;
use crate::graphql::{reads, store};

/// Where a connection's `totalCount` comes from. A connection whose total is counted on demand
/// is listed in `cost::COUNTED`, so that asking for it costs what counting reads.
pub enum Total {
    /// Already known (a counter kept with the data).
    Known(u64),
    /// Counted on demand, batched.
    SubDiscussion(SubDiscussionCountKey),
}

/// A page of comments.
pub struct CommentConnection {
    discussion: Arc<Discussion>,
    page: Paged<Comment>,
    kind: CursorKind,
    total: Total,
    parent: Option<Arc<Comment>>,
}

impl CommentConnection {
    /// The connection of a page a store read for `paging` (in stored order).
    pub(super) fn new(
        discussion: Arc<Discussion>,
        page: Page<Comment>,
        kind: CursorKind,
        paging: &Paging,
        total: Total,
    ) -> Self {
        Self {
            discussion,
            page: paging.finish(page),
            kind,
            total,
            parent: None,
        }
    }

    fn node(&self, comment: &Comment) -> CommentNode {
        CommentNode {
            status: crate::domain::CommentStatus::Approved,
            reason: None,
            discussion: self.discussion.clone(),
            comment: comment.clone(),
            known_parent: self.parent.clone(),
        }
    }

    /// Marks the page as the replies of `parent`, so its nodes know their parent.
    pub(super) fn with_parent(mut self, parent: &Comment) -> Self {
        self.parent = Some(Arc::new(parent.clone()));
        self
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
        self.page
            .items
            .iter()
            .map(|c| CommentEdge {
                cursor: Cursor::of_comment(c, self.kind).encode_for(self.kind),
                node: self.node(c),
            })
            .collect()
    }

    /// The comments.
    async fn nodes(&self) -> Vec<CommentNode> {
        self.page.items.iter().map(|c| self.node(c)).collect()
    }

    /// Where this page stands.
    async fn page_info(&self) -> PageInfo {
        let cursor = |c: &Comment| Cursor::of_comment(c, self.kind).encode_for(self.kind);
        PageInfo {
            has_next_page: self.page.has_next_page,
            has_previous_page: self.page.has_previous_page,
            start_cursor: self.page.items.first().map(cursor),
            end_cursor: self.page.items.last().map(cursor),
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
        }
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
}

/// One discussion in a page, with its cursor.
pub struct DiscussionEdge {
    discussion: Arc<Discussion>,
}

#[Object]
impl DiscussionEdge {
    /// Pass it as `after` to continue after this discussion, or as `before` to page back from it.
    async fn cursor(&self) -> String {
        Cursor::of_discussion(&self.discussion).encode()
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
            .map(|d| DiscussionEdge {
                discussion: d.clone(),
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

    /// How many discussions exist.
    async fn total_count(&self, ctx: &Context<'_>) -> async_graphql::Result<u64> {
        store(ctx)
            .discussions()
            .count()
            .instrument(tracing::debug_span!("store.discussionCount"))
            .await
            .gql()
    }
}
