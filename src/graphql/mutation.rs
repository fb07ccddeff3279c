//! The Mutation root: every mutation needs a valid bearer token, and a caller who is not banned.

use std::future::Future;
use std::sync::Arc;

use async_graphql::{Context, InputObject, Object, ID};
use chrono::{DateTime, Utc};
use tracing::Instrument as _;

use super::closing::Closing;
use super::error::OrGql;
use super::loaders::{CommentKey, DiscussionRef};
use super::moderation;
use super::query::load_discussion;
use super::reads;
use super::types::{
    comment_by_slug, visible_held, BanNode, CommentNode, DiscussionNode, ModerationMode,
    ReportReason, StorageLayout, VoteValue,
};
use super::{auth, store, AuthorRate, Limits, RequestReads, VoterRate};
use crate::auth::{AuthState, Viewer};
use crate::domain::{
    Actor, Ban, Change, CommentStatus, CommentText, Discussion, DiscussionId, DiscussionKey,
    DiscussionTitle, DiscussionUrl, DomainError, FullSlug, Layout, Logged, Micros,
    ModerationAction, NewComment, NewDiscussion, Queue, Reason, Slug, Standing, UserId,
};
use crate::rate::retry_after_secs;
use crate::store::{DynStorage, Report};

/// The caller of a mutation, checked: signed in, within its author's rate, and not banned (a
/// moderator is never held back by a ban, and is recorded as a moderator instead). Only
/// [`caller`] makes one, and [`detached`], which runs every write, takes one: no mutation can
/// write without these checks.
struct Caller<'a>(&'a Viewer);

impl std::ops::Deref for Caller<'_> {
    type Target = Viewer;

    fn deref(&self) -> &Viewer {
        self.0
    }
}

/// The caller (`UNAUTHENTICATED` without a valid token), refused with `FORBIDDEN` while banned
/// (before the rate, so a banned user hears why, whatever they send), and counted against the
/// mutation rate per author (`RATE_LIMITED` past it). Every mutation field starts here, once,
/// so aliases count too and each mutation spends exactly one of its author's tokens. The ban
/// check costs at most one database command, and none while this process knows the caller's
/// ban state (5 s); a moderator's first mutation in this process records them as a moderator
/// (one write), later ones cost nothing.
async fn caller<'a>(ctx: &Context<'a>) -> async_graphql::Result<Caller<'a>> {
    checked(ctx, Allowance::Changes).await
}

/// Which allowance a mutation spends.
#[derive(Clone, Copy)]
enum Allowance {
    /// Posts, edits and every other change (`THREADQL_RATE_LIMIT`).
    Changes,
    /// Votes (`THREADQL_VOTE_RATE_LIMIT`).
    Votes,
}

/// The caller, checked as [`caller`] says, counted against `allowance`.
async fn checked<'a>(ctx: &Context<'a>, allowance: Allowance) -> async_graphql::Result<Caller<'a>> {
    let viewer = match auth(ctx) {
        AuthState::Authenticated(viewer) => viewer,
        AuthState::Anonymous => return Err(DomainError::Unauthenticated(
            "this needs a signed-in user: send `Authorization: Bearer <token>` (mint a development token with `threadql token`)".into(),
        ))
        .gql(),
        AuthState::Rejected(why) => return Err(DomainError::Unauthenticated(why.clone())).gql(),
    };
    let moderation = store(ctx).moderation();
    if viewer.moderator {
        moderation
            .moderator_acted(&viewer.author)
            .instrument(tracing::debug_span!("store.moderatorActed"))
            .await
            .gql()?;
    } else if let Some(ban) = moderation
        .ban_of(&viewer.author.id)
        .instrument(tracing::debug_span!("store.banOf"))
        .await
        .gql()?
    {
        if ban.applies_at(Micros::now()) {
            return Err(ban.refusal()).gql();
        }
    }
    let (limiter, what) = match allowance {
        Allowance::Changes => (&ctx.data_unchecked::<AuthorRate>().0, "changes"),
        Allowance::Votes => (&ctx.data_unchecked::<VoterRate>().0, "votes"),
    };
    if let Err(wait) = limiter.check(&viewer.author.id) {
        let secs = retry_after_secs(wait);
        return Err(DomainError::RateLimited {
            message: format!("too many {what} from this author: try again in {secs} s"),
            retry_after_secs: secs,
        })
        .gql();
    }
    Ok(Caller(viewer))
}

