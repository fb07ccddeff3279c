//! The storage layer's error enum and its conversion into the domain error.

use thiserror::Error;

use crate::domain::DomainError;

/// What can go wrong in the storage layer.
#[derive(Debug, Clone, Error)]
pub enum StoreError {
    /// The database failed or could not be reached.
    #[error("database error: {0}")]
    Db(#[from] mongodb::error::Error),
    /// A document the request names does not exist.
    #[error("{0}")]
    NotFound(String),
    /// A stored document does not have the expected shape.
    #[error("corrupt document: {0}")]
    Corrupt(String),
    /// The discussion's storage reached its size cap.
    #[error("{0}")]
    TooLarge(String),
    /// The request cannot be served by this deployment (e.g. a layout that is not enabled).
    #[error("{0}")]
    Unsupported(String),
    /// The discussion is moving to another layout (see `migrate`): the write was not made;
    /// make it again once the move is over.
    #[error("{0}")]
    Moving(String),
    /// Another move of the discussion is under way.
    #[error("{0}")]
    Busy(String),
    /// The discussion is locked: it takes no new comments.
    #[error("{0}")]
    Locked(String),
    /// Retries were exhausted (e.g. slug collisions that kept happening).
    #[error("gave up after retries: {0}")]
    Exhausted(String),
    /// Another discussion has this key (the key).
    #[error("a discussion with the key {0:?} exists already")]
    KeyTaken(String),
    /// A pin past the most pinned comments a discussion may have.
    #[error("discussion {0} has {max} pinned comments already", max = crate::domain::Discussion::MAX_PINNED)]
    PinsFull(String),
}

/// Results of the storage layer.
pub type StoreResult<T> = Result<T, StoreError>;

impl From<StoreError> for DomainError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound(message) => DomainError::NotFound(message),
            StoreError::TooLarge(message) => DomainError::DiscussionTooLarge(message),
            StoreError::Unsupported(message) => DomainError::BadInput(message),
            StoreError::Moving(message) => DomainError::Moving(format!(
                "{message}; nothing was written, and sending the request again is safe"
            )),
            StoreError::Busy(message) => DomainError::Conflict(message),
            StoreError::Locked(message) => DomainError::Forbidden(message),
            StoreError::PinsFull(id) => DomainError::BadInput(format!(
                "discussion {id} has {} pinned comments already, the most it may have: unpin one first",
                crate::domain::Discussion::MAX_PINNED
            )),
            StoreError::KeyTaken(key) => DomainError::BadInput(format!(
                "a discussion with the key {key:?} exists already: use ensureDiscussion, which \
                 returns the discussion that has a key (or creates it when there is none)"
            )),
            StoreError::Exhausted(message) => DomainError::Conflict(format!(
                "{message}; nothing was written, and sending the request again is safe"
            )),
            StoreError::Db(err) if is_unavailable(&err) => {
                tracing::warn!(%err, "the database is unavailable");
                DomainError::Unavailable(
                    "the database is unavailable right now; try again in a moment".into(),
                )
            }
            other => DomainError::Internal(other.to_string()),
        }
    }
}

impl StoreError {
    /// Whether this is a unique-index violation (E11000).
    pub fn is_duplicate_key(&self) -> bool {
        match self {
            StoreError::Db(err) => is_duplicate_key(err),
            _ => false,
        }
    }
}

/// Whether a driver error is a unique-index violation (E11000).
pub(crate) fn is_duplicate_key(err: &mongodb::error::Error) -> bool {
    use mongodb::error::{ErrorKind, WriteFailure};
    match err.kind.as_ref() {
        ErrorKind::Write(WriteFailure::WriteError(e)) => e.code == 11000,
        ErrorKind::Command(e) => e.code == 11000,
        ErrorKind::InsertMany(e) => e
            .write_errors
            .as_ref()
            .is_some_and(|errs| errs.iter().any(|w| w.code == 11000)),
        _ => false,
    }
}

/// Whether a driver error says a document would exceed MongoDB's 16 MB limit (BSONObjectTooLarge,
/// 10334; 17419 is the older code of the same failure for updates).
pub(crate) fn is_too_large(err: &mongodb::error::Error) -> bool {
    use mongodb::error::{ErrorKind, WriteFailure};
    let too_large = |code: i32| code == 10334 || code == 17419;
    match err.kind.as_ref() {
        ErrorKind::Write(WriteFailure::WriteError(e)) => too_large(e.code),
        ErrorKind::Command(e) => too_large(e.code),
        _ => false,
    }
}

/// Whether a driver error means the database could not be reached or answer in time (no server
/// to select, a broken or timed-out connection, a cleared pool, a node stepping down), rather
/// than a problem with the request.
pub(crate) fn is_unavailable(err: &mongodb::error::Error) -> bool {
    use mongodb::error::{ErrorKind, RETRYABLE_WRITE_ERROR, TRANSIENT_TRANSACTION_ERROR};
    /// Server codes of a node that is shutting down, stepping down or not primary.
    const NODE_CODES: [i32; 9] = [6, 7, 89, 91, 189, 10107, 11600, 11602, 13435];
    let code = match err.kind.as_ref() {
        ErrorKind::Command(e) => Some(e.code),
        ErrorKind::Write(mongodb::error::WriteFailure::WriteConcernError(e)) => Some(e.code),
        _ => None,
    };
    matches!(
        err.kind.as_ref(),
        ErrorKind::ServerSelection { .. }
            | ErrorKind::Io(_)
            | ErrorKind::ConnectionPoolCleared { .. }
            | ErrorKind::DnsResolve { .. }
    ) || code.is_some_and(|c| NODE_CODES.contains(&c))
        || err.contains_label(RETRYABLE_WRITE_ERROR)
        || err.contains_label(TRANSIENT_TRANSACTION_ERROR)
}

/// `limit` as the driver takes it (`None` for 0, which the server would read as no limit).
pub(crate) fn as_limit(limit: usize) -> Option<i64> {
    (limit > 0).then(|| i64::try_from(limit).unwrap_or(i64::MAX))
}

/// The indexes of the documents a failed `insert_many` did not store.
pub(crate) fn duplicate_indexes(err: &mongodb::error::Error) -> Vec<usize> {
    match err.kind.as_ref() {
        mongodb::error::ErrorKind::InsertMany(failure) => failure
            .write_errors
            .iter()
            .flatten()
            .map(|e| e.index)
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether a failed `insert_many` failed only on ids stored already.
pub(crate) fn only_duplicates(err: &mongodb::error::Error) -> bool {
    match err.kind.as_ref() {
        mongodb::error::ErrorKind::InsertMany(failure) => {
            failure.write_concern_error.is_none()
                && failure
                    .write_errors
                    .as_ref()
                    .is_some_and(|errs| errs.iter().all(|e| e.code == 11000))
        }
        _ => false,
    }
}
