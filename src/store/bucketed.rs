//! The bucketed layout: comments in pages of about a hundred in `comment_pages` ("Hybrid").
//!
//! A page is `{discussion_id, page, count, roots, thread_total, first_key, last_key, comments}`.
//! Pages hold disjoint, increasing runs of the chronological order `(posted, slug)` and each page's
//! array is kept sorted, so walking pages in page order *is* the chronological order: offset
//! windows are cut from the `{page, count}` list, cursor windows start at the first page whose
//! `last_key` follows the cursor. See docs/ARCHITECTURE.md for why this holds under concurrency.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, from_document, to_bson, Bson, Document};
use mongodb::options::ReturnDocument;
use mongodb::{Collection, Database};
use serde::Deserialize;

use super::docs::CommentDoc;
use super::error::is_duplicate_key;
use super::mongo::index_model as index;
use super::{CommentStore, Discussions, Listing, Posted, ReadScope, StoreError, StoreResult};
use crate::domain::paging::Cursor;
use crate::domain::slug::MonotonicClock;
use crate::domain::tree::Thread;
use crate::domain::{
    Comment, Discussion, DiscussionId, FullSlug, Micros, NewComment, Page, Placement, Slug,
    SlugPart, Window,
};

/// How often a slug collision is retried before giving up (each try has a fresh random part).
const SLUG_ATTEMPTS: usize = 8;
/// How many pages a post may try before giving up (each failed try means others filled a page).
const PAGE_ATTEMPTS: usize = 10_000;
/// Documents per reply batch: large, so that a read is one command however many pages it returns.
const BATCH_SIZE: u32 = 100_000;
/// Discussion fields this layout keeps: the page new comments go to, and the last key of the
/// page before it (every later comment must sort after it).
const NUM_PAGES: &str = "num_comment_pages";
const FLOOR: &str = "comment_pages_floor";

/// The chronological sort key of a comment as one string: fixed-width time, then slug.
fn order_key(posted: Micros, slug: &Slug) -> String {
    format!("{:016}:{}", posted.0.max(0), slug)
}

/// The time part of an order key (or of a full slug).
fn key_time(key: &str) -> i64 {
    key.get(..16).and_then(|t| t.parse().ok()).unwrap_or(0)
}

/// One entry of a discussion's page list: everything but the comments.
#[derive(Debug, Clone, Deserialize)]
struct PageInfo {
    page: i64,
    count: i64,
    /// Top-level comments in the page.
    #[serde(default)]
    roots: i64,
    /// Comments in the threads whose top-level comment is in the page.
    #[serde(default)]
    thread_total: i64,
    /// Smallest and largest order key in the page.
    #[serde(default)]
    first_key: String,
    #[serde(default)]
    last_key: String,
}

impl PageInfo {
    fn weight(&self, top_level: bool) -> u64 {
        u64::try_from(if top_level { self.roots } else { self.count }).unwrap_or(0)
    }
}

/// Where a post goes next: the current page, and the key every new comment must follow.
#[derive(Debug, Clone)]
struct Target {
    page: i64,
    floor: String,
}

impl Target {
    fn from_doc(doc: Option<Document>) -> Self {
        let doc = doc.unwrap_or_default();
        let page = match doc.get(NUM_PAGES) {
            Some(Bson::Int64(n)) => *n,
            Some(Bson::Int32(n)) => i64::from(*n),
            _ => 0,
        };
        let floor = doc.get_str(FLOOR).unwrap_or_default().to_owned();
        Self { page, floor }
    }

    /// The floor's time: a new comment must be posted strictly after it.
    fn floor_time(&self) -> Micros {
        if self.floor.is_empty() {
            Micros(-1)
        } else {
            Micros(key_time(&self.floor))
        }
    }
}

/// Comments already read in this request, by slug (serves direct links and parents again).
#[derive(Default)]
struct Seen {
    by_slug: Mutex<HashMap<Slug, Comment>>,
}

impl Seen {
    fn remember(&self, comments: &[Comment]) {
        let mut map = self.by_slug.lock().unwrap_or_else(|p| p.into_inner());
        for c in comments {
            map.insert(c.slug.clone(), c.clone());
        }
    }

