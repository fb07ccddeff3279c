//! An author's history through the router: one aggregation per range of the author's numbers
//! (`shared::numbers`), made of every layout's part and the held comments' (see
//! `shared::authored` for the parts and why they join as they do).
//!
//! A page asks for the comments numbered just below its cursor (for a first page, below the
//! author's counter), as their keys, in a seed document made from the author's `people`
//! document; a `$facet` runs every layout's part and the held comments' from it, and the items
//! of all four are merged. Every part reads only the documents that hold those comments, so a
//! page costs the same for an author of ten comments or of a hundred thousand. Each item
//! carries its discussion's metadata and whether it is gone (a move's copy): gone items are
//! left out. A number with nothing listed (a gap, or a comment whose only items are copies)
//! leaves the page short, and the page reads the numbers below in another round, twice as
//! wide each time, until it is full or the numbers run out.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document, RawDocumentBuf};

use super::Store;
use crate::domain::paging::Cursor;
use crate::domain::Layout;
use crate::store::api::{AuthoredComment, HistoryStore, AUTHORED_RANGE};
use crate::store::bucketed::Bucketed;
use crate::store::embedded::Embedded;
use crate::store::moderation::held::HeldComments;
use crate::store::per_comment::PerComment;
use crate::store::shared::authored::{
    with_discussion, ByAuthor, Numbers, COMMENT, GONE, HELD, KEY, KEYS, META, SLUG,
};
use crate::store::shared::bson::corrupt;
use crate::store::shared::docs::owned_comment_of;
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::numbers;

/// Reads of one page at most: a page over gaps and copies reads on below them.
const MAX_ROUNDS: usize = 8;

/// Numbers one read asks for at most.
const MAX_KEYS: u64 = 1_024;

impl Store {
    /// The aggregation of the comments of `numbers` (see the module documentation): one
    /// document, the author's counter as `top` and the items, with their comments and their
    /// discussions' metadata, each saying whether it is [`GONE`].
    fn authored_pipeline(author: &str, numbers: Numbers, metadata: &Document) -> Vec<Document> {
        let mut stages = ByAuthor::seed(author, numbers);
        let part = |stages: Vec<Document>, after: Vec<Document>| -> Vec<Bson> {
            let mut part = vec![doc! { "$project": { KEYS: 1 } }];
            part.extend(stages);
            part.extend(after);
            part.into_iter().map(Bson::Document).collect()
        };
        let mut held = HeldComments::authored_branch();
        held.push(doc! { "$set": { HELD: true } });
        stages.push(doc! { "$facet": {
            "top": [{ "$project": { "top": 1 } }],
            "per_comment": part(PerComment::authored_branch(), with_discussion(Some(Layout::PerComment), metadata)),
            "bucketed": part(Bucketed::authored_branch(), with_discussion(Some(Layout::Bucketed), metadata)),
            "embedded": part(Embedded::authored_branch(metadata), Vec::new()),
            "held": part(held, with_discussion(None, metadata)),
        } });
        stages.push(doc! { "$project": {
            // (The development database gives null for a path through an array.)
            "top": { "$ifNull": [
                { "$let": { "vars": { "t": { "$arrayElemAt": ["$top", 0] } }, "in": "$$t.top" } },
                0_i64,
            ] },
            "items": { "$concatArrays": ["$per_comment", "$bucketed", "$embedded", "$held"] },
        } });
        stages
    }

    /// The comments of `author` of `numbers` that are listed, newest first, and the numbers
    /// read (from the counter, for the newest): one aggregation. Of a comment found twice (held
    /// and, being approved, published already) the published one is listed.
    async fn authored_round(
        &self,
        author: &str,
        numbers: Numbers,
    ) -> StoreResult<(Vec<AuthoredComment>, std::ops::Range<u64>)> {
        let metadata = self.discussions.projection();
        let pipeline = Self::authored_pipeline(author, numbers, &metadata);
        let found: Vec<Document> = self
            .held
            .people()
            .aggregate(pipeline)
            .await?
            .try_collect()
            .await?;
        let Some(found) = found.first() else {
            return Ok((Vec::new(), 0..0));
        };
        let read = match numbers {
            Numbers::Range { from, to } => from..to,
            Numbers::Newest(width) => {
                let top = found
                    .get("top")
                    .and_then(crate::store::shared::bson::as_i64)
                    .and_then(|n| u64::try_from(n).ok())
                    .unwrap_or(0);
                let to = top.saturating_add(1);
                to.saturating_sub(width).max(1)..to
            }
        };
        let items = found.get_array("items").map_err(corrupt)?;
        let mut listed: BTreeMap<u64, AuthoredComment> = BTreeMap::new();
        for item in items {
            let Bson::Document(item) = item else {
                return Err(corrupt("an author's comment is not a document"));
            };
            let Some(comment) = self.authored_of(item)? else {
                continue;
            };
            match listed.get(&comment.number) {
                Some(kept) if !kept.held => {}
                _ => {
                    listed.insert(comment.number, comment);
                }
            }
        }
        Ok((listed.into_values().rev().collect(), read))
    }

