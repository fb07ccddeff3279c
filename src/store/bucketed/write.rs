//! Posting into buckets: the seed's loop made safe under concurrency (see docs/ARCHITECTURE.md).

use async_trait::async_trait;
use mongodb::bson::{doc, to_bson};
use mongodb::options::ReturnDocument;
use mongodb::ClientSession;

use super::shapes::{comments_of, order_key, Target, FLOOR, NUM_PAGES};
use super::Bucketed;
use crate::domain::{Comment, Discussion, DiscussionId, Micros, Slug};
use crate::store::bson::{corrupt, int_field};
use crate::store::docs::CommentDoc;
use crate::store::error::is_duplicate_key;
use crate::store::write::{Attempt, ParentPaths, PostSteps};
use crate::store::{StoreError, StoreResult};

/// A post in progress: where posts go, the parent and its page, and the last slug found free.
pub(in crate::store) struct PostState {
    target: Target,
    parent: Option<(i64, Comment)>,
    free_slug: Option<Slug>,
}

impl Bucketed {
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

    /// Counts a new reply in its parent's `reply_count` and in its thread's page total.
    async fn count_reply(
        &self,
        id: &DiscussionId,
        comment: &Comment,
        parent_page: Option<i64>,
        session: &mut ClientSession,
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
                .session(&mut *session)
                .await?;
        } else {
            self.pages
                .update_one(
                    parent_filter,
                    doc! { "$inc": { "comments.$.reply_count": 1_i64 } },
                )
                .session(&mut *session)
                .await?;
            self.pages
                .update_one(
                    doc! { "discussion_id": id.as_str(), "comments.slug": root.as_str() },
                    doc! { "$inc": { "thread_total": 1_i64 } },
                )
                .session(&mut *session)
                .await?;
        }
        Ok(())
    }
}

#[async_trait]
impl PostSteps for Bucketed {
    type State = PostState;

    async fn prepare(
        &self,
        discussion: &Discussion,
        parent: Option<&Slug>,
    ) -> StoreResult<(Option<ParentPaths>, PostState)> {
        let (target, parent) = tokio::try_join!(
            self.target(&discussion.id),
            self.find_parent(&discussion.id, parent)
        )?;
        let paths = parent.as_ref().map(|(_, c)| c.into());
        let state = PostState {
            target,
            parent,
            free_slug: None,
        };
        Ok((paths, state))
    }

    /// Pages hold disjoint runs of the chronological order: a comment comes after the last key
    /// of the page before the current one.
    fn floor(&self, state: &PostState, _parent: Option<&Slug>) -> Option<Micros> {
        Some(state.target.floor_time())
    }

    /// `$push`+`$inc` into the current page while it has room, with upsert; E11000 means the
    /// page exists and did not match: full (move the discussion on to the next page, a no-op
    /// when another post did) or created by a concurrent post a moment ago (try it again).
    async fn attempt(
        &self,
        discussion: &Discussion,
        comment: &Comment,
        state: &mut PostState,
        session: &mut ClientSession,
    ) -> StoreResult<Attempt> {
        // Slug uniqueness across pages: looked up once per slug part (see ARCHITECTURE.md).
        if state.free_slug.as_ref() != Some(&comment.slug) {
            if self.slug_taken(&discussion.id, &comment.slug).await? {
                return Ok(Attempt::Retry);
            }
            state.free_slug = Some(comment.slug.clone());
        }
        let id = discussion.id.as_str();
        let page = state.target.page;
        let key = order_key(comment.posted, &comment.slug);
        let element = to_bson(&CommentDoc::from_comment(comment, false)).map_err(corrupt)?;
        let top = i64::from(comment.parent.is_none());
        let result = self
            .pages
            .update_one(
                doc! { "discussion_id": id, "page": page, "count": { "$lt": self.cap } },
                doc! {
                    "$push": { "comments": { "$each": [element], "$sort": { "posted": 1, "slug": 1 } } },
                    "$inc": { "count": 1_i64, "roots": top, "thread_total": top },
                    "$min": { "first_key": &key },
                    "$max": { "last_key": &key },
                },
            )
            .upsert(true)
            .session(&mut *session)
            .await;
        match result {
            Ok(_) => Ok(Attempt::Stored),
            Err(err) if is_duplicate_key(&err) => {
                // The header is read and the page moved on outside the post's transaction.
                let header = self
                    .pages
                    .find_one(doc! { "discussion_id": id, "page": page })
                    .projection(doc! { "count": 1, "last_key": 1 })
                    .await?;
                if let Some(header) = header {
                    if int_field(&header, "count")? >= self.cap {
                        let last_key = header.get_str("last_key").unwrap_or_default();
                        state.target = self.next_page(&discussion.id, page, last_key).await?;
                    }
                }
                Ok(Attempt::Moved)
            }
            Err(err) => Err(err.into()),
        }
    }

    async fn count(
        &self,
        discussion: &Discussion,
        comment: &Comment,
        state: &PostState,
        session: &mut ClientSession,
    ) -> StoreResult<()> {
        let parent_page = state
            .parent
            .as_ref()
            .filter(|(_, p)| comment.parent.as_ref() == Some(&p.slug))
            .map(|(page, _)| *page);
        self.count_reply(&discussion.id, comment, parent_page, session)
            .await?;
        self.discussions
            .record_post(&discussion.id, comment, session)
            .await
    }
}