    fn get(&self, slug: &Slug) -> Option<Comment> {
        self.by_slug
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(slug)
            .cloned()
    }
}

/// The bucketed layout.
pub struct Bucketed {
    pages: Collection<Document>,
    discussion_docs: Collection<Document>,
    discussions: Discussions,
    clock: Arc<MonotonicClock>,
    max_depth: usize,
    cap: i64,
}

impl Bucketed {
    /// Name of the collection.
    pub const COLLECTION: &'static str = "comment_pages";

    pub(super) fn new(
        db: &Database,
        discussions: Discussions,
        clock: Arc<MonotonicClock>,
        max_depth: usize,
        bucket_size: u32,
    ) -> Self {
        Self {
            pages: db.collection(Self::COLLECTION),
            discussion_docs: db.collection(Discussions::COLLECTION),
            discussions,
            clock,
            max_depth,
            cap: i64::from(bucket_size.max(1)),
        }
    }

    pub(super) async fn ensure_indexes(&self) -> StoreResult<()> {
        self.pages
            .create_indexes([
                index("page_unique", doc! { "discussion_id": 1, "page": 1 }, true),
                index("order", doc! { "discussion_id": 1, "last_key": 1 }, false),
                index(
                    "slug",
                    doc! { "discussion_id": 1, "comments.slug": 1 },
                    false,
                ),
                index(
                    "parent",
                    doc! { "discussion_id": 1, "comments.parent": 1 },
                    false,
                ),
                index(
                    "threaded",
                    doc! { "discussion_id": 1, "comments.full_slug": 1 },
                    false,
                ),
            ])
            .await?;
        Ok(())
    }

    // ----- writing -----

    /// The page new comments go to, as the discussion records it.
    async fn target(&self, id: &DiscussionId) -> StoreResult<Target> {
        let doc = self
            .discussion_docs
            .find_one(doc! { "_id": id.as_str() })
            .projection(doc! { NUM_PAGES: 1, FLOOR: 1 })
            .await?;
        Ok(Target::from_doc(doc))
    }

    /// Page `full` is full: move the discussion on to the next page (a no-op when another post
    /// already did) and return where posts go now.
    async fn next_page(&self, id: &DiscussionId, full: i64, last_key: &str) -> StoreResult<Target> {
        let doc = self
            .discussion_docs
            .find_one_and_update(
                doc! { "_id": id.as_str() },
                doc! { "$max": { NUM_PAGES: full + 1, FLOOR: last_key } },
            )
            .projection(doc! { NUM_PAGES: 1, FLOOR: 1 })
            .return_document(ReturnDocument::After)
            .await?;
        Ok(Target::from_doc(doc))
    }

