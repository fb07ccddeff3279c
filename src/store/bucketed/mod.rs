//! The bucketed layout: comments in pages of about a hundred in `comment_pages` ("Hybrid").
//!
//! A page is `{discussion_id, page, count, roots, thread_total, first_key, last_key, comments}`.
//! Pages hold disjoint, increasing runs of the chronological order `(posted, slug)` and each page's
//! array is kept sorted, so walking pages in page order *is* the chronological order: offset
//! windows are cut from the `{page, count}` list, cursor windows start at the first page whose
//! `last_key` follows the cursor. See docs/ARCHITECTURE.md for why this holds under concurrency.

mod authored;
mod copies;
mod headers;
pub mod hints;
mod kept;
mod known;
mod moving;
mod offsets;
mod pages;
mod push;
mod shapes;
mod stored;
mod streams;
mod threaded;
mod threads;
mod write;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use mongodb::bson::{doc, Bson, Document};
use mongodb::Database;

pub(crate) use copies::COPIES_KEY;
use kept::Kept;
pub use shapes::PageInfo;

use crate::domain::paging::Cursor;
use crate::domain::tree::Listing;
use crate::domain::tree::Thread;
use crate::domain::{
    share_all, shared_pages, Comment, Discussion, FullSlug, Layout, Page, Slug, Window,
};
use crate::store::api::CommentStore;
use crate::store::discussions::Discussions;
use crate::store::shared::bson::as_i64;
use crate::store::shared::connect::index_model as index;
use crate::store::shared::docs::{replace_update, unchanged_filter};
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::metrics::Counted;
use crate::store::shared::scope::ReadScope;
use crate::store::shared::sharding::{KeyKind, ShardKey};
use crate::store::shared::skeleton::Waiting;
use crate::store::shared::writer::Writer;
use stored::Stored;

/// The bucketed layout.
pub struct Bucketed {
    pages: Counted<Document>,
    /// Copies of voted comments (see `copies`).
    copies: Counted<Document>,
    discussion_docs: Counted<Document>,
    discussions: Discussions,
    writer: Writer,
    cap: i64,
    targets: pages::Targets,
    /// Where comments this process stored or read for a post live.
    known: known::Locations,
    /// Posts waiting for their discussion's turn, stored together by whoever gets it.
    waiting: Waiting<push::PostState>,
}

impl Bucketed {
    /// Its fields on the discussion document.
    pub(crate) fn fields() -> hints::Fields {
        hints::Fields
    }

    /// Name of the collection.
    pub const COLLECTION: &'static str = "comment_pages";

    /// Its shard key: its unique index, discussion then page.
    pub const SHARD_KEY: ShardKey = ShardKey {
        collection: Self::COLLECTION,
        fields: &[
            ("discussion_id", KeyKind::Ranged),
            ("page", KeyKind::Ranged),
        ],
        unique: true,
    };

    pub(crate) fn new(
        db: &Database,
        discussions: Discussions,
        writer: Writer,
        bucket_size: u32,
    ) -> Self {
        Self {
            pages: Counted::new(db, Self::COLLECTION, &writer.commands),
            copies: Counted::new(db, copies::COPIES, &writer.commands),
            discussion_docs: Counted::new(db, Discussions::COLLECTION, &writer.commands),
            discussions,
            writer,
            cap: i64::from(bucket_size.max(1)),
            targets: pages::Targets::default(),
            known: known::Locations::default(),
            waiting: Waiting::new(write::GROUP),
        }
    }

    pub(crate) async fn ensure_indexes(&self) -> StoreResult<()> {
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
                authored::index(),
            ])
            .await?;
        // An earlier version's index of an author's history, by id (none on a new database).
        self.pages.retire_index(authored::RETIRED_INDEX).await;
        self.ensure_copy_indexes().await
    }
}

