//! The `Comment` object, its author and its revisions.

use std::sync::Arc;

use async_graphql::{Context, Object, SimpleObject, ID};
use chrono::{DateTime, Utc};

mod connection;

pub use connection::{CommentConnection, CommentEdge, PageInfo, Total};

use super::{CommentOrder, CommentStatus, DiscussionNode, ReportReason, VoteValue};
use crate::domain::ranking::{ranked_in, window_in_memory};
use crate::domain::{
    Comment, CursorKind, Discussion, Held, Page, PageArgs, Paging, Rank, Slug, Window,
};
use crate::graphql::error::OrGql;
use crate::graphql::loaders::{
    CommentKey, DiscussionRef, RepliesKey, ReportsKey, SubDiscussionCountKey, SubDiscussionKey,
    ViewerVoteKey,
};
use crate::graphql::{reads, Limits};
use crate::store::{Ranked, RankedOf};

/// The author of a comment.
#[derive(SimpleObject)]
pub struct Author {
    /// The author's id (the token's `sub`); empty for a deleted comment's hidden author.
    pub id: ID,
    /// The author's display name; `[deleted]` for a deleted comment's hidden author.
    pub name: String,
    /// Whether the author is a guest (posted without an account, under a name anyone may
    /// give): clients mark guests so that they cannot pass as signed-in users.
    pub guest: bool,
}

impl From<&crate::domain::Author> for Author {
    fn from(author: &crate::domain::Author) -> Self {
        Self {
            id: ID(author.id.clone()),
            name: author.name.clone(),
            guest: crate::domain::guest_posts::is_guest(&author.id),
        }
    }
}

/// What moderators see of a guest.
#[derive(SimpleObject)]
pub(super) struct GuestDetails {
    /// The e-mail address they gave.
    pub email: Option<String>,
    /// The website they gave.
    pub website: Option<String>,
    /// The network they last posted from (`203.0.113.0/24`, `2001:db8:1::/48`): never their
    /// address.
    pub network: String,
    /// When they last posted.
    pub last_posted_at: DateTime<Utc>,
}

