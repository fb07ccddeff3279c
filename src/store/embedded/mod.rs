//! The embedded layout: every comment nested in its discussion document ("Embedding All Comments").

use std::collections::HashMap;

use mongodb::bson::{doc, Document, RawDocumentBuf};
use mongodb::Database;

use crate::store::discussions::Discussions;
use crate::store::discussions::{locked, moving, FENCE};
use crate::store::shared::bson::corrupt;
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::metrics::CommandCounter;
use crate::store::shared::metrics::Counted;
use crate::store::shared::skeleton::Waiting;
mod authored;
mod moving;
mod reads;
mod shape;
mod write;

use crate::domain::tree::Thread;
use crate::domain::{Comment, Discussion, DiscussionId, FullSlug, Slug};
use shape::{missing, Shape};

/// Field of the discussion document, and of every comment in it, that holds the direct replies.
pub(super) const REPLIES: &str = "replies";
/// Field of the discussion document that counts the bytes its comments take.
pub(super) const BYTES: &str = "embedded_bytes";
/// Bytes the size cap keeps for the discussion's own fields (a title of up to 300 characters,
/// counters, the top-level array).
pub(super) const METADATA_ALLOWANCE: i64 = 4 * 1024;
/// Bytes an array element takes besides its document: type byte, index key (up to 10 digits), NUL.
pub(super) const ELEMENT_OVERHEAD: i64 = 12;

/// The embedded layout's slot of a request's scope.
#[derive(Default)]
pub(crate) struct Kept {
    /// Whole discussion documents, as threads.
    pub(crate) documents: crate::store::shared::scope::Memo<Thread>,
}

/// The embedded layout. The discussion document holds the top-level comments in `replies`; each
/// comment is a `CommentDoc` with its own `replies`. Nothing is ever removed from these arrays,
/// so a comment's position (`replies.0.replies.2`) never changes, and each sibling array is kept
/// in posting order: a write is refused when a sibling with the same or a later time is already
/// there, so array order is chronological order and a page of top-level comments is an array slice.
pub struct Embedded {
    coll: Counted<Document>,
    max_bytes: i64,
    /// The tree of each discussion this process posted to lately, as its last read and its own
    /// posts since left it, so that a reply needs no read of the whole document first. The
    /// post's guarded update checks everything taken from it (the parent at its position, no
    /// later sibling, the size), so a tree another process changed since costs one refused
    /// update and a fresh read.
    shapes: std::sync::Mutex<HashMap<DiscussionId, Shape>>,
    /// Posts waiting for their discussion's turn, stored together by whoever gets it.
    waiting: Waiting<PostState>,
    /// The event log, which changes join in their transaction.
    log: crate::store::events::EventLog,
}

/// Discussions whose trees a process keeps (past this, it starts over).
pub(super) const MAX_SHAPES: usize = 64;

/// Where a chain of comments (a comment and its ancestors) sits in the document.
pub(super) struct Located {
    /// Array index of each comment of the chain, top-level first.
    path: Vec<usize>,
    /// Full slug of each comment of the chain.
    full: Vec<FullSlug>,
    /// How many direct replies each comment of the chain has.
    replies: Vec<usize>,
    /// Latest `posted` among the top-level comments (index 0) and among the direct replies of
    /// the comment of depth `k` (index `k + 1`).
    last_child: Vec<Option<i64>>,
    /// The bytes the discussion's comments take so far.
    bytes: i64,
}

/// What a guarded write did.
pub(super) enum Guarded {
    /// Written.
    Done,
    /// A guard refused the write; it needed the counted bytes to stay within `budget`.
    Refused { budget: i64 },
}

/// A post in progress: the parent's line of descent and where it was last seen.
pub(crate) struct PostState {
    chain: Vec<Slug>,
    located: Option<Located>,
    /// Set when a group of posts did not fit under the size cap: the next try stores one.
    alone: bool,
}

/// Most posts waiting for a discussion's turn that one update stores together.
pub(super) const GROUP: usize = 64;

