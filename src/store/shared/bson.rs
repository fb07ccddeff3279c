//! Small BSON helpers every layout uses: integers of any width, comment elements, shape errors.

use mongodb::bson::{Bson, Document};

use super::error::{StoreError, StoreResult};
use crate::domain::{Author, Micros};

/// Calls `visit` with `document` and every document nested in it (through sub-documents and
/// arrays, at any depth, parents before their children, fields in order), each with its
/// dotted path (`""` for `document` itself, `replies.0.author` below it).
pub(crate) fn visit_documents(document: &Document, visit: &mut impl FnMut(&str, &Document)) {
    fn value(v: &Bson, path: &str, visit: &mut impl FnMut(&str, &Document)) {
        match v {
            Bson::Document(inner) => node(inner, path, visit),
            Bson::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    value(item, &format!("{path}.{i}"), visit);
                }
            }
            _ => {}
        }
    }
    fn node(d: &Document, path: &str, visit: &mut impl FnMut(&str, &Document)) {
        visit(path, d);
        for (field, v) in d {
            let inner = match path.is_empty() {
                true => field.clone(),
                false => format!("{path}.{field}"),
            };
            value(v, &inner, visit);
        }
    }
    node(document, "", visit);
}

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

/// The stored form of an author.
pub(crate) fn author_doc(author: &Author) -> Document {
    mongodb::bson::doc! { "id": &author.id, "name": &author.name }
}

/// The author stored under `key`.
pub(crate) fn author_of(doc: &Document, key: &str) -> StoreResult<Author> {
    let author = doc
        .get_document(key)
        .map_err(|_| corrupt(format!("{key} is not an author")))?;
    let field = |name: &str| {
        author
            .get_str(name)
            .map(str::to_owned)
            .map_err(|_| corrupt(format!("{key}.{name} is not a string")))
    };
    Ok(Author {
        id: field("id")?,
        name: field("name")?,
    })
}

/// The string stored under `key`, if any.
pub(crate) fn string_of(doc: &Document, key: &str) -> StoreResult<Option<String>> {
    match doc.get(key) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(corrupt(format!("{key} is not a string"))),
    }
}

/// The time stored under `key`, if any.
pub(crate) fn micros_of(doc: &Document, key: &str) -> StoreResult<Option<Micros>> {
    match doc.get(key) {
        None | Some(Bson::Null) => Ok(None),
        Some(value) => as_i64(value)
            .map(|n| Some(Micros(n)))
            .ok_or_else(|| corrupt(format!("{key} is not a time"))),
    }
}
