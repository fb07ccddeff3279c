//! The per-comment layout's part of an author's history (see `shared::authored`): it leads the
//! aggregation, over its own collection.

use mongodb::bson::{doc, Document};

use super::PerComment;
use crate::store::shared::authored::ByAuthor;
use crate::store::shared::connect::index_model;
use crate::store::shared::metrics::Counted;
use crate::store::shared::numbers::KEY;

/// The comments' keys among their authors' (`shared::numbers`).
const KEYS: &str = "author.k";

/// The index of the comments by their keys among their authors'.
pub(super) fn index() -> mongodb::IndexModel {
    index_model("author_number", doc! { KEYS: 1 }, false)
}

/// The index an earlier version kept for an author's history (dropped at start).
pub(super) const RETIRED_INDEX: &str = "author";

impl PerComment {
    /// The stages that read the comments of the keys asked for, as items: one equality of
    /// the `author_number` index per key, a document per comment. They start the aggregation,
    /// so they are read through the index.
    pub(crate) fn authored_lead(of: &ByAuthor) -> Vec<Document> {
        vec![
            doc! { "$match": { KEYS: { "$in": of.keys() } } },
            ByAuthor::item(
                "$discussion_id",
                &format!("$author.{KEY}"),
                "$slug",
                "$$ROOT",
            ),
        ]
    }

    /// The collection the aggregation of an author's history runs on.
    pub(crate) fn authored_collection(&self) -> &Counted<Document> {
        &self.raw
    }
}

impl PerComment {
    /// The comments stored before comments were numbered (`shared::numbers_backfill`): the
    /// collection, the filter and the field counting bytes (none here).
    pub(crate) fn unnumbered(&self) -> (&Counted<Document>, Document, Option<&'static str>) {
        (&self.raw, doc! { KEYS: { "$exists": false } }, None)
    }
}
