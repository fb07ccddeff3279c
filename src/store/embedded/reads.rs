//! The embedded reads (the document once per request) and the guarded replace of a comment.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};

use super::shape::chain_of;
use super::write::{array_path, element_path};
use super::*;
use crate::domain::tree::Listing;
use crate::domain::tree::Thread;
use crate::domain::{
    share_all, shared_pages, Comment, Discussion, DiscussionId, FullSlug, Layout, Page, Slug,
    Window,
};
use crate::store::api::CommentStore;
use crate::store::changes;
use crate::store::discussions::unfenced;
use crate::store::shared::bson::corrupt;
use crate::store::shared::docs::owned_comment_of;
use crate::store::shared::docs::{element_size, replace_update, unchanged_filter};
use crate::store::shared::error::is_too_large;
use crate::store::shared::error::StoreResult;
use crate::store::shared::scope::ReadScope;

impl Embedded {
    /// The whole thread, read once per request.
    pub(super) async fn thread(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
    ) -> StoreResult<Arc<Thread>> {
        scope
            .slot::<Kept>()
            .documents
            .get_or_load(&discussion.id, || self.load(&discussion.id))
            .await
    }

    pub(super) async fn load(&self, id: &DiscussionId) -> StoreResult<Thread> {
        let found = self
            .coll
            .find_one(doc! { "_id": id.as_str() })
            .projection(doc! { "_id": 0, REPLIES: 1 })
            .await?;
        let comments = match found {
            Some(document) => flatten(document, id)?,
            None => Vec::new(),
        };
        Ok(Thread::new(comments))
    }

    /// One page of top-level comments, read as a `$slice` of the top-level array (which is in
    /// chronological order, see the type's comment) without the nested replies. A window from
    /// the end is a slice counted from the discussion's thread count. `None` for a cursor window
    /// (it would need a search for its position; a loaded document answers it for free).
    pub(super) async fn threads_page(
        &self,
        discussion: &Discussion,
        window: &Window,
    ) -> StoreResult<Option<Page<Comment>>> {
        let id = &discussion.id;
        let Some(span) = window.span(Some(discussion.thread_count), None) else {
            return Ok(None);
        };
        let skip = i32::try_from(span.from).unwrap_or(i32::MAX);
        let take = i32::try_from(span.count).unwrap_or(i32::MAX);
        if take == 0 {
            return Ok(Some(window.page(Vec::new())));
        }
        let without_replies = doc! { "$arrayToObject": { "$filter": {
            "input": { "$objectToArray": "$$c" },
            "as": "f",
            "cond": { "$ne": ["$$f.k", REPLIES] },
        } } };
        let pipeline = vec![
            doc! { "$match": { "_id": id.as_str() } },
            doc! { "$project": { "_id": 0, "page": { "$map": {
                "input": { "$slice": [{ "$ifNull": [format!("${REPLIES}"), []] }, skip, take] },
                "as": "c",
                "in": without_replies,
            } } } },
        ];
        let found: Vec<Document> = self.coll.aggregate(pipeline).await?.try_collect().await?;
        let items = match found.into_iter().next() {
            None => Vec::new(),
            Some(mut found) => match found.remove("page") {
                Some(Bson::Array(items)) => items
                    .into_iter()
                    .map(|item| owned_comment_of(item, id))
                    .collect::<StoreResult<Vec<_>>>()?,
                _ => return Err(corrupt("an embedded page is not an array")),
            },
        };
        Ok(Some(window.page(items)))
    }
}

/// Every comment of a discussion document (or of a comment element), depth first.
pub(super) fn flatten(mut root: Document, id: &DiscussionId) -> StoreResult<Vec<Comment>> {
    let mut out = Vec::new();
    let mut stack = take_replies(&mut root)?;
    while let Some(item) = stack.pop() {
        let Bson::Document(mut element) = item else {
            return Err(corrupt("comment is not a document"));
        };
        stack.extend(take_replies(&mut element)?);
        out.push(owned_comment_of(Bson::Document(element), id)?);
    }
    Ok(out)
}

pub(super) fn take_replies(element: &mut Document) -> StoreResult<Vec<Bson>> {
    match element.remove(REPLIES) {
        None | Some(Bson::Null) => Ok(Vec::new()),
        Some(Bson::Array(replies)) => Ok(replies),
        Some(_) => Err(corrupt("replies is not an array")),
    }
}

#[async_trait]
impl CommentStore for Embedded {
    /// A discussion that reached the size cap goes on in buckets.
    fn promotes_to(&self) -> Option<Layout> {
        Some(Layout::Bucketed)
    }

    /// The post's guarded update checks the fence, the lock and the moderation mode.
    fn posts_from_kept(&self) -> bool {
        true
    }

    /// Every read loads the whole document anyway.
    fn ranks_in_memory(&self) -> bool {
        true
    }

    fn import_scratch(&self) -> Layout {
        Layout::Bucketed
    }

