//! GraphQL object types: Discussion, Comment, Author, connections and enums.

use std::sync::Arc;

use async_graphql::{ComplexObject, Context, Enum, Object, SimpleObject, ID};
use chrono::{DateTime, Utc};

use super::error::OrGql;
use super::limits::page_cost;
use super::loaders::{
    CommentKey, DiscussionRef, RepliesKey, SubDiscussionCountKey, SubDiscussionKey,
};
use super::{reads, store, Limits};
use crate::domain::paging::Cursor;
use crate::domain::{Comment, CursorKind, Discussion, DomainError, Page, PageArgs, Slug, Window};
use crate::store::Listing;

/// How a discussion's comments are stored.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(remote = "crate::domain::Layout")]
pub enum StorageLayout {
    /// One document per comment.
    PerComment,
    /// Every comment nested in the discussion document.
    Embedded,
    /// Buckets of about a hundred comments.
    Bucketed,
}

/// The order of a discussion's comment list.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug, Default)]
pub enum CommentOrder {
    /// By posting time, oldest first.
    #[default]
    Chronological,
    /// Each comment right after its parent, siblings oldest first (a flattened tree).
    Threaded,
}

/// A discussion: one thread of comments, e.g. under an article.
pub struct DiscussionNode(pub Arc<Discussion>);

impl DiscussionNode {
    fn window(
        &self,
        ctx: &Context<'_>,
        args: PageArgs,
        kind: CursorKind,
    ) -> async_graphql::Result<Window> {
        ctx.data_unchecked::<Limits>().window(&args, kind)
    }
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

    /// When it was created.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created.to_datetime()
    }

    /// Its comments, chronological or threaded, paged by `offset` or by cursor (`after`).
    #[graphql(complexity = "page_cost(first, child_complexity)")]
    async fn comments(
        &self,
        ctx: &Context<'_>,
        #[graphql(default)] order: CommentOrder,
        first: Option<i32>,
        after: Option<String>,
        offset: Option<i32>,
    ) -> async_graphql::Result<CommentConnection> {
        let (listing, kind) = match order {
            CommentOrder::Chronological => (Listing::Chronological, CursorKind::Chronological),
            CommentOrder::Threaded => (Listing::Threaded, CursorKind::Threaded),
        };
        let window = self.window(
            ctx,
            PageArgs {
                first,
                after,
                offset,
            },
            kind,
        )?;
        let page = store(ctx)
            .layout(self.0.layout)
            .gql()?
            .list(&reads(ctx).scope, &self.0, listing, &window)
            .await
            .gql()?;
        Ok(CommentConnection::new(
            self.0.clone(),
            page,
            kind,
            &window,
            Total::Known(self.0.comment_count),
        ))
    }

    /// Its top-level comments, oldest first.
    #[graphql(complexity = "page_cost(first, child_complexity)")]
    async fn threads(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
        offset: Option<i32>,
    ) -> async_graphql::Result<CommentConnection> {
        let kind = CursorKind::Chronological;
        let window = self.window(
            ctx,
            PageArgs {
                first,
                after,
                offset,
            },
            kind,
        )?;
        let layout = store(ctx).layout(self.0.layout).gql()?;
        let scope = &reads(ctx).scope;
        let page = if reads_below_nodes(ctx) {
            layout.list(scope, &self.0, Listing::Threads, &window).await
        } else {
            layout
                .list_shallow(scope, &self.0, Listing::Threads, &window)
                .await
        }
        .gql()?;
        Ok(CommentConnection::new(
            self.0.clone(),
            page,
            kind,
            &window,
            Total::Known(self.0.thread_count),
        ))
    }

    /// One comment by slug (a direct link).
    async fn comment(&self, ctx: &Context<'_>, slug: String) -> async_graphql::Result<CommentNode> {
        comment_by_slug(ctx, self.0.clone(), &slug).await
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

/// Loads a comment by client-supplied slug, or fails with `NOT_FOUND`.
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
    match reads(ctx).loader.load_one(key).await.gql()? {
        Some(comment) => Ok(CommentNode::new(discussion, comment)),
        None => Err(DomainError::not_found(format!(
            "no comment {slug} in discussion {}",
            discussion.id
        )))
        .gql(),
    }
}

