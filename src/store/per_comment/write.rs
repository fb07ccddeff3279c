//! Posting: the per-comment steps of the post skeleton (numbering, thread and subtree counts).

use async_trait::async_trait;
use mongodb::bson::{doc, Bson, Document};
use mongodb::ClientSession;

use super::subtree::{self};
use super::*;
use crate::domain::{Comment, Discussion, Micros, Slug, SlugPart};
use crate::store::per_comment::hints::Hints;
use crate::store::per_comment::numbering::ThreadPlace;
use crate::store::shared::docs::CommentDoc;
use crate::store::shared::error::is_duplicate_key;
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::skeleton::{Attempt, ParentPaths, PostPolicy, PostSteps};
/// A post in progress: the time the next try must come after (the discussion's latest comment,
/// once a try learned it), and, where the discussion keeps block counts of its threads, the
/// parent's thread (replies) or the discussion's thread count as last known (new threads).
pub(crate) struct PostState {
    floor: Option<Micros>,
    thread: Option<i64>,
    threads: i64,
    /// The stored comment's document id.
    home: Option<Bson>,
}

impl PerComment {
    /// Whether this post numbers its comment (inside its transaction).
    pub(super) fn numbers(&self, discussion: &Discussion) -> bool {
        Hints::of(discussion).sequenced && self.writer.transactions
    }

    /// Whether this post counts its comment in its thread and its block of threads (inside its
    /// transaction).
    pub(super) fn counts_threads(&self, discussion: &Discussion) -> bool {
        self.numbers(discussion) && Hints::of(discussion).thread_blocks.is_some()
    }

    /// Whether this post counts its comment in the subtree size of every ancestor (inside its
    /// transaction).
    pub(super) fn sizes_subtrees(&self, discussion: &Discussion) -> bool {
        self.numbers(discussion) && Hints::of(discussion).subtree_sizes
    }

    /// Where the comment counts among the discussion's threads (`None` where it keeps no block
    /// counts).
    pub(super) fn place(&self, discussion: &Discussion, state: &PostState) -> Option<ThreadPlace> {
        if !self.counts_threads(discussion) {
            return None;
        }
        Some(match state.thread {
            Some(thread) => ThreadPlace::In(thread),
            None => ThreadPlace::New {
                threads: state.threads,
            },
        })
    }
}

#[async_trait]
impl PostSteps for PerComment {
    type State = PostState;

    async fn prepare(
        &self,
        discussion: &Discussion,
        parent: Option<&Slug>,
        _part: &SlugPart,
    ) -> StoreResult<(Option<ParentPaths>, PostState)> {
        let mut state = PostState {
            floor: None,
            thread: None,
            threads: i64::try_from(discussion.thread_count).unwrap_or(i64::MAX),
            home: None,
        };
        let Some(slug) = parent else {
            return Ok((None, state));
        };
        let found = self
            .coll
            .find_one(doc! { "discussion_id": discussion.id.as_str(), "slug": slug.as_str() })
            .await?
            .ok_or_else(|| {
                StoreError::NotFound(format!("no comment {slug} in discussion {}", discussion.id))
            })?;
        if self.counts_threads(discussion) {
            state.thread = Some(found.thread.ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "comment {slug} of {} has no thread number",
                    discussion.id
                ))
            })?);
        }
        Ok((Some((&found.into_comment(&discussion.id)).into()), state))
    }

    /// A comment, its counters and its number land together, in one transaction. The read may
    /// come before the turn: the parent's paths and thread never change, and a new thread's
    /// block is checked by the numbering itself.
    fn policy(&self) -> PostPolicy<'_, PostState> {
        PostPolicy {
            transaction: true,
            grouping: None,
        }
    }

    /// In a sequenced discussion a comment comes after the latest one, so that numbers follow
    /// the chronological order.
    fn floor(&self, state: &PostState, _parent: Option<&Slug>) -> Option<Micros> {
        state.floor
    }

    fn home(&self, _discussion: &Discussion, state: &PostState) -> Option<Bson> {
        state.home.clone()
    }

    /// In a sequenced discussion: number the comment (refused when another post came in with a
    /// later time: learn that time and try again after it), then insert it; otherwise insert it.
    async fn attempt(
        &self,
        discussion: &Discussion,
        comment: &Comment,
        state: &mut PostState,
        session: &mut ClientSession,
    ) -> StoreResult<Attempt> {
        let mut stored = CommentDoc::from_comment(comment, true);
        if self.numbers(discussion) {
            let place = self.place(discussion, state);
            match self
                .counters
                .number(&discussion.id, comment, place, &mut *session)
                .await?
            {
                Some((seq, thread_seq)) => {
                    stored.seq = Some(seq);
                    stored.thread_seq = thread_seq;
                    if place.is_some() {
                        stored.thread = thread_seq.or(state.thread);
                        stored.thread_total = thread_seq.map(|_| 1);
                    }
                    if self.sizes_subtrees(discussion) {
                        stored.descendants = Some(0);
                    }
                }
                None => {
                    (state.floor, state.threads) = self.counters.post_floor(&discussion.id).await?;
                    return Ok(Attempt::Retry);
                }
            }
        }
        match self.coll.insert_one(stored).session(session).await {
            Ok(inserted) => {
                state.home = Some(inserted.inserted_id);
                Ok(Attempt::Stored)
            }
            Err(err) if is_duplicate_key(&err) => Ok(Attempt::Retry),
            Err(err) => Err(err.into()),
        }
    }

    async fn count(
        &self,
        discussion: &Discussion,
        comment: &Comment,
        _state: &PostState,
        session: &mut ClientSession,
    ) -> StoreResult<()> {
        if let Some(parent) = &comment.parent {
            // The parent's reply count, where the discussion counts threads the root's thread
            // total, and where it keeps subtree sizes every ancestor's: one statement per
            // ancestor that counts something (each by the unique slug index), one command.
            let id = discussion.id.as_str();
            let at = |slug: &Slug| doc! { "discussion_id": id, "slug": slug.as_str() };
            let threads = self.counts_threads(discussion);
            let sizes = self.sizes_subtrees(discussion);
            let mut statements = Vec::new();
            for depth in 0..comment.slug.depth() {
                let ancestor = comment.slug.ancestor_at(depth);
                let mut inc = Document::new();
                if ancestor == *parent {
                    inc.insert("reply_count", 1_i64);
                }
                if threads && depth == 0 {
                    inc.insert("thread_total", 1_i64);
                }
                if sizes {
                    inc.insert(subtree::DESCENDANTS, 1_i64);
                    inc.insert(subtree::reply_size_path(&comment.full_slug, depth), 1_i64);
                }
                if !inc.is_empty() {
                    statements.push(doc! { "q": at(&ancestor), "u": { "$inc": inc } });
                }
            }
            let reply = self
                .raw
                .update_statements(statements, self.writer.transactions, session)
                .await?;
            if let Ok(errors) = reply.get_array("writeErrors") {
                return Err(StoreError::Corrupt(format!(
                    "counting reply {} in {id}: {errors:?}",
                    comment.slug
                )));
            }
        }
        if self.numbers(discussion) {
            // Numbering counted it already.
            return Ok(());
        }
        self.discussions
            .record_post(discussion, comment, session)
            .await
    }
}
