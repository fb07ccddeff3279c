//! Numbering: a sequenced discussion's comments get their numbers (in the discussion, and among
//! threads) in the transaction that inserts them, from counters on the discussion document.

use mongodb::bson::{doc, Document};
use mongodb::options::ReturnDocument;

use super::hints::{LAST_POSTED, SUBTREE_SIZES};
use super::thread_blocks;
use crate::domain::{Comment, DiscussionId, Micros};
use crate::store::discussions::{moving, posts_update, FENCE};
use crate::store::shared::bson::{as_i64, int_field};
use crate::store::shared::error::StoreResult;
use crate::store::shared::metrics::Counted;

/// Where a new comment of a discussion that keeps block counts of its threads counts.
#[derive(Debug, Clone, Copy)]
pub(super) enum ThreadPlace {
    /// A reply, in the thread with this number.
    In(i64),
    /// A new thread, in a discussion of `threads` threads as far as the post knows.
    New {
        /// The discussion's thread count as the post knows it.
        threads: i64,
    },
}

/// The per-comment layout's counters on the discussion documents.
#[derive(Clone)]
pub(super) struct Counters {
    /// The discussions collection.
    pub(super) discussions: Counted<Document>,
}

impl Counters {
    /// Records a new comment of a sequenced discussion, in the transaction that inserts it: counts
    /// it (in its block of threads too, where the discussion keeps those: `place`), marks it for
    /// the change feed, and numbers it. The comment must be posted after every earlier comment
    /// of the discussion (then the numbers follow the chronological order), and a new thread
    /// must fall in the block `place` expects; `None` when either is not so, and nothing is
    /// written. Returns the comment's number in the discussion and, for a top-level comment,
    /// among the top-level ones (both from 1).
    pub(super) async fn number(
        &self,
        id: &DiscussionId,
        comment: &Comment,
        place: Option<ThreadPlace>,
        session: &mut mongodb::ClientSession,
    ) -> StoreResult<Option<(i64, Option<i64>)>> {
        let top_level = comment.parent.is_none();
        let mut update = posts_update(&[comment]);
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
            .discussions
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
    pub(super) async fn post_floor(&self, id: &DiscussionId) -> StoreResult<(Option<Micros>, i64)> {
        let found = self
            .discussions
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
        self.discussions
            .update_one(
                doc! { "_id": id.as_str() },
                doc! { "$unset": { thread_blocks::FIELD: "", SUBTREE_SIZES: "" } },
            )
            .await?;
        Ok(())
    }
}