impl Embedded {
    pub(crate) fn new(
        db: &Database,
        commands: &CommandCounter,
        max_bytes: usize,
        log: crate::store::events::EventLog,
    ) -> Self {
        Self {
            log,
            coll: Counted::new(db, Discussions::COLLECTION, commands),
            max_bytes: i64::try_from(max_bytes).unwrap_or(i64::MAX),
            shapes: std::sync::Mutex::default(),
            waiting: Waiting::new(GROUP),
        }
    }

    /// Reads the document's tree as raw BSON, touching only the fields it needs (refused while
    /// the discussion is moving). (An aggregation that walks to one comment on the server sends
    /// less over the wire, but evaluating it over a large document costs the server far more
    /// than sending the document: see docs/ARCHITECTURE.md.)
    pub(super) async fn read_shape(&self, id: &DiscussionId) -> StoreResult<Shape> {
        let raw = self
            .coll
            .clone_with_type::<RawDocumentBuf>()
            .find_one(doc! { "_id": id.as_str() })
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("no discussion {id}")))?;
        if raw.get(FENCE).map_err(corrupt)?.is_some() {
            return Err(moving(id));
        }
        Shape::read(&raw)
    }

    /// Finds the positions of `chain` (slugs of depth 0, 1, … in one line of descent) in the
    /// document as it is now.
    pub(super) async fn locate(&self, id: &DiscussionId, chain: &[Slug]) -> StoreResult<Located> {
        let shape = self.read_shape(id).await?;
        shape.located(chain).ok_or_else(|| missing(id, chain))
    }

    /// Finds the positions of `chain` for a post: from the tree this process keeps when it knows
    /// the chain, otherwise from a read, whose tree is kept.
    pub(super) async fn locate_for_post(
        &self,
        discussion: &Discussion,
        chain: &[Slug],
    ) -> StoreResult<Located> {
        if let Some(at) = self.kept(discussion, chain) {
            return Ok(at);
        }
        let shape = self.read_kept(discussion).await?;
        shape
            .located(chain)
            .ok_or_else(|| missing(&discussion.id, chain))
    }

    /// Where `chain` sits in the tree this process keeps of the discussion, if it knows it.
    pub(super) fn kept(&self, discussion: &Discussion, chain: &[Slug]) -> Option<Located> {
        let shapes = self.shapes.lock().unwrap_or_else(|p| p.into_inner());
        shapes
            .get(&discussion.id)
            .filter(|shape| shape.moves == discussion.moves)
            .and_then(|shape| shape.located(chain))
    }

    /// Reads the discussion's tree afresh and keeps it, for a post: `Moving` when the
    /// discussion moved since `discussion` was read, or changed how it moderates or when it
    /// closes (the post's own write would never match: the router reads the discussion again
    /// and says so), `Locked` while it is locked.
    pub(super) async fn read_kept(&self, discussion: &Discussion) -> StoreResult<Shape> {
        let id = &discussion.id;
        let shape = self.read_shape(id).await?;
        let mode = discussion.moderation.map(|m| m.as_str());
        let guests = discussion.guests.map(|g| g.as_str());
        if shape.moves != discussion.moves
            || shape.moderation.as_deref() != mode
            || shape.guests.as_deref() != guests
            || shape.closing != discussion.closing
        {
            return Err(moving(id));
        }
        if shape.locked {
            return Err(locked(id));
        }
        let mut shapes = self.shapes.lock().unwrap_or_else(|p| p.into_inner());
        if shapes.len() >= MAX_SHAPES && !shapes.contains_key(id) {
            shapes.clear();
        }
        shapes.insert(id.clone(), shape.clone());
        Ok(shape)
    }

    /// Adds a comment this process stored to the tree it keeps of the discussion.
    pub(super) fn learn(&self, discussion: &Discussion, comment: &Comment, growth: i64) {
        let mut shapes = self.shapes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(shape) = shapes
            .get_mut(&discussion.id)
            .filter(|shape| shape.moves == discussion.moves)
        {
            shape.add(comment, growth);
        }
    }
}
