//! The BSON shape of a comment, shared by every layout (a layout adds only its own fields).

use mongodb::bson::{doc, from_document, from_slice, to_bson, Bson, Document, RawBsonRef};
use serde::{Deserialize, Serialize};

use super::bson::corrupt;
use super::error::StoreResult;
use super::numbers;
use crate::domain::{
    Author, Comment, CommentStatus, DiscussionId, FullSlug, Micros, Revision, Slug, Standing, Votes,
};

/// An author as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct AuthorDoc {
    /// Author id (token `sub`).
    pub id: String,
    /// Display name (token `name`).
    pub name: String,
    /// A comment's author: the comment's place among theirs, as a key (`numbers::key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<String>,
}

impl AuthorDoc {
    fn of(author: &Author) -> Self {
        Self {
            id: author.id.clone(),
            name: author.name.clone(),
            k: None,
        }
    }

    /// A comment's author, with the comment's number.
    fn numbered(author: &Author, number: Option<u64>) -> Self {
        Self {
            k: number.map(|n| numbers::key(n, &author.id)),
            ..Self::of(author)
        }
    }

    fn into_author(self) -> Author {
        Author {
            id: self.id,
            name: self.name,
        }
    }
}

/// An earlier version of a comment's text, as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RevisionDoc {
    /// The text of that version.
    pub text: String,
    /// Microseconds since the epoch when it was written.
    pub edited: i64,
    /// Who wrote it.
    pub editor: AuthorDoc,
}

/// A comment as stored. `discussion_id` is present where the comment lives outside its
/// discussion document (per-comment layout).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CommentDoc {
    /// The document's id where the comment is a document of its own (per-comment layout), as
    /// read; never written (the database gives it).
    #[serde(rename = "_id", default, skip_serializing)]
    pub id: Option<Bson>,
    /// Owning discussion (per-comment layout only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discussion_id: Option<String>,
    /// Path of slug parts.
    pub slug: String,
    /// Sortable path of `time:part` segments.
    pub full_slug: String,
    /// Parent slug, null at the top level.
    #[serde(default)]
    pub parent: Option<String>,
    /// Microseconds since the epoch.
    pub posted: i64,
    /// Who posted it.
    pub author: AuthorDoc,
    /// The text, null once deleted.
    #[serde(default)]
    pub text: Option<String>,
    /// The text as HTML, rendered when it was written (absent once deleted, and in comments
    /// stored before HTML was stored with them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub html: Option<String>,
    /// Microseconds since the epoch of the last edit.
    #[serde(default)]
    pub edited: Option<i64>,
    /// Who wrote the current text when it is not the author (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_by: Option<AuthorDoc>,
    /// Tombstone flag.
    #[serde(default)]
    pub deleted: bool,
    /// Earlier versions, oldest first (absent when there are none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revisions: Vec<RevisionDoc>,
    /// Number of direct replies.
    #[serde(default)]
    pub reply_count: i64,
    /// `pending` or `rejected` for a placeholder (absent while it is public).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Why it is held or rejected (absent without a reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moderation_reason: Option<String>,
    /// Reports since a moderator last approved it (absent without any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_count: Option<i64>,
    /// Votes for it (absent without any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<i64>,
    /// Votes against it (absent without any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down: Option<i64>,
    /// The discussion's vote number of the last vote that changed `up` or `down` (absent
    /// before any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vseq: Option<i64>,
    /// Position in its discussion's posting order, from 1 (per-comment layout, sequenced
    /// discussions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    /// Position among its discussion's top-level comments, from 1 (top-level comments of
    /// sequenced discussions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_seq: Option<i64>,
    /// Its thread's number (the top-level comment's `thread_seq`), where the discussion keeps
    /// block counts of its threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<i64>,
    /// The comments of its thread, itself included (top-level comments, where the discussion
    /// keeps block counts of its threads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_total: Option<i64>,
    /// The comments of its subtree, itself left out (where the discussion keeps subtree sizes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descendants: Option<i64>,
    /// The size of each reply's subtree, the reply included, by the reply's last `full_slug`
    /// segment (where the discussion keeps subtree sizes and the comment has replies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_sizes: Option<Document>,
}

