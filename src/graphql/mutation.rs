//! The Mutation root: each field parses its arguments, checks its caller once, calls one
//! service workflow and maps the result. Every mutation needs a valid bearer token, and a caller
//! who is not banned.

use async_graphql::{Context, InputObject, Object, ID};
use chrono::{DateTime, Utc};

use super::error::OrGql;
use super::types::{
    BanNode, CommentNode, DiscussionNode, ModerationMode, ReportReason, StorageLayout, VoteValue,
};
use super::{auth, services, RequestReads};
use crate::auth::AuthState;
use crate::domain::{
    DiscussionId, DiscussionKey, DiscussionTitle, DiscussionUpdate, DiscussionUrl, DomainError,
    Layout, NewDiscussion, Reason, Slug, UserId,
};
use crate::service::{Allowance, Caller, Creating, NewPost, Posted};

/// The caller (`UNAUTHENTICATED` without a valid token), checked by the services for a change
/// that spends `allowance` (a ban, the rate per author). Every mutation field starts here, once,
/// so aliases count too and each mutation spends exactly one of its author's tokens.
pub(super) async fn caller(
    ctx: &Context<'_>,
    allowance: Allowance,
) -> async_graphql::Result<Caller> {
    let viewer = match auth(ctx) {
        AuthState::Authenticated(viewer) => viewer,
        AuthState::Anonymous => return Err(DomainError::Unauthenticated(
            "this needs a signed-in user: send `Authorization: Bearer <token>` (mint a development token with `threadql token`)".into(),
        ))
        .gql(),
        AuthState::Rejected(why) => return Err(DomainError::Unauthenticated(why.clone())).gql(),
    };
    let caller = services(ctx)
        .caller(&viewer.author, (viewer.moderator, viewer.admin), allowance)
        .await
        .gql()?;
    // The latest verified address is kept, so a person who only posts can be mailed.
    if let Some(address) = &viewer.email {
        services(ctx)
            .remember_address(&viewer.author.id, address)
            .await
            .gql()?;
    }
    Ok(caller)
}

/// The caller of a change of the comment `slug` of discussion `id`: a guest with that
/// comment's token (the request carries no bearer token), or a signed-in caller.
async fn changer(
    ctx: &Context<'_>,
    guest_token: Option<&str>,
    id: &DiscussionId,
    slug: &Slug,
) -> async_graphql::Result<Caller> {
    match (guest_token, auth(ctx)) {
        (Some(token), AuthState::Anonymous) => {
            services(ctx).guest_caller(token, id, slug).await.gql()
        }
        (Some(_), _) => Err(DomainError::bad_input(
            "a guest token is sent without `Authorization`: send one or the other",
        ))
        .gql(),
        (None, _) => caller(ctx, Allowance::Changes).await,
    }
}

/// The caller, who must be a moderator (`FORBIDDEN` otherwise).
pub(super) async fn moderator(ctx: &Context<'_>) -> async_graphql::Result<Caller> {
    let caller = caller(ctx, Allowance::Moderation).await?;
    caller.must_moderate().gql()?;
    Ok(caller)
}

/// The caller, who must be an admin (`FORBIDDEN` otherwise).
pub(super) async fn administrator(ctx: &Context<'_>) -> async_graphql::Result<Caller> {
    let caller = caller(ctx, Allowance::Changes).await?;
    caller.must_administer().gql()?;
    Ok(caller)
}

/// Forgets what this request has read, so fields resolved after a write see it.
pub(super) fn forget_reads(ctx: &Context<'_>) {
    ctx.data_unchecked::<RequestReads>().invalidate();
}