impl Bucketed {
    /// The filter of the page that holds `current` while its fields are still as read (and its
    /// replies, when `counted`: a copy is written whole), with the page (`_id` and number): by
    /// the `_id` of the page the read of `current` found it in (found by slug when that read was
    /// not this layout's), so one page is written however many the discussion has (a filter on
    /// `discussion_id` and an `$elemMatch` alone may be answered by reading every page of the
    /// discussion). `None` when no page holds it.
    async fn guarded_page(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        current: &Comment,
        counted: bool,
    ) -> StoreResult<Option<(Document, (Bson, i64))>> {
        let id = discussion.id.as_str();
        let (page_doc_id, page) = match scope
            .slot::<Kept>()
            .pages_of
            .get(&discussion.id, &current.slug)
        {
            Some(found) => found,
            None => {
                let Some(found) = self
                    .pages
                    .find_one(doc! { "discussion_id": id, "comments.slug": current.slug.as_str() })
                    .projection(doc! { "_id": 1, "page": 1 })
                    .await?
                else {
                    return Ok(None);
                };
                match (found.get("_id"), found.get("page").and_then(as_i64)) {
                    (Some(page_doc_id), Some(page)) => (page_doc_id.clone(), page),
                    _ => {
                        return Err(StoreError::Corrupt(format!(
                            "a page of discussion {id} has no _id or number"
                        )))
                    }
                }
            }
        };
        let mut unchanged = unchanged_filter("", current)?;
        if counted {
            // An element stored without replies may have no `reply_count` (read as 0).
            let replies = match i64::try_from(current.reply_count).unwrap_or(i64::MAX) {
                0 => Bson::Document(doc! { "$in": [0_i64, Bson::Null] }),
                n => Bson::Int64(n),
            };
            unchanged.insert("reply_count", replies);
        }
        let filter = doc! {
            "_id": page_doc_id.clone(),
            "discussion_id": id,
            "page": page,
            "comments": { "$elemMatch": unchanged },
        };
        Ok(Some((filter, (page_doc_id, page))))
    }
}

#[async_trait]
impl CommentStore for Bucketed {
    fn promotes_to(&self) -> Option<Layout> {
        None
    }

    /// The post's write checks the fence, the lock and the moderation mode.
    fn posts_from_kept(&self) -> bool {
        true
    }

    fn ranks_in_memory(&self) -> bool {
        false
    }

    fn import_scratch(&self) -> Layout {
        Layout::Embedded
    }

    /// One update of the comment inside its page (`$elemMatch` also checks that its fields are
    /// still as read; `$` is the matched element), written by the `_id` of the page the read of
    /// `current` found it in (found by slug when that read was not this layout's): one page
    /// written, however many the discussion has (a filter on `discussion_id` and an `$elemMatch`
    /// alone may be answered by reading every page of the discussion).
    async fn replace(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        current: &Comment,
        next: &Comment,
        events: &[crate::domain::Event],
    ) -> StoreResult<bool> {
        let voted = copies::voted(next);
        let Some((filter, place)) = self.guarded_page(scope, discussion, current, voted).await?
        else {
            return Ok(false);
        };
        let follower = copies::Following {
            layout: self,
            scope,
            next,
            place,
        };
        crate::store::shared::writer::replace_outside(
            &self.writer,
            &self.discussions,
            (&discussion.id, &next.slug),
            (&self.pages, voted.then_some(&follower as _)),
            (filter, replace_update("comments.$.", next)?),
            (crate::store::changes::change_mark(current, next), events),
        )
        .await
    }

    async fn replace_in(
        &self,
        session: &mut mongodb::ClientSession,
        scope: &ReadScope,
        discussion: &Discussion,
        current: &Comment,
        next: &Comment,
    ) -> StoreResult<bool> {
        let Some((filter, place)) = self.guarded_page(scope, discussion, current, true).await?
        else {
            return Ok(false);
        };
        // Without transactions the copy goes first (see `copies`).
        if !self.writer.transactions {
            self.follow(session, scope, next, (&place.0, place.1))
                .await?;
        }
        let replaced = crate::store::shared::writer::replace_within(
            session,
            &self.discussions,
            &discussion.id,
            &self.pages,
            (filter, replace_update("comments.$.", next)?),
            crate::store::changes::change_mark(current, next),
        )
        .await?;
        if replaced && self.writer.transactions {
            self.follow(session, scope, next, (&place.0, place.1))
                .await?;
            self.known.voted(discussion, &next.slug);
        }
        Ok(replaced)
    }

    async fn list(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        listing: Listing,
        window: &Window,
    ) -> StoreResult<Page<Arc<Comment>>> {
        let need = usize::try_from(window.more()).unwrap_or(usize::MAX);
        let top_level = match listing {
            Listing::Threaded => {
                return self
                    .threaded(scope, discussion, window)
                    .await
                    .map(Page::shared)
            }
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
            Window::FromEnd { skip: 0, .. } => {
                self.stream_back(scope, discussion, None, top_level, need)
                    .await?
            }
            Window::FromEnd { .. } => {
                // The offset walk that ends there, by the discussion's count.
                let total = match top_level {
                    true => discussion.thread_count,
                    false => discussion.comment_count,
                };
                match window.span(Some(total), None) {
                    Some(span) if span.count > 0 => {
                        self.walk(scope, discussion, top_level, span.from, span.count)
                            .await?
                    }
                    _ => Vec::new(),
                }
            }
            Window::Before {
                cursor: Cursor::Chronological { posted, slug },
                ..
            } => {
                self.stream_back(scope, discussion, Some((*posted, slug)), top_level, need)
                    .await?
            }
            Window::After { .. } | Window::Before { .. } => {
                return Err(StoreError::Unsupported("cursor of another order".into()))
            }
        };
        Ok(window.page(items).shared())
    }