    /// The parent's page and stored form.
    async fn find_parent(
        &self,
        id: &DiscussionId,
        parent: Option<&Slug>,
    ) -> StoreResult<Option<(i64, Comment)>> {
        let Some(slug) = parent else {
            return Ok(None);
        };
        let found = self
            .pages
            .find_one(doc! { "discussion_id": id.as_str(), "comments.slug": slug.as_str() })
            .projection(doc! { "page": 1, "comments.$": 1 })
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("no comment {slug} in discussion {id}")))?;
        let page = int_field(&found, "page")?;
        let comment = comments_of(&found, id)?
            .into_iter()
            .find(|c| &c.slug == slug)
            .ok_or_else(|| StoreError::Corrupt(format!("page {page} lost comment {slug}")))?;
        Ok(Some((page, comment)))
    }

    /// Whether a slug is in use anywhere in the discussion.
    async fn slug_taken(&self, id: &DiscussionId, slug: &Slug) -> StoreResult<bool> {
        Ok(self
            .pages
            .find_one(doc! { "discussion_id": id.as_str(), "comments.slug": slug.as_str() })
            .projection(doc! { "_id": 1 })
            .await?
            .is_some())
    }

    /// Pushes a comment into the current page, moving on to the next page while pages are full.
    /// Returns the stored comment, whether it was reattached, and its page.
    async fn place(
        &self,
        discussion: &Discussion,
        target: &mut Target,
        parent: Option<&Comment>,
        part: &SlugPart,
        new: &NewComment,
    ) -> StoreResult<(Comment, bool, i64)> {
        let id = discussion.id.as_str();
        for _ in 0..PAGE_ATTEMPTS {
            let posted = self.clock.now_after(target.floor_time());
            let placement = Placement::new(
                parent.map(|p| (&p.slug, &p.full_slug)),
                self.max_depth,
                posted,
                part,
            );
            let reattached = placement.reattached;
            let comment = placement.into_comment(discussion.id.clone(), posted, new);
            let key = order_key(posted, &comment.slug);
            let element = to_bson(&CommentDoc::from_comment(&comment, false))
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let top = i64::from(comment.parent.is_none());
            let result = self
                .pages
                .update_one(
                    doc! { "discussion_id": id, "page": target.page, "count": { "$lt": self.cap } },
                    doc! {
                        "$push": { "comments": { "$each": [element], "$sort": { "posted": 1, "slug": 1 } } },
                        "$inc": { "count": 1_i64, "roots": top, "thread_total": top },
                        "$min": { "first_key": &key },
                        "$max": { "last_key": &key },
                    },
                )
                .upsert(true)
                .await;
            match result {
                Ok(_) => return Ok((comment, reattached, target.page)),
                Err(err) if is_duplicate_key(&err) => {
                    // The page exists and the filter did not match it: it is full, or it was
                    // created by a concurrent post a moment ago (then it has room: try again).
                    let header = self
                        .pages
                        .find_one(doc! { "discussion_id": id, "page": target.page })
                        .projection(doc! { "count": 1, "last_key": 1 })
                        .await?;
                    if let Some(header) = header {
                        if int_field(&header, "count")? >= self.cap {
                            let last_key = header.get_str("last_key").unwrap_or_default();
                            *target = self
                                .next_page(&discussion.id, target.page, last_key)
                                .await?;
                        }
                    }
                }
                Err(err) => return Err(err.into()),
            }
        }
        Err(StoreError::Exhausted(format!(
            "no page took the comment after {PAGE_ATTEMPTS} attempts"
        )))
    }

    /// Counts a new reply in its parent's `reply_count` and in its thread's page total.
    async fn count_reply(
        &self,
        id: &DiscussionId,
        comment: &Comment,
        parent_page: Option<i64>,
    ) -> StoreResult<()> {
        let Some(parent) = &comment.parent else {
            return Ok(());
        };
        let root = comment.slug.ancestor_at(0);
        let mut parent_filter =
            doc! { "discussion_id": id.as_str(), "comments.slug": parent.as_str() };
        if let Some(page) = parent_page {
            parent_filter.insert("page", page);
        }
        if *parent == root {
            self.pages
                .update_one(
                    parent_filter,
                    doc! { "$inc": { "comments.$.reply_count": 1_i64, "thread_total": 1_i64 } },
                )
                .await?;
        } else {
            let bump_parent = self.pages.update_one(
                parent_filter,
                doc! { "$inc": { "comments.$.reply_count": 1_i64 } },
            );
            let bump_thread = self.pages.update_one(
                doc! { "discussion_id": id.as_str(), "comments.slug": root.as_str() },
                doc! { "$inc": { "thread_total": 1_i64 } },
            );
            tokio::try_join!(bump_parent, bump_thread)?;
        }
        Ok(())
    }

    // ----- reading -----

    async fn seen(&self, scope: &ReadScope, id: &DiscussionId) -> Arc<Seen> {
        let loaded = scope
            .get_or_load(&format!("bucketed/seen/{id}"), || async {
                Ok::<_, std::convert::Infallible>(Seen::default())
            })
            .await;
        match loaded {
            Ok(seen) => seen,
            Err(never) => match never {},
        }
    }

    /// The discussion's page list (no comments), once per request.
    async fn page_list(
        &self,
        scope: &ReadScope,
        id: &DiscussionId,
    ) -> StoreResult<Arc<Vec<PageInfo>>> {
        scope
            .get_or_load(&format!("bucketed/pages/{id}"), || async {
                let docs: Vec<Document> = self
                    .pages
                    .find(doc! { "discussion_id": id.as_str() })
                    .projection(doc! {
                        "_id": 0, "page": 1, "count": 1, "roots": 1, "thread_total": 1,
                        "first_key": 1, "last_key": 1,
                    })
                    .sort(doc! { "page": 1 })
                    .batch_size(BATCH_SIZE)
                    .await?
                    .try_collect()
                    .await?;
                docs.into_iter()
                    .map(|d| from_document::<PageInfo>(d).map_err(corrupt))
                    .collect::<StoreResult<Vec<_>>>()
            })
            .await
    }

    /// Runs a pipeline whose documents hold a `comments` array; returns the comments in order.
    async fn run(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        pipeline: Vec<Document>,
    ) -> StoreResult<Vec<Comment>> {
        let docs: Vec<Document> = self
            .pages
            .aggregate(pipeline)
            .batch_size(BATCH_SIZE)
            .await?
            .try_collect()
            .await?;
        let mut out = Vec::new();
        for doc in &docs {
            out.extend(comments_of(doc, &discussion.id)?);
        }
        self.seen(scope, &discussion.id).await.remember(&out);
        Ok(out)
    }

    /// The comments matching `cond` (an expression over `$$c`) from the pages matching `filter`:
    /// one indexed query, and only the matching comments travel.
    /// The comments whose `field` is one of `values` (one indexed query on `comments.<field>`).
    async fn matching_in(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        field: &str,
        values: &[&str],
    ) -> StoreResult<Vec<Comment>> {
        let filter = doc! { format!("comments.{field}"): { "$in": values } };
        let cond = doc! { "$in": [format!("$$c.{field}"), values] };
        self.matching(scope, discussion, filter, cond.into()).await
    }

    async fn matching(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        filter: Document,
        cond: Bson,
    ) -> StoreResult<Vec<Comment>> {
        let mut matcher = doc! { "discussion_id": discussion.id.as_str() };
        matcher.extend(filter);
        let pipeline = vec![
            doc! { "$match": matcher },
            doc! { "$project": { "_id": 0, "comments": {
                "$filter": { "input": "$comments", "as": "c", "cond": cond },
            } } },
        ];
        self.run(scope, discussion, pipeline).await
    }

    /// The start of a chronological listing (or of the top-level comments), after `after`:
    /// pages in order from the first whose last key follows the cursor, cut after `need` items.
    async fn stream(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        after: Option<(Micros, &Slug)>,
        top_level: bool,
        need: usize,
    ) -> StoreResult<Vec<Comment>> {
        let mut matcher = doc! { "discussion_id": discussion.id.as_str() };
        let mut conds: Vec<Bson> = Vec::new();
        if let Some((posted, slug)) = after {
            matcher.insert("last_key", doc! { "$gt": order_key(posted, slug) });
            conds.push(after_cond(posted, slug).into());
        }
        if top_level {
            matcher.insert("roots", doc! { "$gt": 0 });
            conds.push(doc! { "$eq": ["$$c.parent", Bson::Null] }.into());
        }
        let mut pipeline = vec![
            doc! { "$match": matcher },
            doc! { "$sort": { "last_key": 1 } },
        ];
        pipeline.push(if conds.is_empty() {
            doc! { "$project": { "_id": 0, "comments": 1 } }
        } else {
            doc! { "$project": { "_id": 0, "comments": {
                "$filter": { "input": "$comments", "as": "c", "cond": { "$and": conds } },
            } } }
        });
        pipeline.extend([
            doc! { "$unwind": "$comments" },
            doc! { "$limit": i64::try_from(need).unwrap_or(i64::MAX) },
        ]);
        self.run(scope, discussion, pipeline).await
    }

    /// The seed's skip/limit walk: the page list says which pages hold the window; one query
    /// `$slice`s just those pages.
    async fn walk(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        top_level: bool,
        skip: u64,
        need: u64,
    ) -> StoreResult<Vec<Comment>> {
        let pages = self.page_list(scope, &discussion.id).await?;
        let slices = window_slices(&pages, top_level, skip, need);
        if slices.is_empty() {
            return Ok(Vec::new());
        }
        let input = if top_level {
            Bson::from(doc! { "$filter": {
                "input": "$comments", "as": "c", "cond": { "$eq": ["$$c.parent", Bson::Null] },
            } })
        } else {
            Bson::from("$comments")
        };
        let branches: Vec<Bson> = slices
            .iter()
            .map(|s| {
                doc! {
                    "case": { "$eq": ["$page", s.page] },
                    "then": { "$slice": [input.clone(), to_i64(s.skip), to_i64(s.take)] },
                }
                .into()
            })
            .collect();
        let pages_wanted: Vec<i64> = slices.iter().map(|s| s.page).collect();
        let pipeline = vec![
            doc! { "$match": { "discussion_id": discussion.id.as_str(), "page": { "$in": pages_wanted } } },
            doc! { "$sort": { "page": 1 } },
            doc! { "$project": { "_id": 0, "comments": {
                "$switch": { "branches": branches, "default": [] },
            } } },
        ];
        self.run(scope, discussion, pipeline).await
    }

    /// Threaded order: the page list's thread totals say which pages' threads hold the window;
    /// one range query on `comments.full_slug` fetches those threads.
    async fn threaded(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        window: &Window,
    ) -> StoreResult<Page<Comment>> {
        let pages = self.page_list(scope, &discussion.id).await?;
        let need = window.limit() as u64 + 1;
        let (span, lower, inner) = match window {
            Window::Offset { skip, limit } => {
                let Some((span, inner_skip)) = thread_span(&pages, *skip, need) else {
                    return Ok(Page::from_overfetch(Vec::new(), *limit));
                };
                let first = &pages[span.0];
                (
                    span,
                    doc! { "$gte": first.first_key.as_str() },
                    Window::Offset {
                        skip: inner_skip,
                        limit: *limit,
                    },
                )
            }
            Window::After { cursor, limit } => {
                let from = match cursor {
                    None => None,
                    Some(Cursor::Threaded(full)) => Some(full),
                    Some(_) => {
                        return Err(StoreError::Unsupported("cursor of another order".into()))
                    }
                };
                let Some(span) = thread_span_after(&pages, from, need) else {
                    return Ok(Page::from_overfetch(Vec::new(), *limit));
                };
                let lower = match from {
                    Some(full) => doc! { "$gt": full.as_str() },
                    None => doc! { "$gte": pages[span.0].first_key.as_str() },
                };
                (span, lower, window.clone())
            }
        };
        let (first, last) = (&pages[span.0], &pages[span.1]);
        let upper = format!("{:016}", key_time(&last.last_key) + 1);
        let mut range = lower.clone();
        range.insert("$lt", upper.as_str());
        let cond: Vec<Bson> = range
            .iter()
            .map(|(op, v)| doc! { op: ["$$c.full_slug", v.clone()] }.into())
            .collect();
        let comments = self
            .matching(
                scope,
                discussion,
                doc! { "comments.full_slug": range },
                doc! { "$and": cond }.into(),
            )
            .await?;
        let (lo, hi) = (first.first_key.as_str(), last.last_key.as_str());
        let comments = comments
            .into_iter()
            .filter(|c| {
                let root = c.full_slug.ancestor_at(0);
                lo <= root.as_str() && root.as_str() <= hi
            })
            .collect();
        Ok(Thread::new(comments).list(Listing::Threaded, &inner))
    }
}

