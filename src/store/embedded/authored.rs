//! The embedded layout's part of an author's history. Replies nest recursively, so no index
//! reaches a reply's author: each discussion document also keeps a flat array, `authored`, one
//! entry per comment, `{author: {id, k}, p: posted, s: slug, at: positions}`, sorted by
//! `(p, s)`; `k` is the comment's key among its author's (`shared::numbers`), as the comment's
//! own author sub-document has it.
//! `at` is the comment's position in each `replies` array below its top-level comment (empty
//! for a top-level comment, which is found by its slug's first part). Entries are pushed by the
//! update that pushes their comments (`write.rs`), written whole by a move into the layout
//! (`moving.rs`), and written once for documents stored before the array (`backfill_authored`);
//! they count in the size cap as comments do.

use mongodb::bson::{doc, Bson, Document, RawArray, RawBsonRef, RawDocument, RawDocumentBuf};

use super::{Embedded, BYTES, ELEMENT_OVERHEAD, REPLIES};
use crate::domain::paging::Cursor;
use crate::domain::{Comment, Layout, Window};
use crate::store::api::DiscussionStore;
use crate::store::discussions::{Discussions, FENCE};
use crate::store::shared::authored::{
    join, metadata_of, ByAuthor, COMMENT, DISCUSSION, GONE, KEY, META, SLUG,
};
use crate::store::shared::bson::{as_i64, corrupt};
use crate::store::shared::connect::index_model;
use crate::store::shared::error::StoreResult;
use crate::store::shared::metrics::Counted;
use crate::store::shared::numbers;

/// The field of the discussion document that holds the flat array.
pub(super) const AUTHORED: &str = "authored";

/// The entries' keys among their authors' comments (multikey, see `shared::numbers`): an
/// entry names its author as a comment does, so the rewriting of stored author ids
/// (`shared::authors`) finds it too.
const KEYS: &str = "authored.author.k";

/// The index an earlier version kept for an author's history (dropped at start).
const RETIRED_INDEX: &str = "authored";

/// Discussions listed per command by the one-time indexing.
const LIST_PAGE: usize = 100;

/// How the array is kept sorted (every push sorts it).
pub(super) fn sorted() -> Document {
    doc! { "p": 1, "s": 1 }
}

/// The entry of a comment at positions `at` below its top-level comment.
pub(super) fn entry(comment: &Comment, at: &[usize]) -> Document {
    entry_of(
        &comment.author.id,
        comment.number,
        comment.posted.0,
        comment.slug.as_str(),
        at,
    )
}

fn entry_of(author: &str, number: Option<u64>, posted: i64, slug: &str, at: &[usize]) -> Document {
    let at: Vec<Bson> = at
        .iter()
        .map(|i| Bson::Int32(i32::try_from(*i).unwrap_or(i32::MAX)))
        .collect();
    let mut who = doc! { "id": author };
    if let Some(n) = number {
        who.insert(numbers::KEY, numbers::key(n, author));
    }
    doc! { "author": who, "p": posted, "s": slug, "at": at }
}

/// The bytes a comment's entry adds to the counted size: its BSON and an element's overhead
/// (its positions are 32-bit integers, so its size follows from its depth alone).
pub(super) fn entry_size(comment: &Comment) -> StoreResult<i64> {
    let at = vec![0; comment.slug.depth()];
    bytes_of(&entry(comment, &at))
}

fn bytes_of(entry: &Document) -> StoreResult<i64> {
    let bytes = mongodb::bson::to_vec(entry).map_err(corrupt)?;
    Ok(i64::try_from(bytes.len())
        .unwrap_or(i64::MAX)
        .saturating_add(ELEMENT_OVERHEAD))
}

/// The index of the discussions by the keys of their comments.
fn index() -> mongodb::IndexModel {
    index_model("author_number", doc! { KEYS: 1 }, false)
}

/// An expression of the first part of a slug (its top-level comment's slug).
fn head(slug: &str) -> Document {
    doc! { "$arrayElemAt": [{ "$split": [slug, "/"] }, 0] }
}

/// An expression of the comment element `element` without its nested replies.
fn without_replies(element: Document) -> Document {
    doc! { "$arrayToObject": { "$filter": {
        "input": { "$objectToArray": element },
        "as": "f",
        "cond": { "$ne": ["$$f.k", REPLIES] },
    } } }
}

