//! The per-comment layout's part of an author's history (see `shared::authored`).

use mongodb::bson::{doc, Document};

use super::PerComment;
use crate::store::shared::authored::{join, ByAuthor};
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
    /// The stages that give, from the seed, the comments of the keys asked for, as items: one
    /// equality of the `author_number` index per key, a document per comment.
    pub(crate) fn authored_branch() -> Vec<Document> {
        let mut stages = join(Self::COLLECTION, KEYS, "c").to_vec();
        stages.push(ByAuthor::item(
            "$c.discussion_id",
            &format!("$c.author.{KEY}"),
            "$c.slug",
            "$c",
        ));
        stages
    }

    /// The comments stored before comments were numbered (`shared::numbers_backfill`): the
    /// collection, the filter and the field counting bytes (none here).
    pub(crate) fn unnumbered(&self) -> (&Counted<Document>, Document, Option<&'static str>) {
        (&self.raw, doc! { KEYS: { "$exists": false } }, None)
    }
}
