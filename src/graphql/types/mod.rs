//! GraphQL object types: Discussion, Comment, Author, connections and enums.

mod comment;
mod connection;
mod discussion;

use async_graphql::Enum;

pub use comment::{Author, CommentNode, Revision};
pub use connection::{
    CommentConnection, CommentEdge, DiscussionConnection, DiscussionEdge, PageInfo, Total,
};
pub use discussion::{comment_by_slug, DiscussionNode};

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

/// The order of a discussion's comment list.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug, Default)]
pub enum CommentOrder {
    /// By posting time, oldest first.
    #[default]
    Chronological,
    /// Each comment right after its parent, siblings oldest first (a flattened tree).
    Threaded,
}