/// The caller (see [`caller`]), who must be a moderator (`FORBIDDEN` otherwise).
async fn moderator<'a>(ctx: &Context<'a>) -> async_graphql::Result<Caller<'a>> {
    let caller = caller(ctx).await?;
    if !caller.moderator {
        return Err(DomainError::Forbidden(
            "only moderators (a token with the `moderator` role) may do this".into(),
        ))
        .gql();
    }
    Ok(caller)
}

/// Records a moderator action in the moderation log, once it has succeeded (in the write's own
/// task, right after it). When the entry cannot be written, the action stands and the caller
/// is told: sending the same request again is safe.
async fn record(storage: &DynStorage, logged: Logged) -> Result<(), DomainError> {
    let action = logged.action;
    let Err(err) = storage.moderation().record(logged).await else {
        return Ok(());
    };
    tracing::error!(%err, action = action.as_str(), "a moderator action was made, but the moderation log could not record it");
    Err(match DomainError::from(err) {
        DomainError::Unavailable(_) => DomainError::Unavailable(format!(
            "the {} was made, but the database became unavailable before the moderation log \
             recorded it; sending the same request again is safe",
            action.as_str().replace('_', " ")
        )),
        other => other,
    })
}

/// Runs a write in a task of its own: once started, it completes (or fails) whatever happens to
/// the request that asked for it (by a [`Caller`]: every check passed). A client that hangs up
/// drops its request, and so does a shutdown whose grace period ran out; without this the write
/// would stop halfway. The write is counted until it ends, and the process waits for it before
/// it stops the embedded database; once that wait has begun, a write is refused with
/// `UNAVAILABLE` instead. The task stays in the request's span (its trace).
async fn detached<T, E>(
    ctx: &Context<'_>,
    _checked: &Caller<'_>,
    write: impl Future<Output = Result<T, E>> + Send + 'static,
) -> async_graphql::Result<T>
where
    T: Send + 'static,
    E: Into<DomainError> + Send + 'static,
{
    let counted = ctx.data_unchecked::<Closing>().start_write().gql()?;
    let write = async move {
        let result = write.await;
        drop(counted);
        result
    };
    match tokio::spawn(write.in_current_span()).await {
        Ok(result) => result.map_err(Into::into).gql(),
        Err(err) => Err(DomainError::Internal(format!("a write task failed: {err}"))).gql(),
    }
}

/// Forgets what this request has read, so fields resolved after a write see it.
fn forget_reads(ctx: &Context<'_>) {
    ctx.data_unchecked::<RequestReads>().invalidate();
}

/// How a new discussion is stored.
#[derive(Debug, Clone, Copy)]
enum Creating {
    /// As a new discussion (a key in use is refused).
    Always,
    /// Only when no discussion has its key yet; otherwise that discussion is the answer.
    UnlessKeyed,
}

/// Stores `new` as `how` says, in a task of its own (see [`detached`]), and answers with the
/// discussion stored.
async fn store_discussion(
    ctx: &Context<'_>,
    caller: &Caller<'_>,
    new: NewDiscussion,
    how: Creating,
) -> async_graphql::Result<Option<DiscussionNode>> {
    let storage = store(ctx).clone();
    let span = match how {
        Creating::Always => tracing::debug_span!("store.createDiscussion"),
        Creating::UnlessKeyed => tracing::debug_span!("store.ensureDiscussion"),
    };
    let write = async move {
        match how {
            Creating::Always => storage.discussions().add(new).await,
            Creating::UnlessKeyed => storage.discussions().ensure(new).await,
        }
    };
    let discussion = detached(ctx, caller, write.instrument(span)).await?;
    forget_reads(ctx);
    Ok(Some(DiscussionNode(discussion.into())))
}

/// A new discussion.
#[derive(InputObject)]
pub(super) struct CreateDiscussionInput {
    /// Its title (1–300 characters).
    pub title: String,
    /// How to store its comments; the server's default when omitted.
    pub layout: Option<StorageLayout>,
    /// The host page's own identifier for it (1–512 characters, no control characters,
    /// compared exactly); unique: a key in use is `BAD_USER_INPUT` (see `ensureDiscussion`).
    pub key: Option<String>,
    /// The address of the page it belongs to: an absolute http or https URL of at most 2 048
    /// characters, kept as the URL standard writes it.
    pub url: Option<String>,
}

