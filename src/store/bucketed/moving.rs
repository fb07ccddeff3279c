//! Moving a discussion into or out of buckets.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use mongodb::bson::{doc, to_document, Bson, Document};

use super::shapes::REPLY_PAGES;
use super::shapes::SEALED;
use super::shapes::{
    block_of, order_key, page_id, BLOCK_KEYS, FLOOR, KEYED, NUM_PAGES, PAGE_BLOCKS, SEALED_MAX,
    SEALED_MIN, SIZED, THREAD_PAGES,
};
use super::{copies, Bucketed};
use crate::domain::{Comment, Discussion, DiscussionId, Slug};
use crate::store::moves::migrate::{Lease, Movable};
use crate::store::shared::bson::{as_i64, corrupt};
use crate::store::shared::docs::CommentDoc;
use crate::store::shared::error::StoreResult;
use crate::store::shared::metrics::Counted;

#[async_trait]
impl Movable for Bucketed {
    /// The discussion's pages, its comments in each page's `comments`, and its copies.
    fn documents_of(&self, id: &DiscussionId) -> Vec<(&Counted<Document>, Document)> {
        let filter = doc! { "discussion_id": id.as_str() };
        vec![(&self.pages, filter.clone()), (&self.copies, filter)]
    }

    /// The copies go first: a copy never outlives its page.
    async fn clear(&self, id: &DiscussionId) -> StoreResult<()> {
        self.clear_copies(id).await?;
        self.pages
            .delete_many(doc! { "discussion_id": id.as_str() })
            .await?;
        self.discussion_docs
            .update_one(
                doc! { "_id": id.as_str() },
                doc! { "$unset": {
                    NUM_PAGES: "", FLOOR: "", KEYED: "", SIZED: "", SEALED_MIN: "", SEALED_MAX: "",
                    PAGE_BLOCKS: "", BLOCK_KEYS: "",
                } },
            )
            .await?;
        Ok(())
    }

