//! The bucketed layout's part of an author's history (see `shared::authored`).

use mongodb::bson::{doc, Document};

use super::Bucketed;
use crate::store::shared::authored::{join, ByAuthor};
use crate::store::shared::connect::index_model;

/// The pages' field that holds their comments' authors (multikey).
const AUTHORS: &str = "comments.author.id";

/// The index of the pages holding an author's comments.
pub(super) fn index() -> mongodb::IndexModel {
    index_model("author", doc! { AUTHORS: 1 }, false)
}

impl Bucketed {
    /// The stages that give, from the seed, the author's comments older than the cursor, as
    /// items: every page holding one of their comments (one equality of the `author` index),
    /// each page's comments filtered to theirs. A page holds many people's comments, so no
    /// limit of pages is a limit of comments: every such page is read, on either database.
    pub(crate) fn authored_branch(of: &ByAuthor<'_>) -> Vec<Document> {
        let mut stages = join(Self::COLLECTION, AUTHORS, "page").to_vec();
        stages.push(doc! { "$project": {
            "_id": 0,
            "discussion_id": "$page.discussion_id",
            "c": { "$filter": {
                "input": "$page.comments",
                "as": "c",
                "cond": { "$eq": ["$$c.author.id", of.author()] },
            } },
        } });
        stages.push(doc! { "$unwind": "$c" });
        stages.push(of.item("$discussion_id", "$c.posted", "$c.slug", "$c"));
        stages.extend(of.older());
        stages
    }
}
