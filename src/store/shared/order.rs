//! The keyset order of cursors, written once, on either side of a cursor: as a query filter on
//! stored comments and as an aggregation condition on a comment variable. Both say what
//! `Cursor::precedes` (after) and `Cursor::follows_key` (before) say.

use mongodb::bson::{doc, Bson, Document};

use crate::domain::paging::{Cursor, Window};

/// The sort key a cursor carries, most significant field first.
fn key(cursor: &Cursor) -> Vec<(&'static str, Bson)> {
    match cursor {
        Cursor::Chronological { posted, slug } => vec![
            ("posted", Bson::Int64(posted.0)),
            ("slug", Bson::String(slug.as_str().to_owned())),
        ],
        Cursor::Threaded(full) => vec![("full_slug", Bson::String(full.as_str().to_owned()))],
        Cursor::Discussion { created, id } => vec![
            ("created", Bson::Int64(created.0)),
            ("_id", Bson::String(id.as_str().to_owned())),
        ],
        Cursor::Log(seq) => vec![("_id", Bson::Int64(i64::try_from(*seq).unwrap_or(i64::MAX)))],
        Cursor::Queue { since, key } => vec![
            ("since", Bson::Int64(since.0)),
            ("_id", Bson::String(key.clone())),
        ],
        Cursor::Ban { at, user } => vec![
            ("at", Bson::Int64(at.0)),
            ("_id", Bson::String(user.clone())),
        ],
        // An author's comments are read by the keys of their numbers (`shared::numbers`).
        Cursor::ByAuthor(number) => vec![(
            "number",
            Bson::Int64(i64::try_from(*number).unwrap_or(i64::MAX)),
        )],
        // Within one rank value, ranked lists follow posting order (see `store::ranked`).
        Cursor::Ranked { posted, slug, .. } => vec![
            ("posted", Bson::Int64(posted.0)),
            ("slug", Bson::String(slug.as_str().to_owned())),
        ],
    }
}

/// Which side of a cursor a filter keeps.
#[derive(Clone, Copy)]
enum Side {
    After,
    Before,
}

impl Side {
    /// The strict and the inclusive comparison toward this side.
    fn ops(self) -> (&'static str, &'static str) {
        match self {
            Side::After => ("$gt", "$gte"),
            Side::Before => ("$lt", "$lte"),
        }
    }
}

/// The query filter that keeps what sorts strictly after `cursor`: the lexicographic `$or` of
/// the key, plus a `$gte` on its first field (redundant, but it lets a database turn the `$or`
/// into one index range starting at the cursor).
pub(crate) fn after_filter(cursor: &Cursor) -> Document {
    keyset_filter(cursor, Side::After)
}

/// The query filter that keeps what sorts strictly before `cursor` (the mirror of
/// [`after_filter`]: an index range ending at the cursor).
pub(crate) fn before_filter(cursor: &Cursor) -> Document {
    keyset_filter(cursor, Side::Before)
}

fn keyset_filter(cursor: &Cursor, side: Side) -> Document {
    let (strict, inclusive) = side.ops();
    let key = key(cursor);
    let mut branches: Vec<Bson> = Vec::new();
    for (i, (field, value)) in key.iter().enumerate() {
        let mut branch = Document::new();
        for (eq_field, eq_value) in &key[..i] {
            branch.insert(*eq_field, eq_value.clone());
        }
        branch.insert(*field, doc! { strict: value.clone() });
        branches.push(branch.into());
    }
    let mut filter = Document::new();
    if let (Some((first, value)), true) = (key.first(), key.len() > 1) {
        filter.insert(*first, doc! { inclusive: value.clone() });
    }
    match branches.len() {
        1 => filter.extend(
            branches
                .into_iter()
                .next()
                .and_then(into_doc)
                .unwrap_or_default(),
        ),
        _ => {
            filter.insert("$or", branches);
        }
    }
    filter
}

/// The keyset filter of a window's cursor: after it for a forward window, before it for a
/// backward one; `None` without a cursor.
pub(crate) fn cursor_filter(window: &Window) -> Option<Document> {
    match window {
        Window::After {
            cursor: Some(cursor),
            ..
        } => Some(after_filter(cursor)),
        Window::Before { cursor, .. } => Some(before_filter(cursor)),
        _ => None,
    }
}

/// The aggregation condition that `$$<var>` sorts strictly after `cursor`.
pub(crate) fn after_cond(cursor: &Cursor, var: &str) -> Document {
    keyset_cond(cursor, var, Side::After)
}

/// The aggregation condition that `$$<var>` sorts strictly before `cursor`.
pub(crate) fn before_cond(cursor: &Cursor, var: &str) -> Document {
    keyset_cond(cursor, var, Side::Before)
}

fn keyset_cond(cursor: &Cursor, var: &str, side: Side) -> Document {
    let (strict, _) = side.ops();
    let key = key(cursor);
    let path = |field: &str| format!("$${var}.{field}");
    let branches: Vec<Bson> = key
        .iter()
        .enumerate()
        .map(|(i, (field, value))| {
            let mut all: Vec<Bson> = key[..i]
                .iter()
                .map(|(f, v)| doc! { "$eq": [path(f), v.clone()] }.into())
                .collect();
            all.push(doc! { strict: [path(field), value.clone()] }.into());
            doc! { "$and": all }.into()
        })
        .collect();
    doc! { "$or": branches }
}