/// A new discussion from client input: every field checked.
fn new_discussion(
    ctx: &Context<'_>,
    title: &str,
    layout: Option<StorageLayout>,
    key: Option<&str>,
    url: Option<&str>,
) -> async_graphql::Result<NewDiscussion> {
    Ok(NewDiscussion {
        title: DiscussionTitle::parse(title).gql()?,
        layout: layout
            .map(Into::into)
            .unwrap_or(services(ctx).rules().default_layout),
        key: key.map(DiscussionKey::parse).transpose().gql()?,
        url: url.map(DiscussionUrl::parse).transpose().gql()?,
        id: None,
        created: None,
    })
}

/// A discussion id and a comment slug from client input.
fn comment_args(discussion_id: &str, slug: &str) -> async_graphql::Result<(DiscussionId, Slug)> {
    Ok((
        DiscussionId::parse(discussion_id).gql()?,
        Slug::parse(slug).gql()?,
    ))
}

/// A new discussion.
#[derive(InputObject)]
pub(super) struct CreateDiscussionInput {
    /// Its title (1–300 characters).
    pub title: String,
    /// How to store its comments; the server's default when omitted.
    pub layout: Option<StorageLayout>,
    /// The host page's own identifier for it (1–512 characters, no control or invisible
    /// characters but the space, composed as Unicode's NFC, then compared exactly); unique: a
    /// key in use is `BAD_USER_INPUT` (see `ensureDiscussion`).
    pub key: Option<String>,
    /// The address of the page it belongs to: an absolute http or https URL of at most 2 048
    /// characters, kept as the URL standard writes it.
    pub url: Option<String>,
}

/// The discussion of a host page, by the page's key.
#[derive(InputObject)]
pub(super) struct EnsureDiscussionInput {
    /// The host page's own identifier (1–512 characters, no control or invisible characters
    /// but the space, composed as Unicode's NFC, then compared exactly).
    pub key: String,
    /// The title, if the discussion is created now (1–300 characters).
    pub title: String,
    /// The page's address, if the discussion is created now.
    pub url: Option<String>,
    /// How to store its comments, if it is created now; the server's default when omitted.
    pub layout: Option<StorageLayout>,
}

/// A new comment.
#[derive(InputObject)]
pub(super) struct PostCommentInput {
    /// The discussion to post in.
    pub discussion_id: ID,
    /// The comment to reply to; omit for a top-level comment.
    pub parent_slug: Option<String>,
    /// The text.
    pub text: String,
    /// Posts as a guest, without an account: the request carries no token, and the
    /// discussion must take guests' comments (`Discussion.guests`).
    pub guest: Option<super::guest_post::GuestInput>,
}

/// A new text for a comment.
#[derive(InputObject)]
pub(super) struct EditCommentInput {
    /// The comment's discussion.
    pub discussion_id: ID,
    /// The comment's slug.
    pub slug: String,
    /// The new text (the same rules as when posting).
    pub text: String,
    /// The guest token the comment's post answered with (`Comment.guestToken`), in place of
    /// a bearer token: its guest may edit it within the edit window.
    pub guest_token: Option<String>,
}

/// The core writes (the reserved names' are in `names.rs`); merged into [`super::Mutation`].
#[derive(Default)]
pub(super) struct CoreMutation;

#[Object]
impl CoreMutation {
    /// Creates a discussion. Any signed-in user may; one who is not a moderator gives a `key`
    /// or a `url` only with the url of a page of the allowed origins (`FORBIDDEN`, naming them,
    /// otherwise). A `key` another discussion has is `BAD_USER_INPUT`: `ensureDiscussion` gets
    /// the discussion of a key.
    async fn create_discussion(
        &self,
        ctx: &Context<'_>,
        input: CreateDiscussionInput,
    ) -> async_graphql::Result<Option<DiscussionNode>> {
        let caller = caller(ctx, Allowance::Changes).await?;
        let new = new_discussion(
            ctx,
            &input.title,
            input.layout,
            input.key.as_deref(),
            input.url.as_deref(),
        )?;
        let discussion = services(ctx)
            .create_discussion(&caller, new, Creating::Always)
            .await
            .gql()?;
        forget_reads(ctx);
        Ok(Some(DiscussionNode(discussion.into())))
    }

