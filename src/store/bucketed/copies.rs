//! Copies of voted comments (`voted_copies`): every comment of a bucketed discussion that was
//! ever voted on, as its page holds it (with its page and its replies per page), so that a
//! ranked page reads the comments its tallies name in one bounded read instead of the pages
//! they are spread over (see docs/ARCHITECTURE.md, "Votes and ranked orders").
//!
//! A copy changes with its comment, in the same transaction: a vote writes it whole, a change
//! of the comment (edit, delete, moderation, erasure, stored HTML) writes it whole, guarded by
//! the comment's reply count as read, and a reply to a comment that may have one counts itself
//! in it as in the page. Without transactions every one of those writes removes the copy
//! before it changes the comment (ranked pages then read the pages): a crash between two
//! writes never leaves a copy showing what its comment no longer is. A move writes the copies
//! with the pages, and clears them with them.

use futures::TryStreamExt as _;
use mongodb::bson::{doc, Bson, Document, RawDocumentBuf};
use mongodb::ClientSession;

use super::kept::Kept;
use super::shapes::{reply_pages_of, REPLY_PAGES};
use super::Bucketed;
use crate::domain::{Comment, Discussion, DiscussionId, Slug};
use crate::store::shared::bson::{corrupt, int_field};
use crate::store::shared::docs::{raw_comment_of, CommentDoc};
use crate::store::shared::error::StoreResult;
use crate::store::shared::scope::ReadScope;
use crate::store::shared::sharding::{KeyKind, ShardKey};

/// The collection of copies.
pub(crate) const COPIES: &str = "voted_copies";

/// The `_id` of the page that holds the comment.
const PAGE_ID: &str = "page_id";
/// The number of that page.
const PAGE: &str = "page";

/// The copies' shard key: their unique index, discussion then slug.
pub(crate) const COPIES_KEY: ShardKey = ShardKey {
    collection: COPIES,
    fields: &[
        ("discussion_id", KeyKind::Ranged),
        ("slug", KeyKind::Ranged),
    ],
    unique: true,
};

/// Whether a comment may have a copy: it was voted on (a vote number stays once given).
pub(super) fn voted(comment: &Comment) -> bool {
    comment.votes.seq > 0
}

/// The filter of one comment's copy.
pub(super) fn copy_filter(id: &DiscussionId, slug: &Slug) -> Document {
    doc! { "discussion_id": id.as_str(), "slug": slug.as_str() }
}

/// A comment's copy: its stored form with its discussion (its author without the author's
/// numbering, which no ranked page shows), the page that holds it, and its replies per page.
pub(super) fn copy_of(
    comment: &Comment,
    (page_id, page): (&Bson, i64),
    reply_pages: Option<&[(i64, u64)]>,
) -> StoreResult<Document> {
    let unnumbered = Comment {
        number: None,
        ..comment.clone()
    };
    let mut copy = mongodb::bson::to_document(&CommentDoc::from_comment(&unnumbered, true))
        .map_err(corrupt)?;
    copy.insert(PAGE_ID, page_id.clone());
    copy.insert(PAGE, page);
    if let Some(pages) = reply_pages.filter(|p| !p.is_empty()) {
        let counts: Document = pages
            .iter()
            .map(|(page, n)| {
                (
                    page.to_string(),
                    Bson::Int64(i64::try_from(*n).unwrap_or(0)),
                )
            })
            .collect();
        copy.insert(REPLY_PAGES, counts);
    }
    Ok(copy)
}

impl Bucketed {
    /// The unique index of the copies: a ranked page's read is one range per comment of it.
    pub(super) async fn ensure_copy_indexes(&self) -> StoreResult<()> {
        self.copies
            .create_index(crate::store::shared::connect::index_model(
                "discussion_slug",
                doc! { "discussion_id": 1, "slug": 1 },
                true,
            ))
            .await?;
        Ok(())
    }

