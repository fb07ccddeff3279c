//! The embedded layout: every comment nested in its discussion document ("Embedding All Comments").

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{
    doc, to_document, Bson, Document, RawArray, RawBsonRef, RawDocument, RawDocumentBuf,
};
use mongodb::{ClientSession, Database};

use super::bson::{as_i64, corrupt, owned_comment_of};
use super::discussions::{locked, moving, open_for_posts, unfenced, FENCE};
use super::docs::{element_size, replace_update, unchanged_filter, CommentDoc};
use super::error::is_too_large;
use super::metrics::Counted;
use super::migrate::{Lease, Movable};
use super::write::{self, Attempt, ParentPaths, PostSteps, Try, Waiting, Writer};
use super::{
    changes, ChangeKind, CommentStore, Discussions, Listing, Posted, ReadScope, StoreError,
    StoreResult,
};
use crate::domain::tree::Thread;
use crate::domain::{
    Comment, Discussion, DiscussionId, FullSlug, Micros, NewComment, Page, Slug, SlugPart, Window,
};

/// Field of the discussion document, and of every comment in it, that holds the direct replies.
const REPLIES: &str = "replies";
/// Field of the discussion document that counts the bytes its comments take.
const BYTES: &str = "embedded_bytes";
/// Bytes the size cap keeps for the discussion's own fields (a title of up to 300 characters,
/// counters, the top-level array).
const METADATA_ALLOWANCE: i64 = 4 * 1024;
/// Bytes an array element takes besides its document: type byte, index key (up to 10 digits), NUL.
const ELEMENT_OVERHEAD: i64 = 12;

/// The embedded layout. The discussion document holds the top-level comments in `replies`; each
/// comment is a `CommentDoc` with its own `replies`. Nothing is ever removed from these arrays,
/// so a comment's position (`replies.0.replies.2`) never changes, and each sibling array is kept
/// in posting order: a write is refused when a sibling with the same or a later time is already
/// there, so array order is chronological order and a page of top-level comments is an array slice.
pub struct Embedded {
    coll: Counted<Document>,
    writer: Writer,
    max_bytes: i64,
    /// The tree of each discussion this process posted to lately, as its last read and its own
    /// posts since left it, so that a reply needs no read of the whole document first. The
    /// post's guarded update checks everything taken from it (the parent at its position, no
    /// later sibling, the size), so a tree another process changed since costs one refused
    /// update and a fresh read.
    shapes: std::sync::Mutex<HashMap<DiscussionId, Shape>>,
    /// Posts waiting for their discussion's turn, stored together by whoever gets it.
    waiting: Waiting<PostState>,
}

/// Discussions whose trees a process keeps (past this, it starts over).
const MAX_SHAPES: usize = 64;

/// Where a chain of comments (a comment and its ancestors) sits in the document.
pub(super) struct Located {
    /// Array index of each comment of the chain, top-level first.
    path: Vec<usize>,
    /// Full slug of each comment of the chain.
    full: Vec<FullSlug>,
    /// Latest `posted` among the top-level comments (index 0) and among the direct replies of
    /// the comment of depth `k` (index `k + 1`).
    last_child: Vec<Option<i64>>,
    /// The bytes the discussion's comments take so far.
    bytes: i64,
}

/// What a guarded write did.
enum Guarded {
    /// Written.
    Done,
    /// A guard refused the write; it needed the counted bytes to stay within `budget`.
    Refused { budget: i64 },
}

/// A post in progress: the parent's line of descent and where it was last seen.
pub(super) struct PostState {
    chain: Vec<Slug>,
    located: Option<Located>,
    /// Set when a group of posts did not fit under the size cap: the next try stores one.
    alone: bool,
}

/// Most posts waiting for a discussion's turn that one update stores together.
const GROUP: usize = 64;

