//! The BSON shape of a comment, shared by every layout (a layout adds only its own fields).

use serde::{Deserialize, Serialize};

use crate::domain::{Author, Comment, DiscussionId, FullSlug, Micros, Slug};

/// An author as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuthorDoc {
    /// Author id (token `sub`).
    pub id: String,
    /// Display name (token `name`).
    pub name: String,
}

/// A comment as stored. `discussion_id` is present where the comment lives outside its
/// discussion document (per-comment layout).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommentDoc {
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
    /// Microseconds since the epoch of the last edit.
    #[serde(default)]
    pub edited: Option<i64>,
    /// Tombstone flag.
    #[serde(default)]
    pub deleted: bool,
    /// Number of direct replies.
    #[serde(default)]
    pub reply_count: i64,
}

impl CommentDoc {
    /// The stored form of a comment; `with_discussion` adds the `discussion_id` field.
    pub fn from_comment(comment: &Comment, with_discussion: bool) -> Self {
        Self {
            discussion_id: with_discussion.then(|| comment.discussion_id.as_str().to_owned()),
            slug: comment.slug.as_str().to_owned(),
            full_slug: comment.full_slug.as_str().to_owned(),
            parent: comment.parent.as_ref().map(|p| p.as_str().to_owned()),
            posted: comment.posted.0,
            author: AuthorDoc {
                id: comment.author.id.clone(),
                name: comment.author.name.clone(),
            },
            text: comment.text.clone(),
            edited: comment.edited.map(|m| m.0),
            deleted: comment.deleted,
            reply_count: i64::try_from(comment.reply_count).unwrap_or(i64::MAX),
        }
    }

    /// The domain comment.
    pub fn into_comment(self, discussion_id: &DiscussionId) -> Comment {
        Comment {
            discussion_id: discussion_id.clone(),
            slug: Slug::from_stored(self.slug),
            full_slug: FullSlug::from_stored(self.full_slug),
            parent: self.parent.map(Slug::from_stored),
            posted: Micros(self.posted),
            author: Author {
                id: self.author.id,
                name: self.author.name,
            },
            text: self.text,
            edited: self.edited.map(Micros),
            deleted: self.deleted,
            reply_count: u64::try_from(self.reply_count).unwrap_or(0),
        }
    }
}
