//! Comment workflows: post (published, or held for a moderator), edit and delete.

use std::sync::Arc;

use tracing::Instrument as _;

use super::moderation::{screened, stricter};
use super::{acted, Caller, Services, Told};
use crate::domain::{
    Actor, Announce, Change, Comment, CommentRef, CommentStatus, CommentText, Discussion,
    DiscussionId, DomainError, Event, FullSlug, Held, Micros, ModerationMode, NewComment, Queue,
    Slug, Standing,
};

/// A comment to post.
#[derive(Debug, Clone)]
pub struct NewPost {
    /// The discussion to post in.
    pub discussion: DiscussionId,
    /// The comment it replies to; `None` for a top-level comment.
    pub parent: Option<Slug>,
    /// The text, as sent (the service checks it against the text rules).
    pub text: String,
}

/// What a post became.
#[derive(Debug)]
pub enum Posted {
    /// Published: everyone sees it.
    Published {
        /// The discussion as the post left it.
        discussion: Arc<Discussion>,
        /// The comment.
        comment: Comment,
    },
    /// Held: it waits for a moderator (or was refused by a word list), seen only by its author
    /// and moderators.
    Held {
        /// The discussion.
        discussion: Arc<Discussion>,
        /// The held comment.
        held: Held,
    },
}

impl Services {
    /// Posts a comment: top-level, or a reply. Whether it is published or held is decided here:
    /// the word lists hold it in any mode (a banned word rejects it at once); otherwise the
    /// discussion's mode does (`PRE` holds every post, `PRE_FIRST` a post of an author no
    /// moderator has approved yet); a moderator's posts are never held. A reply to a held
    /// comment (its author's or, for a moderator, anyone's) is held too. `FORBIDDEN` while the
    /// discussion is locked, on every path, and once it closed (but for moderators).
    pub async fn post(&self, caller: &Caller, post: NewPost) -> Result<Posted, DomainError> {
        let new = self.new_comment(caller, &post).await?;
        self.post_in(caller, &post.discussion, new, None, None)
            .await
    }

    /// The comment `post` makes for `caller`: its text checked and rendered.
    pub(super) async fn new_comment(
        &self,
        caller: &Caller,
        post: &NewPost,
    ) -> Result<NewComment, DomainError> {
        let text = self.text(&post.text)?;
        let html = self.render(text.as_str()).await?;
        Ok(NewComment {
            parent: post.parent.clone(),
            author: caller.author().clone(),
            text,
            html,
            part: None,
            announce: None,
            number: None,
        })
    }

    /// Posts `new` in the discussion `id` as [`Services::post`] does, holding it as `forced`
    /// says when it is given (a guest's: see `guests.rs`; the word lists may still be
    /// stricter), in `read` when the caller read the discussion already (the post's write
    /// checks that its settings are still the ones decided by).
    pub(super) async fn post_in(
        &self,
        caller: &Caller,
        id: &DiscussionId,
        new: NewComment,
        forced: Option<Standing>,
        read: Option<Arc<Discussion>>,
    ) -> Result<Posted, DomainError> {
        // A discussion this process posted to lately is not read again (see `PostStore::kept`):
        // the post's own write checks that its mode is still the one decided by.
        let (discussion, fresh) = match (read, self.storage.posting().kept(id)) {
            (Some(read), _) => (read, true),
            (None, Some(kept)) => (kept, false),
            (None, None) => (self.read_discussion(id).await?, true),
        };
        // Closed by the closing decided by here (the write checks it is still the one).
        self.check_open(caller, &discussion)?;
        let holds = match forced {
            Some(forced) => Some(match screened(&self.words, false, &new.text) {
                Some(screened) => stricter(&forced, &screened),
                None => forced,
            }),
            None => self.holds(caller, &discussion, &new.text).await?,
        };
        if let Some(standing) = holds {
            let parent = match &new.parent {
                Some(slug) => Some(self.visible_parent(caller, &discussion, slug).await?),
                None => None,
            };
            return self
                .hold(caller, discussion, fresh, parent, new, standing)
                .await;
        }
        let storage = self.storage.clone();
        let acted = acted(caller);
        let sent = NewComment {
            announce: Some(Announce::Posted(acted.clone())),
            ..new.clone()
        };
        let read = discussion.clone();
        let write = async move {
            let (discussion, posted) = storage.posting().post_from(read, sent).await?;
            let event = Event::CommentPosted {
                acted,
                comment: CommentRef::of(&posted.comment),
                parent: posted.comment.parent.clone(),
            };
            Ok(((discussion, posted), vec![event]))
        };
        let span = tracing::debug_span!("store.post");
        match self.run(caller, span, write).await {
            Ok(done) => {
                let (discussion, posted) = done.value;
                if posted.reattached {
                    tracing::info!(
                        discussion = %discussion.id,
                        slug = %posted.comment.slug,
                        "reply was deeper than the depth cap: attached to the deepest allowed ancestor"
                    );
                }
                Ok(Posted::Published {
                    discussion,
                    comment: posted.comment,
                })
            }
            // A reply to a held comment the caller may see is held too: its parent is not
            // public, so the public post could not find it.
            Err(err) => {
                let held_parent = match &new.parent {
                    Some(slug) => self.visible_held(caller, &discussion.id, slug).await?,
                    None => None,
                };
                let Some(parent) = held_parent else {
                    return Err(err);
                };
                let parent = (parent.comment.slug, parent.comment.full_slug);
                let standing = Standing::default().set(CommentStatus::Pending, None);
                self.hold(caller, discussion, fresh, Some(parent), new, standing)
                    .await
            }
        }
    }