    /// The discussion of a host page: the one with this key, as it is (its title, URL and
    /// layout are kept), or a new one with this key, title, URL and layout. Concurrent calls
    /// with one key give one discussion. Any signed-in user may call it (and, while the server
    /// takes guests' comments, `THREADQL_GUESTS`, a visitor without a token), so a page can create
    /// its discussion on its first comment; one who is not a moderator creates one only with
    /// the `url` of a page of the allowed origins (`THREADQL_PAGE_ORIGINS`, else
    /// `THREADQL_CORS_ORIGINS`, and `THREADQL_PUBLIC_URL`): `FORBIDDEN`, naming them, otherwise.
    async fn ensure_discussion(
        &self,
        ctx: &Context<'_>,
        input: EnsureDiscussionInput,
    ) -> async_graphql::Result<Option<DiscussionNode>> {
        let caller = match auth(ctx) {
            AuthState::Anonymous => services(ctx).visitor().gql()?,
            _ => caller(ctx, Allowance::Changes).await?,
        };
        let new = new_discussion(
            ctx,
            &input.title,
            input.layout,
            Some(&input.key),
            input.url.as_deref(),
        )?;
        let discussion = services(ctx)
            .create_discussion(&caller, new, Creating::UnlessKeyed)
            .await
            .gql()?;
        forget_reads(ctx);
        Ok(Some(DiscussionNode(discussion.into())))
    }

    /// Corrects a discussion's title or the address of its page, with the rules of
    /// `createDiscussion`; its key stays. An argument left out (or null) keeps what it is; at
    /// least one is needed (`BAD_USER_INPUT`). Changing nothing answers with the discussion as
    /// it is. Recorded in the moderation log when it changed something. Moderators only.
    async fn update_discussion(
        &self,
        ctx: &Context<'_>,
        id: ID,
        title: Option<String>,
        url: Option<String>,
    ) -> async_graphql::Result<Option<DiscussionNode>> {
        let caller = moderator(ctx).await?;
        let id = DiscussionId::parse(&id).gql()?;
        let update = DiscussionUpdate {
            title: title
                .as_deref()
                .map(DiscussionTitle::parse)
                .transpose()
                .gql()?,
            url: url.as_deref().map(DiscussionUrl::parse).transpose().gql()?,
        };
        let discussion = services(ctx)
            .update_discussion(&caller, id, update)
            .await
            .gql()?;
        forget_reads(ctx);
        Ok(Some(DiscussionNode(discussion.into())))
    }

    /// Posts a comment: top-level, or a reply when `parentSlug` is given. A reply deeper than the
    /// depth cap attaches to the deepest allowed ancestor (see the returned `parentSlug`).
    /// Refused with `FORBIDDEN` while the discussion is locked.
    async fn post_comment(
        &self,
        ctx: &Context<'_>,
        input: PostCommentInput,
    ) -> async_graphql::Result<Option<CommentNode>> {
        let parent = input
            .parent_slug
            .as_deref()
            .map(Slug::parse)
            .transpose()
            .gql()?;
        let post = NewPost {
            discussion: DiscussionId::parse(&input.discussion_id).gql()?,
            parent,
            text: input.text,
        };
        if let Some(guest) = input.guest {
            if !matches!(auth(ctx), AuthState::Anonymous) {
                return Err(DomainError::bad_input(
                    "a guest's post carries no token: send `guest` without `Authorization`, or sign in without `guest`",
                ))
                .gql();
            }
            let node = super::guest_post::post(ctx, post, guest).await?;
            forget_reads(ctx);
            return Ok(Some(node));
        }
        let caller = caller(ctx, Allowance::Changes).await?;
        let posted = services(ctx).post(&caller, post).await.gql()?;
        forget_reads(ctx);
        Ok(Some(match posted {
            Posted::Published {
                discussion,
                comment,
            } => CommentNode::new(discussion, comment),
            Posted::Held { discussion, held } => CommentNode::held(discussion, held),
        }))
    }

