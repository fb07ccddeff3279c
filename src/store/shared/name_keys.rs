//! Recording the names signed-in users posted under before names were recorded with each
//! post's number (`numbers::ensure`), once, at start: every comment of a collection, at any
//! depth of its documents, adds its author's name key to their `people` document (a guest may
//! not take one). Guests' names are left out: this server's guests, imported guests and the
//! operator of an import.

use std::collections::{BTreeSet, HashMap};

use futures::TryStreamExt;
use mongodb::bson::{doc, Document};

use super::bson::visit_documents;
use super::error::StoreResult;
use super::metrics::Counted;
use crate::domain::guest_posts::is_guest;
use crate::domain::{name_key, GuestIds};

/// The `people` field that holds the keys (`domain::name_key`) of the names a signed-in user
/// posted under: a guest may not take one (see `store::guests`).
pub(crate) const NAME_KEYS: &str = "name_keys";

/// The comment the scan's `find` carries: a scatter-gather across every discussion, by design,
/// once per database.
pub(crate) const SCAN: &str = "threadql: the names of signed-in authors, once";

/// Authors gathered before their names are written.
const AUTHORS_PER_FLUSH: usize = 1_000;

/// Whether `id` is a signed-in user's (not a guest's, an imported guest's or an operator's).
pub(crate) fn signed_in(id: &str) -> bool {
    !is_guest(id)
        && !id.starts_with("operator:")
        && !GuestIds::prefixes().any(|p| id.starts_with(&p))
}

/// Records the name keys of the signed-in authors of every comment of `coll`; returns how many
/// authors had names recorded.
pub(crate) async fn record_names(
    coll: &Counted<Document>,
    people: &Counted<Document>,
) -> StoreResult<u64> {
    let mut names: HashMap<String, BTreeSet<String>> = HashMap::new();
    let mut written = 0;
    let mut cursor = coll.find(doc! {}).comment(SCAN).await?;
    while let Some(document) = cursor.try_next().await? {
        visit_documents(&document, &mut |_, node| {
            let Ok(author) = node.get_document("author") else {
                return;
            };
            if let (Ok(id), Ok(name)) = (author.get_str("id"), author.get_str("name")) {
                if signed_in(id) {
                    names
                        .entry(id.to_owned())
                        .or_default()
                        .insert(name_key(name));
                }
            }
        });
        if names.len() >= AUTHORS_PER_FLUSH {
            written += flush(people, &mut names).await?;
        }
    }
    written += flush(people, &mut names).await?;
    Ok(written)
}

/// Writes the gathered names, one update per author.
async fn flush(
    people: &Counted<Document>,
    names: &mut HashMap<String, BTreeSet<String>>,
) -> StoreResult<u64> {
    let mut written = 0;
    for (id, keys) in names.drain() {
        let keys: Vec<String> = keys.into_iter().collect();
        people
            .update_one(
                doc! { "_id": id },
                doc! { "$addToSet": { NAME_KEYS: { "$each": keys } } },
            )
            .upsert(true)
            .await?;
        written += 1;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_signed_in_users_names_are_kept() {
        assert!(signed_in("ada"));
        assert!(signed_in("auth0|123"));
        assert!(!signed_in("guest:0123456789abcdef"));
        assert!(!signed_in("disqus-guest:0123456789abcdef01234567"));
        assert!(!signed_in("operator:import"));
    }
}
