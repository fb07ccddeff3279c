//! Discussion workflows: create, ensure by key, lock, set the moderation mode, pin, and move to
//! another layout.

use std::sync::Arc;

use super::{acted, Caller, Services};
use crate::domain::CommentRef;
use crate::domain::{
    Comment, Discussion, DiscussionId, DiscussionUpdate, DomainError, Event, Layout,
    ModerationMode, NewDiscussion, Slug,
};
use crate::store::Moved;

/// How a new discussion is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Creating {
    /// As a new discussion (a key in use is refused).
    Always,
    /// Only when no discussion has its key yet; otherwise that discussion is the answer.
    UnlessKeyed,
}

impl Services {
    /// Stores `new` as `how` says (any signed-in caller may), and answers with the discussion
    /// stored. Its layout must be one the store has. A caller who is not a moderator may create
    /// a discussion with a key or a URL only for a page of the allowed origins
    /// ([`PageOrigins`](super::PageOrigins)): otherwise `ensure` answers with the key's
    /// discussion when there is one, and anything else is `FORBIDDEN`. `DiscussionCreated`
    /// when a discussion was created (not when `ensure` found one).
    pub async fn create_discussion(
        &self,
        caller: &Caller,
        mut new: NewDiscussion,
        how: Creating,
    ) -> Result<Discussion, DomainError> {
        self.storage.layout(new.layout)?;
        if !caller.moderator() {
            if let Err(refused) = self.pages.check(&new) {
                // Finding a key's discussion creates nothing: any page may show it.
                if let (Creating::UnlessKeyed, Some(key)) = (how, &new.key) {
                    let keys = std::slice::from_ref(key);
                    if let Some(found) = self.storage.discussions().by_keys(keys).await?.pop() {
                        return Ok(found);
                    }
                }
                return Err(refused);
            }
        }
        // An id of its own, so that the answer tells whether this call created it.
        let id = new.id.get_or_insert_with(DiscussionId::generate).clone();
        let storage = self.storage.clone();
        let acted = acted(caller);
        let span = match how {
            Creating::Always => tracing::debug_span!("store.createDiscussion"),
            Creating::UnlessKeyed => tracing::debug_span!("store.ensureDiscussion"),
        };
        let write = async move {
            let created = [Event::DiscussionCreated {
                acted,
                discussion: id.clone(),
            }];
            let discussion = match how {
                Creating::Always => storage.discussions().add(new, &created).await?,
                Creating::UnlessKeyed => storage.discussions().ensure(new, &created).await?,
            };
            // Found by its key: created by someone else, who said so.
            let events = match discussion.id == id {
                true => created.to_vec(),
                false => Vec::new(),
            };
            Ok((discussion, events))
        };
        Ok(self.run(caller, span, write).await?.value)
    }

    /// Locks a discussion (no new comments, replies or votes, no edits by authors) or unlocks
    /// it. Moderators only.
    pub async fn lock_discussion(
        &self,
        caller: &Caller,
        id: DiscussionId,
        locked: bool,
    ) -> Result<Discussion, DomainError> {
        caller.must_moderate()?;
        let storage = self.storage.clone();
        let acted = acted(caller);
        let write = async move {
            let events = vec![Event::DiscussionLocked {
                acted,
                discussion: id.clone(),
                locked,
            }];
            let discussion = storage.discussions().set_locked(&id, locked, &events).await;
            // Posts from this process decide by the discussion they read from now on.
            storage.posting().forget(&id);
            Ok((discussion?, events))
        };
        let span = tracing::debug_span!("store.lock");
        Ok(self.run(caller, span, write).await?.value)
    }

    /// Corrects a discussion's title and page address (its key stays). Moderators only.
    /// `BAD_USER_INPUT` for an update that names nothing; one that changes nothing answers
    /// with the discussion as it is and emits nothing, else `DiscussionUpdated`.
    pub async fn update_discussion(
        &self,
        caller: &Caller,
        id: DiscussionId,
        update: DiscussionUpdate,
    ) -> Result<Discussion, DomainError> {
        caller.must_moderate()?;
        if update.is_empty() {
            return Err(DomainError::bad_input(
                "updateDiscussion needs a title or a url to change",
            ));
        }
        let current = self.read_discussion(&id).await?;
        let Some(update) = update.against(&current.title, current.url.as_deref()) else {
            return Ok(Arc::unwrap_or_clone(current));
        };
        let storage = self.storage.clone();
        let acted = acted(caller);
        let write = async move {
            let events = vec![Event::DiscussionUpdated {
                acted,
                discussion: id.clone(),
                update: update.clone(),
            }];
            let updated = storage.discussions().update(&id, &update, &events).await;
            // Posts from this process answer with the discussion they read from now on.
            storage.posting().forget(&id);
            Ok((updated?, events))
        };
        let span = tracing::debug_span!("store.updateDiscussion");
        Ok(self.run(caller, span, write).await?.value)
    }