/// The discussion of a host page, by the page's key.
#[derive(InputObject)]
pub(super) struct EnsureDiscussionInput {
    /// The host page's own identifier (1–512 characters, no control characters, compared
    /// exactly).
    pub key: String,
    /// The title, if the discussion is created now (1–300 characters).
    pub title: String,
    /// The page's address, if the discussion is created now.
    pub url: Option<String>,
    /// How to store its comments, if it is created now; the server's default when omitted.
    pub layout: Option<StorageLayout>,
}

/// A new discussion from client input: every field checked, the layout one the store has.
fn new_discussion(
    ctx: &Context<'_>,
    title: &str,
    layout: Option<StorageLayout>,
    key: Option<&str>,
    url: Option<&str>,
) -> async_graphql::Result<NewDiscussion> {
    let new = NewDiscussion {
        title: DiscussionTitle::parse(title).gql()?,
        layout: layout
            .map(Into::into)
            .unwrap_or(ctx.data_unchecked::<Limits>().default_layout),
        key: key.map(DiscussionKey::parse).transpose().gql()?,
        url: url.map(DiscussionUrl::parse).transpose().gql()?,
        id: None,
        created: None,
    };
    store(ctx).layout(new.layout).gql()?;
    Ok(new)
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
}

/// Writes.
pub struct Mutation;

/// The parent a held reply goes under: a public comment, or a held one the caller may see
/// (`NOT_FOUND` otherwise); its slug and full slug.
async fn visible_parent(
    ctx: &Context<'_>,
    discussion: &Arc<Discussion>,
    slug: &Slug,
) -> async_graphql::Result<(Slug, FullSlug)> {
    let key = CommentKey {
        discussion: DiscussionRef(discussion.clone()),
        slug: slug.clone(),
    };
    if let Some(public) = reads(ctx).loader.load_one(key).await.gql()? {
        return Ok((public.slug, public.full_slug));
    }
    match visible_held(ctx, discussion, slug).await? {
        Some(held) => Ok((held.comment.slug, held.comment.full_slug)),
        None => Err(DomainError::not_found(format!(
            "no comment {slug} in discussion {} to reply to",
            discussion.id
        )))
        .gql(),
    }
}

impl Mutation {
    /// Holds `new` for a moderator under `parent` with `standing` (pending or rejected), in a
    /// task of its own (see [`detached`]).
    async fn hold(
        ctx: &Context<'_>,
        caller: &Caller<'_>,
        discussion: Arc<Discussion>,
        parent: Option<(Slug, FullSlug)>,
        new: NewComment,
        standing: Standing,
    ) -> async_graphql::Result<CommentNode> {
        if discussion.locked {
            return Err(DomainError::Forbidden(format!(
                "discussion {} is locked: it takes no new comments or replies",
                discussion.id
            )))
            .gql();
        }
        let storage = store(ctx).clone();
        let id = discussion.id.clone();
        let hold = async move {
            let parent = parent.as_ref().map(|(s, f)| (s, f));
            storage.held().hold(&id, parent, &new, standing).await
        };
        let held = detached(
            ctx,
            caller,
            hold.instrument(tracing::debug_span!("store.hold")),
        )
        .await?;
        forget_reads(ctx);
        Ok(CommentNode::held(discussion, held))
    }

