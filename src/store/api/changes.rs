//! `ChangeFeed`: the feed of posts and changes, and what it reports.

use std::time::Duration;

use futures::stream::BoxStream;

use crate::domain::{DiscussionId, Slug};

/// What happened to a comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// It was posted.
    Posted,
    /// It was edited or deleted.
    Changed,
    /// Something only moderators or counters show changed (votes, reports, a moderator's
    /// reason): live subscribers are not told, caches are.
    Quiet,
}

impl ChangeKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Posted => "posted",
            ChangeKind::Changed => "changed",
            ChangeKind::Quiet => "quiet",
        }
    }
}

/// A comment that was posted or changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentChange {
    /// Its discussion.
    pub discussion: DiscussionId,
    /// The comment.
    pub slug: Slug,
    /// What happened.
    pub kind: ChangeKind,
}

/// What the change feed reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watched {
    /// The feed is open: every change from now on is reported.
    Open,
    /// A comment was posted or changed.
    Change(CommentChange),
    /// The discussion document changed without a comment changing: its settings (lock,
    /// moderation mode, pins, key), its layout's bookkeeping, a move. Only caches care.
    Discussion(DiscussionId),
    /// The feed failed and is being reopened; changes made meanwhile are reported once it is
    /// open again.
    Interrupted,
    /// The feed had to start afresh: changes made while it was down were lost.
    Gap,
}

/// The change feed.
pub trait ChangeFeed: Send + Sync {
    /// The feed of posts and changes in every discussion, as the database reports them to this
    /// process (open it once per process: every call opens a change stream). It never ends; it
    /// reopens itself after failures, waiting `retry` before the first try.
    fn feed(&self, retry: Duration) -> BoxStream<'static, Watched>;
}