    /// Sets how a discussion moderates new comments from now on. Moderators only.
    pub async fn set_moderation(
        &self,
        caller: &Caller,
        id: DiscussionId,
        mode: ModerationMode,
    ) -> Result<Discussion, DomainError> {
        caller.must_moderate()?;
        let storage = self.storage.clone();
        let acted = acted(caller);
        let write = async move {
            let events = vec![Event::ModerationChanged {
                acted,
                discussion: id.clone(),
                mode,
            }];
            let set = storage
                .discussions()
                .set_moderation(&id, mode, &events)
                .await;
            // Posts from this process decide by the mode they read from now on.
            storage.posting().forget(&id);
            Ok((set?, events))
        };
        let span = tracing::debug_span!("store.setModeration");
        Ok(self.run(caller, span, write).await?.value)
    }

    /// Pins a public comment to the top of its discussion, or unpins it (at most
    /// [`Discussion::MAX_PINNED`]). Moderators only. Returns the discussion as it is now, with
    /// the comment.
    pub async fn pin_comment(
        &self,
        caller: &Caller,
        id: DiscussionId,
        slug: Slug,
        pinned: bool,
    ) -> Result<(Arc<Discussion>, Comment), DomainError> {
        caller.must_moderate()?;
        let discussion = self.read_discussion(&id).await?;
        let Some(comment) = self.public_comment(&discussion, &slug).await? else {
            return Err(match self.storage.held().find(&id, &slug).await? {
                Some(_) => DomainError::bad_input(format!(
                    "comment {slug} is held for moderation: only public comments can be pinned"
                )),
                None => DomainError::not_found(format!("no comment {slug} in discussion {id}")),
            });
        };
        if !comment.standing.is_public() {
            return Err(DomainError::bad_input(format!(
                "comment {} is held for moderation: only public comments can be pinned",
                comment.slug
            )));
        }
        if pinned && comment.deleted {
            return Err(DomainError::CommentDeleted(format!(
                "comment {} was deleted: it cannot be pinned",
                comment.slug
            )));
        }
        let storage = self.storage.clone();
        let target = CommentRef::of(&comment);
        let acted = acted(caller);
        let write = async move {
            let events = vec![Event::CommentPinned {
                acted,
                comment: target.clone(),
                pinned,
            }];
            let updated = storage
                .discussions()
                .set_pinned(&target.discussion, &target.slug, pinned, &events)
                .await?;
            Ok((Arc::new(updated), events))
        };
        let span = tracing::debug_span!("store.pin");
        let updated = self.run(caller, span, write).await?.value;
        Ok((updated, comment))
    }

    /// Moves a discussion to another storage layout while it stays online. Moderators only.
    pub async fn move_discussion(
        &self,
        caller: &Caller,
        id: DiscussionId,
        to: Layout,
    ) -> Result<Moved, DomainError> {
        caller.must_moderate()?;
        self.storage.layout(to)?;
        let storage = self.storage.clone();
        let acted = acted(caller);
        let write = async move {
            let announce = |from| {
                vec![Event::DiscussionMoved {
                    acted: acted.clone(),
                    discussion: id.clone(),
                    from,
                    to,
                }]
            };
            let moved = storage.moves().migrate(&id, to, &|_| {}, &announce).await?;
            // A move to the layout it has switches nothing, and says nothing.
            let events = match moved.from == to {
                true => Vec::new(),
                false => announce(moved.from),
            };
            Ok((moved, events))
        };
        let span = tracing::debug_span!("store.migrate");
        let moved = self.run(caller, span, write).await?.value;
        tracing::info!(discussion = %moved.discussion.id, from = %moved.from, to = %to, comments = moved.comments, "discussion moved");
        Ok(moved)
    }

    /// The discussion `id` (`NOT_FOUND` when there is none), as the store reads it for
    /// everyone (through the read cache, which follows every change exactly).
    #[tracing::instrument(level = "debug", name = "store.discussions", skip_all)]
    pub(super) async fn read_discussion(
        &self,
        id: &DiscussionId,
    ) -> Result<Arc<Discussion>, DomainError> {
        self.storage
            .discussions()
            .by_ids(std::slice::from_ref(id))
            .await?
            .into_iter()
            .next()
            .map(Arc::new)
            .ok_or_else(|| DomainError::not_found(format!("no discussion {id}")))
    }

    /// The comment `slug` of a discussion's layout, if there is one (public comments and
    /// placeholders; held comments are in the held store).
    pub(super) async fn public_comment(
        &self,
        discussion: &Discussion,
        slug: &Slug,
    ) -> Result<Option<Comment>, DomainError> {
        super::public_comment(&self.storage, discussion, slug).await
    }
}