    /// Replaces a comment's text, keeping the previous one in `revisions`. Its author may edit
    /// for a while after posting (the server's edit window) unless the discussion is locked;
    /// moderators may edit at any time (recorded in the moderation log when the comment is not
    /// their own). A deleted comment cannot be edited (`COMMENT_DELETED`).
    async fn edit_comment(
        &self,
        ctx: &Context<'_>,
        input: EditCommentInput,
    ) -> async_graphql::Result<Option<CommentNode>> {
        let (id, slug) = comment_args(&input.discussion_id, &input.slug)?;
        let caller = changer(ctx, input.guest_token.as_deref(), &id, &slug).await?;
        let (discussion, comment) = services(ctx)
            .edit(&caller, id, slug, &input.text)
            .await
            .gql()?;
        forget_reads(ctx);
        Ok(Some(CommentNode::new(discussion, comment)))
    }

    /// Deletes a comment (its author or a moderator; a moderator's delete of a comment not their
    /// own is recorded in the moderation log). The comment stays as a tombstone: same place,
    /// slug and replies, `deleted: true`, no text, no revisions. Deleting again is fine.
    async fn delete_comment(
        &self,
        ctx: &Context<'_>,
        discussion_id: ID,
        slug: String,
        guest_token: Option<String>,
    ) -> async_graphql::Result<Option<CommentNode>> {
        let (id, slug) = comment_args(&discussion_id, &slug)?;
        let caller = changer(ctx, guest_token.as_deref(), &id, &slug).await?;
        let (discussion, comment) = services(ctx).delete(&caller, id, slug).await.gql()?;
        forget_reads(ctx);
        Ok(Some(CommentNode::new(discussion, comment)))
    }

    /// Locks a discussion (no new comments or replies, no edits by authors) or unlocks it.
    /// Recorded in the moderation log. Moderators only.
    async fn lock_discussion(
        &self,
        ctx: &Context<'_>,
        id: ID,
        locked: bool,
    ) -> async_graphql::Result<Option<DiscussionNode>> {
        let caller = moderator(ctx).await?;
        let id = DiscussionId::parse(&id).gql()?;
        let discussion = services(ctx)
            .lock_discussion(&caller, id, locked)
            .await
            .gql()?;
        forget_reads(ctx);
        Ok(Some(DiscussionNode(discussion.into())))
    }

    /// Sets how a discussion moderates new comments from now on (comments already posted keep
    /// their status). Moderators only.
    async fn set_moderation(
        &self,
        ctx: &Context<'_>,
        id: ID,
        mode: ModerationMode,
    ) -> async_graphql::Result<Option<DiscussionNode>> {
        let caller = moderator(ctx).await?;
        let id = DiscussionId::parse(&id).gql()?;
        let discussion = services(ctx)
            .set_moderation(&caller, id, mode.into())
            .await
            .gql()?;
        forget_reads(ctx);
        Ok(Some(DiscussionNode(discussion.into())))
    }

    /// Approves a comment. A held one (PENDING or REJECTED, never public) is posted now, as any
    /// comment is, with its author and text and the slug it was given when submitted: it
    /// appears at its approval time (`posted`) and `commentPosted` fires. A placeholder (a
    /// public comment rejected or held by reports) is restored in place and `commentChanged`
    /// fires. Either way its author is trusted from then on (`PRE_FIRST`). A public comment's
    /// reports are dismissed (`reportCount` 0, out of the REPORTED queue); one with none is
    /// returned as it is. A held reply whose parent is still held is `BAD_USER_INPUT` (approve
    /// the parent first); an unknown slug is `NOT_FOUND`. Recorded in the moderation log when
    /// it changed something. Moderators only.
    async fn approve_comment(
        &self,
        ctx: &Context<'_>,
        discussion_id: ID,
        slug: String,
    ) -> async_graphql::Result<Option<CommentNode>> {
        let caller = moderator(ctx).await?;
        let (id, slug) = comment_args(&discussion_id, &slug)?;
        let approved = services(ctx).approve(&caller, id, slug).await.gql()?;
        forget_reads(ctx);
        Ok(Some(CommentNode::new(
            approved.discussion,
            approved.comment,
        )))
    }

