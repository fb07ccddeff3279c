//! Comments as their pages were read: raw BSON, decoded (and remembered in the request's scope)
//! only when a read returns them. A read that needs a window of many comments (the first 50 of a
//! sub-discussion of 4 000) orders them by the keys it reads in place and decodes the window.

use std::collections::HashSet;
use std::sync::Arc;

use mongodb::bson::{Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};

use super::kept::Kept;
use super::shapes::reply_pages_of;
use super::shapes::REPLY_PAGES;
use super::shapes::{thread_page_numbers, THREAD_PAGES};
use crate::domain::{Comment, DiscussionId, Micros, Slug, SortKey};
use crate::store::shared::bson::{as_i64, corrupt};
use crate::store::shared::docs::raw_comment_of;
use crate::store::shared::error::StoreResult;
use crate::store::shared::scope::ReadScope;

/// Every comment of `docs` (page documents as read, their `comments` an array or, after
/// `$unwind`, one comment), decoded and remembered.
pub(super) fn read_all(
    scope: &ReadScope,
    docs: &[RawDocumentBuf],
    id: &DiscussionId,
) -> StoreResult<Vec<Comment>> {
    let mut out = Vec::new();
    for doc in docs {
        out.extend(read_page(scope, doc, id)?);
    }
    Ok(out)
}

/// The first `need` comments of `docs` (page documents as read, in order), decoded and
/// remembered; the rest are not decoded (a first page of 50 reads two pages of 100).
pub(super) fn read_first(
    scope: &ReadScope,
    docs: &[RawDocumentBuf],
    id: &DiscussionId,
    need: usize,
) -> StoreResult<Vec<Comment>> {
    let mut out = Vec::with_capacity(need);
    for doc in docs {
        if out.len() >= need {
            break;
        }
        out.extend(read_items(scope, doc, id, need - out.len())?);
    }
    Ok(out)
}

/// The last `need` comments of `docs` (page documents as read, in order), decoded and
/// remembered, in that order; the ones before them are not decoded.
pub(super) fn read_last(
    scope: &ReadScope,
    docs: &[RawDocumentBuf],
    id: &DiscussionId,
    need: usize,
) -> StoreResult<Vec<Comment>> {
    // Gathered from the end, page by page.
    let mut pages: Vec<Vec<Comment>> = Vec::new();
    let mut gathered = 0;
    for doc in docs.iter().rev() {
        if gathered >= need {
            break;
        }
        let items = items(doc)?;
        let from = items.len().saturating_sub(need - gathered);
        let comments = decode(scope, doc, id, items[from..].iter().copied())?;
        gathered += comments.len();
        pages.push(comments);
    }
    let out: Vec<Comment> = pages.into_iter().rev().flatten().collect();
    scope.slot::<Kept>().seen.remember_all(&out);
    Ok(out)
}

/// The comments of `docs` (whole pages as read) that `keep` picks (given each one's stored
/// element), decoded and remembered; the others are not decoded.
pub(super) fn read_where(
    scope: &ReadScope,
    docs: &[Arc<RawDocumentBuf>],
    id: &DiscussionId,
    keep: impl Fn(&RawDocument) -> bool,
) -> StoreResult<Vec<Comment>> {
    let mut out = Vec::new();
    for doc in docs {
        let picked = items(doc)?.into_iter().filter(|item| keep(item));
        out.extend(decode(scope, doc, id, picked)?);
    }
    scope.slot::<Kept>().seen.remember_all(&out);
    Ok(out)
}

/// The comments of one page document (or part of one) as read, remembering them in the
/// request's scope (see [`Decoder`]).
pub(super) fn read_page(
    scope: &ReadScope,
    doc: &RawDocument,
    id: &DiscussionId,
) -> StoreResult<Vec<Comment>> {
    read_items(scope, doc, id, usize::MAX)
}

