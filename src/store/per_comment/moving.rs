//! The per-comment side of a move between layouts: clearing and importing comments.

use std::collections::HashMap;

use async_trait::async_trait;
use mongodb::bson::{doc, Document};

use super::subtree::{self};
use super::thread_blocks;
use super::*;
use crate::domain::{Comment, Discussion, DiscussionId, Slug};
use crate::store::moves::migrate::{Lease, Movable};
use crate::store::per_comment::hints::{LAST_POSTED, SUBTREE_SIZES};
use crate::store::shared::bson::as_i64;
use crate::store::shared::docs::CommentDoc;
use crate::store::shared::error::{StoreError, StoreResult};
#[async_trait]
impl Movable for PerComment {
    /// One document per comment, each naming its discussion.
    fn documents_of(&self, id: &DiscussionId) -> Vec<(&Counted<Document>, Document)> {
        vec![(&self.raw, doc! { "discussion_id": id.as_str() })]
    }

    async fn clear(&self, id: &DiscussionId) -> StoreResult<()> {
        self.coll
            .delete_many(doc! { "discussion_id": id.as_str() })
            .await?;
        self.counters.forget_counts(id).await
    }

    /// One document per comment, inserted in chunks; numbered in posting order, and counted in
    /// its thread and block of threads, where the deployment numbers new discussions (the
    /// numbering of posts needs transactions).
    async fn import(
        &self,
        _discussion: &Discussion,
        comments: &[Comment],
        lease: &Lease<'_>,
    ) -> StoreResult<Document> {
        let sequenced = self.writer.transactions;
        // Threads are numbered in posting order of their top-level comments; a reply counts in
        // its top-level ancestor's thread.
        let mut threads: HashMap<&str, (i64, i64)> = HashMap::new();
        for comment in comments.iter().filter(|c| c.parent.is_none()) {
            let number = i64::try_from(threads.len()).unwrap_or(i64::MAX) + 1;
            threads.insert(comment.slug.as_str(), (number, 0));
        }
        let mut blocks: Vec<u64> = Vec::new();
        let mut thread_of = Vec::with_capacity(comments.len());
        for comment in comments {
            let root = comment.slug.ancestor_at(0);
            let entry = threads.get_mut(root.as_str()).ok_or_else(|| {
                StoreError::Corrupt(format!("comment {} has no top-level comment", comment.slug))
            })?;
            entry.1 += 1;
            let block = usize::try_from(thread_blocks::block_of(entry.0)).unwrap_or(0);
            if blocks.len() <= block {
                blocks.resize(block + 1, 0);
            }
            blocks[block] += 1;
            thread_of.push(entry.0);
        }
        // Every comment counts in the subtree size of each of its ancestors.
        let mut descendants: HashMap<Slug, (i64, Document)> = HashMap::new();
        if sequenced {
            for comment in comments {
                for depth in 0..comment.slug.depth() {
                    let (count, sizes) = descendants
                        .entry(comment.slug.ancestor_at(depth))
                        .or_default();
                    *count += 1;
                    let reply = subtree::reply_segment(&comment.full_slug, depth);
                    let n = sizes.get(reply).and_then(as_i64).unwrap_or(0);
                    sizes.insert(reply, n + 1);
                }
            }
        }
        let mut seq = 0_i64;
        let mut done = 0_u64;
        for (chunk, chunk_threads) in comments
            .chunks(lease.chunk())
            .zip(thread_of.chunks(lease.chunk()))
        {
            let docs: Vec<CommentDoc> = chunk
                .iter()
                .zip(chunk_threads)
                .map(|(comment, &thread)| {
                    let mut stored = CommentDoc::from_comment(comment, true);
                    if sequenced {
                        seq += 1;
                        stored.seq = Some(seq);
                        stored.thread = Some(thread);
                        let (count, sizes) = descendants.remove(&comment.slug).unwrap_or_default();
                        stored.descendants = Some(count);
                        stored.reply_sizes = (!sizes.is_empty()).then_some(sizes);
                        if comment.parent.is_none() {
                            stored.thread_seq = Some(thread);
                            stored.thread_total =
                                threads.get(comment.slug.as_str()).map(|&(_, total)| total);
                        }
                    }
                    stored
                })
                .collect();
            self.coll.insert_many(docs).await?;
            done += chunk.len() as u64;
            lease.written(done).await?;
        }
        let mut fields = doc! { "sequenced": sequenced, SUBTREE_SIZES: sequenced };
        if sequenced {
            fields.insert(
                thread_blocks::FIELD,
                crate::store::shared::blocks::stored(&blocks),
            );
        }
        if let Some(last) = comments.last() {
            fields.insert(LAST_POSTED, last.posted.0);
        }
        Ok(fields)
    }
}
