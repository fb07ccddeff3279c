//! One author's comments across the layouts (see `HistoryStore`): what the layouts' parts of
//! that query share. A read asks for the comments of some of the author's numbers
//! (`shared::numbers`), as their keys, in one seed document made from the author's `people`
//! document, which holds their counter (a first page asks for the newest numbers below it).
//! Each layout writes its part in its own folder (`authored.rs`): from the seed, one equality
//! of its own index per key, giving the comments it holds as items of one shape; the router
//! composes the parts into one aggregation (`router/history.rs`).
//!
//! Every part joins its collection to the seed by an equality `$lookup` on the [`KEYS`]: the
//! one join the development database reads through an index (it reads every document of the
//! other collection for `$unionWith` or a `$lookup` with a pipeline). A `localField` that is an
//! array matches each of its elements, so a part reads the documents holding those comments
//! and no other.

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

/// Which of an author's numbers a read asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Numbers {
    /// From `from` up to `to`, `to` left out.
    Range {
        /// The lowest.
        from: u64,
        /// Past the highest.
        to: u64,
    },
    /// The newest this many, below the author's counter (read in the same command).
    Newest(u64),
}

/// What an author's history asks each layout: the comments of some of the author's numbers.
pub(crate) struct ByAuthor;

impl ByAuthor {
    /// The stages that start the read, on `people`: the author's document (one point read),
    /// projected to one seed document holding their counter as `top` and the [`KEYS`] asked
    /// for. No document when the author never had a number.
    pub(crate) fn seed(author: &str, numbers: Numbers) -> Vec<Document> {
        let keys: Bson = match numbers {
            Numbers::Range { from, to } => {
                let keys: Vec<Bson> = (from..to)
                    .map(|n| Bson::String(numbers::key(n, author)))
                    .collect();
                doc! { "$literal": keys }.into()
            }
            Numbers::Newest(width) => {
                let to = doc! { "$add": ["$top", 1_i64] };
                let width = i64::try_from(width).unwrap_or(i64::MAX);
                let from = doc! { "$max": [1_i64, { "$subtract": [to.clone(), width] }] };
                doc! { "$map": {
                    "input": { "$range": [from, to] },
                    "as": "n",
                    "in": { "$concat": [{ "$toString": "$$n" }, ":", { "$literal": author }] },
                } }
                .into()
            }
        };
        vec![
            doc! { "$match": { "_id": author } },
            doc! { "$project": { "_id": 0, "top": { "$ifNull": [format!("${}", numbers::COUNTER), 0_i64] } } },
            doc! { "$set": { KEYS: keys } },
        ]
    }

    /// The condition that the key expression `key` is one of the seed's keys.
    pub(crate) fn wanted(key: &str) -> Document {
        doc! { "$in": [key, format!("${KEYS}")] }
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
    fn a_range_of_numbers_is_read_as_its_keys_and_the_newest_from_the_counter() {
        let seed = ByAuthor::seed("u:a", Numbers::Range { from: 7, to: 10 });
        assert_eq!(seed[0], doc! { "$match": { "_id": "u:a" } });
        let keys = seed[2]
            .get_document("$set")
            .and_then(|s| s.get_document(KEYS))
            .and_then(|k| k.get_array("$literal"))
            .expect("literal keys");
        assert_eq!(
            keys,
            &vec![
                Bson::from("7:u:a"),
                Bson::from("8:u:a"),
                Bson::from("9:u:a")
            ]
        );
        // The newest are counted from the counter, in the same command; the author's id is a
        // literal, whatever it looks like.
        let newest = ByAuthor::seed("$x", Numbers::Newest(20));
        let map = newest[2]
            .get_document("$set")
            .and_then(|s| s.get_document(KEYS))
            .and_then(|k| k.get_document("$map"))
            .expect("keys made from the counter");
        assert!(map
            .get_document("input")
            .is_ok_and(|i| i.contains_key("$range")));
        assert_eq!(
            ByAuthor::wanted("$$c.k"),
            doc! { "$in": ["$$c.k", "$keys"] }
        );
    }
}