/// What an author's change (a person's erasure) writes to the comment's entry in the flat
/// array: the guard that the entry is still the comment's, the fields set, and the bytes the
/// entry grows by.
pub(super) struct AuthorChange {
    pub guard: Document,
    pub set: Document,
    pub growth: i64,
}

impl Embedded {
    /// Creates the index of the flat array (idempotent).
    pub(crate) async fn ensure_indexes(&self) -> StoreResult<()> {
        self.coll.create_index(index()).await?;
        self.coll.retire_index(RETIRED_INDEX).await;
        Ok(())
    }

    /// The stages that give, from the seed, the comments of the keys asked for, as items: the
    /// discussion documents holding them (one equality of the `author_number` index per key,
    /// so at most one document per comment), each read whole (that is the layout). Each gives
    /// its entries of those keys and their comments, taken by their positions from the
    /// top-level comments they are under (each top-level comment is picked from the array
    /// once: the development database copies an array each time an expression names it). An
    /// item is gone when the discussion is in another layout now.
    pub(crate) fn authored_branch(metadata: &Document) -> Vec<Document> {
        let mut stages = join(Discussions::COLLECTION, KEYS, "doc").to_vec();
        let theirs = doc! { "$filter": {
            "input": { "$map": { "input": "$doc.authored", "as": "e", "in": {
                DISCUSSION: "$doc._id", KEY: "$$e.author.k", SLUG: "$$e.s", "at": "$$e.at",
            } } },
            "as": "e",
            "cond": ByAuthor::wanted("$$e.k"),
        } };
        stages.push(doc! { "$project": {
            "_id": 0,
            GONE: { "$ne": ["$doc.layout", Layout::Embedded.as_str()] },
            "picks": theirs,
            META: metadata_of("$doc", metadata),
            "replies": "$doc.replies",
        } });
        stages.extend(Self::comments_of_picks());
        stages.push(doc! { "$unwind": "$picks" });
        stages.push(doc! { "$project": {
            GONE: 1,
            META: 1,
            DISCUSSION: format!("$picks.{DISCUSSION}"),
            KEY: format!("$picks.{KEY}"),
            SLUG: format!("$picks.{SLUG}"),
            COMMENT: format!("$picks.{COMMENT}"),
        } });
        stages
    }

    /// The embedded discussions holding comments stored before comments were numbered
    /// (`shared::numbers_backfill`; their entries have no key): the collection, the filter and
    /// the field counting bytes, which the keys raise.
    pub(crate) fn unnumbered(&self) -> (&Counted<Document>, Document, Option<&'static str>) {
        let filter = doc! {
            "layout": Layout::Embedded.as_str(),
            AUTHORED: { "$elemMatch": { "author.k": { "$exists": false } } },
        };
        (&self.coll, filter, Some(BYTES))
    }

    /// The stages that add to each pick its comment, without its replies.
    fn comments_of_picks() -> Vec<Document> {
        let slug = format!("$$e.{SLUG}");
        let top = doc! { "$arrayElemAt": ["$tops", { "$indexOfArray": ["$heads", head(&slug)] }] };
        let comment = doc! { "$reduce": {
            "input": "$$e.at", "initialValue": top,
            "in": { "$arrayElemAt": ["$$value.replies", "$$this"] },
        } };
        vec![
            doc! { "$set": {
                "wanted": { "$map": { "input": "$picks", "as": "e", "in": head(&slug) } },
            } },
            doc! { "$set": { "tops": { "$filter": {
                "input": "$replies", "as": "t", "cond": { "$in": ["$$t.slug", "$wanted"] },
            } } } },
            doc! { "$set": {
                "heads": { "$map": { "input": "$tops", "as": "t", "in": "$$t.slug" } },
            } },
            doc! { "$project": { GONE: 1, META: 1, "picks": { "$map": {
                "input": "$picks", "as": "e", "in": {
                    DISCUSSION: format!("$$e.{DISCUSSION}"), KEY: format!("$$e.{KEY}"),
                    SLUG: format!("$$e.{SLUG}"), COMMENT: without_replies(comment),
                },
            } } } },
        ]
    }