    /// The copies of these comments that exist, decoded and remembered in the request's
    /// scope with their pages and replies per page: one command, one index range per slug.
    pub(super) async fn copies_of(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        slugs: &[&str],
    ) -> StoreResult<Vec<Comment>> {
        if slugs.is_empty() {
            return Ok(Vec::new());
        }
        let id = &discussion.id;
        let filter = doc! { "discussion_id": id.as_str(), "slug": { "$in": slugs } };
        let docs: Vec<RawDocumentBuf> = self
            .copies
            .clone_with_type::<RawDocumentBuf>()
            .find(filter)
            .await?
            .try_collect()
            .await?;
        let kept = scope.slot::<Kept>();
        let mut out = Vec::with_capacity(docs.len());
        for raw in docs {
            let comment = raw_comment_of(mongodb::bson::RawBsonRef::Document(&raw), id)?;
            let doc = Document::try_from(raw.as_ref()).map_err(corrupt)?;
            let page_id = doc
                .get(PAGE_ID)
                .cloned()
                .ok_or_else(|| corrupt("a copy's page"))?;
            kept.pages_of
                .remember(id, comment.slug.clone(), (page_id, int_field(&doc, PAGE)?));
            if let Ok(pages) = doc.get_document(REPLY_PAGES) {
                kept.reply_pages
                    .remember(id, comment.slug.clone(), reply_pages_of(pages));
            }
            out.push(comment);
        }
        kept.seen.remember_all(&out);
        Ok(out)
    }

    /// Keeps the copy of `next` in step with the change of its comment being written in
    /// `session`: with transactions, writes it (the caller's guard made sure the replies it
    /// counts are those stored); without, removes it, before the comment changes.
    pub(super) async fn follow(
        &self,
        session: &mut ClientSession,
        scope: &ReadScope,
        next: &Comment,
        place: (&Bson, i64),
    ) -> StoreResult<()> {
        let filter = copy_filter(&next.discussion_id, &next.slug);
        if !self.writer.transactions {
            self.copies.delete_one(filter).session(session).await?;
            return Ok(());
        }
        let pages = scope
            .slot::<Kept>()
            .reply_pages
            .get(&next.discussion_id, &next.slug);
        let copy = copy_of(next, place, pages.as_deref())?;
        self.copies
            .replace_one(filter, copy)
            .upsert(true)
            .session(session)
            .await?;
        Ok(())
    }

    /// Counts replies stored in `page` in the copies of their parents (`parents`, each once
    /// per reply) that may have one, in `session`: one command. Without transactions the
    /// copies are removed instead.
    pub(super) async fn count_in_copies(
        &self,
        id: &DiscussionId,
        parents: &[&Slug],
        page: i64,
        session: &mut ClientSession,
    ) -> StoreResult<()> {
        if parents.is_empty() {
            return Ok(());
        }
        if !self.writer.transactions {
            let slugs: Vec<&str> = parents.iter().map(|s| s.as_str()).collect();
            self.copies
                .delete_many(doc! { "discussion_id": id.as_str(), "slug": { "$in": slugs } })
                .session(session)
                .await?;
            return Ok(());
        }
        let statements = parents
            .iter()
            .map(|parent| {
                doc! {
                    "q": copy_filter(id, parent),
                    "u": { "$inc": {
                        "reply_count": 1_i64,
                        format!("{REPLY_PAGES}.{page}"): 1_i64,
                    } },
                }
            })
            .collect();
        self.copies
            .update_statements(statements, true, session)
            .await?;
        Ok(())
    }

    /// Removes every copy of the discussion's comments.
    pub(super) async fn clear_copies(&self, id: &DiscussionId) -> StoreResult<()> {
        self.copies
            .delete_many(doc! { "discussion_id": id.as_str() })
            .await?;
        Ok(())
    }
}

/// The write of a copy that follows a change of its comment (see `writer::Follow`).
pub(super) struct Following<'a> {
    pub layout: &'a Bucketed,
    pub scope: &'a ReadScope,
    pub next: &'a Comment,
    pub place: (Bson, i64),
}

#[async_trait::async_trait]
impl crate::store::shared::writer::Follow for Following<'_> {
    async fn follow(&self, session: &mut ClientSession) -> StoreResult<()> {
        let place = (&self.place.0, self.place.1);
        self.layout
            .follow(session, self.scope, self.next, place)
            .await
    }
}