    /// Whether a post of `text` by `caller` waits for a moderator, and how it stands then.
    async fn holds(
        &self,
        caller: &Caller,
        discussion: &Discussion,
        text: &CommentText,
    ) -> Result<Option<Standing>, DomainError> {
        if let Some(standing) = screened(&self.words, caller.moderator(), text) {
            return Ok(Some(standing));
        }
        if caller.moderator() {
            return Ok(None);
        }
        let holds = match discussion
            .moderation
            .unwrap_or(self.rules.default_moderation)
        {
            ModerationMode::Post => false,
            ModerationMode::Pre => true,
            ModerationMode::PreFirst => {
                let trusted = self.storage.held().trusted(&caller.author().id);
                !trusted
                    .instrument(tracing::debug_span!("store.trusted"))
                    .await?
            }
        };
        Ok(holds.then(|| Standing::default().set(CommentStatus::Pending, None)))
    }

    /// Holds `new` for a moderator under `parent` with `standing` (pending or rejected). A held
    /// post is not guarded by the public post's write, so whether the discussion takes posts
    /// is decided against it as stored: read again unless `fresh` (read by this post).
    async fn hold(
        &self,
        caller: &Caller,
        discussion: Arc<Discussion>,
        fresh: bool,
        parent: Option<(Slug, FullSlug)>,
        new: NewComment,
        standing: Standing,
    ) -> Result<Posted, DomainError> {
        let discussion = match fresh {
            true => discussion,
            false => self.read_discussion(&discussion.id).await?,
        };
        self.check_open(caller, &discussion)?;
        if discussion.locked {
            return Err(DomainError::Forbidden(format!(
                "discussion {} is locked: it takes no new comments or replies",
                discussion.id
            )));
        }
        let storage = self.storage.clone();
        let id = discussion.id.clone();
        let acted = acted(caller);
        let new = NewComment {
            announce: Some(Announce::Held(acted.clone())),
            ..new
        };
        let write = async move {
            let parent = parent.as_ref().map(|(s, f)| (s, f));
            let held = storage.held().hold(&id, parent, &new, standing).await?;
            let event = Event::CommentHeld {
                acted,
                comment: CommentRef::of(&held.comment),
                reason: held.comment.standing.reason.clone(),
            };
            Ok((held, vec![event]))
        };
        let span = tracing::debug_span!("store.hold");
        let held = self.run(caller, span, write).await?.value;
        Ok(Posted::Held { discussion, held })
    }

    /// The parent a held reply goes under: a public comment, or a held one the caller may see
    /// (`NOT_FOUND` otherwise); its slug and full slug.
    async fn visible_parent(
        &self,
        caller: &Caller,
        discussion: &Discussion,
        slug: &Slug,
    ) -> Result<(Slug, FullSlug), DomainError> {
        if let Some(public) = self.public_comment(discussion, slug).await? {
            return Ok((public.slug, public.full_slug));
        }
        match self.visible_held(caller, &discussion.id, slug).await? {
            Some(held) => Ok((held.comment.slug, held.comment.full_slug)),
            None => Err(DomainError::not_found(format!(
                "no comment {slug} in discussion {} to reply to",
                discussion.id
            ))),
        }
    }

