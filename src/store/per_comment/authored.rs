//! The per-comment layout's part of an author's history (see `shared::authored`): it leads the
//! aggregation, over its own collection.

use mongodb::bson::{doc, Document};

use super::PerComment;
use crate::store::shared::authored::{ByAuthor, DISCUSSION, POSTED, SLUG};
use crate::store::shared::connect::index_model;
use crate::store::shared::order::before_filter;

/// The index of an author's comments, newest first from its end.
pub(super) fn index() -> mongodb::IndexModel {
    index_model(
        "author",
        doc! { "author.id": 1, POSTED: 1, DISCUSSION: 1, SLUG: 1 },
        false,
    )
}

impl PerComment {
    /// The stages that read the author's comments older than the cursor, newest first, at
    /// most `limit`, as items: one range of the `author` index. They start the aggregation,
    /// so the range is read through the index and, on MongoDB, stops at the limit (the
    /// development database reads the whole range first). A comment is a document here, so a
    /// limit of documents is a limit of comments.
    pub(crate) fn authored_lead(of: &ByAuthor<'_>) -> Vec<Document> {
        let mut range = doc! { "author.id": of.author };
        if let Some(cursor) = of.before {
            range.extend(before_filter(cursor));
        }
        let [sort, limit] = of.newest();
        vec![
            doc! { "$match": range },
            sort,
            limit,
            of.item("$discussion_id", "$posted", "$slug", "$$ROOT"),
        ]
    }

    /// The collection the aggregation of an author's history runs on.
    pub(crate) fn authored_collection(&self) -> &crate::store::shared::metrics::Counted<Document> {
        &self.raw
    }
}
