//! Connections: pages of comments and of discussions, their edges and page info.

use std::sync::Arc;

use async_graphql::{ComplexObject, Context, Object, SimpleObject};
use tracing::Instrument as _;

use super::{CommentNode, DiscussionNode};
use crate::domain::paging::Cursor;
use crate::domain::{Comment, CursorKind, Discussion, Page, Window};
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
    page: Page<Comment>,
    kind: CursorKind,
    has_previous: bool,
    total: Total,
    parent: Option<Arc<Comment>>,
}

impl CommentConnection {
    pub(super) fn new(
        discussion: Arc<Discussion>,
        page: Page<Comment>,
        kind: CursorKind,
        window: &Window,
        total: Total,
    ) -> Self {
        let has_previous = match window {
            Window::Offset { skip, .. } => *skip > 0,
            Window::After { cursor, .. } => cursor.is_some(),
        };
        Self {
            discussion,
            page,
            kind,
            has_previous,
            total,
            parent: None,
        }
    }

    fn node(&self, comment: &Comment) -> CommentNode {
        CommentNode {
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
    /// Pass it as `after` to continue from this comment.
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
    /// Whether more items follow this page.
    pub has_next_page: bool,
    /// Whether items precede this page.
    pub has_previous_page: bool,
    /// The cursor of the first item of the page.
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
                cursor: Cursor::of_comment(c, self.kind).encode(),
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
        let cursor = |c: &Comment| Cursor::of_comment(c, self.kind).encode();
        PageInfo {
            has_next_page: self.page.has_next,
            has_previous_page: self.has_previous,
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
    /// The discussions of the page.
    #[graphql(skip)]
    pub page: Page<Arc<Discussion>>,
}

/// One discussion in a page, with its cursor.
pub struct DiscussionEdge {
    discussion: Arc<Discussion>,
}

#[Object]
impl DiscussionEdge {
    /// Pass it as `after` to continue from this discussion.
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
        self.page
            .items
            .iter()
            .map(|d| DiscussionEdge {
                discussion: d.clone(),
            })
            .collect()
    }

    /// The discussions.
    async fn nodes(&self) -> Vec<DiscussionNode> {
        self.page
            .items
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
