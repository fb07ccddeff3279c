//! Numbering the comments stored before comments were numbered (`shared::numbers`), once, at
//! start, whatever the document's shape: a comment is any sub-document (at any depth, the
//! document itself included) with an `author` sub-document and a slug (`slug`, or `s` for an
//! embedded discussion's entry of its flat array of authors). Within a document, every
//! sub-document with the same slug is the same comment (an embedded comment and its entry), so
//! all of them get the same key; one that has a key already gives it to the others.
//!
//! Each document is numbered by one update per [`FIELDS_PER_UPDATE`] keys, on condition that
//! each of those comments still has its author, its slug and no key (array positions shift
//! only where an embedded discussion's flat array is sorted on a push, and then the condition
//! fails): a document changed meanwhile is counted as missed, its numbers as gaps, and left for
//! the next pass. The order is the documents' (by `_id`) and, within one, posting order: the
//! comments of an author in different documents are numbered in the order the documents are
//! read, not by time.

use std::collections::{BTreeMap, HashMap, HashSet};

use futures::TryStreamExt;
use mongodb::bson::{doc, Document};

use super::bson::{as_i64, visit_documents};
use super::error::StoreResult;
use super::metrics::Counted;
use super::numbers::{self, KEY};

/// Keys one update sets at most.
const FIELDS_PER_UPDATE: usize = 400;

/// What a numbering did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Numbered {
    /// Comments given a number.
    pub comments: u64,
    /// Documents that changed while they were numbered, left for the next pass.
    pub missed: u64,
}

impl std::ops::AddAssign for Numbered {
    fn add_assign(&mut self, other: Self) {
        self.comments += other.comments;
        self.missed += other.missed;
    }
}

/// Where a comment is in a document.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    /// The dotted path of the sub-document (empty for the document itself).
    path: String,
    /// The name of its slug's field (`slug` or `s`).
    slug_field: &'static str,
}

/// A comment found in a document: its places, its author, when it was posted, and its key when
/// one of its places has one.
#[derive(Debug, Default)]
struct Found {
    author: String,
    posted: i64,
    key: Option<String>,
    /// Places without a key.
    unkeyed: Vec<Place>,
}

/// The comments of `document` that have a place without a key, by slug.
fn unkeyed_in(document: &Document) -> BTreeMap<String, Found> {
    let mut found: BTreeMap<String, Found> = BTreeMap::new();
    visit_documents(document, &mut |path, node| note(node, path, &mut found));
    found.retain(|_, f| !f.unkeyed.is_empty());
    found
}

/// Notes the comment `node` is, if it is one.
fn note(node: &Document, path: &str, found: &mut BTreeMap<String, Found>) {
    let slug = ["slug", "s"]
        .into_iter()
        .find_map(|field| node.get_str(field).ok().map(|s| (field, s)));
    let (Some((slug_field, slug)), Ok(author)) = (slug, node.get_document("author")) else {
        return;
    };
    let Ok(id) = author.get_str("id") else {
        return;
    };
    let entry = found.entry(slug.to_owned()).or_default();
    entry.author = id.to_owned();
    if let Some(posted) = ["posted", "p", "submitted"]
        .into_iter()
        .find_map(|f| node.get(f).and_then(as_i64))
    {
        entry.posted = posted;
    }
    match author.get_str(KEY) {
        Ok(key) => entry.key = Some(key.to_owned()),
        Err(_) => entry.unkeyed.push(Place {
            path: path.to_owned(),
            slug_field,
        }),
    }
}

/// The path of a field of the sub-document at `path`.
fn at(path: &str, field: &str) -> String {
    match path.is_empty() {
        true => field.to_owned(),
        false => format!("{path}.{field}"),
    }
}

/// The bytes a key field adds to a document: type, name (`k` and its NUL), length, text, NUL.
fn key_bytes(key: &str) -> i64 {
    i64::try_from(key.len())
        .unwrap_or(i64::MAX)
        .saturating_add(8)
}