    /// Applies an edit or a delete to a comment on behalf of the caller. A moderator's edit or
    /// delete of someone else's comment is recorded in the moderation log (of their own, it is
    /// an author's change like anyone's).
    async fn change(
        ctx: &Context<'_>,
        caller: &Caller<'_>,
        discussion_id: &str,
        slug: &str,
        change: Change,
    ) -> async_graphql::Result<CommentNode> {
        let slug = Slug::parse(slug).gql()?;
        let discussion = load_discussion(ctx, discussion_id).await?;
        let rules = ctx.data_unchecked::<Limits>().edit_rules;
        let storage = store(ctx).clone();
        let target = discussion.clone();
        let viewer = Viewer::clone(caller);
        let action = match change {
            Change::Edit(_) => ModerationAction::Edit,
            Change::Delete => ModerationAction::Delete,
        };
        // An edit with a listed word makes a public comment a placeholder (pending for a
        // suspect word, rejected for a banned one).
        let screened = match &change {
            Change::Edit(text) => moderation::screened(ctx, caller.moderator, text),
            Change::Delete => None,
        };
        let comment = detached(
            ctx,
            caller,
            async move {
                let actor = Actor {
                    author: &viewer.author,
                    moderator: viewer.moderator,
                };
                let decide = |current: &crate::domain::Comment, now| {
                    let next = change.apply(current, actor, rules, target.locked, now)?;
                    Ok(match (next, &screened) {
                        (Some(mut next), Some(screened)) => {
                            next.standing = moderation::stricter(&current.standing, screened);
                            Some(next)
                        }
                        (next, _) => next,
                    })
                };
                let comment = storage
                    .posting()
                    .change_comment(&target, &slug, &decide)
                    .await?;
                // Held or rejected by the edit: into its queue (after the change, which may
                // be refused; a crash in between leaves it out of the queue until its next
                // change or report).
                if screened.is_some() && !comment.deleted {
                    if let Some(queue) = Queue::of(&comment.standing) {
                        storage
                            .held()
                            .enqueue(&target.id, &slug, queue, Micros::now())
                            .await?;
                    }
                }
                if action == ModerationAction::Delete && Queue::of(&comment.standing).is_some() {
                    // A deleted comment waits for no moderator.
                    storage.held().remove(&target.id, &slug).await?;
                }
                if viewer.moderator && comment.author.id != viewer.author.id {
                    let logged = Logged::new(viewer.author.clone(), action, Micros::now())
                        .comment(target.id.clone(), comment.slug.clone())
                        .user(UserId::from_stored(comment.author.id.clone()));
                    record(&storage, logged).await?;
                }
                Ok::<_, DomainError>(comment)
            }
            .instrument(tracing::debug_span!("store.change")),
        )
        .await?;
        forget_reads(ctx);
        Ok(CommentNode::new(discussion, comment))
    }
}

/// Every field is nullable: a failed mutation is `null` with its error, and the other fields of
/// the same request keep their results (GraphQL's null propagation stops at the field).
#[Object]
impl Mutation {
    /// Creates a discussion. Any signed-in user may. A `key` another discussion has is
    /// `BAD_USER_INPUT`: `ensureDiscussion` gets the discussion of a key.
    async fn create_discussion(
        &self,
        ctx: &Context<'_>,
        input: CreateDiscussionInput,
    ) -> async_graphql::Result<Option<DiscussionNode>> {
        let caller = caller(ctx).await?;
        let new = new_discussion(
            ctx,
            &input.title,
            input.layout,
            input.key.as_deref(),
            input.url.as_deref(),
        )?;
        store_discussion(ctx, &caller, new, Creating::Always).await
    }

    /// The discussion of a host page: the one with this key, as it is (its title, URL and
    /// layout are kept), or a new one with this key, title, URL and layout. Concurrent calls
    /// with one key give one discussion. Any signed-in user may call it, so a page can create
    /// its discussion on its first comment.
    async fn ensure_discussion(
        &self,
        ctx: &Context<'_>,
        input: EnsureDiscussionInput,
    ) -> async_graphql::Result<Option<DiscussionNode>> {
        let caller = caller(ctx).await?;
        let new = new_discussion(
            ctx,
            &input.title,
            input.layout,
            Some(&input.key),
            input.url.as_deref(),
        )?;
        store_discussion(ctx, &caller, new, Creating::UnlessKeyed).await
    }

