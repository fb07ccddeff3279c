//! An author's history through the router: one aggregation made of every layout's part and
//! the held comments' (see `shared::authored` for the parts and why they join as they do).
//!
//! The per-comment layout leads, over its own collection: its part is one index range, sorted
//! and limited there (on MongoDB the only part whose reads stop at the limit; a page of the
//! other layouts holds many people's comments). A `$facet` then makes one seed document, with
//! the author's id, whatever the lead found; a second `$facet` runs the other parts from it,
//! each sorted and limited; the items of all four are merged, sorted and limited. Each item
//! carries its discussion's metadata and whether it is gone (a move's copy): gone items keep
//! their place in the order, so a page never skips a comment, and are left out here.

use std::sync::Arc;

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document, RawDocumentBuf};

use super::Store;
use crate::domain::paging::Cursor;
use crate::domain::{DiscussionId, Layout, Slug};
use crate::store::api::{AuthoredComment, HistoryStore};
use crate::store::bucketed::Bucketed;
use crate::store::embedded::Embedded;
use crate::store::moderation::held::HeldComments;
use crate::store::per_comment::PerComment;
use crate::store::shared::authored::{
    with_discussion, ByAuthor, AUTHOR, COMMENT, DISCUSSION, GONE, HELD, META, POSTED, SLUG,
};
use crate::store::shared::bson::corrupt;
use crate::store::shared::docs::owned_comment_of;
use crate::store::shared::error::{StoreError, StoreResult};

/// Reads of one page at most: a page whose every comment is a stale copy reads on past them.
const MAX_ROUNDS: usize = 8;

/// How a part's items are checked against their discussions.
#[derive(Clone, Copy)]
enum Check {
    /// Gone unless their discussion is in this layout now (a layout's items).
    InLayout(Layout),
    /// Gone unless their discussion exists (held comments).
    Exists,
    /// The part checks them itself (the embedded layout reads the discussion anyway).
    ByThePart,
}

impl Store {
    /// The aggregation of an author's history (see the module documentation). With
    /// `of.bodies`, its documents are items with their comments and, with `metadata`, their
    /// discussions' metadata; without, they are counts per discussion, `{n}`. Each says
    /// whether it is [`GONE`].
    fn authored_pipeline(of: &ByAuthor<'_>, metadata: Option<&Document>) -> Vec<Document> {
        // What follows a part: the check of its items' discussions, item by item, or
        // discussion by discussion for a count.
        let checked = |check: Check| -> Vec<Document> {
            let mut stages = Vec::new();
            if !of.bodies {
                stages.push(doc! { "$group": {
                    "_id": format!("${DISCUSSION}"), "n": { "$sum": 1 }, GONE: { "$max": format!("${GONE}") },
                } });
                stages.push(doc! { "$project": { "_id": 0, DISCUSSION: "$_id", "n": 1, GONE: 1 } });
            }
            let layout = match check {
                Check::InLayout(layout) => Some(layout),
                Check::Exists => None,
                Check::ByThePart => return stages,
            };
            stages.extend(with_discussion(layout, metadata.filter(|_| of.bodies)));
            stages
        };
        let mut stages = PerComment::authored_lead(of);
        stages.extend(checked(Check::InLayout(Layout::PerComment)));
        // One document whatever the lead found: the seed of the other parts.
        stages.push(doc! { "$facet": { "lead": [{ "$match": {} }] } });
        stages.push(doc! { "$project": { "lead": 1, AUTHOR: of.author() } });
        let part = |stages: Vec<Document>, after: Vec<Document>| -> Vec<Bson> {
            let mut part = vec![doc! { "$project": { "_id": 0, AUTHOR: 1 } }];
            part.extend(stages);
            part.extend(of.newest());
            part.extend(after);
            part.into_iter().map(Bson::Document).collect()
        };
        let mut held = HeldComments::authored_branch(of);
        held.push(doc! { "$set": { HELD: true } });
        stages.push(doc! { "$facet": {
            "lead": [{ "$unwind": "$lead" }, { "$replaceWith": "$lead" }],
            "bucketed": part(Bucketed::authored_branch(of), checked(Check::InLayout(Layout::Bucketed))),
            "embedded": part(Embedded::authored_branch(of, metadata), checked(Check::ByThePart)),
            "held": part(held, checked(Check::Exists)),
        } });
        stages.push(doc! { "$project": { "items": {
            "$concatArrays": ["$lead", "$bucketed", "$embedded", "$held"],
        } } });
        stages.push(doc! { "$unwind": "$items" });
        stages.push(doc! { "$replaceWith": "$items" });
        stages
    }