    /// One guarded update at the comment's position: its fields must still be as read, and a
    /// longer text must fit under the cap; the size counter moves by the exact change in bytes.
    async fn replace(
        &self,
        _scope: &ReadScope,
        discussion: &Discussion,
        current: &Comment,
        next: &Comment,
        events: &[crate::domain::Event],
    ) -> StoreResult<bool> {
        if events.is_empty() {
            return self.replace_with(None, discussion, current, next).await;
        }
        self.log
            .atomically(|mut session| async move {
                let replaced = self
                    .replace_with(Some(&mut session), discussion, current, next)
                    .await;
                let told = |done: bool| (done, if done { events.to_vec() } else { Vec::new() });
                (session, replaced.map(told))
            })
            .await
    }

    async fn replace_in(
        &self,
        session: &mut mongodb::ClientSession,
        _scope: &ReadScope,
        discussion: &Discussion,
        current: &Comment,
        next: &Comment,
    ) -> StoreResult<bool> {
        self.replace_with(Some(session), discussion, current, next)
            .await
    }
    async fn list(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        listing: Listing,
        window: &Window,
    ) -> StoreResult<Page<Arc<Comment>>> {
        Ok(self
            .thread(scope, discussion)
            .await?
            .list(listing, window)
            .shared())
    }

    async fn list_shallow(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        listing: Listing,
        window: &Window,
    ) -> StoreResult<Page<Arc<Comment>>> {
        let unread = scope
            .slot::<Kept>()
            .documents
            .peek(&discussion.id)
            .is_none();
        if listing == Listing::Threads && unread {
            if let Some(page) = self.threads_page(discussion, window).await? {
                return Ok(page.shared());
            }
        }
        self.list(scope, discussion, listing, window).await
    }

    async fn by_slugs(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        slugs: &[Slug],
    ) -> StoreResult<Vec<Arc<Comment>>> {
        Ok(share_all(
            self.thread(scope, discussion).await?.by_slugs(slugs),
        ))
    }

    async fn replies(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        parents: &[Slug],
        window: &Window,
    ) -> StoreResult<HashMap<Slug, Page<Arc<Comment>>>> {
        Ok(shared_pages(
            self.thread(scope, discussion)
                .await?
                .replies(parents, window),
        ))
    }

    async fn sub_discussions(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
        window: &Window,
    ) -> StoreResult<HashMap<FullSlug, Page<Arc<Comment>>>> {
        Ok(shared_pages(
            self.thread(scope, discussion)
                .await?
                .sub_discussions(roots, window),
        ))
    }

    async fn sub_discussion_counts(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
    ) -> StoreResult<HashMap<FullSlug, u64>> {
        Ok(self
            .thread(scope, discussion)
            .await?
            .sub_discussion_counts(roots))
    }
}

impl Embedded {
    /// One guarded update at the comment's position (in `session` when given): its fields must
    /// still be as read, and a longer text must fit under the cap; the size counter moves by
    /// the exact change in bytes.
    async fn replace_with(
        &self,
        session: Option<&mut mongodb::ClientSession>,
        discussion: &Discussion,
        current: &Comment,
        next: &Comment,
    ) -> StoreResult<bool> {
        let id = &discussion.id;
        let at = self.locate(id, &chain_of(&current.slug)).await?;
        let prefix = format!("{}.", element_path(&at.path));
        let author = self.author_change(id, current, next).await?;
        let growth = element_size(next, true)? - element_size(current, true)?
            + author.as_ref().map_or(0, |a| a.growth);
        let mut filter = unfenced(id);
        // The guard matches inside the comment's own array with `$elemMatch`: on a dotted path
        // through arrays (`replies.3.status`) a null (absent field) would also match by the
        // path's other reading (a field named `3` of any element, absent everywhere), so the
        // guard of a field that is absent when unchanged (status, reason, report count) would
        // let a concurrent change through and be lost.
        let (array, _) = at.path.split_at(at.path.len().saturating_sub(1));
        filter.insert(
            array_path(array),
            doc! { "$elemMatch": unchanged_filter("", current)? },
        );
        let budget = self.budget(id, growth.max(0))?;
        if growth > 0 {
            filter.insert(BYTES, doc! { "$not": { "$gt": budget } });
        }
        let mut update = replace_update(&prefix, next)?;
        update.insert("$inc", doc! { BYTES: growth });
        let mut set = doc! { changes::FIELD: changes::change_mark(current, next) };
        if let Some(author) = author {
            filter.extend(author.guard);
            set.extend(author.set);
        }
        match update.get_document_mut("$set") {
            Ok(fields) => fields.extend(set),
            Err(_) => {
                update.insert("$set", set);
            }
        }
        let update = self.coll.update_one(filter, update);
        let updated = match session {
            Some(session) => update.session(session).await,
            None => update.await,
        };
        match updated {
            Ok(result) if result.matched_count == 1 => Ok(true),
            Ok(_) if growth > 0 => {
                let at = self.locate(id, &chain_of(&current.slug)).await?;
                self.refused(id, &at, budget).map(|_| false)
            }
            // A guard refused it: read again (`Moving` when the discussion is moving).
            Ok(_) => self
                .locate(id, &chain_of(&current.slug))
                .await
                .map(|_| false),
            Err(err) if is_too_large(&err) => Err(self.too_large(id)),
            Err(err) => Err(err.into()),
        }
    }
}
