//! The embedded side of a move between layouts.

use std::collections::HashMap;

use async_trait::async_trait;
use mongodb::bson::{doc, to_document, Bson, Document};

use super::*;
use crate::domain::{Comment, Discussion, DiscussionId, Slug};
use crate::store::moves::migrate::{Lease, Movable};
use crate::store::shared::bson::corrupt;
use crate::store::shared::docs::{element_size, CommentDoc};
use crate::store::shared::error::StoreResult;

#[async_trait]
impl Movable for Embedded {
    /// The discussion's own document, its comments nested in `replies`.
    fn documents_of(&self, id: &DiscussionId) -> Vec<(&Counted<Document>, Document)> {
        vec![(&self.coll, doc! { "_id": id.as_str() })]
    }

    async fn clear(&self, id: &DiscussionId) -> StoreResult<()> {
        self.coll
            .update_one(
                doc! { "_id": id.as_str() },
                doc! { "$unset": { REPLIES: "", BYTES: "", authored::AUTHORED: "" } },
            )
            .await?;
        Ok(())
    }

    /// The nested document and its flat array of authors, built here and written by the update
    /// that switches the layout (`TooLarge`, and nothing written, when it would not fit under
    /// the cap).
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
                .saturating_add(ELEMENT_OVERHEAD)
                .saturating_add(authored::entry_size(comment)?);
        }
        if bytes > self.max_bytes.saturating_sub(METADATA_ALLOWANCE) {
            return Err(self.too_large(&discussion.id));
        }
        /// The elements of `parent`'s replies (their positions below the top level `at`,
        /// empty for the top level), with the authors' entries of them all into `entries`.
        fn nest(
            children: &HashMap<Option<&Slug>, Vec<&Comment>>,
            parent: Option<&Slug>,
            at: &mut Vec<usize>,
            entries: &mut Vec<Document>,
        ) -> StoreResult<Vec<Bson>> {
            let Some(list) = children.get(&parent) else {
                return Ok(Vec::new());
            };
            let mut elements = Vec::with_capacity(list.len());
            for (index, comment) in list.iter().enumerate() {
                if parent.is_some() {
                    at.push(index);
                }
                entries.push(authored::entry(comment, at));
                let mut element =
                    to_document(&CommentDoc::from_comment(comment, false)).map_err(corrupt)?;
                element.insert(REPLIES, nest(children, Some(&comment.slug), at, entries)?);
                elements.push(Bson::Document(element));
                if parent.is_some() {
                    at.pop();
                }
            }
            Ok(elements)
        }
        let mut entries = Vec::with_capacity(comments.len());
        let top = nest(&children, None, &mut Vec::new(), &mut entries)?;
        // In posting order, as every push keeps them (`comments` come in that order).
        entries.sort_by_key(|e| {
            (
                e.get_i64("p").unwrap_or(0),
                e.get_str("s").map(str::to_owned).unwrap_or_default(),
            )
        });
        lease.written(comments.len() as u64).await?;
        Ok(doc! { REPLIES: top, authored::AUTHORED: entries, BYTES: bytes })
    }
}
