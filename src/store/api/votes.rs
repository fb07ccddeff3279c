//! What ranked lists take and return.

use crate::domain::{Comment, Page, Rank};

/// A ranked list: which comments, in which order.
#[derive(Debug, Clone, Copy)]
pub struct Ranked<'a> {
    /// The order.
    pub rank: Rank,
    /// The comments.
    pub of: RankedOf<'a>,
}

/// The comments of a ranked list.
#[derive(Debug, Clone, Copy)]
pub enum RankedOf<'a> {
    /// Every comment of the discussion.
    Comments,
    /// Its top-level comments.
    Threads,
    /// The direct replies of this comment.
    Replies(&'a Comment),
}

/// A page of a ranked list.
#[derive(Debug, Clone)]
pub struct RankedPage {
    /// The page, in the list's order.
    pub page: Page<Comment>,
    /// The walk its cursors belong to: the discussion's vote number when the walk's first page
    /// was read.
    pub walk: u64,
}