    async fn by_slugs(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        slugs: &[Slug],
    ) -> StoreResult<Vec<Arc<Comment>>> {
        let mut out = Vec::new();
        let mut missing: Vec<&str> = Vec::new();
        for slug in slugs {
            match scope.slot::<Kept>().seen.get(&discussion.id, slug) {
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
        Ok(share_all(out))
    }

    fn home_of(&self, scope: &ReadScope, discussion: &Discussion, slug: &Slug) -> Option<Bson> {
        let (page_id, _) = scope.slot::<Kept>().pages_of.get(&discussion.id, slug)?;
        Some(page_id)
    }

    /// Comments from their copies (one query, one index range each: see `copies`), the others
    /// from the pages their homes name (one query; 45 pages by `_id`: 62 ms on the development
    /// database, 176 ms by slug), the rest by slug.
    async fn by_homes(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        wanted: &[(Slug, Option<Bson>)],
    ) -> StoreResult<Vec<Arc<Comment>>> {
        let slugs: Vec<&str> = wanted.iter().map(|(slug, _)| slug.as_str()).collect();
        let copied = self.copies_of(scope, discussion, &slugs).await?;
        let wanted: Vec<(Slug, Option<Bson>)> = wanted
            .iter()
            .filter(|(slug, _)| !copied.iter().any(|c| &c.slug == slug))
            .cloned()
            .collect();
        if wanted.is_empty() {
            return Ok(share_all(copied));
        }
        let mut pages: Vec<&Bson> = Vec::new();
        for home in wanted.iter().filter_map(|(_, home)| home.as_ref()) {
            if !pages.contains(&home) {
                pages.push(home);
            }
        }
        let mut found = Vec::new();
        if !pages.is_empty() {
            let slugs: Vec<&str> = wanted.iter().map(|(slug, _)| slug.as_str()).collect();
            // One branch per page: given `_id: {$in: …}` beside `discussion_id` the development
            // database read every page of the collection (590 ms for 45 pages of 1 000).
            let id = discussion.id.as_str();
            let branches: Vec<Document> = pages
                .into_iter()
                .map(|page| doc! { "_id": page, "discussion_id": id })
                .collect();
            let filter = doc! { "$or": branches };
            let cond = doc! { "$in": ["$$c.slug", slugs] };
            found = self
                .matching(scope, discussion, filter, cond.into())
                .await?;
        }
        let rest = crate::store::api::not_at_home(&wanted, &found);
        let mut found = share_all(found);
        if !rest.is_empty() {
            found.extend(self.by_slugs(scope, discussion, &rest).await?);
        }
        found.extend(share_all(copied));
        Ok(found)
    }

    async fn replies(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        parents: &[Slug],
        window: &Window,
    ) -> StoreResult<HashMap<Slug, Page<Arc<Comment>>>> {
        if parents.is_empty() {
            return Ok(HashMap::new());
        }
        if let Some(found) = self
            .replies_by_pages(scope, discussion, parents, window)
            .await?
        {
            return Ok(shared_pages(found));
        }
        let names: Vec<&str> = parents.iter().map(Slug::as_str).collect();
        let comments = self
            .matching_in(scope, discussion, "parent", &names)
            .await?;
        Ok(shared_pages(Thread::new(comments).replies(parents, window)))
    }

    async fn sub_discussions(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
        window: &Window,
    ) -> StoreResult<HashMap<FullSlug, Page<Arc<Comment>>>> {
        if roots.is_empty() {
            return Ok(HashMap::new());
        }
        // Only the window is decoded: the first 50 of a sub-discussion of 4 000 comments
        // decode 51 of them, ordered by the keys read in place.
        let docs = self.descendant_docs(scope, discussion, roots).await?;
        let stored = Stored::new(&docs)?;
        roots
            .iter()
            .map(|root| {
                let (lo, hi) = root.descendant_range();
                let picked = window.pick(stored.range(&lo, &hi), |item| item.key());
                let comments = stored.decode(scope, &discussion.id, picked)?;
                Ok((root.clone(), window.page(comments).shared()))
            })
            .collect()
    }

    async fn sub_discussion_counts(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
    ) -> StoreResult<HashMap<FullSlug, u64>> {
        self.descendant_counts(scope, discussion, roots).await
    }
}