    /// Writes the flat array of every embedded discussion whose array does not hold all its
    /// comments (stored before the array was kept), discussion by discussion from the listing:
    /// each document is read whole by `_id` and gets its array in one update, on condition that
    /// its comments and moves are as read and no move holds it (one that changed meanwhile is
    /// left for the next run, and logged). Returns how many documents were written, and how
    /// many were left.
    pub(crate) async fn backfill_authored(
        &self,
        discussions: &Discussions,
    ) -> StoreResult<(u64, u64)> {
        let raw = self.coll.clone_with_type::<RawDocumentBuf>();
        let (mut written, mut left) = (0, 0);
        let mut cursor = None;
        loop {
            let window = Window::After {
                cursor: cursor.take(),
                limit: LIST_PAGE,
            };
            let page = discussions.list(&window).await?;
            for discussion in page.items.iter().filter(|d| d.layout == Layout::Embedded) {
                let found = raw.find_one(doc! { "_id": discussion.id.as_str() }).await?;
                match self.index_authors(found).await? {
                    Some(true) => written += 1,
                    Some(false) => left += 1,
                    None => {}
                }
            }
            match page.items.last() {
                Some(last) if page.has_next => cursor = Some(Cursor::of_discussion(last)),
                _ => return Ok((written, left)),
            }
        }
    }

    /// Writes the flat array of one discussion document when it does not hold all its
    /// comments: `None` when it did (or the document is gone, or not embedded any more), else
    /// whether it was written (not when the document changed since it was read).
    async fn index_authors(&self, found: Option<RawDocumentBuf>) -> StoreResult<Option<bool>> {
        let Some(document) = found else {
            return Ok(None);
        };
        let number = |field: &str| {
            document
                .get(field)
                .ok()
                .flatten()
                .and_then(|b| as_i64(&Bson::try_from(b).ok()?))
        };
        let mut growth = 0_i64;
        let mut kept = 0_i64;
        if let Some(RawBsonRef::Array(old)) = document.get(AUTHORED).map_err(corrupt)? {
            for item in old {
                if let RawBsonRef::Document(e) = item.map_err(corrupt)? {
                    let e = Document::try_from(e).map_err(corrupt)?;
                    growth = growth.saturating_sub(bytes_of(&e)?);
                    kept += 1;
                }
            }
        }
        let embedded = document.get_str("layout").ok() == Some(Layout::Embedded.as_str());
        if !embedded || kept == number("comment_count").unwrap_or(0) {
            return Ok(None);
        }
        let mut entries = entries_in(&document)?;
        entries.sort_by_key(|e| {
            let slug = e.get_str("s").map(str::to_owned).unwrap_or_default();
            (e.get_i64("p").unwrap_or(0), slug)
        });
        for entry in &entries {
            growth = growth.saturating_add(bytes_of(entry)?);
        }
        let id = document.get_str("_id").map_err(corrupt)?;
        let guard = doc! {
            "_id": id,
            "layout": Layout::Embedded.as_str(),
            "moves": number("moves").map_or(Bson::Null, Bson::Int64),
            "comment_count": number("comment_count").map_or(Bson::Null, Bson::Int64),
            FENCE: { "$exists": false },
        };
        let entries: Vec<Bson> = entries.into_iter().map(Bson::Document).collect();
        let update = doc! { "$set": { AUTHORED: entries }, "$inc": { BYTES: growth } };
        let written = self.coll.update_one(guard, update).await?.matched_count > 0;
        if !written {
            tracing::warn!(
                discussion = id,
                "an embedded discussion changed while its authors were indexed: left for the next run"
            );
        }
        Ok(Some(written))
    }
}

