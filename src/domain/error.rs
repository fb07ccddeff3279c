//! The domain's error enum: what went wrong, in terms a client can be told.

use thiserror::Error;

/// Every failure a request can meet, before it becomes a GraphQL error with `extensions.code`.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DomainError {
    /// The request itself is malformed (bad id, bad slug, empty text, bad paging arguments…).
    #[error("{0}")]
    BadInput(String),
    /// The thing asked for does not exist.
    #[error("{0}")]
    NotFound(String),
    /// A mutation was sent without a valid token.
    #[error("{0}")]
    Unauthenticated(String),
    /// The caller is known but may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// The comment was deleted, so it cannot be changed any more.
    #[error("{0}")]
    CommentDeleted(String),
    /// A write kept meeting concurrent writes and gave up; sending it again is safe.
    #[error("{0}")]
    Conflict(String),
    /// The caller sent too much too fast; `retry_after_secs` says when to try again.
    #[error("{message}")]
    RateLimited {
        /// What was limited.
        message: String,
        /// Whole seconds until the next request would be allowed.
        retry_after_secs: u64,
    },
    /// The database cannot be reached right now; the request may be retried later.
    #[error("{0}")]
    Unavailable(String),
    /// The discussion is moving to another layout: the write was not made and may be sent
    /// again once the move is over (clients see `UNAVAILABLE`, which is retryable).
    #[error("{0}")]
    Moving(String),
    /// The discussion's storage is at its size cap.
    #[error("{0}")]
    DiscussionTooLarge(String),
    /// A live subscription missed changes (it fell behind, or the change feed had to start
    /// afresh); the subscription goes on, and the client should read again what it shows.
    #[error("{0}")]
    EventsMissed(String),
    /// Something failed inside the server; the cause is logged, never sent.
    #[error("internal error")]
    Internal(String),
}

impl DomainError {
    /// Shorthand for a [`DomainError::BadInput`].
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self::BadInput(message.into())
    }

    /// Shorthand for a [`DomainError::NotFound`].
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::NotFound(message.into())
    }

    /// The stable machine-readable code a client sees in `extensions.code`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BadInput(_) => "BAD_USER_INPUT",
            Self::NotFound(_) => "NOT_FOUND",
            Self::Unauthenticated(_) => "UNAUTHENTICATED",
            Self::Forbidden(_) => "FORBIDDEN",
            Self::CommentDeleted(_) => "COMMENT_DELETED",
            Self::Conflict(_) => "CONFLICT",
            Self::RateLimited { .. } => "RATE_LIMITED",
            Self::Unavailable(_) | Self::Moving(_) => "UNAVAILABLE",
            Self::DiscussionTooLarge(_) => "DISCUSSION_TOO_LARGE",
            Self::EventsMissed(_) => "EVENTS_MISSED",
            Self::Internal(_) => "INTERNAL",
        }
    }
}
