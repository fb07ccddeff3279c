//! Held comments: those a moderator must approve before they are public. They live outside every
//! layout, in one collection shared by the three (`held_comments`), so public reads never meet
//! them and every layout's counts and bounds stay as they are. Publishing one is a post (see
//! `approveComment`): it then appears at its approval time. The discussion document counts the
//! pending ones (`pending_count`), and `people` counts each author's approved comments (an
//! author with one is trusted by `PRE_FIRST`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use mongodb::bson::{doc, Bson, Document};
use mongodb::options::ReturnDocument;
use mongodb::Database;

use super::connect::index_model;
use super::discussions::Discussions;
use super::error::{StoreError, StoreResult};
use super::metrics::{CommandCounter, Counted};
use crate::domain::slug::MonotonicClock;
use crate::domain::{
    Author, Comment, CommentStatus, DiscussionId, FullSlug, Held, Micros, NewComment, Placement,
    Slug, SlugPart,
};

/// The collection of held comments.
pub(super) const COLLECTION: &str = "held_comments";
/// The collection of per-person moderation facts.
pub(super) const PEOPLE: &str = "people";
/// The discussion document's count of its pending comments.
const PENDING: &str = "pending_count";
/// Trusted people a process remembers (past this, it starts over; trust is never withdrawn).
const TRUSTED: usize = 100_000;

/// Held comments, and what moderation knows of each person.
#[async_trait]
pub trait HeldStore: Send + Sync {
    /// Holds `new` as a PENDING comment of the discussion (a fresh slug part, kept when it is
    /// published), under `parent` (its slug and full slug, public or held), placed under the depth
    /// cap as a post would be; counts it in the discussion's pending count.
    async fn hold(
        &self,
        discussion: &DiscussionId,
        parent: Option<(&Slug, &FullSlug)>,
        new: &NewComment,
    ) -> StoreResult<Held>;

    /// The held comment `slug` of the discussion, if there is one.
    async fn find(&self, discussion: &DiscussionId, slug: &Slug) -> StoreResult<Option<Held>>;

    /// Marks a held comment REJECTED with `reason` (a pending one leaves the pending count);
    /// `None` when there is no such held comment.
    async fn reject(
        &self,
        discussion: &DiscussionId,
        slug: &Slug,
        reason: Option<String>,
    ) -> StoreResult<Option<Held>>;

    /// Removes a held comment (once it is published); whether there was one.
    async fn remove(&self, discussion: &DiscussionId, slug: &Slug) -> StoreResult<bool>;

    /// Claims a held comment for publishing, so that two approvals of it at once publish it
    /// once: the claim lasts `lease` (a process that stopped while publishing holds it no
    /// longer) or until [`HeldStore::release`]; removing the comment ends it too.
    async fn claim(
        &self,
        discussion: &DiscussionId,
        slug: &Slug,
        lease: std::time::Duration,
    ) -> StoreResult<Claim>;

    /// Gives up a claim made by [`HeldStore::claim`] (publishing failed).
    async fn release(&self, discussion: &DiscussionId, slug: &Slug) -> StoreResult<()>;

    /// Whether the person has had a comment approved.
    async fn trusted(&self, person: &str) -> StoreResult<bool>;

    /// Counts an approved comment of the person (who is trusted from now on).
    async fn trust(&self, person: &str) -> StoreResult<()>;
}

/// What [`HeldStore::claim`] found.
#[derive(Debug, Clone)]
pub enum Claim {
    /// The held comment, now claimed by the caller.
    Claimed(Box<Held>),
    /// Another approval holds it (for at most its lease).
    Busy,
    /// There is no such held comment (any more).
    Gone,
}

/// The held document's field that says since when an approval has claimed it (microseconds).
const PUBLISHING: &str = "publishing";

/// The MongoDB held-comments store.
pub(crate) struct HeldComments {
    coll: Counted<Document>,
    people: Counted<Document>,
    discussions: Counted<Document>,
    clock: Arc<MonotonicClock>,
    max_depth: usize,
    trusted: Mutex<HashSet<String>>,
}

/// A held comment's document id: unique per discussion and slug.
fn key(discussion: &DiscussionId, slug: &Slug) -> String {
    format!("{discussion}:{slug}")
}

