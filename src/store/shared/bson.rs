//! Small BSON helpers every layout uses: integers of any width, comment elements, shape errors.

use mongodb::bson::{Bson, Document};

use super::error::{StoreError, StoreResult};

/// A stored document that does not have the expected shape.
pub(crate) fn corrupt(err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(err.to_string())
}

/// An integer, whichever integer type it was stored as.
pub(crate) fn as_i64(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        Bson::Double(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => Some(*n as i64),
        _ => None,
    }
}

/// An integer field of a document.
pub(crate) fn int_field(doc: &Document, key: &str) -> StoreResult<i64> {
    doc.get(key)
        .and_then(as_i64)
        .ok_or_else(|| corrupt(format!("field {key} is not an integer")))
}

/// A count that cannot be negative (a negative stored value reads as 0).
pub(crate) fn to_count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}