/// What is known of a discussion document's tree: where each comment sits among its siblings,
/// its full slug, and how many direct replies it has and the latest time among them. Read from
/// the document in one pass; a process also keeps it per discussion between its own posts (see
/// [`Embedded::shapes`]).
#[derive(Debug, Clone, Default)]
struct Shape {
    /// The discussion's move count when read (a move makes it stale).
    moves: u64,
    /// Whether the discussion was locked when read.
    locked: bool,
    /// The top-level comments.
    top: Level,
    nodes: HashMap<Slug, Node>,
    /// The bytes the discussion's comments take.
    bytes: i64,
}

/// The direct replies of a comment (or the top-level comments).
#[derive(Debug, Clone, Copy, Default)]
struct Level {
    count: usize,
    latest: Option<i64>,
}

#[derive(Debug, Clone)]
struct Node {
    index: usize,
    full: FullSlug,
    replies: Level,
}

impl Shape {
    /// Reads the tree of a raw discussion document (its move count is the caller's to set).
    fn read(raw: &RawDocument) -> StoreResult<Shape> {
        fn replies_of(node: &RawDocument) -> StoreResult<Option<&RawArray>> {
            match node.get(REPLIES).map_err(corrupt)? {
                None | Some(RawBsonRef::Null) => Ok(None),
                Some(RawBsonRef::Array(items)) => Ok(Some(items)),
                Some(_) => Err(corrupt("replies is not an array")),
            }
        }
        /// Adds the comments of `items` (and below) and returns their level.
        fn level(items: Option<&RawArray>, nodes: &mut HashMap<Slug, Node>) -> StoreResult<Level> {
            let mut level = Level::default();
            for (index, item) in items.into_iter().flatten().enumerate() {
                let RawBsonRef::Document(c) = item.map_err(corrupt)? else {
                    return Err(corrupt("a comment is not a document"));
                };
                let posted = c
                    .get("posted")
                    .map_err(corrupt)?
                    .and_then(|p| as_i64(&Bson::try_from(p).ok()?));
                level.count += 1;
                level.latest = level.latest.max(posted);
                let replies = level_of(c, nodes)?;
                nodes.insert(
                    Slug::from_stored(c.get_str("slug").map_err(corrupt)?.to_owned()),
                    Node {
                        index,
                        full: FullSlug::from_stored(
                            c.get_str("full_slug").map_err(corrupt)?.to_owned(),
                        ),
                        replies,
                    },
                );
            }
            Ok(level)
        }
        fn level_of(node: &RawDocument, nodes: &mut HashMap<Slug, Node>) -> StoreResult<Level> {
            level(replies_of(node)?, nodes)
        }
        let number = |field: &str| -> StoreResult<i64> {
            Ok(raw
                .get(field)
                .map_err(corrupt)?
                .and_then(|b| as_i64(&Bson::try_from(b).ok()?))
                .unwrap_or(0))
        };
        let bytes = number(BYTES)?;
        let moves = u64::try_from(number("moves")?).unwrap_or(0);
        let locked = raw.get_bool("locked").unwrap_or(false);
        let mut nodes = HashMap::new();
        let top = level_of(raw, &mut nodes)?;
        Ok(Shape {
            moves,
            locked,
            top,
            nodes,
            bytes,
        })
    }

    /// Where `chain` (a comment's line of descent, top-level first) sits; `None` when a comment
    /// of it is not in the tree.
    fn located(&self, chain: &[Slug]) -> Option<Located> {
        let mut path = Vec::with_capacity(chain.len());
        let mut full = Vec::with_capacity(chain.len());
        let mut last_child = vec![self.top.latest];
        for slug in chain {
            let node = self.nodes.get(slug)?;
            path.push(node.index);
            full.push(node.full.clone());
            last_child.push(node.replies.latest);
        }
        Some(Located {
            path,
            full,
            last_child,
            bytes: self.bytes,
        })
    }