    /// Posts a comment: top-level, or a reply when `parentSlug` is given. A reply deeper than the
    /// depth cap attaches to the deepest allowed ancestor (see the returned `parentSlug`).
    /// Refused with `FORBIDDEN` while the discussion is locked.
    async fn post_comment(
        &self,
        ctx: &Context<'_>,
        input: PostCommentInput,
    ) -> async_graphql::Result<Option<CommentNode>> {
        let caller = caller(ctx).await?;
        let limits = ctx.data_unchecked::<Limits>();
        let text = CommentText::parse(&input.text, limits.max_text_chars).gql()?;
        let parent = input
            .parent_slug
            .as_deref()
            .map(Slug::parse)
            .transpose()
            .gql()?;
        let id = DiscussionId::parse(&input.discussion_id).gql()?;
        let new = NewComment {
            parent,
            author: caller.author.clone(),
            text,
            part: None,
        };
        // Moderation: the discussion's mode (and, for PRE_FIRST, whether the author is trusted)
        // says whether the comment waits for a moderator. Moderators' own comments never do.
        // A discussion this process posted to lately is not read again (see `Storage::kept`):
        // the post's own write checks that its mode is still the one decided by.
        let discussion = match store(ctx).posting().kept(&id) {
            Some(kept) => kept,
            None => load_discussion(ctx, &input.discussion_id).await?,
        };
        // The word lists hold a comment in any mode (a banned word rejects it at once).
        let mode = discussion.moderation.unwrap_or(limits.default_moderation);
        let held = match moderation::screened(ctx, caller.moderator, &new.text) {
            Some(standing) => Some(standing),
            None if caller.moderator => None,
            None => {
                let holds = match mode {
                    crate::domain::ModerationMode::Post => false,
                    crate::domain::ModerationMode::Pre => true,
                    crate::domain::ModerationMode::PreFirst => {
                        !store(ctx).held().trusted(&caller.author.id).await.gql()?
                    }
                };
                holds
                    .then(Standing::default)
                    .map(|s| s.set(CommentStatus::Pending, None))
            }
        };
        if let Some(standing) = held {
            let parent = match &new.parent {
                Some(slug) => Some(visible_parent(ctx, &discussion, slug).await?),
                None => None,
            };
            return Self::hold(ctx, &caller, discussion, parent, new, standing)
                .await
                .map(Some);
        }
        // The store reads the discussion (or, for an embedded one it posted to lately, checks
        // it in the post's own update): `NOT_FOUND`, and `FORBIDDEN` while it is locked.
        let storage = store(ctx).clone();
        let (sent, read) = (new.clone(), discussion.clone());
        let post = async move { storage.posting().post_from(read, sent).await };
        let (discussion, posted) = match detached(
            ctx,
            &caller,
            post.instrument(tracing::debug_span!("store.post")),
        )
        .await
        {
            Ok(done) => done,
            // A reply to a held comment (its author's or, for a moderator, anyone's) is
            // held too: its parent is not public.
            Err(err) => {
                let held_parent = match &new.parent {
                    Some(slug) => visible_held(ctx, &discussion, slug).await?,
                    None => None,
                };
                let Some(parent) = held_parent else {
                    return Err(err);
                };
                let parent = (parent.comment.slug, parent.comment.full_slug);
                let standing = Standing::default().set(CommentStatus::Pending, None);
                return Self::hold(ctx, &caller, discussion, Some(parent), new, standing)
                    .await
                    .map(Some);
            }
        };
        forget_reads(ctx);
        if posted.reattached {
            tracing::info!(
                discussion = %discussion.id,
                slug = %posted.comment.slug,
                "reply was deeper than the depth cap: attached to the deepest allowed ancestor"
            );
        }
        Ok(Some(CommentNode::new(discussion, posted.comment)))
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
        let caller = caller(ctx).await?;
        let limits = ctx.data_unchecked::<Limits>();
        let text = CommentText::parse(&input.text, limits.max_text_chars).gql()?;
        Self::change(
            ctx,
            &caller,
            &input.discussion_id,
            &input.slug,
            Change::Edit(text),
        )
        .await
        .map(Some)
    }