    /// The held comment `slug` when the caller may see it: its author or a moderator (nobody
    /// else learns that it exists).
    #[tracing::instrument(level = "debug", name = "store.held", skip_all)]
    async fn visible_held(
        &self,
        caller: &Caller,
        discussion: &DiscussionId,
        slug: &Slug,
    ) -> Result<Option<Held>, DomainError> {
        let held = self.storage.held().find(discussion, slug).await?;
        Ok(held.filter(|h| caller.moderator() || h.comment.author.id == caller.author().id))
    }

    /// Replaces a comment's text, keeping the previous one as a revision: its author within
    /// the edit window unless the discussion is locked or closed, a moderator at any time. An
    /// edit with a listed word makes a public comment a placeholder (pending for a suspect
    /// word, rejected for a banned one).
    pub async fn edit(
        &self,
        caller: &Caller,
        discussion: DiscussionId,
        slug: Slug,
        text: &str,
    ) -> Result<(Arc<Discussion>, Comment), DomainError> {
        let text = self.text(text)?;
        let html = self.render(text.as_str()).await?;
        self.change(caller, discussion, slug, Change::Edit { text, html })
            .await
    }

    /// A client's comment text, checked against the text rules (length, characters, Markdown
    /// nesting).
    pub(super) fn text(&self, raw: &str) -> Result<CommentText, DomainError> {
        let rules = &self.rules;
        CommentText::parse_nested(raw, rules.max_text_chars, rules.max_markdown_depth)
    }

    /// Deletes a comment (its author or a moderator): it stays as a tombstone. Deleting again
    /// changes nothing.
    pub async fn delete(
        &self,
        caller: &Caller,
        discussion: DiscussionId,
        slug: Slug,
    ) -> Result<(Arc<Discussion>, Comment), DomainError> {
        self.change(caller, discussion, slug, Change::Delete).await
    }

    /// Applies an edit or a delete on behalf of the caller.
    async fn change(
        &self,
        caller: &Caller,
        id: DiscussionId,
        slug: Slug,
        change: Change,
    ) -> Result<(Arc<Discussion>, Comment), DomainError> {
        let discussion = self.read_discussion(&id).await?;
        // A closed discussion's comments may still be deleted, not edited.
        if let Change::Edit { .. } = change {
            self.check_open(caller, &discussion)?;
        }
        let rules = self.rules.edit_rules;
        let storage = self.storage.clone();
        let target = discussion.clone();
        let viewer = caller.clone();
        let acted = acted(caller);
        let screened = match &change {
            Change::Edit { text, .. } => screened(&self.words, caller.moderator(), text),
            Change::Delete => None,
        };
        let write = async move {
            let actor = Actor {
                author: viewer.author(),
                moderator: viewer.moderator(),
            };
            let decide = |current: &Comment, now| {
                let next = change.apply(current, actor, rules, target.locked, now)?;
                let next = match (next, &screened) {
                    (Some(mut next), Some(screened)) => {
                        next.standing = stricter(&current.standing, screened);
                        Some(next)
                    }
                    (next, _) => next,
                };
                Ok(next)
            };
            // Edited or deleted, and held by the edit's words: written with the change.
            let told = Told::default();
            let announce = |_: &Comment, next: &Comment| {
                let on = CommentRef::of(next);
                let acted = acted.clone();
                let mut events = vec![match change {
                    Change::Edit { .. } => Event::CommentEdited {
                        acted: acted.clone(),
                        comment: on.clone(),
                    },
                    Change::Delete => Event::CommentDeleted {
                        acted: acted.clone(),
                        comment: on.clone(),
                    },
                }];
                if screened.is_some() && Queue::of(&next.standing).is_some() && !next.deleted {
                    events.push(Event::CommentHeld {
                        acted,
                        comment: on,
                        reason: next.standing.reason.clone(),
                    });
                }
                told.tell(events)
            };
            let comment = storage
                .posting()
                .change_comment(&target, &slug, &decide, &announce)
                .await?;
            let events = told.take();
            let queue = Queue::of(&comment.standing);
            // Held or rejected by the edit: into its queue (after the change, which may be
            // refused; a crash in between leaves it out of the queue until its next change or
            // report).
            if let (Some(_), Some(queue), false) = (&screened, queue, comment.deleted) {
                storage
                    .held()
                    .enqueue(&target.id, &slug, queue, Micros::now())
                    .await?;
            }
            if comment.deleted && queue.is_some() {
                // A deleted comment waits for no moderator.
                storage.held().remove(&target.id, &slug).await?;
            }
            Ok((comment, events))
        };
        let span = tracing::debug_span!("store.change");
        let comment = self.run(caller, span, write).await?.value;
        Ok((discussion, comment))
    }
}
