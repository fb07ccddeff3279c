//! The marks changes leave on their discussion document (`last_change`), which the feed reads.

use mongodb::bson::{doc, oid::ObjectId, Document};

use crate::domain::{Comment, Slug};
use crate::store::api::ChangeKind;

/// The field of a discussion document that holds its latest change.
pub(crate) const FIELD: &str = "last_change";

/// The mark a change leaves on its discussion: what happened to which comment, and a fresh id so
/// that two marks are never equal (an update that sets an equal value changes nothing, and then
/// the database reports no change at all).
pub(crate) fn mark(kind: ChangeKind, slug: &Slug) -> Document {
    mark_all(kind, &[slug])
}

/// The mark of a change of a comment from `current` to `next`: a change the public can see
/// (its text, edit time, editor, tombstone or moderation status) is `changed`; one only
/// moderators can see (its report count, a moderator's reason) is `quiet`, which the feed
/// passes over, so that live subscribers are not told that a comment was reported.
pub(crate) fn change_mark(current: &Comment, next: &Comment) -> Document {
    if current.shows_as(next) {
        doc! { "kind": QUIET, "slug": next.slug.as_str(), "id": ObjectId::new() }
    } else {
        mark(ChangeKind::Changed, &next.slug)
    }
}

/// The kind of a mark the feed passes over.
pub(crate) const QUIET: &str = "quiet";

/// The mark of one write that changed several comments (posts stored together): the first in
/// `slug`, all of them in `slugs` (left out for one comment, the form every reader knows).
pub(crate) fn mark_all(kind: ChangeKind, slugs: &[&Slug]) -> Document {
    let first = slugs.first().map_or("", |s| s.as_str());
    let mut mark = doc! { "kind": kind.as_str(), "slug": first, "id": ObjectId::new() };
    if slugs.len() > 1 {
        let all: Vec<&str> = slugs.iter().map(|s| s.as_str()).collect();
        mark.insert("slugs", all);
    }
    mark
}

/// The mark of a rewrite of stored data that no live subscriber is told of (the keying of guest
/// ids): of a kind the feed reads as "the discussion changed", so every process's read cache
/// forgets the discussion, and no comment is reported.
pub(crate) fn rewritten_mark() -> Document {
    doc! { "kind": "rewritten", "id": ObjectId::new() }
}
