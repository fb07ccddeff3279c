//! Small BSON helpers every layout uses: integers of any width, comment elements, shape errors.

use mongodb::bson::{from_document, from_slice, Bson, Document, RawBsonRef};

use super::docs::CommentDoc;
use super::{StoreError, StoreResult};
use crate::domain::{Comment, DiscussionId};

/// A stored document that does not have the expected shape.
pub(super) fn corrupt(err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(err.to_string())
}

/// An integer, whichever integer type it was stored as.
pub(super) fn as_i64(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        Bson::Double(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => Some(*n as i64),
        _ => None,
    }
}

/// An integer field of a document.
pub(super) fn int_field(doc: &Document, key: &str) -> StoreResult<i64> {
    doc.get(key)
        .and_then(as_i64)
        .ok_or_else(|| corrupt(format!("field {key} is not an integer")))
}

/// A count that cannot be negative (a negative stored value reads as 0).
pub(super) fn to_count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// A comment element (any layout's shape: unknown fields such as nested `replies` are ignored),
/// taken by value: decoded without copying it first.
pub(super) fn owned_comment_of(item: Bson, id: &DiscussionId) -> StoreResult<Comment> {
    match item {
        Bson::Document(d) => from_document::<CommentDoc>(d)
            .map(|c| c.into_comment(id))
            .map_err(corrupt),
        _ => Err(corrupt("a comment is not a document")),
    }
}

/// A comment element read as raw BSON, decoded once.
pub(super) fn raw_comment_of(item: RawBsonRef<'_>, id: &DiscussionId) -> StoreResult<Comment> {
    match item {
        RawBsonRef::Document(d) => from_slice::<CommentDoc>(d.as_bytes())
            .map(|c| c.into_comment(id))
            .map_err(corrupt),
        _ => Err(corrupt("a comment is not a document")),
    }
}