impl HeldComments {
    pub(crate) fn new(
        db: &Database,
        commands: &CommandCounter,
        clock: Arc<MonotonicClock>,
        max_depth: usize,
    ) -> Self {
        Self {
            coll: Counted::new(db, COLLECTION, commands),
            people: Counted::new(db, PEOPLE, commands),
            discussions: Counted::new(db, Discussions::COLLECTION, commands),
            clock,
            max_depth,
            trusted: Mutex::default(),
        }
    }

    /// The queue indexes: oldest first, across the service or in one discussion.
    pub(crate) async fn ensure_indexes(&self) -> StoreResult<()> {
        let all = index_model(
            "status_submitted_id",
            doc! { "status": 1, "submitted": 1, "_id": 1 },
            false,
        );
        self.coll.create_index(all).await?;
        let one = index_model(
            "discussion_status_submitted_id",
            doc! { "discussion_id": 1, "status": 1, "submitted": 1, "_id": 1 },
            false,
        );
        self.coll.create_index(one).await?;
        Ok(())
    }

    /// Adds `by` to the discussion's pending count.
    async fn count_pending(&self, discussion: &DiscussionId, by: i64) -> StoreResult<()> {
        self.discussions
            .update_one(
                doc! { "_id": discussion.as_str() },
                doc! { "$inc": { PENDING: by } },
            )
            .await?;
        Ok(())
    }

    fn remember(&self, person: &str) {
        let mut trusted = self.trusted.lock().unwrap_or_else(|p| p.into_inner());
        if trusted.len() >= TRUSTED {
            trusted.clear();
        }
        trusted.insert(person.to_owned());
    }
}

/// A held comment's document.
fn to_doc(held: &Held) -> Document {
    let c = &held.comment;
    doc! {
        "_id": key(&c.discussion_id, &c.slug),
        "discussion_id": c.discussion_id.as_str(),
        "slug": c.slug.as_str(),
        "full_slug": c.full_slug.as_str(),
        "parent": c.parent.as_ref().map(Slug::as_str),
        "author": { "id": &c.author.id, "name": &c.author.name },
        "text": c.text.as_deref(),
        "submitted": c.posted.0,
        "status": held.status.as_str(),
        "reason": held.reason.as_deref(),
    }
}

/// A held comment from its document.
fn from_doc(doc: &Document) -> StoreResult<Held> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("held comment without {what}"));
    let text = |field: &str| {
        doc.get_str(field)
            .map(str::to_owned)
            .map_err(|_| corrupt(field))
    };
    let optional = |field: &str| match doc.get(field) {
        Some(Bson::String(s)) => Some(s.clone()),
        _ => None,
    };
    let author = doc.get_document("author").map_err(|_| corrupt("author"))?;
    let status = doc
        .get_str("status")
        .ok()
        .and_then(CommentStatus::from_stored)
        .ok_or_else(|| corrupt("status"))?;
    let discussion = DiscussionId::parse(&text("discussion_id")?)
        .map_err(|_| corrupt("a valid discussion id"))?;
    Ok(Held {
        comment: Comment {
            discussion_id: discussion,
            slug: Slug::from_stored(text("slug")?),
            full_slug: FullSlug::from_stored(text("full_slug")?),
            parent: optional("parent").map(Slug::from_stored),
            posted: Micros(doc.get_i64("submitted").map_err(|_| corrupt("submitted"))?),
            author: Author {
                id: author
                    .get_str("id")
                    .map_err(|_| corrupt("author id"))?
                    .to_owned(),
                name: author
                    .get_str("name")
                    .map_err(|_| corrupt("author name"))?
                    .to_owned(),
            },
            text: Some(text("text")?),
            edited: None,
            edited_by: None,
            deleted: false,
            revisions: Vec::new(),
            reply_count: 0,
        },
        status,
        reason: optional("reason"),
    })
}

