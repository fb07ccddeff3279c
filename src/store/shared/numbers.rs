//! Each author's comments are numbered 1, 2, 3… in the order they are stored, across the
//! layouts and the held comments, so that a page of an author's history is a range of numbers
//! whose width is known (see `router/history.rs`).
//!
//! - The counter is the author's document in `people`: [`COUNTER`] is the last number drawn.
//!   A post draws its number just before its write (one more command per post); an import
//!   draws one block per author.
//! - A comment keeps its number in its author sub-document as a key, [`KEY`]: `"<n>:<id>"`.
//!   The key names the author, so one equality of one index per collection finds a comment
//!   of that author by number, on any database (a `$lookup` whose `localField` is the page's
//!   keys). Moves copy it with the comment; a rewrite of author ids rewrites it
//!   (`shared::authors`).
//! - A number drawn for a write that then fails is never used: a gap. [`GAPS`] counts the gaps
//!   that were seen (a process killed between drawing and writing leaves one uncounted), so
//!   that the counter less the gaps is the number of comments stored.

use std::collections::HashMap;

use mongodb::bson::{doc, Document};
use mongodb::options::ReturnDocument;

use super::bson::as_i64;
use super::error::StoreResult;
use super::metrics::Counted;
use super::name_keys::{signed_in, NAME_KEYS};
use crate::domain::{name_key, Author, Comment};

/// The author sub-document's field that holds the comment's key.
pub(crate) const KEY: &str = "k";
/// The `people` field that holds the last number drawn.
pub(crate) const COUNTER: &str = "numbered";
/// The `people` field that counts the numbers drawn for writes that failed.
pub(crate) const GAPS: &str = "number_gaps";

/// The key of `author`'s comment number `n`.
pub(crate) fn key(n: u64, author: &str) -> String {
    format!("{n}:{author}")
}

/// The number of a key (`None` when it is not one).
pub(crate) fn number_of(key: &str) -> Option<u64> {
    key.split_once(':')
        .and_then(|(n, _)| n.parse().ok())
        .filter(|n| *n > 0)
}

/// A comment's author sub-document as stored: id, name and, when numbered, the key.
pub(crate) fn author_doc(author: &Author, number: Option<u64>) -> Document {
    let mut stored = doc! { "id": &author.id, "name": &author.name };
    if let Some(n) = number {
        stored.insert(KEY, key(n, &author.id));
    }
    stored
}

/// Draws `count` numbers for `author` from the counter in `people`; returns the first.
pub(crate) async fn draw(people: &Counted<Document>, author: &str, count: u64) -> StoreResult<u64> {
    drawn(people, author, count, doc! {}).await
}

/// Draws `count` numbers for `author`, making `also` (more `$` operators) in the same write.
async fn drawn(
    people: &Counted<Document>,
    author: &str,
    count: u64,
    also: Document,
) -> StoreResult<u64> {
    let by = i64::try_from(count).unwrap_or(i64::MAX);
    let mut update = doc! { "$inc": { COUNTER: by } };
    update.extend(also);
    let after = people
        .find_one_and_update(doc! { "_id": author }, update)
        .upsert(true)
        .return_document(ReturnDocument::After)
        .projection(doc! { COUNTER: 1 })
        .await?;
    let last = after
        .as_ref()
        .and_then(|d| d.get(COUNTER))
        .and_then(as_i64)
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(count);
    Ok(last.saturating_sub(count).saturating_add(1))
}

/// Counts `count` numbers of `author` as gaps (their writes failed). Best effort: a failure to
/// count is logged, and only the count of comments is off by it.
pub(crate) async fn gap(people: &Counted<Document>, author: &str, count: u64) {
    let by = i64::try_from(count).unwrap_or(i64::MAX);
    let counted = people
        .update_one(doc! { "_id": author }, doc! { "$inc": { GAPS: by } })
        .await;
    if let Err(err) = counted {
        tracing::warn!(%err, author, "a gap in an author's numbers was not counted");
    }
}

/// Gives `number` one drawn for `author` when it has none (a held comment being published
/// keeps its own); whether it was drawn. The same write records the name a signed-in author
/// posts under (not a guest's: guests may not take signed-in users' names).
pub(crate) async fn ensure(
    people: &Counted<Document>,
    number: &mut Option<u64>,
    author: &Author,
) -> StoreResult<bool> {
    if number.is_some() {
        return Ok(false);
    }
    let also = match signed_in(&author.id) {
        true => doc! { "$addToSet": { NAME_KEYS: name_key(&author.name) } },
        false => doc! {},
    };
    *number = Some(drawn(people, &author.id, 1, also).await?);
    Ok(true)
}

/// Passes on the result of a write a number was drawn for (`drawn`), counting the number as
/// a gap when the write failed.
pub(crate) async fn settle<T>(
    people: &Counted<Document>,
    result: StoreResult<T>,
    drawn: bool,
    author: &str,
) -> StoreResult<T> {
    if result.is_err() && drawn {
        gap(people, author, 1).await;
    }
    result
}

/// The last number drawn for the author and the gaps counted, from their `people` document.
pub(crate) fn counter_of(person: Option<&Document>) -> (u64, u64) {
    let field = |name: &str| {
        person
            .and_then(|d| d.get(name))
            .and_then(as_i64)
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or(0)
    };
    (field(COUNTER), field(GAPS))
}

/// Numbers the comments that have no number yet: one block per author, in the order given
/// (an import's order, which is posting order within a discussion).
pub(crate) async fn number_all(
    people: &Counted<Document>,
    comments: &mut [Comment],
) -> StoreResult<()> {
    let mut wanted: HashMap<String, u64> = HashMap::new();
    for comment in comments.iter().filter(|c| c.number.is_none()) {
        *wanted.entry(comment.author.id.clone()).or_default() += 1;
    }
    let mut next = HashMap::with_capacity(wanted.len());
    for (author, count) in wanted {
        let first = draw(people, &author, count).await?;
        next.insert(author, first);
    }
    for comment in comments.iter_mut().filter(|c| c.number.is_none()) {
        if let Some(n) = next.get_mut(&comment.author.id) {
            comment.number = Some(*n);
            *n += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_gives_back_its_number_whatever_the_id() {
        assert_eq!(key(42, "u:a:b"), "42:u:a:b");
        assert_eq!(number_of(&key(42, "u:a:b")), Some(42));
        assert_eq!(number_of("x:ann"), None);
        assert_eq!(number_of("0:ann"), None);
        assert_eq!(number_of("17"), None);
        let author = Author {
            id: "ann".into(),
            name: "Ann".into(),
        };
        assert_eq!(author_doc(&author, Some(3)).get_str(KEY), Ok("3:ann"));
        assert!(!author_doc(&author, None).contains_key(KEY));
    }

    #[test]
    fn counters_read_zero_when_absent() {
        assert_eq!(counter_of(None), (0, 0));
        assert_eq!(
            counter_of(Some(&doc! { COUNTER: 9_i64, GAPS: 2_i32 })),
            (9, 2)
        );
    }
}