impl CommentDoc {
    /// The stored form of a comment; `with_discussion` adds the `discussion_id` field.
    pub(crate) fn from_comment(comment: &Comment, with_discussion: bool) -> Self {
        Self {
            id: None,
            discussion_id: with_discussion.then(|| comment.discussion_id.as_str().to_owned()),
            slug: comment.slug.as_str().to_owned(),
            full_slug: comment.full_slug.as_str().to_owned(),
            parent: comment.parent.as_ref().map(|p| p.as_str().to_owned()),
            posted: comment.posted.0,
            author: AuthorDoc::numbered(&comment.author, comment.number),
            text: comment.text.clone(),
            html: comment.html.clone(),
            edited: comment.edited.map(|m| m.0),
            edited_by: comment.edited_by.as_ref().map(AuthorDoc::of),
            deleted: comment.deleted,
            revisions: comment
                .revisions
                .iter()
                .map(|r| RevisionDoc {
                    text: r.text.clone(),
                    edited: r.edited.0,
                    editor: AuthorDoc::of(&r.editor),
                })
                .collect(),
            reply_count: i64::try_from(comment.reply_count).unwrap_or(i64::MAX),
            status: (!comment.standing.is_public())
                .then(|| comment.standing.status.as_str().to_owned()),
            moderation_reason: comment.standing.reason.clone(),
            report_count: (comment.standing.reports > 0)
                .then(|| i64::try_from(comment.standing.reports).unwrap_or(i64::MAX)),
            up: positive(comment.votes.up),
            down: positive(comment.votes.down),
            vseq: positive(comment.votes.seq),
            seq: None,
            thread_seq: None,
            thread: None,
            thread_total: None,
            descendants: None,
            reply_sizes: None,
        }
    }

    /// The domain comment.
    pub(crate) fn into_comment(self, discussion_id: &DiscussionId) -> Comment {
        Comment {
            discussion_id: discussion_id.clone(),
            slug: Slug::from_stored(self.slug),
            full_slug: FullSlug::from_stored(self.full_slug),
            parent: self.parent.map(Slug::from_stored),
            posted: Micros(self.posted),
            number: self.author.k.as_deref().and_then(numbers::number_of),
            author: self.author.into_author(),
            text: self.text,
            html: self.html,
            edited: self.edited.map(Micros),
            edited_by: self.edited_by.map(AuthorDoc::into_author),
            deleted: self.deleted,
            revisions: self
                .revisions
                .into_iter()
                .map(|r| Revision {
                    text: r.text,
                    edited: Micros(r.edited),
                    editor: r.editor.into_author(),
                })
                .collect(),
            reply_count: u64::try_from(self.reply_count).unwrap_or(0),
            standing: Standing {
                // A status this version does not know hides the comment rather than show it.
                status: self.status.as_deref().map_or(CommentStatus::Approved, |s| {
                    CommentStatus::from_stored(s).unwrap_or(CommentStatus::Pending)
                }),
                reason: self.moderation_reason,
                reports: self
                    .report_count
                    .and_then(|n| u64::try_from(n).ok())
                    .unwrap_or(0),
            },
            votes: Votes {
                up: counter(self.up),
                down: counter(self.down),
                seq: counter(self.vseq),
            },
        }
    }
}

/// A counter as stored: absent at 0.
fn positive(n: u64) -> Option<i64> {
    (n > 0).then(|| i64::try_from(n).unwrap_or(i64::MAX))
}

/// A stored counter (0 when absent or negative).
fn counter(stored: Option<i64>) -> u64 {
    stored.and_then(|n| u64::try_from(n).ok()).unwrap_or(0)
}

/// The fields of a comment that change after it is posted (edits, deletion, moderation, and
/// the author: only the erasure of a person changes it, see `domain::erasure`).
const CHANGEABLE: [&str; 13] = [
    "author",
    "text",
    "html",
    "edited",
    "edited_by",
    "deleted",
    "revisions",
    "status",
    "moderation_reason",
    "report_count",
    "up",
    "down",
    "vseq",
];