    /// Adds a comment this process just stored, `growth` bytes large.
    fn add(&mut self, comment: &Comment, growth: i64) {
        let level = match &comment.parent {
            None => Some(&mut self.top),
            Some(parent) => self.nodes.get_mut(parent).map(|n| &mut n.replies),
        };
        let Some(level) = level else {
            return;
        };
        let index = level.count;
        level.count += 1;
        level.latest = level.latest.max(Some(comment.posted.0));
        self.nodes.insert(
            comment.slug.clone(),
            Node {
                index,
                full: comment.full_slug.clone(),
                replies: Level::default(),
            },
        );
        self.bytes = self.bytes.saturating_add(growth);
    }
}

/// The error for a chain whose last comment is not in the discussion.
fn missing(id: &DiscussionId, chain: &[Slug]) -> StoreError {
    let slug = chain.last().map_or("", Slug::as_str);
    StoreError::NotFound(format!("no comment {slug} in discussion {id}"))
}

/// The slugs of `slug`'s line of descent, top-level first, `slug` last.
fn chain_of(slug: &Slug) -> Vec<Slug> {
    (0..=slug.depth()).map(|d| slug.ancestor_at(d)).collect()
}

impl Embedded {
    pub(super) fn new(db: &Database, writer: Writer, max_bytes: usize) -> Self {
        Self {
            coll: Counted::new(db, Discussions::COLLECTION, &writer.commands),
            writer,
            max_bytes: i64::try_from(max_bytes).unwrap_or(i64::MAX),
            shapes: std::sync::Mutex::default(),
            waiting: Waiting::new(GROUP),
        }
    }

