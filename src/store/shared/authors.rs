//! Rewriting stored author ids in place, whatever the document's shape: every `author`,
//! `edited_by` and `editor` sub-document (at any depth: a comment, an embedded discussion's
//! nested `replies`, a bucketed page's `comments`, a revision) whose `id` an id map changes.

use futures::TryStreamExt;
use mongodb::bson::{doc, Document};

use super::bson::visit_documents;
use super::error::{is_duplicate_key, StoreResult};
use super::metrics::Counted;
use super::numbers;
use crate::domain::GuestIds;

/// The sub-documents whose `id` is a person's id.
const PEOPLE_FIELDS: [&str; 3] = ["author", "edited_by", "editor"];

/// Fields one update sets at most (a larger rewrite of one document takes several updates).
const FIELDS_PER_UPDATE: usize = 500;

/// What a rewrite changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rewritten {
    /// Documents changed.
    pub documents: u64,
    /// Ids changed.
    pub ids: u64,
    /// Documents that changed under the rewrite (another write came between its read and its
    /// update), left for the next pass.
    pub missed: u64,
}

impl std::ops::AddAssign for Rewritten {
    fn add_assign(&mut self, other: Self) {
        self.documents += other.documents;
        self.ids += other.ids;
        self.missed += other.missed;
    }
}

/// One id to change: its dotted path in the document, its value and its new value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IdChange {
    pub path: String,
    pub old: String,
    pub new: String,
}

/// Every person's id in `doc` that `map` changes, with its path.
pub(crate) fn id_changes(
    doc: &Document,
    map: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Vec<IdChange> {
    let mut changes = Vec::new();
    visit_documents(doc, &mut |path, person| {
        let field = path.rsplit('.').next().unwrap_or(path);
        if path.is_empty() || !PEOPLE_FIELDS.contains(&field) {
            return;
        }
        let Ok(id) = person.get_str("id") else {
            return;
        };
        let Some(new) = map(id) else {
            return;
        };
        // A comment's key among its author's names the author (`numbers`).
        if let Ok(key) = person.get_str(numbers::KEY) {
            if let Some(n) = numbers::number_of(key) {
                changes.push(IdChange {
                    path: format!("{path}.{}", numbers::KEY),
                    old: key.to_owned(),
                    new: numbers::key(n, &new),
                });
            }
        }
        changes.push(IdChange {
            path: format!("{path}.id"),
            old: id.to_owned(),
            new,
        });
    });
    changes
}

/// Rewrites the ids `map` changes in every document of `coll` that `filter` selects, read as
/// a stream (one batch at a time). Each document is updated by `_id`, on condition that every
/// id it changes still has the value read: positions in arrays never shift (nothing is removed
/// from them) and no write changes an author, so a concurrent post or edit is kept, and a
/// document changed meanwhile is counted as missed rather than overwritten.
pub(crate) async fn rewrite_ids(
    coll: &Counted<Document>,
    filter: Document,
    map: &(dyn Fn(&str) -> Option<String> + Sync),
) -> StoreResult<Rewritten> {
    let mut done = Rewritten::default();
    let mut cursor = coll.find(filter).await?;
    while let Some(document) = cursor.try_next().await? {
        let changes = id_changes(&document, map);
        if changes.is_empty() {
            continue;
        }
        let Some(id) = document.get("_id").cloned() else {
            continue;
        };
        let mut whole = true;
        for chunk in changes.chunks(FIELDS_PER_UPDATE) {
            let mut guard = doc! { "_id": id.clone() };
            let mut set = Document::new();
            for change in chunk {
                guard.insert(change.path.clone(), change.old.as_str());
                set.insert(change.path.clone(), change.new.as_str());
            }
            let result = coll.update_one(guard, doc! { "$set": set }).await?;
            if result.modified_count == 1 {
                done.ids += chunk.len() as u64;
            } else {
                whole = false;
            }
        }
        match whole {
            true => done.documents += 1,
            false => done.missed += 1,
        }
    }
    Ok(done)
}

/// Renames the documents of `coll` whose `_id` is an id `ids` keys (a ban, a trusted person):
/// each is copied under its new `_id` (a copy an interrupted run left is kept) and removed
/// under its old one. Read in the `_id` range of each source's prefix.
pub(crate) async fn rename_ids(coll: &Counted<Document>, ids: &GuestIds) -> StoreResult<Rewritten> {
    let mut done = Rewritten::default();
    for prefix in GuestIds::prefixes() {
        // The prefix's range: from it up to the same text with its last character (`:`) raised.
        let end = format!("{};", prefix.trim_end_matches(':'));
        let found: Vec<Document> = coll
            .find(doc! { "_id": { "$gte": &prefix, "$lt": end } })
            .await?
            .try_collect()
            .await?;
        for mut document in found {
            let Some(new) = document.get_str("_id").ok().and_then(|id| ids.keyed(id)) else {
                continue;
            };
            let Some(old) = document.insert("_id", new.as_str()) else {
                continue;
            };
            match coll.insert_one(document).await {
                Err(err) if !is_duplicate_key(&err) => return Err(err.into()),
                _ => {}
            }
            coll.delete_many(doc! { "_id": old }).await?;
            done.documents += 1;
            done.ids += 1;
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upper(id: &str) -> Option<String> {
        id.starts_with("g:").then(|| id.to_uppercase())
    }

    #[test]
    fn ids_are_found_at_every_depth_with_their_paths() {
        let document = doc! {
            "_id": "d1",
            "author": { "id": "operator", "name": "Op" },
            "replies": [
                { "author": { "id": "g:ann", "name": "Ann" }, "replies": [
                    { "author": { "id": "u:bob", "name": "Bob" },
                      "edited_by": { "id": "g:eve", "name": "Eve" },
                      "revisions": [ { "text": "t", "editor": { "id": "g:eve", "name": "Eve" } } ],
                      "replies": [] },
                ] },
            ],
            "comments": [ { "author": { "id": "g:cy", "name": "Cy", "k": "4:g:cy" }, "text": "author" } ],
            "by": { "id": "g:mod", "name": "Not a person field" },
        };
        let changes: Vec<(String, String)> = id_changes(&document, &upper)
            .into_iter()
            .map(|c| (c.path, c.new))
            .collect();
        assert_eq!(
            changes,
            [
                ("replies.0.author.id".to_owned(), "G:ANN".to_owned()),
                (
                    "replies.0.replies.0.edited_by.id".to_owned(),
                    "G:EVE".to_owned()
                ),
                (
                    "replies.0.replies.0.revisions.0.editor.id".to_owned(),
                    "G:EVE".to_owned()
                ),
                ("comments.0.author.k".to_owned(), "4:G:CY".to_owned()),
                ("comments.0.author.id".to_owned(), "G:CY".to_owned()),
            ]
        );
    }
}