    /// A comment of an item; `None` when it is gone, or when what was found at an embedded
    /// comment's positions is another comment (logged: the array of authors is out of step).
    fn authored_of(&self, item: &Document) -> StoreResult<Option<AuthoredComment>> {
        if item.get_bool(GONE).unwrap_or(false) {
            return Ok(None);
        }
        let meta = item
            .get_document(META)
            .map_err(|_| corrupt("an author's comment without its discussion"))?;
        let raw = RawDocumentBuf::from_document(meta).map_err(corrupt)?;
        let discussion = Arc::new(self.discussions.read(&raw)?);
        let held = item.get_bool(HELD).unwrap_or(false);
        let stored = item.get(COMMENT).cloned().unwrap_or(Bson::Null);
        let comment = match (held, stored) {
            (true, Bson::Document(stored)) => HeldComments::authored_of(&stored)?.comment,
            (true, _) => {
                return Err(corrupt(
                    "a held comment of an author's history is not a document",
                ))
            }
            (false, stored) => owned_comment_of(stored, &discussion.id)?,
        };
        let slug = item.get_str(SLUG).map_err(corrupt)?;
        if comment.slug.as_str() != slug {
            tracing::warn!(discussion = %discussion.id, slug, found = %comment.slug, "an author's comment was not at its positions: left out");
            return Ok(None);
        }
        let number = item
            .get_str(KEY)
            .ok()
            .and_then(numbers::number_of)
            .ok_or_else(|| corrupt("an author's comment without its number"))?;
        Ok(Some(AuthoredComment {
            discussion,
            comment,
            held,
            number,
        }))
    }

    /// The author's counter and the gaps counted (see `shared::numbers`): one point read.
    async fn author_counter(&self, author: &str) -> StoreResult<(u64, u64)> {
        let person = self
            .held
            .people()
            .find_one(doc! { "_id": author })
            .projection(doc! { numbers::COUNTER: 1, numbers::GAPS: 1 })
            .await?;
        Ok(numbers::counter_of(person.as_ref()))
    }
}

#[async_trait]
impl HistoryStore for Store {
    async fn authored(
        &self,
        author: &str,
        after: Option<&Cursor>,
        limit: usize,
    ) -> StoreResult<(Vec<AuthoredComment>, bool)> {
        let mut width = u64::try_from(limit).unwrap_or(MAX_KEYS).clamp(1, MAX_KEYS);
        let mut numbers = match after {
            Some(Cursor::ByAuthor(number)) => Numbers::Range {
                from: number.saturating_sub(width).max(1),
                to: *number,
            },
            _ => Numbers::Newest(width),
        };
        let mut listed = Vec::with_capacity(limit);
        // Numbers below `to` are left to read.
        let mut to = u64::MAX;
        for _ in 0..MAX_ROUNDS {
            let (mut found, read) = self.authored_round(author, numbers).await?;
            let room = limit - listed.len();
            if found.len() > room {
                found.truncate(room);
                listed.extend(found);
                return Ok((listed, true));
            }
            listed.extend(found);
            to = read.start;
            if listed.len() >= limit || to <= 1 {
                break;
            }
            width = width.saturating_mul(2).min(MAX_KEYS);
            numbers = Numbers::Range {
                from: to.saturating_sub(width).max(1),
                to,
            };
        }
        if listed.is_empty() && to > 1 {
            return Err(StoreError::Busy(format!(
                "the comments of {author} read so far are gaps or copies that moves between \
                 layouts left behind: try again once those moves are over"
            )));
        }
        Ok((listed, to > 1))
    }

    async fn authored_count(&self, author: &str) -> StoreResult<u64> {
        let (drawn, gaps) = self.author_counter(author).await?;
        Ok(drawn.saturating_sub(gaps))
    }

    async fn numbers_drawn(&self, author: &str) -> StoreResult<u64> {
        Ok(self.author_counter(author).await?.0)
    }

    async fn authored_range(
        &self,
        author: &str,
        numbers: std::ops::Range<u64>,
    ) -> StoreResult<Vec<AuthoredComment>> {
        let from = numbers.start.max(1);
        let to = numbers.end.min(from.saturating_add(AUTHORED_RANGE));
        if from >= to {
            return Ok(Vec::new());
        }
        let (found, _) = self
            .authored_round(author, Numbers::Range { from, to })
            .await?;
        Ok(found)
    }
}