/// The entries of every comment of a discussion document, in document order.
fn entries_in(document: &RawDocument) -> StoreResult<Vec<Document>> {
    fn replies(node: &RawDocument) -> StoreResult<Option<&RawArray>> {
        match node.get(REPLIES).map_err(corrupt)? {
            None | Some(RawBsonRef::Null) => Ok(None),
            Some(RawBsonRef::Array(items)) => Ok(Some(items)),
            Some(_) => Err(corrupt("replies is not an array")),
        }
    }
    fn walk(
        items: Option<&RawArray>,
        at: &mut Vec<usize>,
        top: bool,
        out: &mut Vec<Document>,
    ) -> StoreResult<()> {
        for (index, item) in items.into_iter().flatten().enumerate() {
            let RawBsonRef::Document(c) = item.map_err(corrupt)? else {
                return Err(corrupt("a comment is not a document"));
            };
            if !top {
                at.push(index);
            }
            let author = c.get_document("author").map_err(corrupt)?;
            let posted = c
                .get("posted")
                .map_err(corrupt)?
                .and_then(|p| as_i64(&Bson::try_from(p).ok()?))
                .ok_or_else(|| corrupt("a comment without its time"))?;
            out.push(entry_of(
                author.get_str("id").map_err(corrupt)?,
                author
                    .get_str(numbers::KEY)
                    .ok()
                    .and_then(numbers::number_of),
                posted,
                c.get_str("slug").map_err(corrupt)?,
                at,
            ));
            walk(replies(c)?, at, false, out)?;
            if !top {
                at.pop();
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(replies(document)?, &mut Vec::new(), true, &mut out)?;
    Ok(out)
}

impl Embedded {
    /// What changing the comment's author from `current`'s to `next`'s writes to its entry in
    /// the flat array (`None` when the author and number stay): one read of the array, to find
    /// the entry by the comment's slug. Only an erasure changes an author.
    pub(super) async fn author_change(
        &self,
        id: &crate::domain::DiscussionId,
        current: &Comment,
        next: &Comment,
    ) -> StoreResult<Option<AuthorChange>> {
        if current.author.id == next.author.id && current.number == next.number {
            return Ok(None);
        }
        let found = self
            .coll
            .find_one(doc! { "_id": id.as_str() })
            .projection(doc! { AUTHORED: 1 })
            .await?;
        let entries = found
            .as_ref()
            .and_then(|d| d.get_array(AUTHORED).ok())
            .map(Vec::as_slice)
            .unwrap_or_default();
        let slug = current.slug.as_str();
        let Some(at) = entries
            .iter()
            .position(|e| e.as_document().is_some_and(|e| e.get_str("s") == Ok(slug)))
        else {
            return Err(corrupt(format!(
                "discussion {id} keeps no entry of its comment {slug} among its authors"
            )));
        };
        let mut who = doc! { "id": &next.author.id };
        if let Some(n) = next.number {
            who.insert(numbers::KEY, numbers::key(n, &next.author.id));
        }
        Ok(Some(AuthorChange {
            guard: doc! { format!("{AUTHORED}.{at}.s"): slug },
            set: doc! { format!("{AUTHORED}.{at}.author"): who },
            growth: entry_size(next)? - entry_size(current)?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_hold_positions_below_the_top_level_comment() {
        let element = |slug: &str, posted: i64, replies: Vec<Bson>| {
            Bson::Document(doc! {
                "slug": slug, "posted": posted, "author": { "id": format!("u{posted}") },
                "replies": replies,
            })
        };
        let document = doc! { "_id": "d", REPLIES: [
            element("a", 1, vec![element("a/b", 2, vec![]), element("a/c", 3, vec![element("a/c/d", 4, vec![])])]),
            element("e", 5, vec![]),
        ] };
        let raw = RawDocumentBuf::from_document(&document).expect("raw");
        let entries = entries_in(&raw).expect("entries");
        let got: Vec<(String, Vec<Bson>)> = entries
            .iter()
            .map(|e| {
                (
                    e.get_str("s").expect("s").to_owned(),
                    e.get_array("at").expect("at").clone(),
                )
            })
            .collect();
        let at = |p: &[i32]| p.iter().map(|i| Bson::Int32(*i)).collect::<Vec<_>>();
        assert_eq!(
            got,
            vec![
                ("a".to_owned(), at(&[])),
                ("a/b".to_owned(), at(&[0])),
                ("a/c".to_owned(), at(&[1])),
                ("a/c/d".to_owned(), at(&[1, 0])),
                ("e".to_owned(), at(&[])),
            ]
        );
        let author = entries[3].get_document("author").expect("author");
        assert_eq!(author.get_str("id").expect("id"), "u4");
    }
}
