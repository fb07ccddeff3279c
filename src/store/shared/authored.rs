//! One author's comments across the layouts (see `HistoryStore`): what the layouts' parts of
//! that query share. A read asks for the comments of one range of the author's numbers
//! (`shared::numbers`), as their keys; each layout writes its part in its own folder
//! (`authored.rs`), one equality of its own index on the keys, and gives the comments it holds
//! as items of one shape; the router composes the parts into one aggregation
//! (`router/history.rs`).
//!
//! Every part but the first starts from one seed document whose [`KEYS`] field holds the keys,
//! and joins its collection by an equality `$lookup` on them: the one join the development
//! database reads through an index (it reads every document of the other collection for
//! `$unionWith` or a `$lookup` with a pipeline). A `localField` that is an array matches each
//! of its elements, so a part reads the documents holding those comments and no other.

use mongodb::bson::{doc, Bson, Document};

use crate::domain::Layout;
use crate::store::discussions::Discussions;
use crate::store::shared::numbers;

/// The seed's field that holds the keys read.
pub(crate) const KEYS: &str = "keys";

/// An item's discussion id.
pub(crate) const DISCUSSION: &str = "discussion_id";
/// An item's key (its number among its author's comments, see `shared::numbers`).
pub(crate) const KEY: &str = "k";
/// An item's slug.
pub(crate) const SLUG: &str = "slug";
/// Whether an item is a held comment (its comment is the held document).
pub(crate) const HELD: &str = "held";
/// An item's comment as stored.
pub(crate) const COMMENT: &str = "comment";
/// Whether an item is not its discussion's (the discussion is gone, or it lives in another
/// layout now: the copy a move made or has yet to remove).
pub(crate) const GONE: &str = "gone";
/// An item's discussion, as a metadata read gives it.
pub(crate) const META: &str = "d";

/// What an author's history asks each layout: the comments of one range of numbers.
pub(crate) struct ByAuthor {
    keys: Vec<String>,
}

impl ByAuthor {
    /// The comments of `author` numbered from `from` up to `to`, `to` left out.
    pub(crate) fn numbered(author: &str, from: u64, to: u64) -> Self {
        Self {
            keys: (from..to).map(|n| numbers::key(n, author)).collect(),
        }
    }

    /// The keys, as a literal array.
    pub(crate) fn keys(&self) -> Bson {
        let keys: Vec<Bson> = self.keys.iter().map(|k| Bson::String(k.clone())).collect();
        Bson::Array(keys)
    }

    /// The condition that the key expression `key` is one of the keys read.
    pub(crate) fn wanted(&self, key: &str) -> Document {
        doc! { "$in": [key, { "$literal": self.keys() }] }
    }

    /// The stage projecting to an item: each argument is the expression of that field.
    pub(crate) fn item(discussion: &str, key: &str, slug: &str, comment: &str) -> Document {
        doc! { "$project": {
            "_id": 0,
            DISCUSSION: discussion,
            KEY: key,
            SLUG: slug,
            COMMENT: comment,
        } }
    }
}

/// The stages that join, to the seed, every document of `collection` whose `field` holds one
/// of the keys, one document each (its fields under `into`).
pub(crate) fn join(collection: &str, field: &str, into: &str) -> [Document; 2] {
    [
        doc! { "$lookup": {
            "from": collection, "localField": KEYS, "foreignField": field, "as": into,
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
/// items were read from; `None` for held comments, which any discussion may have) and add the
/// discussion's metadata as [`META`]. One point read per item.
pub(crate) fn with_discussion(layout: Option<Layout>, metadata: &Document) -> Vec<Document> {
    let found = format!("${META}");
    let gone = match layout {
        Some(layout) => doc! { "$ne": [format!("{found}.layout"), layout.as_str()] },
        None => doc! { "$eq": [{ "$ifNull": [format!("{found}._id"), Bson::Null] }, Bson::Null] },
    };
    vec![
        doc! { "$lookup": {
            "from": Discussions::COLLECTION, "localField": DISCUSSION, "foreignField": "_id",
            "as": META,
        } },
        doc! { "$unwind": { "path": &found, "preserveNullAndEmptyArrays": true } },
        doc! { "$set": { GONE: gone, META: metadata_of(&found, metadata) } },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_of_numbers_is_read_as_its_keys_and_nothing_else() {
        let of = ByAuthor::numbered("u:a", 7, 10);
        assert_eq!(
            of.keys(),
            Bson::Array(vec!["7:u:a".into(), "8:u:a".into(), "9:u:a".into()])
        );
        assert_eq!(ByAuthor::numbered("u:a", 3, 3).keys(), Bson::Array(vec![]));
        let wanted = of.wanted("$$e.k");
        let args = wanted.get_array("$in").expect("in");
        assert_eq!(args[0], Bson::String("$$e.k".into()));
        // The keys are a literal: an author id that looks like a field path stays text.
        let literal = ByAuthor::numbered("$x", 1, 2);
        let wanted = literal.wanted("$k");
        let keys = wanted.get_array("$in").expect("in")[1]
            .as_document()
            .expect("literal")
            .get_array("$literal")
            .expect("keys")
            .clone();
        assert_eq!(keys, vec![Bson::String("1:$x".into())]);
    }
}
