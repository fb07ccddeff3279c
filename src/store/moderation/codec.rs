//! The documents of `held_comments`: a held comment (its author keyed by their comment number,
//! see `shared::numbers`) or a queue entry of a public comment, each under `<discussion>:<slug>`.

use mongodb::bson::{doc, Bson, Document};

use crate::domain::{
    Author, Comment, CommentStatus, DiscussionId, FullSlug, Held, Micros, Slug, Standing,
};
use crate::store::api::{QueueEntry, Report, Waiting};
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::numbers;

/// A held comment's or queue entry's document id: unique per discussion and slug.
pub(super) fn key(discussion: &DiscussionId, slug: &Slug) -> String {
    format!("{discussion}:{slug}")
}

/// A report's document id: one per comment and reporter.
pub(super) fn report_key(report: &Report) -> String {
    format!("{}:{}:{}", report.discussion, report.slug, report.reporter)
}

/// A held comment's document.
pub(super) fn to_doc(held: &Held) -> Document {
    let c = &held.comment;
    let mut doc = doc! {
        "_id": key(&c.discussion_id, &c.slug),
        "discussion_id": c.discussion_id.as_str(),
        "slug": c.slug.as_str(),
        "full_slug": c.full_slug.as_str(),
        "parent": c.parent.as_ref().map(Slug::as_str),
        "author": numbers::author_doc(&c.author, c.number),
        "text": c.text.as_deref(),
        "submitted": c.posted.0,
        "since": c.posted.0,
        "status": c.standing.status.as_str(),
        "reason": c.standing.reason.as_deref(),
    };
    if let Some(html) = &c.html {
        doc.insert("html", html);
    }
    doc
}

/// A held comment from its document.
pub(super) fn from_doc(doc: &Document) -> StoreResult<Held> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("held comment without {what}"));
    let text = |field: &str| {
        doc.get_str(field)
            .map(str::to_owned)
            .map_err(|_| corrupt(field))
    };
    let optional = |field: &str| match doc.get(field) {
        Some(Bson::String(s)) => Some(s.clone()),
        _ => None,
    };
    let author = doc.get_document("author").map_err(|_| corrupt("author"))?;
    let status = doc
        .get_str("status")
        .ok()
        .and_then(CommentStatus::from_stored)
        .ok_or_else(|| corrupt("status"))?;
    let discussion = DiscussionId::parse(&text("discussion_id")?)
        .map_err(|_| corrupt("a valid discussion id"))?;
    Ok(Held {
        comment: Comment {
            discussion_id: discussion,
            slug: Slug::from_stored(text("slug")?),
            full_slug: FullSlug::from_stored(text("full_slug")?),
            parent: optional("parent").map(Slug::from_stored),
            posted: Micros(doc.get_i64("submitted").map_err(|_| corrupt("submitted"))?),
            author: Author {
                id: author
                    .get_str("id")
                    .map_err(|_| corrupt("author id"))?
                    .to_owned(),
                name: author
                    .get_str("name")
                    .map_err(|_| corrupt("author name"))?
                    .to_owned(),
            },
            text: Some(text("text")?),
            html: optional("html"),
            edited: None,
            edited_by: None,
            deleted: false,
            revisions: Vec::new(),
            reply_count: 0,
            standing: Standing {
                status,
                reason: optional("reason"),
                reports: 0,
            },
            votes: crate::domain::Votes::default(),
            number: author
                .get_str(numbers::KEY)
                .ok()
                .and_then(numbers::number_of),
        },
    })
}

/// A queue entry from its document.
pub(super) fn entry_of(doc: &Document) -> StoreResult<QueueEntry> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("queue entry without {what}"));
    let key = doc.get_str("_id").map_err(|_| corrupt("_id"))?.to_owned();
    let since = Micros(doc.get_i64("since").map_err(|_| corrupt("since"))?);
    let waiting = match doc.get_bool("public") {
        Ok(true) => Waiting::Public {
            discussion: DiscussionId::parse(
                doc.get_str("discussion_id")
                    .map_err(|_| corrupt("discussion_id"))?,
            )
            .map_err(|_| corrupt("a valid discussion id"))?,
            slug: Slug::from_stored(doc.get_str("slug").map_err(|_| corrupt("slug"))?.to_owned()),
        },
        _ => Waiting::Held(Box::new(from_doc(doc)?)),
    };
    Ok(QueueEntry {
        since,
        key,
        waiting,
    })
}