/// The sort of a list's stored order by `fields`, ascending, or descending for a read that
/// starts from the end (a backward window).
pub(crate) fn sort_toward(fields: &[&str], backward: bool) -> Document {
    let direction = if backward { -1 } else { 1 };
    fields
        .iter()
        .map(|f| ((*f).to_owned(), Bson::Int32(direction)))
        .collect()
}

fn into_doc(value: Bson) -> Option<Document> {
    match value {
        Bson::Document(d) => Some(d),
        _ => None,
    }
}

/// The driver's limit for fetching `limit` items plus one that tells whether more follow.
pub(crate) fn limit_plus_one(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{
        Author, Comment, CursorKind, DiscussionId, FullSlug, Micros, Slug, SlugPart,
    };
    use mongodb::bson::to_document;
    use std::cmp::Ordering;

    /// Compares two BSON scalars of one type (the only ones the filters use).
    fn cmp(a: &Bson, b: &Bson) -> Ordering {
        match (a, b) {
            (Bson::Int64(x), Bson::Int64(y)) => x.cmp(y),
            (Bson::String(x), Bson::String(y)) => x.cmp(y),
            _ => panic!("compared {a:?} with {b:?}"),
        }
    }

    /// Evaluates the query operators `after_filter` uses against a stored document.
    fn matches(filter: &Document, stored: &Document) -> bool {
        filter.iter().all(|(key, cond)| match (key.as_str(), cond) {
            ("$or", Bson::Array(branches)) => branches
                .iter()
                .any(|b| matches(b.as_document().unwrap_or_else(|| panic!("{b}")), stored)),
            (field, Bson::Document(ops)) => ops.iter().all(|(op, v)| {
                let have = stored.get(field).unwrap_or_else(|| panic!("no {field}"));
                match op.as_str() {
                    "$gt" => cmp(have, v) == Ordering::Greater,
                    "$gte" => cmp(have, v) != Ordering::Less,
                    "$lt" => cmp(have, v) == Ordering::Less,
                    "$lte" => cmp(have, v) != Ordering::Greater,
                    other => panic!("operator {other}"),
                }
            }),
            (field, value) => stored.get(field).is_some_and(|v| cmp(v, value).is_eq()),
        })
    }

    /// Evaluates the expression operators `after_cond` uses with `$$c` bound to `stored`.
    fn eval(expr: &Bson, stored: &Document) -> bool {
        let Bson::Document(d) = expr else {
            panic!("{expr}")
        };
        let (op, args) = d.iter().next().unwrap_or_else(|| panic!("empty"));
        let args = args.as_array().unwrap_or_else(|| panic!("{args}"));
        let value = |b: &Bson| match b {
            Bson::String(s) if s.starts_with("$$c.") => stored
                .get(&s["$$c.".len()..])
                .unwrap_or_else(|| panic!("no {s}"))
                .clone(),
            other => other.clone(),
        };
        match op.as_str() {
            "$or" => args.iter().any(|a| eval(a, stored)),
            "$and" => args.iter().all(|a| eval(a, stored)),
            "$gt" => cmp(&value(&args[0]), &value(&args[1])) == Ordering::Greater,
            "$lt" => cmp(&value(&args[0]), &value(&args[1])) == Ordering::Less,
            "$eq" => cmp(&value(&args[0]), &value(&args[1])).is_eq(),
            other => panic!("operator {other}"),
        }
    }

    fn comment(posted: i64, parent: Option<&Comment>) -> Comment {
        let part = SlugPart::generate();
        let (slug, full_slug) = match parent {
            None => (
                Slug::top_level(&part),
                FullSlug::top_level(Micros(posted), &part),
            ),
            Some(p) => (
                p.slug.child(&part),
                p.full_slug.child(Micros(posted), &part),
            ),
        };
        Comment {
            discussion_id: DiscussionId::generate(),
            parent: parent.map(|p| p.slug.clone()),
            slug,
            full_slug,
            posted: Micros(posted),
            author: Author {
                id: "a".into(),
                name: "A".into(),
            },
            text: Some("t".into()),
            html: Some("<p>t</p>\n".into()),
            edited: None,
            edited_by: None,
            deleted: false,
            revisions: Vec::new(),
            reply_count: 0,
            standing: Default::default(),
            votes: Default::default(),
            number: None,
        }
    }

    #[test]
    fn filters_conditions_and_precedes_agree() {
        let mut all = Vec::new();
        // Equal times in several places, so the slug tie-break matters.
        for t in [5, 5, 7, 3, 5] {
            let top = comment(t, None);
            all.push(comment(t + 1, Some(&top)));
            all.push(comment(t + 1, Some(&top)));
            all.push(top);
        }
        for cursor_of in &all {
            for kind in [CursorKind::Chronological, CursorKind::Threaded] {
                let cursor = Cursor::of_comment(cursor_of, kind);
                let sides = [
                    (after_filter(&cursor), after_cond(&cursor, "c"), true),
                    (before_filter(&cursor), before_cond(&cursor, "c"), false),
                ];
                for (filter, cond, after) in sides {
                    let cond = Bson::Document(cond);
                    for c in &all {
                        let stored = to_document(
                            &crate::store::shared::docs::CommentDoc::from_comment(c, true),
                        )
                        .unwrap_or_else(|e| panic!("{e}"));
                        let want = match after {
                            true => cursor.precedes(c),
                            false => cursor.follows_key(c.sort_key()),
                        };
                        assert_eq!(matches(&filter, &stored), want, "{filter} on {}", c.slug);
                        assert_eq!(eval(&cond, &stored), want, "{cond} on {}", c.slug);
                    }
                }
            }
        }
    }
}