    /// Deletes a comment (its author or a moderator; a moderator's delete of a comment not their
    /// own is recorded in the moderation log). The comment stays as a tombstone: same place,
    /// slug and replies, `deleted: true`, no text, no revisions. Deleting again is fine.
    async fn delete_comment(
        &self,
        ctx: &Context<'_>,
        discussion_id: ID,
        slug: String,
    ) -> async_graphql::Result<Option<CommentNode>> {
        let caller = caller(ctx).await?;
        Self::change(ctx, &caller, &discussion_id, &slug, Change::Delete)
            .await
            .map(Some)
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
        let storage = store(ctx).clone();
        let by = caller.author.clone();
        let lock = async move {
            let discussion = storage.discussions().set_locked(&id, locked).await?;
            let action = match locked {
                true => ModerationAction::Lock,
                false => ModerationAction::Unlock,
            };
            record(
                &storage,
                Logged::new(by, action, Micros::now()).discussion(id),
            )
            .await?;
            Ok::<_, DomainError>(discussion)
        };
        let discussion = detached(
            ctx,
            &caller,
            lock.instrument(tracing::debug_span!("store.lock")),
        )
        .await?;
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
        let storage = store(ctx).clone();
        let mode: crate::domain::ModerationMode = mode.into();
        let by = caller.author.clone();
        let set = async move {
            let set = storage.discussions().set_moderation(&id, mode).await;
            // Posts from this process decide by the mode they read from now on.
            storage.posting().forget(&id);
            let discussion = set?;
            let logged = Logged::new(by, ModerationAction::SetModeration, Micros::now())
                .discussion(id)
                .detail(mode.as_str().to_uppercase());
            record(&storage, logged).await?;
            Ok::<_, DomainError>(discussion)
        };
        let discussion = detached(
            ctx,
            &caller,
            set.instrument(tracing::debug_span!("store.setModeration")),
        )
        .await?;
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
        let slug = Slug::parse(&slug).gql()?;
        let discussion = load_discussion(ctx, &discussion_id).await?;
        let storage = store(ctx).clone();
        let max = ctx.data_unchecked::<Limits>().max_text_chars;
        let by = caller.author.clone();
        let approve = async move {
            let approved = moderation::approve(storage.clone(), discussion, slug, max).await?;
            if approved.changed {
                let comment = &approved.comment;
                let logged = Logged::new(by, ModerationAction::Approve, Micros::now())
                    .comment(approved.discussion.id.clone(), comment.slug.clone())
                    .user(UserId::from_stored(comment.author.id.clone()));
                record(&storage, logged).await?;
            }
            Ok::<_, DomainError>(approved)
        };
        let approved = detached(
            ctx,
            &caller,
            approve.instrument(tracing::debug_span!("store.approve")),
        )
        .await?;
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
        let slug = Slug::parse(&slug).gql()?;
        let reason = reason.as_deref().map(Reason::parse).transpose().gql()?;
        let discussion = load_discussion(ctx, &discussion_id).await?;
        let storage = store(ctx).clone();
        let by = caller.author.clone();
        let target = discussion.clone();
        let reject = async move {
            let kept = reason.as_ref().map(|r| r.as_str().to_owned());
            let comment = moderation::reject(storage.clone(), target, slug, kept).await?;
            let logged = Logged::new(by, ModerationAction::Reject, Micros::now())
                .comment(comment.discussion_id.clone(), comment.slug.clone())
                .user(UserId::from_stored(comment.author.id.clone()))
                .reason(reason);
            record(&storage, logged).await?;
            Ok::<_, DomainError>(comment)
        };
        let comment = detached(
            ctx,
            &caller,
            reject.instrument(tracing::debug_span!("store.reject")),
        )
        .await?;
        forget_reads(ctx);
        Ok(Some(CommentNode::new(discussion, comment)))
    }