    /// Full pages in posting order, as posts would have filled them: every page but the last
    /// sealed, each with its counts and keys; the discussion's write target is the last page.
    async fn import(
        &self,
        discussion: &Discussion,
        comments: &[Comment],
        lease: &Lease<'_>,
    ) -> StoreResult<Document> {
        let cap = usize::try_from(self.cap).unwrap_or(usize::MAX).max(1);
        let chunks: Vec<&[Comment]> = comments.chunks(cap).collect();
        // Each comment's direct replies per page, as posts count them.
        let mut reply_pages: HashMap<&Slug, BTreeMap<usize, i64>> = HashMap::new();
        for (number, chunk) in chunks.iter().enumerate() {
            for comment in chunk.iter() {
                if let Some(parent) = &comment.parent {
                    *reply_pages
                        .entry(parent)
                        .or_default()
                        .entry(number)
                        .or_default() += 1;
                }
            }
        }
        // Where each page's threads are, as posts count them: the pages of each thread's
        // comments, on the page of its top-level comment (they add up to its `thread_total`).
        let root_pages: HashMap<&Slug, usize> = chunks
            .iter()
            .enumerate()
            .flat_map(|(number, chunk)| {
                chunk
                    .iter()
                    .filter(|c| c.parent.is_none())
                    .map(move |c| (&c.slug, number))
            })
            .collect();
        let mut thread_pages: HashMap<usize, BTreeMap<usize, i64>> = HashMap::new();
        for (number, chunk) in chunks.iter().enumerate() {
            for comment in chunk.iter() {
                if let Some(&home) = root_pages.get(&comment.slug.ancestor_at(0)) {
                    *thread_pages
                        .entry(home)
                        .or_default()
                        .entry(number)
                        .or_default() += 1;
                }
            }
        }
        let last = chunks.len().saturating_sub(1);
        let mut pages = Vec::with_capacity(chunks.len());
        // Per block of pages, the comments of the threads started there and its first key.
        let (mut blocks, mut block_keys) = (Document::new(), Document::new());
        let mut floor = String::new();
        // Copies of the comments voted on (see `copies`), written with the pages.
        let mut copied = Vec::new();
        for (number, chunk) in chunks.iter().enumerate() {
            let (Some(first), Some(end)) = (chunk.first(), chunk.last()) else {
                continue;
            };
            let roots = chunk.iter().filter(|c| c.parent.is_none()).count();
            let threads = thread_pages.get(&number);
            let thread_total: i64 = threads.map_or(0, |pages| pages.values().sum());
            let stored = chunk
                .iter()
                .map(|c| {
                    let mut element =
                        to_document(&CommentDoc::from_comment(c, false)).map_err(corrupt)?;
                    if let Some(pages) = reply_pages.get(&c.slug) {
                        let counts: Document = pages
                            .iter()
                            .map(|(page, n)| (page.to_string(), Bson::from(*n)))
                            .collect();
                        element.insert(REPLY_PAGES, counts);
                    }
                    Ok(Bson::Document(element))
                })
                .collect::<StoreResult<Vec<_>>>()?;
            let threads_here: Document = threads
                .map(|pages| {
                    pages
                        .iter()
                        .map(|(page, n)| (page.to_string(), Bson::from(*n)))
                        .collect()
                })
                .unwrap_or_default();
            let last_key = order_key(end.posted, &end.slug);
            let number = i64::try_from(number).unwrap_or(i64::MAX);
            let home = Bson::String(page_id(&discussion.id, number));
            for comment in chunk.iter().filter(|c| copies::voted(c)) {
                let replies: Option<Vec<(i64, u64)>> = reply_pages.get(&comment.slug).map(|p| {
                    p.iter()
                        .map(|(page, n)| {
                            (i64::try_from(*page).unwrap_or(i64::MAX), n.unsigned_abs())
                        })
                        .collect()
                });
                copied.push(copies::copy_of(
                    comment,
                    (&home, number),
                    replies.as_deref(),
                )?);
            }
            let block = block_of(number).to_string();
            let before = blocks.get(&block).and_then(as_i64).unwrap_or(0);
            blocks.insert(block.as_str(), before + thread_total);
            if !block_keys.contains_key(&block) {
                block_keys.insert(block, order_key(first.posted, &first.slug));
            }
            let mut page = doc! {
                "_id": page_id(&discussion.id, number),
                "discussion_id": discussion.id.as_str(),
                "page": number,
                "count": i64::try_from(chunk.len()).unwrap_or(i64::MAX),
                "roots": i64::try_from(roots).unwrap_or(i64::MAX),
                "thread_total": thread_total,
                THREAD_PAGES: threads_here,
                "first_key": order_key(first.posted, &first.slug),
                "last_key": &last_key,
                "comments": stored,
            };
            if usize::try_from(number).unwrap_or(usize::MAX) < last {
                page.insert(SEALED, true);
                floor = last_key;
            }
            pages.push(page);
        }
        let mut done = 0_u64;
        let per_insert = (lease.chunk() / cap).max(1);
        for batch in pages.chunks(per_insert) {
            self.pages.insert_many(batch).await?;
            done += batch
                .iter()
                .map(|p| p.get_i64("count").unwrap_or(0))
                .sum::<i64>()
                .unsigned_abs();
            lease.written(done).await?;
        }
        for batch in copied.chunks(lease.chunk().max(1)) {
            self.copies.insert_many(batch).await?;
            lease.written(done).await?;
        }
        let mut fields = doc! {
            NUM_PAGES: i64::try_from(last).unwrap_or(0), FLOOR: floor, KEYED: true, SIZED: true,
            PAGE_BLOCKS: blocks, BLOCK_KEYS: block_keys,
        };
        if last > 0 {
            // Every page but the last is full.
            fields.insert(SEALED_MIN, self.cap);
            fields.insert(SEALED_MAX, self.cap);
        }
        Ok(fields)
    }
}
