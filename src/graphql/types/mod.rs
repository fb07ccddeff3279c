//! GraphQL object types: Discussion, Comment, Author, connections and enums.

mod comment;
mod discussion;
mod moderation;

use async_graphql::Enum;

use crate::domain::{CursorKind, DomainError, Rank};

pub use comment::{
    Author, CommentConnection, CommentEdge, CommentNode, PageInfo, ReportNode, Revision, Total,
};
pub use discussion::{comment_by_slug, visible_held, DiscussionConnection, DiscussionEdge};

/// A discussion: one thread of comments, e.g. under an article (its fields: `discussion.rs`).
/// Defined here, where both it and the comments that name their discussion can see it.
pub struct DiscussionNode(pub std::sync::Arc<crate::domain::Discussion>);
pub use moderation::{
    BanConnection, BanEdge, BanNode, ModerationAction, ModerationLogConnection, ModerationLogEdge,
    ModerationLogEntry, ReservedNameNode,
};

/// How a discussion's comments are stored.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(remote = "crate::domain::Layout")]
pub enum StorageLayout {
    /// One document per comment.
    PerComment,
    /// Every comment nested in the discussion document.
    Embedded,
    /// Buckets of about a hundred comments.
    Bucketed,
}

/// How a discussion moderates new comments.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(remote = "crate::domain::ModerationMode")]
pub enum ModerationMode {
    /// Comments are published at once; moderators act afterwards.
    Post,
    /// Every comment waits for a moderator's approval.
    Pre,
    /// A comment waits for approval until its author has had one comment approved anywhere
    /// in the service.
    PreFirst,
}

/// Whether a discussion takes comments from people without an account.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(remote = "crate::domain::GuestPolicy")]
pub enum GuestPolicy {
    /// Only signed-in users may comment.
    Off,
    /// Guests may comment; every guest comment waits for a moderator.
    Pre,
    /// Guest comments are published, still subject to the word lists, reports and limits.
    Post,
}

/// Where a comment stands with the moderators.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(remote = "crate::domain::CommentStatus")]
pub enum CommentStatus {
    /// Public.
    Approved,
    /// Waiting for a moderator: its text and author are seen only by its author and
    /// moderators.
    Pending,
    /// Refused by a moderator (or by the banned-word list): its text and author are seen only
    /// by its author and moderators.
    Rejected,
}

/// Why someone reports a comment.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(remote = "crate::domain::ReportReason")]
pub enum ReportReason {
    /// Advertising, scams, bots.
    Spam,
    /// Harassment, hate, threats.
    Abuse,
    /// Not about the discussion.
    OffTopic,
    /// Anything else (say what in the note).
    Other,
}

/// A moderators' queue.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(remote = "crate::domain::Queue")]
pub enum ModerationQueue {
    /// Comments waiting for a moderator: held before they were public (pre-moderation, a
    /// suspect word), and public ones held by reports.
    Pending,
    /// Public comments that users reported, not (yet) held.
    Reported,
    /// Rejected comments: held ones, and placeholders of public ones.
    Rejected,
}

/// A user's vote on a comment.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(remote = "crate::domain::Vote")]
pub enum VoteValue {
    /// For it.
    Up,
    /// Against it.
    Down,
}

/// The order of a list of comments.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug, Default)]
pub enum CommentOrder {
    /// By posting time, oldest first.
    #[default]
    Chronological,
    /// By posting time, newest first.
    Newest,
    /// Each comment right after its parent, siblings oldest first (a flattened tree). Only for
    /// a discussion's `comments`.
    Threaded,
    /// By score (upvotes − downvotes), highest first; ties oldest first. Deleted comments keep
    /// their place and votes; placeholders are left out.
    Top,
    /// By the lower bound of the Wilson score interval (z = 1.281551565545, 80 %) for the share
    /// of upvotes, highest first; 0 without an upvote. Ties oldest first.
    Best,
    /// By (upvotes + downvotes)^(min/max of the two) when both are over 0, else 0, highest
    /// first. Ties oldest first.
    Controversial,
}

impl CommentOrder {
    /// The cursor kind of a list of top-level comments or replies in this order: CHRONOLOGICAL
    /// or NEWEST (`BAD_USER_INPUT` for THREADED, which orders whole threads).
    pub(crate) fn of_siblings(self, field: &str) -> async_graphql::Result<CursorKind> {
        match self {
            CommentOrder::Chronological => Ok(CursorKind::Chronological),
            CommentOrder::Newest => Ok(CursorKind::Newest),
            CommentOrder::Top => Ok(CursorKind::Ranked(Rank::Top)),
            CommentOrder::Best => Ok(CursorKind::Ranked(Rank::Best)),
            CommentOrder::Controversial => Ok(CursorKind::Ranked(Rank::Controversial)),
            CommentOrder::Threaded => {
                Err(crate::graphql::error::gql(DomainError::bad_input(format!(
                    "`{field}` takes every order but THREADED, which orders a discussion's \
                     `comments`"
                ))))
            }
        }
    }
}