    /// Reports a public comment to the moderators, once per user and comment: true when the
    /// report counted, false for a repeat (which changes nothing). Any signed-in user may,
    /// except on their own comment (`BAD_USER_INPUT`). `note`: at most 500 characters. When a
    /// comment's reports reach the server's threshold (`THREADQL_REPORTS_TO_HOLD`), it is held
    /// as a PENDING placeholder until a moderator approves or rejects it. An unknown slug, a
    /// held comment or a placeholder is `NOT_FOUND`; a deleted comment `COMMENT_DELETED`.
    async fn report_comment(
        &self,
        ctx: &Context<'_>,
        discussion_id: ID,
        slug: String,
        reason: ReportReason,
        note: Option<String>,
    ) -> async_graphql::Result<Option<bool>> {
        let caller = caller(ctx).await?;
        let slug = Slug::parse(&slug).gql()?;
        let note = note.as_deref().map(Reason::parse).transpose().gql()?;
        let discussion = load_discussion(ctx, &discussion_id).await?;
        let report = Report {
            discussion: discussion.id.clone(),
            slug,
            reporter: caller.author.id.clone(),
            reason: reason.into(),
            note: note.map(|n| n.as_str().to_owned()),
            at: Micros::now(),
        };
        let storage = store(ctx).clone();
        let hold_at = moderation::hold_at(ctx);
        let write = moderation::report(storage, discussion, report, hold_at);
        let counted = detached(
            ctx,
            &caller,
            write.instrument(tracing::debug_span!("store.report")),
        )
        .await?;
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
        let caller = checked(ctx, Allowance::Votes).await?;
        let slug = Slug::parse(&slug).gql()?;
        let discussion = load_discussion(ctx, &discussion_id).await?;
        if discussion.locked {
            return Err(DomainError::Forbidden(format!(
                "discussion {} is locked: it takes no votes",
                discussion.id
            )))
            .gql();
        }
        let storage = store(ctx).clone();
        let voter = caller.author.id.clone();
        let on = discussion.clone();
        let write = async move {
            storage
                .votes()
                .vote(&on, &slug, &voter, value.map(Into::into))
                .await
        };
        let comment = detached(
            ctx,
            &caller,
            write.instrument(tracing::debug_span!("store.vote")),
        )
        .await?;
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
        let discussion = load_discussion(ctx, &discussion_id).await?;
        let node = comment_by_slug(ctx, discussion.clone(), &slug).await?;
        if !node.comment.standing.is_public() {
            return Err(DomainError::bad_input(format!(
                "comment {} is held for moderation: only public comments can be pinned",
                node.comment.slug
            )))
            .gql();
        }
        if pinned && node.comment.deleted {
            return Err(DomainError::CommentDeleted(format!(
                "comment {} was deleted: it cannot be pinned",
                node.comment.slug
            )))
            .gql();
        }
        let storage = store(ctx).clone();
        let (id, slug) = (discussion.id.clone(), node.comment.slug.clone());
        let by = caller.author.clone();
        let pin = async move {
            let updated = storage.discussions().set_pinned(&id, &slug, pinned).await?;
            let action = match pinned {
                true => ModerationAction::Pin,
                false => ModerationAction::Unpin,
            };
            let logged = Logged::new(by, action, Micros::now()).comment(id, slug);
            record(&storage, logged).await?;
            Ok::<_, DomainError>(updated)
        };
        let updated = detached(
            ctx,
            &caller,
            pin.instrument(tracing::debug_span!("store.pin")),
        )
        .await?;
        forget_reads(ctx);
        Ok(Some(CommentNode::new(Arc::new(updated), node.comment)))
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
        let storage = store(ctx).clone();
        storage.layout(to).gql()?;
        let by = caller.author.clone();
        let migrate = async move {
            let moved = storage.moves().migrate(&id, to, &|_| {}).await?;
            let logged = Logged::new(by, ModerationAction::Move, Micros::now())
                .discussion(id)
                .detail(to.as_str().to_uppercase());
            record(&storage, logged).await?;
            Ok::<_, DomainError>(moved)
        };
        let moved = detached(
            ctx,
            &caller,
            migrate.instrument(tracing::debug_span!("store.migrate")),
        )
        .await?;
        tracing::info!(discussion = %moved.discussion.id, from = %moved.from, to = %to, comments = moved.comments, "discussion moved");
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
        let until = until.map(|until| Micros(until.timestamp_micros()));
        let ban = Ban::new(user, until, reason, caller.author.clone(), Micros::now()).gql()?;
        let storage = store(ctx).clone();
        let write = async move {
            let moderation = storage.moderation();
            if moderation.is_moderator(&ban.user).await? {
                return Err(DomainError::bad_input(format!(
                    "moderators cannot be banned: {} has acted as a moderator on this service",
                    ban.user
                )));
            }
            moderation.ban(&ban).await?;
            let logged = Logged::new(ban.by.clone(), ModerationAction::Ban, ban.at)
                .user(ban.user.clone())
                .reason(ban.reason.clone())
                .detail(ban.term());
            record(&storage, logged).await?;
            Ok(ban)
        };
        let ban = detached(
            ctx,
            &caller,
            write.instrument(tracing::debug_span!("store.ban")),
        )
        .await?;
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
        let storage = store(ctx).clone();
        let by = caller.author.clone();
        let write = async move {
            let removed = storage.moderation().unban(&user).await?;
            let now = Micros::now();
            let lifted = removed.is_some_and(|ban| ban.applies_at(now));
            if lifted {
                let logged = Logged::new(by, ModerationAction::Unban, now).user(user);
                record(&storage, logged).await?;
            }
            Ok::<_, DomainError>(lifted)
        };
        let lifted = detached(
            ctx,
            &caller,
            write.instrument(tracing::debug_span!("store.unban")),
        )
        .await?;
        Ok(Some(lifted))
    }
}