/// The changeable fields of a stored comment, as `CommentDoc` writes them (absent ones are
/// `None`).
fn changeable(comment: &Comment) -> StoreResult<Vec<(&'static str, Option<Bson>)>> {
    let Bson::Document(mut stored) =
        to_bson(&CommentDoc::from_comment(comment, false)).map_err(corrupt)?
    else {
        return Err(corrupt("a comment did not serialize to a document"));
    };
    Ok(CHANGEABLE
        .iter()
        .map(|field| (*field, stored.remove(*field)))
        .collect())
}

/// A filter that matches the comment at `prefix` (`""`, `"comments.$."`-style paths without the
/// positional part, or `"replies.0.replies.2."`) only while its changeable fields are as in
/// `current`.
pub(crate) fn unchanged_filter(prefix: &str, current: &Comment) -> StoreResult<Document> {
    let mut filter = Document::new();
    filter.insert(format!("{prefix}slug"), current.slug.as_str());
    for (field, value) in changeable(current)? {
        // `revisions` follows from the text and edit time, `html` from the text; comparing them
        // is left out, except an absent HTML (a comment whose HTML is being stored is matched
        // only while it has none).
        if field == "revisions" || (field == "html" && value.is_some()) {
            continue;
        }
        // The author is matched by id (a sub-document's equality would also compare the order
        // of its fields).
        if field == "author" {
            filter.insert(format!("{prefix}author.id"), current.author.id.as_str());
            continue;
        }
        filter.insert(format!("{prefix}{field}"), value.unwrap_or(Bson::Null));
    }
    Ok(filter)
}

/// The update that writes the changeable fields of `next` at `prefix`, removing the ones
/// `CommentDoc` leaves out, so the stored element is byte for byte what a new `CommentDoc` of
/// `next` would be (the embedded layout's size counter relies on it).
pub(crate) fn replace_update(prefix: &str, next: &Comment) -> StoreResult<Document> {
    let mut set = Document::new();
    let mut unset = Document::new();
    for (field, value) in changeable(next)? {
        match value {
            Some(value) => set.insert(format!("{prefix}{field}"), value),
            None => unset.insert(format!("{prefix}{field}"), ""),
        };
    }
    let mut update = doc! { "$set": set };
    if !unset.is_empty() {
        update.insert("$unset", unset);
    }
    Ok(update)
}

/// The BSON size of a comment element as stored (with an empty `replies` array when `nested`).
pub(crate) fn element_size(comment: &Comment, nested: bool) -> StoreResult<i64> {
    let mut element =
        mongodb::bson::to_document(&CommentDoc::from_comment(comment, false)).map_err(corrupt)?;
    if nested {
        element.insert("replies", Bson::Array(Vec::new()));
    }
    let bytes = mongodb::bson::to_vec(&element).map_err(corrupt)?;
    Ok(i64::try_from(bytes.len()).unwrap_or(i64::MAX))
}

/// A comment element (any layout's shape: unknown fields such as nested `replies` are ignored),
/// taken by value: decoded without copying it first.
pub(crate) fn owned_comment_of(item: Bson, id: &DiscussionId) -> StoreResult<Comment> {
    match item {
        Bson::Document(d) => from_document::<CommentDoc>(d)
            .map(|c| c.into_comment(id))
            .map_err(corrupt),
        _ => Err(corrupt("a comment is not a document")),
    }
}

/// A comment element read as raw BSON, decoded once.
pub(crate) fn raw_comment_of(item: RawBsonRef<'_>, id: &DiscussionId) -> StoreResult<Comment> {
    match item {
        RawBsonRef::Document(d) => from_slice::<CommentDoc>(d.as_bytes())
            .map(|c| c.into_comment(id))
            .map_err(corrupt),
        _ => Err(corrupt("a comment is not a document")),
    }
}
