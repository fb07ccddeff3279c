//! Comments in ranked lists: a comment's value and key in a ranked order, who may vote on it,
//! which comments are ranked, and a window of a ranked list held in memory.

use std::cmp::Ordering;
use std::sync::Arc;

use super::paging::{Cursor, Page, Window};
use super::votes::{Rank, RankKey};
use super::{Comment, DomainError};

impl Rank {
    /// The value of a comment.
    pub fn of(self, comment: &Comment) -> f64 {
        self.value(comment.votes.up, comment.votes.down)
    }
}

/// The rank key of a comment.
pub fn key_of(rank: Rank, comment: &Comment) -> RankKey<'_> {
    RankKey {
        value: rank.of(comment),
        posted: comment.posted,
        slug: comment.slug.as_str(),
    }
}

/// Whether the user with id `voter` may vote on `comment`: not on their own comment
/// (`FORBIDDEN`), not on a deleted one (`COMMENT_DELETED`), and not on a placeholder, which only
/// its author and moderators see (`NOT_FOUND`).
pub fn may_vote(comment: &Comment, voter: &str) -> Result<(), DomainError> {
    let name = || {
        format!(
            "comment {} in discussion {}",
            comment.slug, comment.discussion_id
        )
    };
    if !comment.standing.is_public() {
        return Err(DomainError::not_found(format!("no {}", name())));
    }
    if comment.deleted {
        return Err(DomainError::CommentDeleted(format!(
            "{} was deleted: it takes no votes",
            name()
        )));
    }
    if comment.author.id == voter {
        return Err(DomainError::Forbidden(format!(
            "{} is your own: you cannot vote on it",
            name()
        )));
    }
    Ok(())
}

/// Whether a comment is in ranked lists: only public ones are (a placeholder is not).
pub fn ranked_in(comment: &Comment) -> bool {
    comment.standing.is_public()
}

/// A window of a ranked list whose items are all in memory (an embedded discussion, a comment's
/// replies), with the walk its cursors belong to. `items` is the whole list, in any order. A
/// cursor window keeps only comments whose votes have not changed since its walk began, so a
/// walk never shows a comment twice; a window without a cursor starts a walk at the latest vote
/// number among the items.
pub fn window_in_memory(
    rank: Rank,
    items: Vec<Arc<Comment>>,
    window: &Window,
) -> (Page<Arc<Comment>>, u64) {
    let from = window.cursor().and_then(Cursor::rank_key);
    let walk = match &from {
        Some((_, walk)) => *walk,
        None => items.iter().map(|c| c.votes.seq).max().unwrap_or(0),
    };
    let mut items: Vec<Arc<Comment>> = items
        .into_iter()
        .filter(|c| ranked_in(c) && (from.is_none() || c.votes.seq <= walk))
        .collect();
    items.sort_by(|a, b| key_of(rank, a).order(&key_of(rank, b)));
    let more = usize::try_from(window.more()).unwrap_or(usize::MAX);
    let picked: Vec<Arc<Comment>> = match (window, &from) {
        (Window::Offset { skip, .. }, _) => items
            .into_iter()
            .skip(usize::try_from(*skip).unwrap_or(usize::MAX))
            .take(more)
            .collect(),
        (Window::After { .. }, Some((at, _))) => items
            .into_iter()
            .filter(|c| key_of(rank, c).order(at) == Ordering::Greater)
            .take(more)
            .collect(),
        (Window::After { .. }, None) => items.into_iter().take(more).collect(),
        (Window::Before { .. }, Some((at, _))) => {
            let before: Vec<Arc<Comment>> = items
                .into_iter()
                .filter(|c| key_of(rank, c).order(at) == Ordering::Less)
                .collect();
            last_of(before, 0, more)
        }
        (Window::FromEnd { skip, .. }, _) => {
            last_of(items, usize::try_from(*skip).unwrap_or(usize::MAX), more)
        }
        (Window::Before { .. }, None) => Vec::new(),
    };
    (window.page(picked), walk)
}

/// The `more` items that end `skip` items before the end of `items`.
fn last_of(mut items: Vec<Arc<Comment>>, skip: usize, more: usize) -> Vec<Arc<Comment>> {
    let end = items.len().saturating_sub(skip);
    items.truncate(end);
    let start = end.saturating_sub(more);
    items.drain(..start);
    items
}