/// The author of a comment.
#[derive(SimpleObject)]
pub struct Author {
    /// The author's id (the token's `sub`); empty for a deleted comment's hidden author.
    pub id: ID,
    /// The author's display name; `[deleted]` for a deleted comment's hidden author.
    pub name: String,
}

impl From<&crate::domain::Author> for Author {
    fn from(author: &crate::domain::Author) -> Self {
        Self {
            id: ID(author.id.clone()),
            name: author.name.clone(),
        }
    }
}

/// An earlier version of a comment's text.
#[derive(SimpleObject)]
pub struct Revision {
    /// The text of that version.
    pub text: String,
    /// When that version was written (the posting time for the original text).
    pub edited_at: DateTime<Utc>,
    /// Who wrote that version: the author, or the moderator who edited it.
    pub editor: Author,
}

/// Whether the request's caller is a moderator, or this author.
fn viewer_is(ctx: &Context<'_>, author: Option<&crate::domain::Author>) -> bool {
    match super::auth(ctx) {
        crate::auth::AuthState::Authenticated(viewer) => {
            viewer.moderator || author.is_some_and(|a| a.id == viewer.author.id)
        }
        _ => false,
    }
}

/// A comment. Deleted comments keep their place and replies; their text is null.
pub struct CommentNode {
    /// Its discussion.
    pub discussion: Arc<Discussion>,
    /// The comment.
    pub comment: Comment,
    /// Its parent, when the node was reached through the parent's `replies` (saves a lookup).
    pub known_parent: Option<Arc<Comment>>,
}

impl CommentNode {
    /// A node whose parent is not known yet.
    pub fn new(discussion: Arc<Discussion>, comment: Comment) -> Self {
        Self {
            discussion,
            comment,
            known_parent: None,
        }
    }

    /// An empty page (a comment without replies has nothing to load).
    fn empty_connection(
        &self,
        kind: CursorKind,
        window: &Window,
        total: Total,
    ) -> CommentConnection {
        let empty = Page::from_overfetch(Vec::new(), 0);
        CommentConnection::new(self.discussion.clone(), empty, kind, window, total)
    }
}

/// A validated cursor window (`first`/`after`, no offset).
fn cursor_window(
    ctx: &Context<'_>,
    first: Option<i32>,
    after: Option<String>,
    kind: CursorKind,
) -> async_graphql::Result<Window> {
    let args = PageArgs {
        first,
        after,
        offset: None,
    };
    ctx.data_unchecked::<Limits>().window(&args, kind)
}

#[Object(name = "Comment")]
impl CommentNode {
    /// A globally unique id: `<discussionId>:<slug>`.
    async fn id(&self) -> ID {
        ID(format!("{}:{}", self.discussion.id, self.comment.slug))
    }

    /// The discussion it belongs to.
    async fn discussion_id(&self) -> ID {
        ID(self.discussion.id.to_string())
    }

    /// Its path in the discussion: the slugs of its ancestors and its own, `/`-separated. Use it
    /// for direct links.
    async fn slug(&self) -> &str {
        self.comment.slug.as_str()
    }

    /// Its sortable path: `<microseconds>:<slug part>` per level. Sorting by it gives threaded order.
    async fn full_slug(&self) -> &str {
        self.comment.full_slug.as_str()
    }

    /// The parent's slug; null for a top-level comment.
    async fn parent_slug(&self) -> Option<&str> {
        self.comment.parent.as_ref().map(Slug::as_str)
    }

    /// 0 for a top-level comment, 1 for a reply to one, and so on.
    async fn depth(&self) -> usize {
        self.comment.depth()
    }

    /// When it was posted.
    async fn posted(&self) -> DateTime<Utc> {
        self.comment.posted.to_datetime()
    }

    /// When it was last edited; null if never.
    async fn edited_at(&self) -> Option<DateTime<Utc>> {
        self.comment.edited.map(|m| m.to_datetime())
    }

