//! One author's comments across the layouts (see `HistoryStore`): what the layouts' parts of
//! that query share. Each layout writes its part in its own folder (`authored.rs`): the comments
//! of one author it holds, as items of one shape; the router composes the parts into one
//! aggregation (`router/history.rs`), which sorts, limits and checks the items here.
//!
//! Every part but the first starts from one seed document whose [`AUTHOR`] field holds the
//! author's id, and joins its collection by an equality `$lookup` on the author: the one join
//! the development database reads through an index (it reads every document of the other
//! collection for `$unionWith` or a `$lookup` with a pipeline).

use mongodb::bson::{doc, Bson, Document};

use crate::domain::paging::Cursor;
use crate::domain::Layout;
use crate::store::discussions::Discussions;
use crate::store::shared::order::{before_cond, before_filter};

/// The seed's field that holds the author's id.
pub(crate) const AUTHOR: &str = "a";

/// An item's discussion id.
pub(crate) const DISCUSSION: &str = "discussion_id";
/// An item's posting time (for a held comment, when it was submitted).
pub(crate) const POSTED: &str = "posted";
/// An item's slug.
pub(crate) const SLUG: &str = "slug";
/// Whether an item is a held comment (its comment is the held document).
pub(crate) const HELD: &str = "held";
/// An item's comment as stored (absent when the items are only counted).
pub(crate) const COMMENT: &str = "comment";
/// Whether an item is not its discussion's (the discussion is gone, or it lives in another
/// layout now: the copy a move made or has yet to remove).
pub(crate) const GONE: &str = "gone";
/// An item's discussion, as a metadata read gives it.
pub(crate) const META: &str = "d";

/// What an author's history asks each layout.
pub(crate) struct ByAuthor<'a> {
    /// The author's id.
    pub author: &'a str,
    /// Only comments strictly older than this position (a `ByAuthor` cursor).
    pub before: Option<&'a Cursor>,
    /// Most items the whole read gives.
    pub limit: usize,
    /// Whether items carry their comment (a count needs only their keys).
    pub bodies: bool,
}

impl ByAuthor<'_> {
    /// The author's id as an aggregation expression: a literal, whatever its characters.
    pub(crate) fn author(&self) -> Bson {
        doc! { "$literal": self.author }.into()
    }

    /// The limit as stored in a stage.
    pub(crate) fn limit(&self) -> i64 {
        i64::try_from(self.limit).unwrap_or(i64::MAX)
    }

    /// The stage projecting to an item: `discussion`, `posted` and `slug` are expressions,
    /// `comment` the expression of the stored comment (left out when items are only counted).
    pub(crate) fn item(
        &self,
        discussion: &str,
        posted: &str,
        slug: &str,
        comment: &str,
    ) -> Document {
        let mut item = doc! {
            "_id": 0,
            DISCUSSION: discussion,
            POSTED: posted,
            SLUG: slug,
        };
        if self.bodies {
            item.insert(COMMENT, comment);
        }
        doc! { "$project": item }
    }

    /// The stages that keep the items strictly older than the cursor (none without one), as a
    /// filter on the items' fields.
    pub(crate) fn older(&self) -> Option<Document> {
        self.before.map(|c| doc! { "$match": before_filter(c) })
    }

    /// The condition that the variable `var` (an item's fields) is strictly older than the
    /// cursor (true without one).
    pub(crate) fn older_cond(&self, var: &str) -> Bson {
        match self.before {
            Some(c) => before_cond(c, var).into(),
            None => Bson::Boolean(true),
        }
    }

    /// The newest `limit` items.
    pub(crate) fn newest(&self) -> [Document; 2] {
        [doc! { "$sort": order() }, doc! { "$limit": self.limit() }]
    }
}

/// The order of an author's history, newest first.
pub(crate) fn order() -> Document {
    doc! { POSTED: -1, DISCUSSION: -1, SLUG: -1 }
}

/// The stages that join, to the seed, every document of `collection` whose `field` is the
/// author's id, one document each (its fields under `into`).
pub(crate) fn join(collection: &str, field: &str, into: &str) -> [Document; 2] {
    [
        doc! { "$lookup": {
            "from": collection, "localField": AUTHOR, "foreignField": field, "as": into,
        } },
        doc! { "$unwind": format!("${into}") },
    ]
}

/// The expression of a discussion's metadata (as `Discussions::metadata` projects it) from
/// the discussion document at `path` (`$d`).
pub(crate) fn metadata_of(path: &str, projection: &Document) -> Document {
    let mut meta = doc! { "_id": format!("{path}._id") };
    for field in projection.keys() {
        meta.insert(field, format!("{path}.{field}"));
    }
    meta
}

/// The stages that mark each item [`GONE`] or not by its discussion (`layout`: the layout the
/// items were read from; `None` for held comments, which any discussion may have) and, where
/// `metadata` is given, add the discussion's metadata as [`META`]. One point read per item.
pub(crate) fn with_discussion(
    layout: Option<Layout>,
    metadata: Option<&Document>,
) -> Vec<Document> {
    let found = format!("${META}");
    let gone = match layout {
        Some(layout) => doc! { "$ne": [format!("{found}.layout"), layout.as_str()] },
        None => doc! { "$eq": [{ "$ifNull": [format!("{found}._id"), Bson::Null] }, Bson::Null] },
    };
    let mut set = doc! { GONE: gone };
    if let Some(projection) = metadata {
        set.insert(META, metadata_of(&found, projection));
    }
    let mut stages = vec![
        doc! { "$lookup": {
            "from": Discussions::COLLECTION, "localField": DISCUSSION, "foreignField": "_id",
            "as": META,
        } },
        doc! { "$unwind": { "path": &found, "preserveNullAndEmptyArrays": true } },
        doc! { "$set": set },
    ];
    if metadata.is_none() {
        stages.push(doc! { "$unset": META });
    }
    stages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{DiscussionId, Micros, Slug};

    #[test]
    fn items_older_than_a_cursor_are_kept_by_time_then_discussion_then_slug() {
        let cursor = Cursor::ByAuthor(
            Micros(10),
            DiscussionId::parse("0123456789abcdef01234567").expect("id"),
            Slug::parse("abcd1234").expect("slug"),
        );
        let of = ByAuthor {
            author: "$u",
            before: Some(&cursor),
            limit: 3,
            bodies: false,
        };
        let Some(stage) = of.older() else {
            panic!("a cursor keeps the older items")
        };
        let filter = stage.get_document("$match").expect("match");
        assert_eq!(
            filter.get_document(POSTED).expect("posted"),
            &doc! { "$lte": 10_i64 }
        );
        assert_eq!(filter.get_array("$or").expect("or").len(), 3);
        assert_eq!(of.author(), Bson::Document(doc! { "$literal": "$u" }));
        let item = of.item("$x", "$p", "$s", "$c");
        assert!(!item
            .get_document("$project")
            .expect("project")
            .contains_key(COMMENT));
    }
}
