//! What posting and changing comments take and return.

use crate::domain::{Comment, Discussion, DomainError, Micros};

/// What a change makes of a comment read at a given time: the new comment, `None` when nothing
/// changes, or why it may not be made.
pub type Decide<'a> =
    dyn Fn(&Comment, Micros) -> Result<Option<Comment>, DomainError> + Send + Sync + 'a;

/// The result of posting a comment.
#[derive(Debug, Clone)]
pub struct Posted {
    /// The stored comment.
    pub comment: Comment,
    /// True when the requested parent was too deep and the comment went to an ancestor.
    pub reattached: bool,
    /// The discussion as it is after the post, when the post met a move of it to another layout
    /// (or made one).
    pub moved: Option<Discussion>,
}
