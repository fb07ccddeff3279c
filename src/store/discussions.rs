//! The `discussions` collection: discussion metadata and counters, shared by every layout.

use std::sync::Arc;

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongodb::options::ReturnDocument;
use mongodb::Database;
use serde::{Deserialize, Serialize};

use super::bson::{as_i64, int_field, to_count};
use super::metrics::Counted;
use super::order::after_filter;
use super::thread_blocks;
use super::CommandCounter;
use super::{changes, ChangeKind, DiscussionStore, StoreError, StoreResult};
use crate::domain::paging::Cursor;
use crate::domain::slug::MonotonicClock;
use crate::domain::{
    Comment, Discussion, DiscussionId, DiscussionTitle, FullPages, Layout, Micros, Page, PageBlock,
    Slug, Window,
};

/// A discussion's metadata as stored. Layouts may add fields (the embedded layout keeps its
/// comments here); metadata reads project those away.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct DiscussionDoc {
    #[serde(rename = "_id")]
    id: String,
    title: String,
    layout: String,
    created: i64,
    #[serde(default)]
    comment_count: i64,
    #[serde(default)]
    thread_count: i64,
    #[serde(default)]
    locked: bool,
    #[serde(default)]
    sequenced: bool,
    #[serde(default)]
    moves: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    thread_blocks: Option<Document>,
    /// Whether every comment carries `descendants`, the size of its subtree.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    subtree_sizes: bool,
    /// Whether its comment pages have `_id`s `<discussion>:<page>` (bucketed discussions; the
    /// bucketed layout reads it with its write target).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    keyed_pages: bool,
    /// Bucketed discussions whose sealed pages' sizes are tracked (created or moved into the
    /// bucketed layout since they are): `sealed_min` and `sealed_max` then cover every sealed
    /// page, and `num_comment_pages` says how many there are.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    sized_pages: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sealed_min: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sealed_max: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    num_comment_pages: Option<i64>,
    /// Bucketed discussions: per block of pages, the comments of the threads started there
    /// (`{"<block>": n}`) and the block's first order key (`{"<block>": key}`); see
    /// `Discussion::page_blocks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    page_blocks: Option<Document>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    page_block_keys: Option<Document>,
}

impl DiscussionDoc {
    fn into_discussion(self) -> StoreResult<Discussion> {
        let corrupt = |what: String| StoreError::Corrupt(format!("discussion {}: {what}", self.id));
        let full_pages = self.full_pages();
        let page_blocks = self.page_blocks();
        Ok(Discussion {
            id: DiscussionId::parse(&self.id).map_err(|e| corrupt(e.to_string()))?,
            layout: self
                .layout
                .parse::<Layout>()
                .map_err(|e| corrupt(e.to_string()))?,
            title: self.title,
            created: crate::domain::Micros(self.created),
            comment_count: to_count(self.comment_count),
            thread_count: to_count(self.thread_count),
            locked: self.locked,
            sequenced: self.sequenced,
            moves: to_count(self.moves),
            thread_blocks: self
                .thread_blocks
                .as_ref()
                .map(thread_blocks::parse)
                .transpose()?,
            subtree_sizes: self.subtree_sizes,
            full_pages,
            page_blocks,
        })
    }

    /// The blocks of pages, where both fields are kept, every block has its first key (in
    /// increasing order) and the counts account for every comment. Counts that do not (a
    /// discussion from before they were kept, whose posts since began them) are not used: reads
    /// then walk every page's header.
    fn page_blocks(&self) -> Option<Vec<PageBlock>> {
        // Stored like the per-comment layout's blocks of threads: `{"<block>": n}`.
        let mut counts = thread_blocks::parse(self.page_blocks.as_ref()?).ok()?;
        let mut first_keys: Vec<String> = Vec::new();
        for (block, first) in self.page_block_keys.as_ref()? {
            let block: usize = block.parse().ok()?;
            if first_keys.len() <= block {
                first_keys.resize(block + 1, String::new());
            }
            first_keys[block] = first.as_str()?.to_owned();
        }
        counts.resize(counts.len().max(first_keys.len()), 0);
        first_keys.resize(counts.len(), String::new());
        let total: u64 = counts.iter().sum();
        let keyed = first_keys.iter().all(|k| !k.is_empty());
        let ordered = first_keys.windows(2).all(|pair| pair[0] < pair[1]);
        (total == to_count(self.comment_count) && keyed && ordered).then(|| {
            counts
                .into_iter()
                .zip(first_keys)
                .map(|(threaded, first_key)| PageBlock {
                    threaded,
                    first_key,
                })
                .collect()
        })
    }