    /// Rejects a comment, with an optional `reason` its author sees (at most 500 characters).
    /// A held one stays hidden, REJECTED. A public one becomes a REJECTED placeholder in
    /// place: its replies stay, and everyone but its author and moderators sees neither its
    /// text nor its author (`commentChanged` fires). Approving it later reverses either.
    /// Rejecting again replaces the reason. An unknown slug is `NOT_FOUND`, a deleted comment
    /// `COMMENT_DELETED`. Recorded in the moderation log. Moderators only.
    async fn reject_comment(
        &self,
        ctx: &Context<'_>,
        discussion_id: ID,
        slug: String,
        reason: Option<String>,
    ) -> async_graphql::Result<Option<CommentNode>> {
        let caller = moderator(ctx).await?;
        let (id, slug) = comment_args(&discussion_id, &slug)?;
        let reason = reason.as_deref().map(Reason::parse).transpose().gql()?;
        let (discussion, comment) = services(ctx)
            .reject(&caller, id, slug, reason)
            .await
            .gql()?;
        forget_reads(ctx);
        Ok(Some(CommentNode::new(discussion, comment)))
    }

    /// Reports a public comment to the moderators, once per user and comment: true when the
    /// report counted, false for a repeat (which changes nothing). Any signed-in user may,
    /// except on their own comment (`BAD_USER_INPUT`). `note`: at most 500 characters. When a
    /// comment's reports reach the server's threshold (`THREADQL_REPORTS_TO_HOLD`), it is held
    /// as a PENDING placeholder until a moderator approves or rejects it; a moderator's comment
    /// is never held by reports (it waits in the REPORTED queue). An unknown slug, a
    /// held comment or a placeholder is `NOT_FOUND`; a deleted comment `COMMENT_DELETED`.
    async fn report_comment(
        &self,
        ctx: &Context<'_>,
        discussion_id: ID,
        slug: String,
        reason: ReportReason,
        note: Option<String>,
    ) -> async_graphql::Result<Option<bool>> {
        let caller = caller(ctx, Allowance::Changes).await?;
        let (id, slug) = comment_args(&discussion_id, &slug)?;
        let note = note.as_deref().map(Reason::parse).transpose().gql()?;
        let counted = services(ctx)
            .report(&caller, id, slug, reason.into(), note)
            .await
            .gql()?;
        forget_reads(ctx);
        Ok(Some(counted))
    }

    /// Votes on a comment as the caller: `UP` or `DOWN`, or `null` to take the vote back. One
    /// vote per user and comment: voting as already voted changes nothing, and switching moves
    /// the vote from one count to the other. Not on one's own comment (`FORBIDDEN`), a deleted
    /// one (`COMMENT_DELETED`), a held one or a placeholder (`NOT_FOUND`), nor in a locked
    /// discussion (`FORBIDDEN`). Votes have their own rate per user
    /// (`THREADQL_VOTE_RATE_LIMIT`). Returns the comment with its counters as they are now. A
    /// vote emits no `commentChanged` event.
    async fn vote_comment(
        &self,
        ctx: &Context<'_>,
        discussion_id: ID,
        slug: String,
        value: Option<VoteValue>,
    ) -> async_graphql::Result<Option<CommentNode>> {
        let caller = caller(ctx, Allowance::Votes).await?;
        let (id, slug) = comment_args(&discussion_id, &slug)?;
        let (discussion, comment) = services(ctx)
            .vote(&caller, id, slug, value.map(Into::into))
            .await
            .gql()?;
        forget_reads(ctx);
        Ok(Some(CommentNode::new(discussion, comment)))
    }