/// Part of one page that a window needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Slice {
    page: i64,
    skip: u64,
    take: u64,
}

/// The slices of the pages that hold items `skip..skip + need` of the walk.
fn window_slices(pages: &[PageInfo], top_level: bool, skip: u64, need: u64) -> Vec<Slice> {
    let end = skip.saturating_add(need);
    let mut before = 0_u64;
    let mut out = Vec::new();
    for page in pages {
        let weight = page.weight(top_level);
        let (start, stop) = (before, before + weight);
        before = stop;
        if stop <= skip || weight == 0 {
            continue;
        }
        if start >= end {
            break;
        }
        let from = skip.saturating_sub(start);
        let take = stop.min(end) - start.max(skip);
        out.push(Slice {
            page: page.page,
            skip: from,
            take,
        });
    }
    out
}

/// The pages whose threads hold threaded items `skip..skip + need`, and the offset of the
/// window inside their threads.
fn thread_span(pages: &[PageInfo], skip: u64, need: u64) -> Option<((usize, usize), u64)> {
    let mut before = 0_u64;
    let mut first: Option<(usize, u64)> = None;
    for (i, page) in pages.iter().enumerate() {
        let stop = before + u64::try_from(page.thread_total).unwrap_or(0);
        if first.is_none() && stop > skip {
            first = Some((i, skip - before));
        }
        if let Some((start, inner)) = first {
            if stop >= skip.saturating_add(need) || i + 1 == pages.len() {
                return Some(((start, i), inner));
            }
        }
        before = stop;
    }
    None
}