    /// The sealed pages, when they are tracked and all of one size.
    fn full_pages(&self) -> Option<FullPages> {
        if !self.sized_pages {
            return None;
        }
        let count = to_count(self.num_comment_pages.unwrap_or(0));
        if count == 0 {
            return Some(FullPages { count, size: 0 });
        }
        match (self.sealed_min, self.sealed_max) {
            (Some(min), Some(max)) if min == max && min > 0 => Some(FullPages {
                count,
                size: to_count(min),
            }),
            _ => None,
        }
    }
}

/// Where a new comment of a discussion that keeps block counts of its threads counts.
#[derive(Debug, Clone, Copy)]
pub enum ThreadPlace {
    /// A reply, in the thread with this number.
    In(i64),
    /// A new thread, in a discussion of `threads` threads as far as the post knows.
    New {
        /// The discussion's thread count as the post knows it.
        threads: i64,
    },
}

/// The posting time of a sequenced discussion's latest comment.
pub(super) const LAST_POSTED: &str = "last_posted";

/// The discussion's field that says every comment carries the size of its subtree.
pub(super) const SUBTREE_SIZES: &str = "subtree_sizes";
/// The field a move to another layout holds while it runs: every write to the discussion's
/// comments is refused while it is there (see `migrate`).
pub(super) const FENCE: &str = "moving";

/// The discussion, while no move of it is under way.
pub(super) fn unfenced(id: &DiscussionId) -> Document {
    doc! { "_id": id.as_str(), FENCE: { "$exists": false } }
}

/// The error of a write refused because the discussion is moving (or is gone).
pub(super) fn moving(id: &DiscussionId) -> StoreError {
    StoreError::Moving(format!(
        "discussion {id} is moving to another layout (or no longer exists)"
    ))
}

/// The discussion, while it takes posts as `discussion` saw it: no move under way or made
/// since, and not locked. A post that did not read the discussion itself (see
/// `Storage::post_to`) relies on this filter in its write.
pub(super) fn open_for_posts(discussion: &Discussion) -> Document {
    let mut filter = unfenced(&discussion.id);
    filter.insert("locked", doc! { "$ne": true });
    match i64::try_from(discussion.moves).unwrap_or(i64::MAX) {
        // Discussions from before moves were counted have no count.
        0 => filter.insert("moves", doc! { "$in": [0_i64, Bson::Null] }),
        moves => filter.insert("moves", moves),
    };
    filter
}

/// The error of a post to a locked discussion.
pub(super) fn locked(id: &DiscussionId) -> StoreError {
    StoreError::Locked(format!(
        "discussion {id} is locked: it takes no new comments or replies"
    ))
}

/// What a new comment changes on its discussion: the counters, and the change-feed mark.
fn post_update(comment: &Comment) -> Document {
    posts_update(&[comment])
}

/// What new comments stored together change on their discussion: the counters, and one
/// change-feed mark that names them all.
fn posts_update(comments: &[&Comment]) -> Document {
    let count = i64::try_from(comments.len()).unwrap_or(i64::MAX);
    let top_level = comments.iter().filter(|c| c.parent.is_none()).count();
    let slugs: Vec<&Slug> = comments.iter().map(|c| &c.slug).collect();
    doc! {
        "$inc": { "comment_count": count, "thread_count": i64::try_from(top_level).unwrap_or(i64::MAX) },
        "$set": { changes::FIELD: changes::mark_all(ChangeKind::Posted, &slugs) },
    }
}

/// Fields a metadata read returns.
fn metadata_projection() -> Document {
    doc! {
        "title": 1, "layout": 1, "created": 1, "comment_count": 1, "thread_count": 1, "locked": 1,
        "sequenced": 1, "moves": 1, thread_blocks::FIELD: 1, SUBTREE_SIZES: 1,
        "sized_pages": 1, "sealed_min": 1, "sealed_max": 1, "num_comment_pages": 1,
        "page_blocks": 1, "page_block_keys": 1,
    }
}

/// The discussions collection.
#[derive(Clone)]
pub struct Discussions {
    coll: Counted<DiscussionDoc>,
    clock: Arc<MonotonicClock>,
    /// Whether new per-comment discussions number their comments (needs transactions: a number
    /// is taken in the same transaction as the comment's insert).
    sequences: bool,
}