    /// Pins a comment (`pinned: true`) to the top of its discussion, after those pinned before
    /// it (`Discussion.pinnedComments`), or unpins it. At most 5 per discussion: a 6th is
    /// `BAD_USER_INPUT`. Pinning a pinned comment, or unpinning one that is not, changes
    /// nothing. A deleted comment cannot be pinned (`COMMENT_DELETED`). Recorded in the
    /// moderation log. Moderators only.
    async fn pin_comment(
        &self,
        ctx: &Context<'_>,
        discussion_id: ID,
        slug: String,
        pinned: bool,
    ) -> async_graphql::Result<Option<CommentNode>> {
        let caller = moderator(ctx).await?;
        let (id, slug) = comment_args(&discussion_id, &slug)?;
        let (discussion, comment) = services(ctx)
            .pin_comment(&caller, id, slug, pinned)
            .await
            .gql()?;
        forget_reads(ctx);
        Ok(Some(CommentNode::new(discussion, comment)))
    }

    /// Moves a discussion to another storage layout while it stays online: reads keep
    /// answering from the old layout until the copy is complete, and posts, edits and deletes
    /// made meanwhile wait for the switch (a few seconds for tens of thousands of comments) and
    /// are then made in the new layout. Every comment keeps its slug, time, author, text, edit
    /// history and tombstone. Returns the discussion in its new layout (moving it to the layout
    /// it has only removes what an interrupted earlier move left behind). `CONFLICT` while
    /// another move of it runs; `DISCUSSION_TOO_LARGE` when it would not fit in one EMBEDDED
    /// document. Recorded in the moderation log. Moderators only.
    async fn migrate_discussion(
        &self,
        ctx: &Context<'_>,
        id: ID,
        layout: StorageLayout,
    ) -> async_graphql::Result<Option<DiscussionNode>> {
        let caller = moderator(ctx).await?;
        let id = DiscussionId::parse(&id).gql()?;
        let to: Layout = layout.into();
        let moved = services(ctx).move_discussion(&caller, id, to).await.gql()?;
        forget_reads(ctx);
        Ok(Some(DiscussionNode(moved.discussion.into())))
    }

    /// Bans a user: until `until` (a time in the future), or for good without it, with an
    /// optional `reason` (at most 500 characters; newlines and tabs are the only control
    /// characters allowed). Every mutation the user then sends is `FORBIDDEN`, with the ban's
    /// end and reason in the message, on every server within 5 s. Banning a banned user
    /// replaces their ban. Any user id may be banned (ids are opaque), but not one a moderator
    /// token has acted with (`BAD_USER_INPUT`), and a moderator's token is never held back by
    /// a ban. Recorded in the moderation log. Moderators only.
    async fn ban_user(
        &self,
        ctx: &Context<'_>,
        user_id: ID,
        until: Option<DateTime<Utc>>,
        reason: Option<String>,
    ) -> async_graphql::Result<Option<BanNode>> {
        let caller = moderator(ctx).await?;
        let user = UserId::parse(&user_id).gql()?;
        let reason = reason.as_deref().map(Reason::parse).transpose().gql()?;
        let ban = services(ctx)
            .ban(&caller, user, until, reason)
            .await
            .gql()?;
        Ok(Some(BanNode(ban)))
    }

    /// Lifts a user's ban: true when they were banned, false when they were not (or their ban
    /// had already ended), which changes nothing. Takes effect on every server within 5 s.
    /// Recorded in the moderation log when there was a ban to lift. Moderators only.
    async fn unban_user(
        &self,
        ctx: &Context<'_>,
        user_id: ID,
    ) -> async_graphql::Result<Option<bool>> {
        let caller = moderator(ctx).await?;
        let user = UserId::parse(&user_id).gql()?;
        let lifted = services(ctx).unban(&caller, user).await.gql()?;
        Ok(Some(lifted))
    }
}
