//! The bucketed layout's part of an author's history (see `shared::authored`).

use mongodb::bson::{doc, Document};

use super::Bucketed;
use crate::store::shared::authored::{join, ByAuthor};
use crate::store::shared::connect::index_model;
use crate::store::shared::metrics::Counted;

/// The pages' field that holds their comments' keys among their authors' (multikey).
const KEYS: &str = "comments.author.k";

/// The index of the pages by the keys of their comments.
pub(super) fn index() -> mongodb::IndexModel {
    index_model("author_number", doc! { KEYS: 1 }, false)
}

/// The index an earlier version kept for an author's history (dropped at start).
pub(super) const RETIRED_INDEX: &str = "author";

impl Bucketed {
    /// The stages that give, from the seed, the comments of the keys asked for, as items: the
    /// pages holding them (one equality of the `author_number` index per key, so at most one
    /// page per comment), each page's comments filtered to those keys.
    pub(crate) fn authored_branch() -> Vec<Document> {
        let mut stages = join(Self::COLLECTION, KEYS, "page").to_vec();
        stages.push(doc! { "$project": {
            "_id": 0,
            "discussion_id": "$page.discussion_id",
            "c": { "$filter": {
                "input": "$page.comments",
                "as": "c",
                "cond": ByAuthor::wanted("$$c.author.k"),
            } },
        } });
        stages.push(doc! { "$unwind": "$c" });
        stages.push(ByAuthor::item(
            "$discussion_id",
            "$c.author.k",
            "$c.slug",
            "$c",
        ));
        stages
    }
}

impl Bucketed {
    /// The pages holding comments stored before comments were numbered
    /// (`shared::numbers_backfill`): the collection, the filter and the field counting bytes
    /// (none here).
    pub(crate) fn unnumbered(&self) -> (&Counted<Document>, Document, Option<&'static str>) {
        let filter = doc! { "comments": { "$elemMatch": { "author.k": { "$exists": false } } } };
        (&self.pages, filter, None)
    }
}