impl From<crate::domain::GuestDetails> for GuestDetails {
    fn from(details: crate::domain::GuestDetails) -> Self {
        Self {
            email: details.email,
            website: details.website,
            network: details.network.to_string(),
            last_posted_at: details.at.to_datetime(),
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

/// A report of a comment, as moderators see it.
pub struct ReportNode(pub crate::store::Report);

#[Object(name = "Report")]
impl ReportNode {
    /// Why it was reported.
    async fn reason(&self) -> ReportReason {
        self.0.reason.into()
    }

    /// What the reporter added.
    async fn note(&self) -> Option<&str> {
        self.0.note.as_deref()
    }

    /// When it was reported.
    async fn at(&self) -> DateTime<Utc> {
        self.0.at.to_datetime()
    }
}

/// Whether the request's caller is a moderator.
fn moderator_viewing(ctx: &Context<'_>) -> bool {
    matches!(
        crate::graphql::auth(ctx),
        crate::auth::AuthState::Authenticated(viewer) if viewer.moderator
    )
}

/// Whether the request's caller is a moderator, or this author.
fn viewer_is(ctx: &Context<'_>, author: Option<&crate::domain::Author>) -> bool {
    match crate::graphql::auth(ctx) {
        crate::auth::AuthState::Authenticated(viewer) => {
            viewer.moderator || author.is_some_and(|a| a.id == viewer.author.id)
        }
        _ => false,
    }
}

/// A comment. Deleted comments keep their place and replies; their text is null.
#[derive(Clone)]
pub struct CommentNode {
    /// Its discussion.
    pub discussion: Arc<Discussion>,
    /// The comment (shared with the page it was read in, and with the read cache).
    pub comment: Arc<Comment>,
    /// Its parent, when the node was reached through the parent's `replies` (saves a lookup).
    pub known_parent: Option<Arc<Comment>>,
    /// Whether it is a held comment (stored outside the layouts until published).
    pub held: bool,
    /// The token that lets its guest author change it: only in the answer to the guest's post,
    /// whose caller is its author (they have no other way to say so).
    pub guest_token: Option<String>,
}

impl CommentNode {
    /// A node whose parent is not known yet.
    pub fn new(discussion: Arc<Discussion>, comment: impl Into<Arc<Comment>>) -> Self {
        Self {
            discussion,
            comment: comment.into(),
            known_parent: None,
            held: false,
            guest_token: None,
        }
    }

    /// The node of a held comment (seen only by its author and moderators).
    pub fn held(discussion: Arc<Discussion>, held: Held) -> Self {
        Self {
            discussion,
            comment: Arc::new(held.comment),
            known_parent: None,
            held: true,
            guest_token: None,
        }
    }

    /// Whether the caller may not see its text and author: it is held or rejected, and the
    /// caller is neither its author nor a moderator.
    fn hidden(&self, ctx: &Context<'_>) -> bool {
        !self.comment.standing.is_public() && !self.viewed_by_author(ctx)
    }

    /// Whether the signed-in viewer ignores its author (`ignoreUser`): never for anonymous
    /// readers, the viewer's own comments, or deleted and hidden ones (whose author is not
    /// shown), which need no read; otherwise the viewer's list, read once per request.
    async fn ignored(&self, ctx: &Context<'_>) -> async_graphql::Result<bool> {
        let crate::auth::AuthState::Authenticated(viewer) = crate::graphql::auth(ctx) else {
            return Ok(false);
        };
        let author = &self.comment.author.id;
        if self.comment.deleted || self.hidden(ctx) || *author == viewer.author.id {
            return Ok(false);
        }
        let services = crate::graphql::services(ctx);
        let ignoring = reads(ctx)
            .ignoring(services, &viewer.author.id)
            .await
            .gql()?;
        Ok(ignoring.contains(author))
    }

    /// Whether the caller is a moderator, or the comment's author (a guest's post is answered
    /// to its author).
    fn viewed_by_author(&self, ctx: &Context<'_>) -> bool {
        self.guest_token.is_some() || viewer_is(ctx, Some(&self.comment.author))
    }

    /// A page of its direct replies in a ranked order. Up to [`RANKED_IN_BATCH`] replies, they
    /// are read whole through the request's batched replies read (one tree level, one query)
    /// and ranked in memory; past that, by the store's ranked read of this comment alone.
    async fn ranked_replies(
        &self,
        ctx: &Context<'_>,
        rank: Rank,
        paging: &Paging,
    ) -> async_graphql::Result<CommentConnection> {
        let parent = Some(&self.comment);
        if self.comment.reply_count == 0 {
            let empty = (Page::empty(), 0);
            let total = Total::Known(0);
            return Ok(CommentConnection::ranked(
                &self.discussion,
                empty,
                rank,
                paging,
                total,
                parent,
            ));
        }
        if self.comment.reply_count < RANKED_IN_BATCH as u64 {
            let key = RepliesKey {
                discussion: DiscussionRef(self.discussion.clone()),
                parent: self.comment.slug.clone(),
                window: Window::After {
                    cursor: None,
                    limit: RANKED_IN_BATCH,
                },
            };
            let all = reads(ctx)
                .loader
                .load_one(key)
                .await
                .gql()?
                .unwrap_or_else(Page::empty);
            if !all.has_next {
                let shown = all.items.iter().filter(|c| ranked_in(c)).count() as u64;
                let ranked = window_in_memory(rank, all.items, &paging.window);
                return Ok(CommentConnection::ranked(
                    &self.discussion,
                    ranked,
                    rank,
                    paging,
                    Total::Known(shown),
                    parent,
                ));
            }
        }
        let ranked = crate::graphql::store(ctx)
            .votes()
            .ranked(
                &reads(ctx).scope,
                &self.discussion,
                Ranked {
                    rank,
                    of: RankedOf::Replies(&self.comment),
                },
                &paging.window,
            )
            .await
            .gql()?;
        let shown = self.comment.reply_count;
        Ok(CommentConnection::ranked(
            &self.discussion,
            (ranked.page, ranked.walk),
            rank,
            paging,
            Total::Known(shown),
            parent,
        ))
    }

    /// An empty page (a comment without replies has nothing to load).
    fn empty_connection(
        &self,
        kind: CursorKind,
        paging: &Paging,
        total: Total,
    ) -> CommentConnection {
        CommentConnection::new(&self.discussion, Page::empty(), kind, paging, total)
    }
}

/// Replies read whole in one batched read, to rank them in memory.
const RANKED_IN_BATCH: usize = 1_000;

/// Validated cursor paging (`first`/`after` or `last`/`before`, no offset) of a list of `kind`.
fn cursor_paging(
    ctx: &Context<'_>,
    [first, last]: [Option<i32>; 2],
    [after, before]: [Option<String>; 2],
    kind: CursorKind,
) -> async_graphql::Result<Paging> {
    let args = PageArgs {
        first,
        after,
        last,
        before,
        offset: None,
    };
    ctx.data_unchecked::<Limits>().paging(&args, kind)
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

    /// APPROVED for a public comment. PENDING or REJECTED for one held for (or refused by) a
    /// moderator: one held before it was ever public is seen only by its author and moderators
    /// (by direct link and in the moderation queues), and its `posted` is when it was
    /// submitted; one that was public stays in place as a placeholder, whose text and author
    /// only its author and moderators see.
    async fn status(&self) -> CommentStatus {
        self.comment.standing.status.into()
    }

    /// Why it is held or rejected (a moderator's reason, `banned word`, `suspect word`,
    /// `reported by N users`), for its author and moderators; null for everyone else and when
    /// there is none.
    async fn moderation_reason(&self, ctx: &Context<'_>) -> Option<&str> {
        if !self.viewed_by_author(ctx) {
            return None;
        }
        self.comment.standing.reason.as_deref()
    }

    /// How many users reported it since a moderator last approved it, for moderators; null for
    /// everyone else.
    async fn report_count(&self, ctx: &Context<'_>) -> Option<u64> {
        viewer_is(ctx, None).then_some(self.comment.standing.reports)
    }

    /// Whether it was deleted (it keeps its place and replies, without text).
    async fn deleted(&self) -> bool {
        self.comment.deleted
    }

    /// Who wrote it. Once it is deleted, only moderators see who; everybody else gets id `""`
    /// and name `[deleted]`. While it is a held or rejected placeholder, everybody but its
    /// author and moderators gets id `""` and name `[hidden]`.
    async fn author(&self, ctx: &Context<'_>) -> Author {
        if self.comment.deleted && !viewer_is(ctx, None) {
            return Author {
                id: ID(String::new()),
                name: "[deleted]".to_owned(),
                guest: false,
            };
        }
        if self.hidden(ctx) {
            return Author {
                id: ID(String::new()),
                name: "[hidden]".to_owned(),
                guest: false,
            };
        }
        (&self.comment.author).into()
    }

    /// Its earlier texts, oldest first, for its author and moderators; null for everyone else,
    /// once it is deleted, and for a moderator who ignores its author.
    async fn revisions(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<Vec<Revision>>> {
        if self.comment.deleted || !self.viewed_by_author(ctx) || self.ignored(ctx).await? {
            return Ok(None);
        }
        Ok(Some(
            self.comment
                .revisions
                .iter()
                .map(|r| Revision {
                    text: r.text.clone(),
                    edited_at: r.edited.to_datetime(),
                    editor: (&r.editor).into(),
                })
                .collect(),
        ))
    }

    /// Whether a moderator pinned it to the top of its discussion.
    async fn pinned(&self) -> bool {
        self.discussion.is_pinned(&self.comment.slug)
    }

    /// The discussion it belongs to.
    async fn discussion(&self) -> DiscussionNode {
        DiscussionNode(self.discussion.clone())
    }

    /// The token that lets the guest who posted it edit or delete it within the edit window
    /// (`editComment`/`deleteComment` with `guestToken`): only in the answer to their
    /// `postComment`; null everywhere else.
    async fn guest_token(&self) -> Option<&str> {
        self.guest_token.as_deref()
    }

    /// What its guest author gave beyond a name (e-mail, website) and the network they last
    /// posted from, for moderators; null for everyone else and for signed-in authors.
    async fn guest_details(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<GuestDetails>> {
        if !moderator_viewing(ctx) || !crate::domain::guest_posts::is_guest(&self.comment.author.id)
        {
            return Ok(None);
        }
        let key = crate::graphql::loaders::GuestKey(self.comment.author.id.clone());
        let details = reads(ctx).loader.load_one(key).await.gql()?;
        Ok(details.map(GuestDetails::from))
    }

    /// Its reports, oldest first (at most 20): why and when people reported it, and what they
    /// added. Moderators only: null for everybody else. The reports of a page of comments are
    /// read in one database command.
    async fn reports(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<Vec<ReportNode>>> {
        if !moderator_viewing(ctx) {
            return Ok(None);
        }
        let key = ReportsKey {
            discussion: self.discussion.id.clone(),
            slug: self.comment.slug.clone(),
        };
        let reports = reads(ctx).loader.load_one(key).await.gql()?;
        Ok(Some(
            reports
                .unwrap_or_default()
                .into_iter()
                .map(ReportNode)
                .collect(),
        ))
    }

    /// Its text; null once deleted, for everybody but its author and moderators while it is
    /// a held or rejected placeholder, and for a viewer who ignores its author
    /// (`ignoredByViewer`).
    async fn text(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<&str>> {
        if self.hidden(ctx) || self.ignored(ctx).await? {
            return Ok(None);
        }
        Ok(self.comment.text.as_deref())
    }

    /// Whether the signed-in viewer ignores its author (`ignoreUser`): then `text`, `html` and
    /// `revisions` are null and the author is still named, so a client can say "a comment from
    /// someone you ignore". False for everybody else, for one's own comments and for deleted
    /// and hidden ones.
    async fn ignored_by_viewer(&self, ctx: &Context<'_>) -> async_graphql::Result<bool> {
        self.ignored(ctx).await
    }

    /// Its text rendered as CommonMark, sanitised: raw HTML shows as typed, links get
    /// `rel="nofollow ugc noopener"`, images show as links, only `http`, `https` and `mailto`
    /// addresses are kept. At most 8 bytes a character of the text and 1 KiB: a text whose
    /// HTML would be larger shows as plain paragraphs. Rendered when the text was written.
    /// Null whenever `text` is.
    async fn html(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<String>> {
        if self.hidden(ctx) || self.ignored(ctx).await? {
            return Ok(None);
        }
        crate::graphql::services(ctx)
            .html_of(&self.discussion, &self.comment, self.held)
            .await
            .gql()
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

    /// Its direct replies, oldest first (or newest first: `order: NEWEST`). Paged forward by
    /// `first`/`after` or backward by `last`/`before`.
    async fn replies(
        &self,
        ctx: &Context<'_>,
        #[graphql(default)] order: CommentOrder,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
    ) -> async_graphql::Result<CommentConnection> {
        let kind = order.of_siblings("replies")?;
        let paging = cursor_paging(ctx, [first, last], [after, before], kind)?;
        if let CursorKind::Ranked(rank) = kind {
            return self.ranked_replies(ctx, rank, &paging).await;
        }
        let total = Total::Known(self.comment.reply_count);
        if self.comment.reply_count == 0 {
            return Ok(self.empty_connection(kind, &paging, total));
        }
        let key = RepliesKey {
            discussion: DiscussionRef(self.discussion.clone()),
            parent: self.comment.slug.clone(),
            window: paging.window.clone(),
        };
        let page = reads(ctx)
            .loader
            .load_one(key)
            .await
            .gql()?
            .unwrap_or_else(Page::empty);
        Ok(CommentConnection::with_parent(
            &self.discussion,
            page,
            kind,
            &paging,
            total,
            Some(&self.comment),
        ))
    }

    /// Votes for it.
    async fn upvotes(&self) -> u64 {
        self.comment.votes.up
    }

    /// Votes against it.
    async fn downvotes(&self) -> u64 {
        self.comment.votes.down
    }

    /// `upvotes` − `downvotes`.
    async fn score(&self) -> i64 {
        self.comment.votes.score()
    }

    /// The caller's vote on it (null when not signed in, or without one). All the comments a
    /// request shows cost one database read for it.
    async fn viewer_vote(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<VoteValue>> {
        let crate::auth::AuthState::Authenticated(viewer) = crate::graphql::auth(ctx) else {
            return Ok(None);
        };
        if !self.comment.standing.is_public() {
            return Ok(None);
        }
        let key = ViewerVoteKey {
            voter: viewer.author.id.clone(),
            discussion: self.discussion.id.clone(),
            slug: self.comment.slug.clone(),
        };
        let vote = reads(ctx).loader.load_one(key).await.gql()?;
        Ok(vote.map(Into::into))
    }

    /// How many direct replies it has.
    async fn reply_count(&self) -> u64 {
        self.comment.reply_count
    }

    /// All its descendants, in threaded order. Paged forward by `first`/`after` or backward by
    /// `last`/`before`.
    async fn sub_discussion(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
        last: Option<i32>,
        before: Option<String>,
    ) -> async_graphql::Result<CommentConnection> {
        let kind = CursorKind::Threaded;
        let paging = cursor_paging(ctx, [first, last], [after, before], kind)?;
        if self.comment.reply_count == 0 {
            return Ok(self.empty_connection(kind, &paging, Total::Known(0)));
        }
        let discussion = DiscussionRef(self.discussion.clone());
        let root = self.comment.full_slug.clone();
        let key = SubDiscussionKey {
            discussion: discussion.clone(),
            root: root.clone(),
            window: paging.window.clone(),
        };
        let page = reads(ctx)
            .loader
            .load_one(key)
            .await
            .gql()?
            .unwrap_or_else(Page::empty);
        Ok(CommentConnection::new(
            &self.discussion,
            page,
            kind,
            &paging,
            Total::SubDiscussion(SubDiscussionCountKey { discussion, root }),
        ))
    }
}