    /// Reads the document's tree as raw BSON, touching only the fields it needs (refused while
    /// the discussion is moving). (An aggregation that walked to one comment on the server sent
    /// less over the wire, but the development database evaluated it in seconds on a document of
    /// a few thousand comments, against milliseconds for reading the whole document.)
    async fn read_shape(&self, id: &DiscussionId) -> StoreResult<Shape> {
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
    async fn locate(&self, id: &DiscussionId, chain: &[Slug]) -> StoreResult<Located> {
        let shape = self.read_shape(id).await?;
        shape.located(chain).ok_or_else(|| missing(id, chain))
    }

    /// Finds the positions of `chain` for a post: from the tree this process keeps when it knows
    /// the chain, otherwise from a read, whose tree is kept.
    async fn locate_for_post(
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
    fn kept(&self, discussion: &Discussion, chain: &[Slug]) -> Option<Located> {
        let shapes = self.shapes.lock().unwrap_or_else(|p| p.into_inner());
        shapes
            .get(&discussion.id)
            .filter(|shape| shape.moves == discussion.moves)
            .and_then(|shape| shape.located(chain))
    }

    /// Reads the discussion's tree afresh and keeps it, for a post: `Moving` when the
    /// discussion moved since `discussion` was read, `Locked` while it is locked.
    async fn read_kept(&self, discussion: &Discussion) -> StoreResult<Shape> {
        let id = &discussion.id;
        let shape = self.read_shape(id).await?;
        if shape.moves != discussion.moves {
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
    fn learn(&self, discussion: &Discussion, comment: &Comment, growth: i64) {
        let mut shapes = self.shapes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(shape) = shapes
            .get_mut(&discussion.id)
            .filter(|shape| shape.moves == discussion.moves)
        {
            shape.add(comment, growth);
        }
    }

    /// Appends each comment of `group` (with the position of its parent, the top-level array
    /// when empty, and the bytes it adds) to its parent's replies with one update, guarded so that it lands only where
    /// and when it is right: each parent is still at its position, no sibling has one of the
    /// slugs or a later time, the counted size stays under the cap, and the discussion is
    /// neither locked nor moved since `discussion` was read (the post may not have read it).
    /// Counters move in the same update. The parents' arrays must not nest (see [`nests`]).
    async fn push(
        &self,
        discussion: &Discussion,
        group: &[(&Comment, &[usize], i64)],
    ) -> StoreResult<Guarded> {
        let id = &discussion.id;
        let mut growth = 0_i64;
        let mut arrays: Vec<(String, Vec<Bson>, Vec<&str>, i64)> = Vec::new();
        let mut inc = doc! { "comment_count": i64::try_from(group.len()).unwrap_or(i64::MAX) };
        let mut filter = open_for_posts(discussion);
        let mut tops = 0_i64;
        for (comment, parent_at, bytes) in group {
            let mut element =
                to_document(&CommentDoc::from_comment(comment, false)).map_err(corrupt)?;
            element.insert(REPLIES, Bson::Array(Vec::new()));
            growth = growth.saturating_add(*bytes);
            let siblings = array_path(parent_at);
            let index = match arrays.iter().position(|(path, ..)| *path == siblings) {
                Some(index) => index,
                None => {
                    arrays.push((siblings, Vec::new(), Vec::new(), i64::MAX));
                    arrays.len() - 1
                }
            };
            let (_, elements, slugs, earliest) = &mut arrays[index];
            elements.push(Bson::Document(element));
            slugs.push(comment.slug.as_str());
            *earliest = (*earliest).min(comment.posted.0);
            match &comment.parent {
                Some(parent) => {
                    let at = element_path(parent_at);
                    filter.insert(format!("{at}.slug"), parent.as_str());
                    let counted = format!("{at}.reply_count");
                    let replies = inc.get(&counted).and_then(as_i64).unwrap_or(0);
                    inc.insert(counted, replies + 1);
                }
                None => tops += 1,
            }
        }
        let budget = self.budget(id, growth)?;
        filter.insert(BYTES, doc! { "$not": { "$gt": budget } });
        inc.insert(BYTES, growth);
        if tops > 0 {
            inc.insert("thread_count", tops);
        }
        let mut push = Document::new();
        for (siblings, elements, slugs, earliest) in arrays {
            filter.insert(format!("{siblings}.slug"), doc! { "$nin": slugs });
            filter.insert(
                siblings.clone(),
                doc! { "$not": { "$elemMatch": { "posted": { "$gte": earliest } } } },
            );
            push.insert(siblings, doc! { "$each": elements });
        }
        let slugs: Vec<&Slug> = group.iter().map(|(c, ..)| &c.slug).collect();
        let mark = changes::mark_all(ChangeKind::Posted, &slugs);
        match self
            .coll
            .update_one(
                filter,
                doc! { "$push": push, "$inc": inc, "$set": { changes::FIELD: mark } },
            )
            .await
        {
            Ok(result) if result.matched_count == 1 => Ok(Guarded::Done),
            Ok(_) => Ok(Guarded::Refused { budget }),
            Err(err) if is_too_large(&err) => Err(self.too_large(id)),
            Err(err) => Err(err.into()),
        }
    }

    /// The most bytes the comments may count before growing by `growth` (`TooLarge` when even
    /// an empty discussion could not take it).
    fn budget(&self, id: &DiscussionId, growth: i64) -> StoreResult<i64> {
        let budget = self
            .max_bytes
            .saturating_sub(METADATA_ALLOWANCE)
            .saturating_sub(growth);
        if budget < 0 {
            return Err(self.too_large(id));
        }
        Ok(budget)
    }

    /// After a refused write: the cap when the counted bytes leave no room, otherwise a retry
    /// (something else the write relied on changed).
    fn refused(&self, id: &DiscussionId, at: &Located, budget: i64) -> StoreResult<Attempt> {
        if at.bytes > budget {
            return Err(self.too_large(id));
        }
        Ok(Attempt::Retry)
    }

    fn too_large(&self, id: &DiscussionId) -> StoreError {
        StoreError::TooLarge(format!(
            "discussion {id} is full: the EMBEDDED layout keeps all of a discussion's comments in \
             one document, capped at {} bytes, and this comment does not fit. A moderator can move it to the BUCKETED or PER_COMMENT \
             layout, which have no size limit (`migrateDiscussion`); servers that promote full \
             discussions do so on their own.",
            self.max_bytes
        ))
    }

    /// The whole thread, read once per request.
    async fn thread(&self, scope: &ReadScope, discussion: &Discussion) -> StoreResult<Arc<Thread>> {
        scope
            .documents
            .get_or_load(&discussion.id, || self.load(&discussion.id))
            .await
    }

    async fn load(&self, id: &DiscussionId) -> StoreResult<Thread> {
        let found = self
            .coll
            .find_one(doc! { "_id": id.as_str() })
            .projection(doc! { "_id": 0, REPLIES: 1 })
            .await?;
        let comments = match found {
            Some(document) => flatten(document, id)?,
            None => Vec::new(),
        };
        Ok(Thread::new(comments))
    }

    /// One page of top-level comments, read as a `$slice` of the top-level array (which is in
    /// chronological order, see the type's comment) without the nested replies.
    async fn threads_page(&self, id: &DiscussionId, window: &Window) -> StoreResult<Page<Comment>> {
        let (skip, limit) = match window {
            Window::Offset { skip, limit } => (*skip, *limit),
            Window::After { limit, .. } => (0, *limit),
        };
        let skip = i32::try_from(skip).unwrap_or(i32::MAX);
        let take = i32::try_from(limit.saturating_add(1)).unwrap_or(i32::MAX);
        let without_replies = doc! { "$arrayToObject": { "$filter": {
            "input": { "$objectToArray": "$$c" },
            "as": "f",
            "cond": { "$ne": ["$$f.k", REPLIES] },
        } } };
        let pipeline = vec![
            doc! { "$match": { "_id": id.as_str() } },
            doc! { "$project": { "_id": 0, "page": { "$map": {
                "input": { "$slice": [{ "$ifNull": [format!("${REPLIES}"), []] }, skip, take] },
                "as": "c",
                "in": without_replies,
            } } } },
        ];
        let found: Vec<Document> = self.coll.aggregate(pipeline).await?.try_collect().await?;
        let items = match found.into_iter().next() {
            None => Vec::new(),
            Some(mut found) => match found.remove("page") {
                Some(Bson::Array(items)) => items
                    .into_iter()
                    .map(|item| owned_comment_of(item, id))
                    .collect::<StoreResult<Vec<_>>>()?,
                _ => return Err(corrupt("an embedded page is not an array")),
            },
        };
        Ok(Page::from_overfetch(items, limit))
    }
}

/// The update path of the comment at `at`: `replies.0.replies.2`.
fn element_path(at: &[usize]) -> String {
    at.iter()
        .map(|i| format!("{REPLIES}.{i}"))
        .collect::<Vec<_>>()
        .join(".")
}

/// The update path of the replies array of the comment at `at` (the top-level array when empty):
/// `replies.0.replies.2.replies`.
fn array_path(at: &[usize]) -> String {
    if at.is_empty() {
        REPLIES.to_owned()
    } else {
        format!("{}.{REPLIES}", element_path(at))
    }
}

/// Whether the replies arrays of the comments at `a` and `b` (the top-level array when empty)
/// nest: one update cannot write both, as one holds the other.
fn nests(a: &[usize], b: &[usize]) -> bool {
    a != b && (a.starts_with(b) || b.starts_with(a))
}

/// Every comment of a discussion document (or of a comment element), depth first.
fn flatten(mut root: Document, id: &DiscussionId) -> StoreResult<Vec<Comment>> {
    let mut out = Vec::new();
    let mut stack = take_replies(&mut root)?;
    while let Some(item) = stack.pop() {
        let Bson::Document(mut element) = item else {
            return Err(corrupt("comment is not a document"));
        };
        stack.extend(take_replies(&mut element)?);
        out.push(owned_comment_of(Bson::Document(element), id)?);
    }
    Ok(out)
}

fn take_replies(element: &mut Document) -> StoreResult<Vec<Bson>> {
    match element.remove(REPLIES) {
        None | Some(Bson::Null) => Ok(Vec::new()),
        Some(Bson::Array(replies)) => Ok(replies),
        Some(_) => Err(corrupt("replies is not an array")),
    }
}

#[async_trait]
impl PostSteps for Embedded {
    type State = PostState;

    async fn prepare(
        &self,
        discussion: &Discussion,
        parent: Option<&Slug>,
        _part: &SlugPart,
    ) -> StoreResult<(Option<ParentPaths>, PostState)> {
        // A reply needs its parent's position first. A top-level comment is written blind and
        // reads the document only when a guard refuses it.
        let Some(parent) = parent else {
            return Ok((
                None,
                PostState {
                    chain: Vec::new(),
                    located: None,
                    alone: false,
                },
            ));
        };
        let chain = chain_of(parent);
        let located = self.locate_for_post(discussion, &chain).await?;
        let full_slug = located
            .full
            .last()
            .cloned()
            .ok_or_else(|| corrupt("the parent was not located"))?;
        let paths = ParentPaths {
            slug: parent.clone(),
            full_slug,
        };
        Ok((
            Some(paths),
            PostState {
                chain,
                located: Some(located),
                alone: false,
            },
        ))
    }

    /// A new comment must come after its latest sibling, so each `replies` array stays in
    /// posting order.
    fn floor(&self, state: &PostState, parent: Option<&Slug>) -> Option<Micros> {
        let level = parent.map_or(0, |p| p.depth() + 1);
        let at = state.located.as_ref()?;
        at.last_child.get(level).copied().flatten().map(Micros)
    }

    /// A post is one guarded update of the discussion document, counters included.
    fn transactional(&self) -> bool {
        false
    }

    /// Concurrent posts to one document refuse each other (a sibling with the same or a later
    /// time fails the guard) and every post rewrites the whole document, so running them side
    /// by side only adds refusals: a process posts to one discussion one at a time, and stores
    /// the posts that waited for their turn together, in one update.
    fn queued(&self) -> bool {
        true
    }

    /// A reply's parent never moves in the document, and what else `prepare` took from the
    /// kept tree is refreshed from it when the turn comes (and checked by the guarded update).
    fn prepares_before_turn(&self) -> bool {
        true
    }

    fn after_turn(&self, discussion: &Discussion, state: &mut PostState) {
        if state.located.is_some() {
            if let Some(at) = self.kept(discussion, &state.chain) {
                state.located = Some(at);
            }
        }
    }

    fn grouping(&self) -> Option<&Waiting<PostState>> {
        Some(&self.waiting)
    }

    /// One guarded update stores the comments whose parents' arrays do not nest in each other
    /// (the database refuses an update of a path and of a path inside it); the others wait for
    /// the next try. A refused update reads the document afresh: comments that no longer fit
    /// under the cap together go one at a time, and a single one that does not fit is refused
    /// as too large; otherwise each tries again.
    async fn attempt_group(
        &self,
        discussion: &Discussion,
        group: &mut [Try<'_, PostState>],
        _session: &mut ClientSession,
    ) -> StoreResult<()> {
        let id = &discussion.id;
        let alone = group.iter().any(|t| t.state.alone);
        let mut chosen: Vec<(usize, Vec<usize>, i64)> = Vec::new();
        let mut size = 0_i64;
        for i in 0..group.len() {
            let one = &group[i];
            let parent_at = match &one.comment.parent {
                None => Vec::new(),
                Some(parent) => one
                    .state
                    .located
                    .as_ref()
                    .and_then(|at| at.path.get(..=parent.depth()))
                    .ok_or_else(|| corrupt("the parent was not located"))?
                    .to_vec(),
            };
            let growth = element_size(one.comment, true)?.saturating_add(ELEMENT_OVERHEAD);
            let twin = chosen
                .iter()
                .any(|(j, ..)| group[*j].comment.slug == one.comment.slug);
            let fits = chosen.is_empty()
                || (!alone
                    && self.budget(id, size.saturating_add(growth)).is_ok()
                    && chosen.iter().all(|(_, at, _)| !nests(at, &parent_at)));
            let one = &mut group[i];
            one.outcome = if twin {
                Attempt::Retry
            } else if fits {
                size = size.saturating_add(growth);
                chosen.push((i, parent_at, growth));
                Attempt::Stored
            } else {
                Attempt::Moved
            };
        }
        let members: Vec<(&Comment, &[usize], i64)> = chosen
            .iter()
            .map(|(i, at, growth)| (group[*i].comment, at.as_slice(), *growth))
            .collect();
        match self.push(discussion, &members).await? {
            Guarded::Done => {
                for (comment, _, growth) in &members {
                    self.learn(discussion, comment, *growth);
                }
                for one in group.iter_mut() {
                    one.state.alone = false;
                }
            }
            Guarded::Refused { budget } => {
                let shape = self.read_kept(discussion).await?;
                let too_large = shape.bytes > budget;
                if too_large && members.len() == 1 {
                    return Err(self.too_large(id));
                }
                for one in group.iter_mut() {
                    one.state.located = Some(
                        shape
                            .located(&one.state.chain)
                            .ok_or_else(|| missing(id, &one.state.chain))?,
                    );
                    one.state.alone = too_large;
                    if one.outcome == Attempt::Stored {
                        one.outcome = if too_large {
                            Attempt::Moved
                        } else {
                            Attempt::Retry
                        };
                    }
                }
            }
        }
        Ok(())
    }
}

#[async_trait]
impl CommentStore for Embedded {
    async fn post_comment(&self, discussion: &Discussion, new: NewComment) -> StoreResult<Posted> {
        write::post(self, &self.writer, discussion, &new).await
    }

    /// One guarded update at the comment's position: its fields must still be as read, and a
    /// longer text must fit under the cap; the size counter moves by the exact change in bytes.
    async fn replace(
        &self,
        _scope: &ReadScope,
        discussion: &Discussion,
        current: &Comment,
        next: &Comment,
    ) -> StoreResult<bool> {
        let id = &discussion.id;
        let at = self.locate(id, &chain_of(&current.slug)).await?;
        let prefix = format!("{}.", element_path(&at.path));
        let growth = element_size(next, true)? - element_size(current, true)?;
        let mut filter = unfenced(id);
        filter.extend(unchanged_filter(&prefix, current)?);
        let budget = self.budget(id, growth.max(0))?;
        if growth > 0 {
            filter.insert(BYTES, doc! { "$not": { "$gt": budget } });
        }
        let mut update = replace_update(&prefix, next)?;
        update.insert("$inc", doc! { BYTES: growth });
        let mark = changes::mark(ChangeKind::Changed, &next.slug);
        match update.get_document_mut("$set") {
            Ok(set) => {
                set.insert(changes::FIELD, mark);
            }
            Err(_) => {
                update.insert("$set", doc! { changes::FIELD: mark });
            }
        }
        match self.coll.update_one(filter, update).await {
            Ok(result) if result.matched_count == 1 => Ok(true),
            Ok(_) if growth > 0 => {
                let at = self.locate(id, &chain_of(&current.slug)).await?;
                self.refused(id, &at, budget).map(|_| false)
            }
            // A guard refused it: read again (`Moving` when the discussion is moving).
            Ok(_) => self
                .locate(id, &chain_of(&current.slug))
                .await
                .map(|_| false),
            Err(err) if is_too_large(&err) => Err(self.too_large(id)),
            Err(err) => Err(err.into()),
        }
    }

    async fn list(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        listing: Listing,
        window: &Window,
    ) -> StoreResult<Page<Comment>> {
        Ok(self.thread(scope, discussion).await?.list(listing, window))
    }

    async fn list_shallow(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        listing: Listing,
        window: &Window,
    ) -> StoreResult<Page<Comment>> {
        // A cursor would need a search for its position; a loaded document answers for free.
        let sliceable = listing == Listing::Threads
            && !matches!(
                window,
                Window::After {
                    cursor: Some(_),
                    ..
                }
            );
        if sliceable && scope.documents.peek(&discussion.id).is_none() {
            self.threads_page(&discussion.id, window).await
        } else {
            self.list(scope, discussion, listing, window).await
        }
    }

    async fn by_slugs(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        slugs: &[Slug],
    ) -> StoreResult<Vec<Comment>> {
        Ok(self.thread(scope, discussion).await?.by_slugs(slugs))
    }

    async fn replies(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        parents: &[Slug],
        window: &Window,
    ) -> StoreResult<HashMap<Slug, Page<Comment>>> {
        Ok(self
            .thread(scope, discussion)
            .await?
            .replies(parents, window))
    }

    async fn sub_discussions(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
        window: &Window,
    ) -> StoreResult<HashMap<FullSlug, Page<Comment>>> {
        Ok(self
            .thread(scope, discussion)
            .await?
            .sub_discussions(roots, window))
    }

    async fn sub_discussion_counts(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
    ) -> StoreResult<HashMap<FullSlug, u64>> {
        Ok(self
            .thread(scope, discussion)
            .await?
            .sub_discussion_counts(roots))
    }
}

#[async_trait]
impl Movable for Embedded {
    async fn clear(&self, id: &DiscussionId) -> StoreResult<()> {
        self.coll
            .update_one(
                doc! { "_id": id.as_str() },
                doc! { "$unset": { REPLIES: "", BYTES: "" } },
            )
            .await?;
        Ok(())
    }

    /// The nested document, built here and written by the update that switches the layout
    /// (`TooLarge`, and nothing written, when it would not fit under the cap).
    async fn import(
        &self,
        discussion: &Discussion,
        comments: &[Comment],
        lease: &Lease<'_>,
    ) -> StoreResult<Document> {
        let mut children: HashMap<Option<&Slug>, Vec<&Comment>> = HashMap::new();
        let mut bytes = 0_i64;
        for comment in comments {
            children
                .entry(comment.parent.as_ref())
                .or_default()
                .push(comment);
            bytes = bytes
                .saturating_add(element_size(comment, true)?)
                .saturating_add(ELEMENT_OVERHEAD);
        }
        if bytes > self.max_bytes.saturating_sub(METADATA_ALLOWANCE) {
            return Err(self.too_large(&discussion.id));
        }
        fn nest(
            children: &HashMap<Option<&Slug>, Vec<&Comment>>,
            parent: Option<&Slug>,
        ) -> StoreResult<Vec<Bson>> {
            let Some(list) = children.get(&parent) else {
                return Ok(Vec::new());
            };
            list.iter()
                .map(|comment| {
                    let mut element =
                        to_document(&CommentDoc::from_comment(comment, false)).map_err(corrupt)?;
                    element.insert(REPLIES, nest(children, Some(&comment.slug))?);
                    Ok(Bson::Document(element))
                })
                .collect()
        }
        let top = nest(&children, None)?;
        lease.written(comments.len() as u64).await?;
        Ok(doc! { REPLIES: top, BYTES: bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_nest_when_one_holds_the_other() {
        // The top-level array holds every other; a comment's replies hold its replies' replies.
        assert!(nests(&[], &[0]));
        assert!(nests(&[0, 2], &[0]));
        assert!(nests(&[0], &[0, 2, 1]));
        // The same array takes several pushes; siblings' and cousins' arrays are apart.
        assert!(!nests(&[], &[]));
        assert!(!nests(&[0, 2], &[0, 2]));
        assert!(!nests(&[0], &[1]));
        assert!(!nests(&[0, 1], &[0, 2, 1]));
    }

    #[test]
    fn paths_name_nested_arrays() {
        assert_eq!(array_path(&[]), "replies");
        assert_eq!(element_path(&[0, 2]), "replies.0.replies.2");
        assert_eq!(
            array_path(&[0, 2, 5]),
            "replies.0.replies.2.replies.5.replies"
        );
    }
}