impl Discussions {
    /// Name of the collection.
    pub const COLLECTION: &'static str = "discussions";

    pub(super) fn new(
        db: &Database,
        clock: Arc<MonotonicClock>,
        sequences: bool,
        commands: &CommandCounter,
    ) -> Self {
        Self {
            coll: Counted::new(db, Self::COLLECTION, commands),
            clock,
            sequences,
        }
    }

    pub(super) async fn ensure_indexes(&self) -> StoreResult<()> {
        let index = super::mongo::index_model("created_id", doc! { "created": 1, "_id": 1 }, false);
        self.coll.create_index(index).await?;
        Ok(())
    }

    /// Records a new comment in the discussion's counters.
    /// and marks it for the change feed.
    pub async fn record_post(
        &self,
        discussion: &Discussion,
        comment: &Comment,
        session: &mut mongodb::ClientSession,
    ) -> StoreResult<()> {
        self.record_posts(discussion, &[comment], Document::new(), session)
            .await
    }

    /// Counts comments stored together (one update, one change-feed mark for them all), in
    /// their post's transaction, with the layout's own counts (`more`: update operators and
    /// their fields, merged into the update): `Moving` (and nothing of the transaction stays)
    /// when the discussion is moving, moved, or was locked since `discussion` was read.
    pub async fn record_posts(
        &self,
        discussion: &Discussion,
        comments: &[&Comment],
        more: Document,
        session: &mut mongodb::ClientSession,
    ) -> StoreResult<()> {
        let mut update = posts_update(comments);
        for (op, fields) in more {
            match (update.get_document_mut(&op), fields) {
                (Ok(existing), Bson::Document(fields)) => existing.extend(fields),
                (_, fields) => {
                    update.insert(op, fields);
                }
            }
        }
        let result = self
            .coll
            .update_one(open_for_posts(discussion), update)
            .session(session)
            .await?;
        if result.matched_count == 0 {
            return Err(moving(&discussion.id));
        }
        Ok(())
    }

    /// Marks a change of a comment stored outside the discussion document for the change feed,
    /// in the transaction that changes it: the mark takes the discussion document into the
    /// transaction, so a move of the discussion cannot begin until it is over, and it is
    /// refused (`Moving`) once one has begun.
    pub async fn mark_change(
        &self,
        id: &DiscussionId,
        slug: &Slug,
        session: &mut mongodb::ClientSession,
    ) -> StoreResult<()> {
        let mark = changes::mark(ChangeKind::Changed, slug);
        let result = self
            .coll
            .update_one(unfenced(id), doc! { "$set": { changes::FIELD: mark } })
            .session(session)
            .await?;
        if result.matched_count == 0 {
            return Err(moving(id));
        }
        Ok(())
    }