    /// Whether it was deleted (it keeps its place and replies, without text).
    async fn deleted(&self) -> bool {
        self.comment.deleted
    }

    /// Who wrote it. Once it is deleted, only moderators see who; everybody else gets id `""`
    /// and name `[deleted]`.
    async fn author(&self, ctx: &Context<'_>) -> Author {
        if self.comment.deleted && !viewer_is(ctx, None) {
            return Author {
                id: ID(String::new()),
                name: "[deleted]".to_owned(),
            };
        }
        (&self.comment.author).into()
    }

    /// Its earlier texts, oldest first, for its author and moderators; null for everyone else
    /// and once it is deleted.
    async fn revisions(&self, ctx: &Context<'_>) -> Option<Vec<Revision>> {
        if self.comment.deleted || !viewer_is(ctx, Some(&self.comment.author)) {
            return None;
        }
        Some(
            self.comment
                .revisions
                .iter()
                .map(|r| Revision {
                    text: r.text.clone(),
                    edited_at: r.edited.to_datetime(),
                    editor: (&r.editor).into(),
                })
                .collect(),
        )
    }

    /// Its text; null once deleted.
    async fn text(&self) -> Option<&str> {
        self.comment.text.as_deref()
    }

    /// The comment it replies to; null for a top-level comment.
    async fn parent(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<CommentNode>> {
        let Some(parent) = &self.comment.parent else {
            return Ok(None);
        };
        if let Some(known) = &self.known_parent {
            return Ok(Some(CommentNode::new(
                self.discussion.clone(),
                Comment::clone(known),
            )));
        }
        let key = CommentKey {
            discussion: DiscussionRef(self.discussion.clone()),
            slug: parent.clone(),
        };
        let comment = reads(ctx).loader.load_one(key).await.gql()?;
        Ok(comment.map(|comment| CommentNode::new(self.discussion.clone(), comment)))
    }

    /// Its direct replies, oldest first.
    #[graphql(complexity = "page_cost(first, child_complexity)")]
    async fn replies(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<CommentConnection> {
        let kind = CursorKind::Chronological;
        let window = cursor_window(ctx, first, after, kind)?;
        let total = Total::Known(self.comment.reply_count);
        if self.comment.reply_count == 0 {
            return Ok(self.empty_connection(kind, &window, total));
        }
        let key = RepliesKey {
            discussion: DiscussionRef(self.discussion.clone()),
            parent: self.comment.slug.clone(),
            window: window.clone(),
        };
        let page = reads(ctx)
            .loader
            .load_one(key)
            .await
            .gql()?
            .unwrap_or_else(|| Page::from_overfetch(Vec::new(), 0));
        Ok(
            CommentConnection::new(self.discussion.clone(), page, kind, &window, total)
                .with_parent(&self.comment),
        )
    }

    /// How many direct replies it has.
    async fn reply_count(&self) -> u64 {
        self.comment.reply_count
    }

    /// All its descendants, in threaded order.
    #[graphql(complexity = "page_cost(first, child_complexity)")]
    async fn sub_discussion(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<CommentConnection> {
        let kind = CursorKind::Threaded;
        let window = cursor_window(ctx, first, after, kind)?;
        if self.comment.reply_count == 0 {
            return Ok(self.empty_connection(kind, &window, Total::Known(0)));
        }
        let discussion = DiscussionRef(self.discussion.clone());
        let root = self.comment.full_slug.clone();
        let key = SubDiscussionKey {
            discussion: discussion.clone(),
            root: root.clone(),
            window: window.clone(),
        };
        let page = reads(ctx)
            .loader
            .load_one(key)
            .await
            .gql()?
            .unwrap_or_else(|| Page::from_overfetch(Vec::new(), 0));
        Ok(CommentConnection::new(
            self.discussion.clone(),
            page,
            kind,
            &window,
            Total::SubDiscussion(SubDiscussionCountKey { discussion, root }),
        ))
    }
}

/// Where a connection's `totalCount` comes from.
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
    fn new(
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
    fn with_parent(mut self, parent: &Comment) -> Self {
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
        store(ctx).discussions().count().await.gql()
    }
}
