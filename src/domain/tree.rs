//! Orders over a flat list of comments, shared by every layout that assembles threads in memory.

use std::cmp::Ordering;

use super::Comment;

/// Chronological order: posting time, ties broken by slug.
pub fn chronological(a: &Comment, b: &Comment) -> Ordering {
    (a.posted, &a.slug).cmp(&(b.posted, &b.slug))
}

/// Threaded order: each comment right after its parent, siblings oldest first.
pub fn threaded(a: &Comment, b: &Comment) -> Ordering {
    a.full_slug.cmp(&b.full_slug)
}