    /// The discussion (`NotFound` when there is none).
    pub(super) async fn by_id(&self, id: &DiscussionId) -> StoreResult<Discussion> {
        self.by_ids(std::slice::from_ref(id))
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| StoreError::NotFound(format!("no discussion {id}")))
    }

    /// The raw discussion collection, for moves between layouts.
    pub(super) fn raw(&self) -> Counted<Document> {
        self.coll.clone_with_type()
    }

    /// Records a new comment of a sequenced discussion, in the transaction that inserts it: counts
    /// it (in its block of threads too, where the discussion keeps those: `place`), marks it for
    /// the change feed, and numbers it. The comment must be posted after every earlier comment
    /// of the discussion (then the numbers follow the chronological order), and a new thread
    /// must fall in the block `place` expects; `None` when either is not so, and nothing is
    /// written. Returns the comment's number in the discussion and, for a top-level comment,
    /// among the top-level ones (both from 1).
    pub async fn number(
        &self,
        id: &DiscussionId,
        comment: &Comment,
        place: Option<ThreadPlace>,
        session: &mut mongodb::ClientSession,
    ) -> StoreResult<Option<(i64, Option<i64>)>> {
        let top_level = comment.parent.is_none();
        let mut update = post_update(comment);
        if let Ok(set) = update.get_document_mut("$set") {
            set.insert(LAST_POSTED, comment.posted.0);
        }
        let mut filter = doc! {
            "_id": id.as_str(), FENCE: { "$exists": false },
            LAST_POSTED: { "$not": { "$gte": comment.posted.0 } },
        };
        if let Some(place) = place {
            let thread = match place {
                ThreadPlace::In(thread) => thread,
                ThreadPlace::New { threads } => {
                    // The new thread's number is the count before plus one: keep it in the block.
                    let block = usize::try_from(thread_blocks::block_of(threads + 1)).unwrap_or(0);
                    let (first, last) = thread_blocks::threads_of(block);
                    filter.insert("thread_count", doc! { "$gte": first - 1, "$lte": last - 1 });
                    threads + 1
                }
            };
            if let Ok(inc) = update.get_document_mut("$inc") {
                inc.insert(thread_blocks::count_path(thread), 1_i64);
            }
        }
        let before = self
            .coll
            .clone_with_type::<Document>()
            .find_one_and_update(filter, update)
            .projection(doc! { "comment_count": 1, "thread_count": 1 })
            .return_document(ReturnDocument::Before)
            .session(session)
            .await?;
        let Some(before) = before else {
            return Ok(None);
        };
        let count = |field: &str| -> StoreResult<i64> { int_field(&before, field) };
        let seq = count("comment_count")? + 1;
        let thread_seq = match top_level {
            true => Some(count("thread_count")? + 1),
            false => None,
        };
        Ok(Some((seq, thread_seq)))
    }

    /// What a refused numbering needs to try again: when the discussion's latest comment was
    /// posted (`None` before the first) and how many threads it has; `Moving` when a move of the
    /// discussion has begun.
    pub async fn post_floor(&self, id: &DiscussionId) -> StoreResult<(Option<Micros>, i64)> {
        let found = self
            .coll
            .clone_with_type::<Document>()
            .find_one(doc! { "_id": id.as_str() })
            .projection(doc! { LAST_POSTED: 1, FENCE: 1, "thread_count": 1 })
            .await?;
        let Some(found) = found else {
            return Err(moving(id));
        };
        if found.contains_key(FENCE) {
            return Err(moving(id));
        }
        let threads = found.get("thread_count").and_then(as_i64).unwrap_or(0);
        Ok((found.get_i64(LAST_POSTED).ok().map(Micros), threads))
    }

    /// Forgets the discussion's block counts of threads and that its comments carry subtree
    /// sizes (its comments left the per-comment layout, or are about to be written there again).
    pub(super) async fn forget_counts(&self, id: &DiscussionId) -> StoreResult<()> {
        self.coll
            .update_one(
                doc! { "_id": id.as_str() },
                doc! { "$unset": { thread_blocks::FIELD: "", SUBTREE_SIZES: "" } },
            )
            .await?;
        Ok(())
    }

    /// After a compare-and-set replace of a comment stored outside the discussion document
    /// (`replaced` tells whether it matched): marks the change for the change feed, and passes
    /// `replaced` on.
    pub async fn after_replace(&self, id: &DiscussionId, slug: &Slug, replaced: bool) -> bool {
        if replaced {
            self.record_change(id, slug).await;
        }
        replaced
    }

    /// Marks an edit or delete of a comment stored outside the discussion document for the
    /// change feed. The change itself is already stored: when the mark cannot be written, live
    /// subscribers miss it (logged), and the change stands.
    async fn record_change(&self, id: &DiscussionId, slug: &Slug) {
        let mark = changes::mark(ChangeKind::Changed, slug);
        let update = doc! { "$set": { changes::FIELD: mark } };
        if let Err(err) = self
            .coll
            .update_one(doc! { "_id": id.as_str() }, update)
            .await
        {
            tracing::warn!(%err, discussion = %id, %slug, "a change was stored, but live subscribers will not hear of it");
        }
    }
}

#[async_trait]
impl DiscussionStore for Discussions {
    /// Creates a discussion with the given layout.
    async fn create(&self, title: DiscussionTitle, layout: Layout) -> StoreResult<Discussion> {
        let sequenced = self.sequences && layout == Layout::PerComment;
        let doc = DiscussionDoc {
            id: DiscussionId::generate().to_string(),
            title: title.into_inner(),
            layout: layout.as_str().to_owned(),
            created: self.clock.now().0,
            comment_count: 0,
            thread_count: 0,
            locked: false,
            sequenced,
            moves: 0,
            thread_blocks: sequenced.then(Document::new),
            subtree_sizes: sequenced,
            keyed_pages: layout == Layout::Bucketed,
            sized_pages: layout == Layout::Bucketed,
            sealed_min: None,
            sealed_max: None,
            num_comment_pages: None,
            page_blocks: (layout == Layout::Bucketed).then(Document::new),
            page_block_keys: (layout == Layout::Bucketed).then(Document::new),
        };
        self.coll.insert_one(&doc).await?;
        doc.into_discussion()
    }