/// The first `most` comments of one page document, decoded and remembered.
pub(super) fn read_items(
    scope: &ReadScope,
    doc: &RawDocument,
    id: &DiscussionId,
    most: usize,
) -> StoreResult<Vec<Comment>> {
    let comments = decode(scope, doc, id, items(doc)?.into_iter().take(most))?;
    scope.slot::<Kept>().seen.remember_all(&comments);
    Ok(comments)
}

/// The comment elements `picked` of page document `doc`, decoded (not remembered).
pub(super) fn decode<'a>(
    scope: &ReadScope,
    doc: &RawDocument,
    id: &DiscussionId,
    picked: impl IntoIterator<Item = &'a RawDocument>,
) -> StoreResult<Vec<Comment>> {
    let page = Decoder::new(doc)?;
    picked
        .into_iter()
        .map(|item| page.decode(scope, id, item))
        .collect()
}

/// The comment elements of a page document's `comments`: an array, or one comment after
/// `$unwind`; none when it has no such field.
pub(super) fn items(doc: &RawDocument) -> StoreResult<Vec<&RawDocument>> {
    match doc.get("comments").map_err(corrupt)? {
        Some(RawBsonRef::Array(items)) => items
            .into_iter()
            .map(|item| match item.map_err(corrupt)? {
                RawBsonRef::Document(d) => Ok(d),
                _ => Err(corrupt("a comment is not a document")),
            })
            .collect(),
        Some(RawBsonRef::Document(one)) => Ok(vec![one]),
        _ => Ok(Vec::new()),
    }
}

/// An integer field of a raw document, whichever integer type it was stored as.
pub(super) fn int_of(doc: &RawDocument, key: &str) -> Option<i64> {
    let value = doc.get(key).ok()??;
    as_i64(&Bson::try_from(value).ok()?)
}

/// What a page document tells about the comments decoded from it: where they were found (its
/// `_id` and number), and for its top-level comments, where the threads it starts are (when
/// its `thread_pages` adds up to its `thread_total`; only reads that may return top-level
/// comments project them).
pub(super) struct Decoder {
    place: Option<(Bson, i64)>,
    homes: Option<Vec<i64>>,
}

impl Decoder {
    pub(super) fn new(doc: &RawDocument) -> StoreResult<Self> {
        let id = doc
            .get("_id")
            .map_err(corrupt)?
            .and_then(|v| Bson::try_from(v).ok());
        let place = id.zip(int_of(doc, "page"));
        let homes = match int_of(doc, "thread_total") {
            Some(total) => {
                let stored = match doc.get_document(THREAD_PAGES) {
                    Ok(raw) => Some(Document::try_from(raw).map_err(corrupt)?),
                    Err(_) => None,
                };
                thread_page_numbers(stored.as_ref(), total)
            }
            None => None,
        };
        Ok(Self { place, homes })
    }

    /// Decodes one comment element and remembers, in the request's scope, where it was found,
    /// its replies per page (where it keeps them) and, for a top-level comment, where its
    /// page's threads are. The caller remembers the comment itself ([`ReadScope::seen`]).
    pub(super) fn decode(
        &self,
        scope: &ReadScope,
        id: &DiscussionId,
        item: &RawDocument,
    ) -> StoreResult<Comment> {
        let comment = raw_comment_of(RawBsonRef::Document(item), id)?;
        if let Ok(raw) = item.get_document(REPLY_PAGES) {
            let stored = Document::try_from(raw).map_err(corrupt)?;
            scope.slot::<Kept>().reply_pages.remember(
                id,
                comment.slug.clone(),
                reply_pages_of(&stored),
            );
        }
        if let Some(place) = &self.place {
            scope
                .slot::<Kept>()
                .pages_of
                .remember(id, comment.slug.clone(), place.clone());
        }
        if let (Some(homes), None) = (&self.homes, &comment.parent) {
            scope
                .slot::<Kept>()
                .thread_homes
                .remember(id, comment.slug.clone(), homes.clone());
        }
        Ok(comment)
    }
}

/// One stored comment, not decoded yet: its sort keys, its element and its page.
pub(super) struct Item<'a> {
    key: SortKey<'a>,
    element: &'a RawDocument,
    page: usize,
}