#[async_trait]
impl HeldStore for HeldComments {
    async fn hold(
        &self,
        discussion: &DiscussionId,
        parent: Option<(&Slug, &FullSlug)>,
        new: &NewComment,
    ) -> StoreResult<Held> {
        let submitted = self.clock.now();
        let part = SlugPart::generate();
        let placement = Placement::new(parent, self.max_depth, submitted, &part);
        let mut comment = placement.into_comment(discussion.clone(), submitted, new);
        comment.reply_count = 0;
        let held = Held {
            comment,
            status: CommentStatus::Pending,
            reason: None,
        };
        self.coll.insert_one(to_doc(&held)).await?;
        self.count_pending(discussion, 1).await?;
        Ok(held)
    }

    async fn find(&self, discussion: &DiscussionId, slug: &Slug) -> StoreResult<Option<Held>> {
        let found = self
            .coll
            .find_one(doc! { "_id": key(discussion, slug) })
            .await?;
        found.as_ref().map(from_doc).transpose()
    }

    async fn reject(
        &self,
        discussion: &DiscussionId,
        slug: &Slug,
        reason: Option<String>,
    ) -> StoreResult<Option<Held>> {
        let before = self
            .coll
            .find_one_and_update(
                doc! { "_id": key(discussion, slug) },
                doc! { "$set": { "status": CommentStatus::Rejected.as_str(), "reason": reason.as_deref() } },
            )
            .return_document(ReturnDocument::Before)
            .await?;
        let Some(before) = before else {
            return Ok(None);
        };
        let mut held = from_doc(&before)?;
        if held.status == CommentStatus::Pending {
            self.count_pending(discussion, -1).await?;
        }
        held.status = CommentStatus::Rejected;
        held.reason = reason;
        Ok(Some(held))
    }

    async fn remove(&self, discussion: &DiscussionId, slug: &Slug) -> StoreResult<bool> {
        let id = key(discussion, slug);
        let pending = self
            .coll
            .delete_many(doc! { "_id": &id, "status": CommentStatus::Pending.as_str() })
            .await?;
        if pending.deleted_count > 0 {
            self.count_pending(discussion, -1).await?;
            return Ok(true);
        }
        let other = self.coll.delete_many(doc! { "_id": &id }).await?;
        Ok(other.deleted_count > 0)
    }

    async fn claim(
        &self,
        discussion: &DiscussionId,
        slug: &Slug,
        lease: std::time::Duration,
    ) -> StoreResult<Claim> {
        let id = key(discussion, slug);
        let now = Micros::now().0;
        let lease = i64::try_from(lease.as_micros()).unwrap_or(i64::MAX);
        let claimed = self
            .coll
            .find_one_and_update(
                doc! { "_id": &id, "$or": [
                    { PUBLISHING: { "$exists": false } },
                    { PUBLISHING: { "$lt": now.saturating_sub(lease) } },
                ] },
                doc! { "$set": { PUBLISHING: now } },
            )
            .return_document(ReturnDocument::After)
            .await?;
        if let Some(doc) = claimed {
            return Ok(Claim::Claimed(Box::new(from_doc(&doc)?)));
        }
        let found = self.coll.find_one(doc! { "_id": &id }).await?;
        Ok(if found.is_some() {
            Claim::Busy
        } else {
            Claim::Gone
        })
    }

    async fn release(&self, discussion: &DiscussionId, slug: &Slug) -> StoreResult<()> {
        self.coll
            .update_one(
                doc! { "_id": key(discussion, slug) },
                doc! { "$unset": { PUBLISHING: "" } },
            )
            .await?;
        Ok(())
    }

    async fn trusted(&self, person: &str) -> StoreResult<bool> {
        {
            let trusted = self.trusted.lock().unwrap_or_else(|p| p.into_inner());
            if trusted.contains(person) {
                return Ok(true);
            }
        }
        let found = self.people.find_one(doc! { "_id": person }).await?;
        let approved = match found.as_ref().and_then(|d| d.get("approved")) {
            Some(Bson::Int32(n)) => i64::from(*n),
            Some(Bson::Int64(n)) => *n,
            _ => 0,
        };
        if approved > 0 {
            self.remember(person);
        }
        Ok(approved > 0)
    }

    async fn trust(&self, person: &str) -> StoreResult<()> {
        self.people
            .update_one(doc! { "_id": person }, doc! { "$inc": { "approved": 1 } })
            .upsert(true)
            .await?;
        self.remember(person);
        Ok(())
    }
}