/// Numbers the comments without a key in every document of `coll` that `filter` selects, read
/// as a stream. `bytes`: the field that counts the bytes of the document's comments, where
/// there is one (the embedded layout's), raised by what the keys add.
pub(crate) async fn number_stored(
    coll: &Counted<Document>,
    people: &Counted<Document>,
    filter: Document,
    bytes: Option<&str>,
) -> StoreResult<Numbered> {
    let mut done = Numbered::default();
    let mut cursor = coll.find(filter).await?;
    while let Some(document) = cursor.try_next().await? {
        let found = unkeyed_in(&document);
        let Some(id) = document.get("_id").cloned().filter(|_| !found.is_empty()) else {
            continue;
        };
        // The keys to write: kept where a place has one, drawn per author in posting order.
        let mut drawing: HashMap<&str, Vec<(i64, &str)>> = HashMap::new();
        for (slug, f) in found.iter().filter(|(_, f)| f.key.is_none()) {
            drawing
                .entry(f.author.as_str())
                .or_default()
                .push((f.posted, slug));
        }
        let mut keys: HashMap<&str, String> = HashMap::new();
        let mut drawn: Vec<(&str, u64)> = Vec::new();
        for (author, mut slugs) in drawing {
            slugs.sort_unstable();
            let count = slugs.len() as u64;
            let first = numbers::draw(people, author, count).await?;
            drawn.push((author, count));
            for (n, (_, slug)) in (first..).zip(slugs) {
                keys.insert(slug, numbers::key(n, author));
            }
        }
        // Updates of whole comments (every place of one comment in the same update), of about
        // `FIELDS_PER_UPDATE` places each.
        let mut chunks: Vec<Vec<(&Place, &str, &Found, String)>> = Vec::new();
        for (slug, f) in &found {
            let key = f
                .key
                .clone()
                .or_else(|| keys.get(slug.as_str()).cloned())
                .unwrap_or_default();
            if chunks.last().is_none_or(|c| c.len() >= FIELDS_PER_UPDATE) {
                chunks.push(Vec::new());
            }
            if let Some(chunk) = chunks.last_mut() {
                for place in &f.unkeyed {
                    chunk.push((place, slug, f, key.clone()));
                }
            }
        }
        let mut whole = true;
        for chunk in &chunks {
            let mut guard = doc! { "_id": id.clone() };
            let mut set = Document::new();
            let mut grown = 0_i64;
            for (place, slug, f, key) in chunk {
                let author = at(&place.path, "author");
                guard.insert(format!("{author}.id"), f.author.as_str());
                guard.insert(format!("{author}.{KEY}"), doc! { "$exists": false });
                guard.insert(at(&place.path, place.slug_field), *slug);
                set.insert(format!("{author}.{KEY}"), key.as_str());
                grown = grown.saturating_add(key_bytes(key));
            }
            let mut update = doc! { "$set": set };
            if let Some(field) = bytes {
                update.insert("$inc", doc! { field: grown });
            }
            let result = coll.update_one(guard, update).await?;
            match result.modified_count == 1 {
                true => {
                    let comments: HashSet<&str> = chunk.iter().map(|(_, slug, ..)| *slug).collect();
                    done.comments += comments.len() as u64;
                }
                false => whole = false,
            }
        }
        if !whole {
            done.missed += 1;
            for (author, count) in drawn {
                numbers::gap(people, author, count).await;
            }
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_are_found_at_every_depth_with_their_entries() {
        let document = doc! {
            "_id": "d1",
            "replies": [
                { "slug": "a", "posted": 2_i64, "author": { "id": "ann", "name": "Ann" }, "replies": [
                    { "slug": "a/b", "posted": 3_i64, "author": { "id": "bob", "name": "Bob", "k": "7:bob" },
                      "revisions": [ { "text": "t", "editor": { "id": "eve" } } ], "replies": [] },
                ] },
            ],
            "authored": [
                { "author": { "id": "ann" }, "p": 2_i64, "s": "a", "at": [] },
                { "author": { "id": "bob" }, "p": 3_i64, "s": "a/b", "at": [0] },
            ],
        };
        let found = unkeyed_in(&document);
        let a = &found["a"];
        assert_eq!(
            (a.author.as_str(), a.posted, a.key.as_deref()),
            ("ann", 2, None)
        );
        assert_eq!(
            a.unkeyed,
            [
                Place {
                    path: "replies.0".into(),
                    slug_field: "slug"
                },
                Place {
                    path: "authored.0".into(),
                    slug_field: "s"
                },
            ]
        );
        // Bob's comment has its key: only its entry is to be written, with that key.
        let b = &found["a/b"];
        assert_eq!(b.key.as_deref(), Some("7:bob"));
        assert_eq!(
            b.unkeyed,
            [Place {
                path: "authored.1".into(),
                slug_field: "s"
            }]
        );
        // A per-comment document is a comment itself.
        let own =
            doc! { "_id": 1, "slug": "x", "posted": 1_i64, "author": { "id": "cy", "name": "Cy" } };
        assert_eq!(unkeyed_in(&own)["x"].unkeyed[0].path, "");
        assert_eq!(at("", "author"), "author");
        assert_eq!(key_bytes("1:cy"), 12);
    }
}