impl<'a> Item<'a> {
    /// What orders it.
    pub(super) fn key(&self) -> SortKey<'a> {
        self.key
    }

    /// The full slug of its thread's top-level comment (its first segment).
    pub(super) fn thread(&self) -> &'a str {
        let full = self.key.full_slug;
        full.split_once('/').map_or(full, |(top, _)| top)
    }
}

/// The comments of some page documents in threaded order, decoded on demand.
pub(super) struct Stored<'a> {
    pages: Vec<Decoder>,
    items: Vec<Item<'a>>,
}

impl<'a> Stored<'a> {
    /// Indexes the comments of `docs` by their keys (read in place) in threaded order.
    pub(super) fn new(docs: &'a [RawDocumentBuf]) -> StoreResult<Self> {
        let mut pages = Vec::with_capacity(docs.len());
        let mut all = Vec::new();
        for (page, doc) in docs.iter().enumerate() {
            pages.push(Decoder::new(doc)?);
            for element in items(doc)? {
                let key = SortKey {
                    posted: Micros(
                        int_of(element, "posted").ok_or_else(|| corrupt("a comment's time"))?,
                    ),
                    slug: element.get_str("slug").map_err(corrupt)?,
                    full_slug: element.get_str("full_slug").map_err(corrupt)?,
                };
                all.push(Item { key, element, page });
            }
        }
        all.sort_by(|a, b| a.key.full_slug.cmp(b.key.full_slug));
        Ok(Self { pages, items: all })
    }

    /// Every comment, in threaded order.
    pub(super) fn items(&self) -> &[Item<'a>] {
        &self.items
    }

    /// The comments whose full slug is in `lo..hi`, in threaded order.
    pub(super) fn range(&self, lo: &str, hi: &str) -> &[Item<'a>] {
        let start = self.items.partition_point(|i| i.key.full_slug < lo);
        let end = self.items.partition_point(|i| i.key.full_slug < hi);
        &self.items[start..end.max(start)]
    }

    /// Remembers, for every top-level comment among its items (decoded or not), where its
    /// page's threads are: a sub-discussion of a comment in its thread then reads just those
    /// pages (see `Bucketed::descendant_pages`).
    pub(super) fn remember_homes(&self, scope: &ReadScope, id: &DiscussionId) {
        for item in &self.items {
            if item.key.full_slug.contains('/') {
                continue;
            }
            if let Some(homes) = &self.pages[item.page].homes {
                scope.slot::<Kept>().thread_homes.remember(
                    id,
                    Slug::from_stored(item.key.slug.to_owned()),
                    homes.clone(),
                );
            }
        }
    }

    /// Decodes `picked` (some of its items), remembering them in the request's scope.
    pub(super) fn decode<'i>(
        &self,
        scope: &ReadScope,
        id: &DiscussionId,
        picked: impl IntoIterator<Item = &'i Item<'a>>,
    ) -> StoreResult<Vec<Comment>>
    where
        'a: 'i,
    {
        let comments = picked
            .into_iter()
            .map(|item| self.pages[item.page].decode(scope, id, item.element))
            .collect::<StoreResult<Vec<_>>>()?;
        scope.slot::<Kept>().seen.remember_all(&comments);
        // Their parents that were read too are remembered as well: a client that shows what
        // each comment answers asks for them next, and they cost no further read.
        let have: HashSet<&str> = comments.iter().map(|c| c.slug.as_str()).collect();
        let parents: HashSet<&str> = comments
            .iter()
            .filter_map(|c| c.parent.as_ref().map(Slug::as_str))
            .filter(|parent| !have.contains(parent))
            .collect();
        if !parents.is_empty() {
            let found = self
                .items
                .iter()
                .filter(|item| parents.contains(item.key.slug))
                .map(|item| self.pages[item.page].decode(scope, id, item.element))
                .collect::<StoreResult<Vec<_>>>()?;
            scope.slot::<Kept>().seen.remember_all(&found);
        }
        Ok(comments)
    }
}