    /// The discussions with these ids (missing ones are left out).
    async fn by_ids(&self, ids: &[DiscussionId]) -> StoreResult<Vec<Discussion>> {
        let ids: Vec<&str> = ids.iter().map(DiscussionId::as_str).collect();
        let docs: Vec<DiscussionDoc> = self
            .coll
            .find(doc! { "_id": { "$in": ids } })
            .projection(metadata_projection())
            .await?
            .try_collect()
            .await?;
        docs.into_iter()
            .map(DiscussionDoc::into_discussion)
            .collect()
    }

    /// One page of discussions, oldest first.
    async fn list(&self, window: &Window) -> StoreResult<Page<Discussion>> {
        let (filter, skip) = match window {
            Window::Offset { skip, .. } => (doc! {}, *skip),
            Window::After { cursor: None, .. } => (doc! {}, 0),
            Window::After {
                cursor: Some(cursor @ Cursor::Discussion { .. }),
                ..
            } => (after_filter(cursor), 0),
            Window::After {
                cursor: Some(_), ..
            } => return Err(StoreError::Unsupported("cursor of another list".into())),
        };
        let docs: Vec<DiscussionDoc> = self
            .coll
            .find(filter)
            .sort(doc! { "created": 1, "_id": 1 })
            .skip(skip)
            .limit(limit_plus_one(window.limit()))
            .projection(metadata_projection())
            .await?
            .try_collect()
            .await?;
        let items = docs
            .into_iter()
            .map(DiscussionDoc::into_discussion)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(Page::from_overfetch(items, window.limit()))
    }

    /// How many discussions exist.
    async fn count(&self) -> StoreResult<u64> {
        Ok(self.coll.count_documents(doc! {}).await?)
    }

    async fn set_locked(&self, id: &DiscussionId, locked: bool) -> StoreResult<Discussion> {
        self.coll
            .find_one_and_update(
                doc! { "_id": id.as_str() },
                doc! { "$set": { "locked": locked } },
            )
            .projection(metadata_projection())
            .return_document(ReturnDocument::After)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("no discussion {id}")))?
            .into_discussion()
    }
}

/// The driver's limit for fetching `limit` items plus one that tells whether more follow.
pub(super) fn limit_plus_one(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(comments: i64, blocks: Option<Document>, keys: Option<Document>) -> DiscussionDoc {
        let mut doc = doc! {
            "_id": "d", "title": "t", "layout": "bucketed", "created": 0_i64,
            "comment_count": comments,
        };
        if let Some(blocks) = blocks {
            doc.insert("page_blocks", blocks);
        }
        if let Some(keys) = keys {
            doc.insert("page_block_keys", keys);
        }
        mongodb::bson::from_document(doc).expect("a discussion")
    }

    #[test]
    fn page_blocks_count_only_when_they_account_for_every_comment() {
        let keys = doc! { "0": "0001:a", "1": "0005:b", "2": "0009:c" };
        let blocks = doc! { "1": 3_i64, "0": 5_i32, "2": 0_i64 };
        let found = stored(8, Some(blocks.clone()), Some(keys.clone()))
            .page_blocks()
            .expect("blocks");
        let counts: Vec<u64> = found.iter().map(|b| b.threaded).collect();
        assert_eq!(counts, [5, 3, 0]);
        assert_eq!(found[1].first_key, "0005:b");
        // A new discussion: none yet.
        assert_eq!(
            stored(0, Some(Document::new()), Some(Document::new())).page_blocks(),
            Some(vec![])
        );
        // From before they were kept, counts its posts began, or damaged: not used.
        assert_eq!(stored(8, None, None).page_blocks(), None);
        assert_eq!(
            stored(9, Some(blocks.clone()), Some(keys.clone())).page_blocks(),
            None
        );
        assert_eq!(stored(8, Some(blocks.clone()), None).page_blocks(), None);
        let gap = doc! { "0": "0001:a", "2": "0009:c" };
        assert_eq!(
            stored(8, Some(blocks.clone()), Some(gap)).page_blocks(),
            None
        );
        let unordered = doc! { "0": "0001:a", "1": "0010:b", "2": "0009:c" };
        assert_eq!(
            stored(8, Some(blocks.clone()), Some(unordered)).page_blocks(),
            None
        );
        let odd = doc! { "x": 8_i64 };
        assert_eq!(stored(8, Some(odd), Some(keys)).page_blocks(), None);
    }
}