/// The pages whose threads hold the `need` threaded items after `from`: from the page holding
/// `from`'s top-level comment, until the pages after it hold enough.
fn thread_span_after(
    pages: &[PageInfo],
    from: Option<&FullSlug>,
    need: u64,
) -> Option<(usize, usize)> {
    let start = match from {
        None => 0,
        Some(full) => {
            let root = full.ancestor_at(0);
            pages
                .iter()
                .position(|p| p.last_key.as_str() >= root.as_str())?
        }
    };
    if start >= pages.len() {
        return None;
    }
    let mut gathered = if from.is_none() {
        u64::try_from(pages[start].thread_total).unwrap_or(0)
    } else {
        0
    };
    let mut end = start;
    while gathered < need && end + 1 < pages.len() {
        end += 1;
        gathered += u64::try_from(pages[end].thread_total).unwrap_or(0);
    }
    Some((start, end))
}

/// The aggregation condition: `$$c` sorts after `(posted, slug)`.
fn after_cond(posted: Micros, slug: &Slug) -> Document {
    doc! { "$or": [
        { "$gt": ["$$c.posted", posted.0] },
        { "$and": [
            { "$eq": ["$$c.posted", posted.0] },
            { "$gt": ["$$c.slug", slug.as_str()] },
        ] },
    ] }
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn corrupt(err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(err.to_string())
}

/// An integer field, whichever integer type it was stored as.
fn int_field(doc: &Document, key: &str) -> StoreResult<i64> {
    match doc.get(key) {
        Some(Bson::Int64(n)) => Ok(*n),
        Some(Bson::Int32(n)) => Ok(i64::from(*n)),
        Some(Bson::Double(n)) if n.fract() == 0.0 => Ok(*n as i64),
        _ => Err(corrupt(format!("field {key} is not an integer"))),
    }
}

/// The comments of a document's `comments` field: an array, or one comment after `$unwind`.
fn comments_of(doc: &Document, id: &DiscussionId) -> StoreResult<Vec<Comment>> {
    let items = match doc.get("comments") {
        Some(Bson::Array(items)) => items.as_slice(),
        Some(one @ Bson::Document(_)) => std::slice::from_ref(one),
        _ => return Ok(Vec::new()),
    };
    items
        .iter()
        .map(|item| match item {
            Bson::Document(d) => from_document::<CommentDoc>(d.clone())
                .map(|c| c.into_comment(id))
                .map_err(corrupt),
            _ => Err(corrupt("a comment is not a document")),
        })
        .collect()
}

/// The `$or` of full-slug ranges, as a query on pages and as a condition on `$$c`.
fn descendant_ranges(roots: &[FullSlug]) -> (Document, Bson) {
    let mut query = Vec::new();
    let mut cond = Vec::new();
    for root in roots {
        let (lo, hi) = root.descendant_range();
        query.push(doc! { "comments.full_slug": { "$gte": &lo, "$lt": &hi } });
        cond.push(doc! { "$and": [
            { "$gte": ["$$c.full_slug", &lo] },
            { "$lt": ["$$c.full_slug", &hi] },
        ] });
    }
    (doc! { "$or": query }, doc! { "$or": cond }.into())
}

#[async_trait]
impl CommentStore for Bucketed {
    async fn post_comment(&self, discussion: &Discussion, new: NewComment) -> StoreResult<Posted> {
        let (mut target, parent) = tokio::try_join!(
            self.target(&discussion.id),
            self.find_parent(&discussion.id, new.parent.as_ref())
        )?;
        let parent_comment = parent.as_ref().map(|(_, c)| c);
        for _ in 0..SLUG_ATTEMPTS {
            let part = SlugPart::generate();
            // The slug does not depend on the time, so it can be checked before placing.
            let slug = Placement::new(
                parent_comment.map(|p| (&p.slug, &p.full_slug)),
                self.max_depth,
                Micros(0),
                &part,
            )
            .slug;
            if self.slug_taken(&discussion.id, &slug).await? {
                continue;
            }
            let (comment, reattached, _page) = self
                .place(discussion, &mut target, parent_comment, &part, &new)
                .await?;
            let parent_page = parent
                .as_ref()
                .filter(|(_, p)| comment.parent.as_ref() == Some(&p.slug))
                .map(|(page, _)| *page);
            tokio::try_join!(
                self.count_reply(&discussion.id, &comment, parent_page),
                self.discussions
                    .record_post(&discussion.id, comment.parent.is_none())
            )?;
            return Ok(Posted {
                comment,
                reattached,
            });
        }
        Err(StoreError::Exhausted(format!(
            "no free slug after {SLUG_ATTEMPTS} attempts"
        )))
    }

    async fn list(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        listing: Listing,
        window: &Window,
    ) -> StoreResult<Page<Comment>> {
        let limit = window.limit();
        let need = limit + 1;
        let top_level = match listing {
            Listing::Threaded => return self.threaded(scope, discussion, window).await,
            Listing::Chronological => false,
            Listing::Threads => true,
        };
        let items = match window {
            Window::Offset { skip: 0, .. } | Window::After { cursor: None, .. } => {
                self.stream(scope, discussion, None, top_level, need)
                    .await?
            }
            Window::Offset { skip, .. } => {
                self.walk(scope, discussion, top_level, *skip, need as u64)
                    .await?
            }
            Window::After {
                cursor: Some(Cursor::Chronological { posted, slug }),
                ..
            } => {
                self.stream(scope, discussion, Some((*posted, slug)), top_level, need)
                    .await?
            }
            Window::After { .. } => {
                return Err(StoreError::Unsupported("cursor of another order".into()))
            }
        };
        Ok(Page::from_overfetch(items, limit))
    }

    async fn by_slugs(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        slugs: &[Slug],
    ) -> StoreResult<Vec<Comment>> {
        let seen = self.seen(scope, &discussion.id).await;
        let mut out = Vec::new();
        let mut missing: Vec<&str> = Vec::new();
        for slug in slugs {
            match seen.get(slug) {
                Some(c) => out.push(c),
                None => missing.push(slug.as_str()),
            }
        }
        if !missing.is_empty() {
            let found = self
                .matching_in(scope, discussion, "slug", &missing)
                .await?;
            out.extend(found);
        }
        Ok(out)
    }

    async fn replies(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        parents: &[Slug],
        window: &Window,
    ) -> StoreResult<HashMap<Slug, Page<Comment>>> {
        if parents.is_empty() {
            return Ok(HashMap::new());
        }
        let names: Vec<&str> = parents.iter().map(Slug::as_str).collect();
        let comments = self
            .matching_in(scope, discussion, "parent", &names)
            .await?;
        Ok(Thread::new(comments).replies(parents, window))
    }

    async fn sub_discussions(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
        window: &Window,
    ) -> StoreResult<HashMap<FullSlug, Page<Comment>>> {
        if roots.is_empty() {
            return Ok(HashMap::new());
        }
        let (query, cond) = descendant_ranges(roots);
        let comments = self.matching(scope, discussion, query, cond).await?;
        Ok(Thread::new(comments).sub_discussions(roots, window))
    }

    async fn sub_discussion_counts(
        &self,
        _scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
    ) -> StoreResult<HashMap<FullSlug, u64>> {
        let mut counts: HashMap<FullSlug, u64> = roots.iter().map(|r| (r.clone(), 0)).collect();
        if roots.is_empty() {
            return Ok(counts);
        }
        let (query, cond) = descendant_ranges(roots);
        let mut matcher = doc! { "discussion_id": discussion.id.as_str() };
        matcher.extend(query);
        // Only the full slugs travel: a count needs nothing else.
        let pipeline = vec![
            doc! { "$match": matcher },
            doc! { "$project": { "_id": 0, "s": { "$map": {
                "input": { "$filter": { "input": "$comments", "as": "c", "cond": cond } },
                "as": "c",
                "in": "$$c.full_slug",
            } } } },
        ];
        let docs: Vec<Document> = self
            .pages
            .aggregate(pipeline)
            .batch_size(BATCH_SIZE)
            .await?
            .try_collect()
            .await?;
        let wanted: HashSet<&str> = roots.iter().map(FullSlug::as_str).collect();
        for doc in &docs {
            for full in doc.get_array("s").map_err(corrupt)? {
                let Bson::String(full) = full else { continue };
                // Every proper prefix that ends at a segment boundary is an ancestor.
                for (i, _) in full.match_indices('/') {
                    let ancestor = &full[..i];
                    if wanted.contains(ancestor) {
                        let key = FullSlug::from_stored(ancestor.to_owned());
                        *counts.entry(key).or_default() += 1;
                    }
                }
            }
        }
        Ok(counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(page: i64, count: i64, roots: i64) -> PageInfo {
        PageInfo {
            page,
            count,
            roots,
            thread_total: count,
            first_key: String::new(),
            last_key: String::new(),
        }
    }

    #[test]
    fn the_seeds_worked_example() {
        // Pages of 100, 102, 101 and 22 comments; skip 300, limit 50 (plus one to see more).
        let pages = [
            page(0, 100, 0),
            page(1, 102, 0),
            page(2, 101, 0),
            page(3, 22, 0),
        ];
        assert_eq!(
            window_slices(&pages, false, 300, 51),
            vec![
                Slice {
                    page: 2,
                    skip: 98,
                    take: 3
                },
                Slice {
                    page: 3,
                    skip: 0,
                    take: 22
                },
            ]
        );
    }

    #[test]
    fn windows_skip_whole_pages_and_empty_ones() {
        let pages = [page(0, 5, 2), page(1, 5, 0), page(2, 5, 3), page(3, 2, 1)];
        assert_eq!(
            window_slices(&pages, false, 5, 5),
            vec![Slice {
                page: 1,
                skip: 0,
                take: 5
            }]
        );
        assert_eq!(
            window_slices(&pages, true, 1, 3),
            vec![
                Slice {
                    page: 0,
                    skip: 1,
                    take: 1
                },
                Slice {
                    page: 2,
                    skip: 0,
                    take: 2
                },
            ]
        );
        assert!(window_slices(&pages, false, 17, 5).is_empty());
    }

    #[test]
    fn thread_spans_cover_the_window() {
        let pages = [page(0, 10, 1), page(1, 10, 1), page(2, 10, 1)];
        assert_eq!(thread_span(&pages, 0, 5), Some(((0, 0), 0)));
        assert_eq!(thread_span(&pages, 8, 5), Some(((0, 1), 8)));
        assert_eq!(thread_span(&pages, 25, 50), Some(((2, 2), 5)));
        assert_eq!(thread_span(&pages, 30, 5), None);
    }

    #[test]
    fn order_keys_sort_like_posted_then_slug() {
        let a = Slug::from_stored("zzzzzzzz".into());
        let b = Slug::from_stored("00000000".into());
        assert!(order_key(Micros(9), &a) < order_key(Micros(10), &b));
        assert!(order_key(Micros(10), &b) < order_key(Micros(10), &a));
        assert_eq!(key_time(&order_key(Micros(1234), &a)), 1234);
    }
}