    /// One read of up to `limit` items after `after`: the comments that are not gone, whether
    /// more items follow, and the cursor of the last item read (gone or not).
    async fn authored_round(
        &self,
        author: &str,
        after: Option<&Cursor>,
        limit: usize,
    ) -> StoreResult<(Vec<AuthoredComment>, bool, Option<Cursor>)> {
        let of = ByAuthor {
            author,
            before: after,
            limit: limit.saturating_add(1),
            bodies: true,
        };
        let metadata = self.discussions.projection();
        let mut pipeline = Self::authored_pipeline(&of, Some(&metadata));
        pipeline.extend(of.newest());
        let (per_comment, ..) = self.layouts.authored();
        let items: Vec<Document> = per_comment
            .authored_collection()
            .aggregate(pipeline)
            .await?
            .try_collect()
            .await?;
        let more = items.len() > limit;
        let mut last = None;
        let mut comments = Vec::with_capacity(limit);
        for item in items.into_iter().take(limit) {
            last = Some(key_of(&item)?);
            if let Some(comment) = self.authored_of(&item)? {
                comments.push(comment);
            }
        }
        Ok((comments, more, last))
    }

    /// A comment of an item; `None` when it is gone, or when what was found at an embedded
    /// comment's positions is another comment (logged: the array of authors is out of step).
    fn authored_of(&self, item: &Document) -> StoreResult<Option<AuthoredComment>> {
        if item.get_bool(GONE).unwrap_or(false) {
            return Ok(None);
        }
        let meta = item
            .get_document(META)
            .map_err(|_| corrupt("an author's comment without its discussion"))?;
        let raw = RawDocumentBuf::from_document(meta).map_err(corrupt)?;
        let discussion = Arc::new(self.discussions.read(&raw)?);
        let held = item.get_bool(HELD).unwrap_or(false);
        let stored = item.get(COMMENT).cloned().unwrap_or(Bson::Null);
        let comment = match (held, stored) {
            (true, Bson::Document(stored)) => HeldComments::authored_of(&stored)?.comment,
            (true, _) => {
                return Err(corrupt(
                    "a held comment of an author's history is not a document",
                ))
            }
            (false, stored) => owned_comment_of(stored, &discussion.id)?,
        };
        let slug = item.get_str(SLUG).map_err(corrupt)?;
        if comment.slug.as_str() != slug {
            tracing::warn!(discussion = %discussion.id, slug, found = %comment.slug, "an author's comment was not at its positions: left out");
            return Ok(None);
        }
        Ok(Some(AuthoredComment {
            discussion,
            comment,
            held,
        }))
    }
}

/// The position of an item in its author's history.
fn key_of(item: &Document) -> StoreResult<Cursor> {
    let posted = item
        .get_i64(POSTED)
        .map_err(|_| corrupt("an author's comment without its time"))?;
    let discussion = item.get_str(DISCUSSION).map_err(corrupt)?;
    Ok(Cursor::ByAuthor(
        crate::domain::Micros(posted),
        DiscussionId::parse(discussion).map_err(|_| corrupt("a discussion id"))?,
        Slug::from_stored(item.get_str(SLUG).map_err(corrupt)?.to_owned()),
    ))
}

#[async_trait]
impl HistoryStore for Store {
    async fn authored(
        &self,
        author: &str,
        after: Option<&Cursor>,
        limit: usize,
    ) -> StoreResult<(Vec<AuthoredComment>, bool)> {
        let mut from = after.cloned();
        for _ in 0..MAX_ROUNDS {
            let (comments, more, last) = self.authored_round(author, from.as_ref(), limit).await?;
            if !comments.is_empty() || !more {
                return Ok((comments, more));
            }
            from = last;
        }
        Err(StoreError::Busy(format!(
            "the comments of {author} read so far are all copies that moves between layouts \
             left behind: try again once those moves are over"
        )))
    }

    async fn authored_count(&self, author: &str, cap: u64) -> StoreResult<u64> {
        let of = ByAuthor {
            author,
            before: None,
            limit: usize::try_from(cap.saturating_add(1)).unwrap_or(usize::MAX),
            bodies: false,
        };
        let mut pipeline = Self::authored_pipeline(&of, None);
        pipeline.push(doc! { "$match": { GONE: { "$ne": true } } });
        pipeline.push(doc! { "$group": { "_id": Bson::Null, "n": { "$sum": "$n" } } });
        let (per_comment, ..) = self.layouts.authored();
        let counted: Vec<Document> = per_comment
            .authored_collection()
            .aggregate(pipeline)
            .await?
            .try_collect()
            .await?;
        let n = counted
            .first()
            .and_then(|d| d.get("n"))
            .and_then(crate::store::shared::bson::as_i64)
            .unwrap_or(0);
        Ok(u64::try_from(n).unwrap_or(0).min(cap))
    }
}
