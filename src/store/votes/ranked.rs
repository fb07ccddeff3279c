//! Ranked lists (TOP, BEST, CONTROVERSIAL): which reads give a page, in every layout.
//!
//! A ranked list runs through *classes* of equal rank value, highest first, each in posting
//! order. The class of value 0 (every comment nobody votes on, and those whose votes cancel
//! out) is the bulk of a discussion: it is read from the layout's own chronological list (or
//! its threads), a bounded read, keeping the comments of value 0. Every other class is read
//! from the tallies, whose index holds each rank value, by windows of posting time sized from
//! the class's count in the discussion's ranking (doubling while a window comes back short).
//! So a page reads about as many comments as it shows, at any size of discussion.
//!
//! A comment's replies, and a discussion whose layout reads it whole anyway (see
//! `CommentStore::ranks_in_memory`), are ranked in memory.
//!
//! **Walks.** A page without a cursor starts a walk at the discussion's vote number; its
//! cursors carry that number and the value each comment was read with, and later pages leave
//! out every comment whose votes changed after it. The comments left all rank as they did when
//! the walk began, so a walk never shows a comment twice, and misses only comments whose votes
//! changed during it.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::sync::Arc;

use super::book::{Ranking, Scope, VoteBook};
use crate::domain::ranking::{ranked_in, window_in_memory};
use crate::domain::tree::Listing;
use crate::domain::votes::RankKey;
use crate::domain::{Comment, Cursor, Discussion, Micros, Rank, Slug, Window};
use crate::store::api::{CommentStore, Ranked, RankedOf, RankedPage};
use crate::store::shared::error::StoreResult;
use crate::store::shared::scope::ReadScope;

/// Comments read per command when a list is read whole.
const WHOLE_CHUNK: usize = 1_000;
/// The most comments one read of the chronological list asks for.
const MOST_PER_READ: usize = 1_000;

/// One page of a ranked list (see `VoteStore::ranked`).
pub(crate) async fn page(
    book: &VoteBook,
    layout: &dyn CommentStore,
    scope: &ReadScope,
    discussion: &Discussion,
    list: Ranked<'_>,
    window: &Window,
) -> StoreResult<RankedPage> {
    let whole = match list.of {
        RankedOf::Replies(parent) => Some(replies_of(layout, scope, discussion, parent).await?),
        RankedOf::Comments | RankedOf::Threads if layout.ranks_in_memory() => {
            let listing = listing_of(list.of);
            Some(whole_list(layout, scope, discussion, listing).await?)
        }
        RankedOf::Comments | RankedOf::Threads => None,
    };
    if let Some(items) = whole {
        let (page, walk) = window_in_memory(list.rank, items, window);
        return Ok(RankedPage { page, walk });
    }
    let of = match list.of {
        RankedOf::Threads => Scope::Threads,
        _ => Scope::All,
    };
    let ranking = book.ranking(&discussion.id).await?;
    let from = window.cursor().and_then(Cursor::rank_key);
    let walk = from.as_ref().map_or(ranking.seq, |(_, walk)| *walk);
    let walker = Walker {
        book,
        layout,
        scope,
        discussion,
        rank: list.rank,
        of,
        listing: listing_of(list.of),
        classes: classes(&ranking, of, list.rank),
        zero: zero_count(&ranking, of, list.rank, total_of(discussion, of)),
        total: total_of(discussion, of),
        walk: from.as_ref().map(|(_, walk)| *walk),
    };
    let more = usize::try_from(window.more()).unwrap_or(usize::MAX);
    let items = match window {
        Window::After { .. } => {
            walker
                .forward(from.as_ref().map(|(at, _)| at), more)
                .await?
        }
        Window::Offset { skip, .. } => {
            let skip = usize::try_from(*skip).unwrap_or(usize::MAX);
            let mut items = walker.forward(None, skip.saturating_add(more)).await?;
            items.drain(..skip.min(items.len()));
            items
        }
        Window::Before { .. } => {
            walker
                .backward(from.as_ref().map(|(at, _)| at), more)
                .await?
        }
        Window::FromEnd { skip, .. } => {
            let skip = usize::try_from(*skip).unwrap_or(usize::MAX);
            let mut items = walker.backward(None, skip.saturating_add(more)).await?;
            let keep = items.len().saturating_sub(skip);
            items.truncate(keep);
            items
        }
    };
    Ok(RankedPage {
        page: window.page(items),
        walk,
    })
}

fn listing_of(of: RankedOf<'_>) -> Listing {
    match of {
        RankedOf::Threads => Listing::Threads,
        _ => Listing::Chronological,
    }
}

fn total_of(discussion: &Discussion, of: Scope) -> u64 {
    match of {
        Scope::All => discussion.comment_count,
        Scope::Threads => discussion.thread_count,
    }
}

/// Every comment of a list, read in chunks.
async fn whole_list(
    layout: &dyn CommentStore,
    scope: &ReadScope,
    discussion: &Discussion,
    listing: Listing,
) -> StoreResult<Vec<Arc<Comment>>> {
    let mut all = Vec::new();
    let mut cursor = None;
    loop {
        let window = Window::After {
            cursor,
            limit: WHOLE_CHUNK,
        };
        let page = layout.list(scope, discussion, listing, &window).await?;
        cursor = page
            .items
            .last()
            .map(|c| Cursor::of_comment(c, crate::domain::CursorKind::Chronological));
        all.extend(page.items);
        if !page.has_next {
            return Ok(all);
        }
    }
}

/// Every direct reply of `parent`, read in chunks.
async fn replies_of(
    layout: &dyn CommentStore,
    scope: &ReadScope,
    discussion: &Discussion,
    parent: &Comment,
) -> StoreResult<Vec<Arc<Comment>>> {
    let mut all = Vec::new();
    let mut cursor = None;
    loop {
        let window = Window::After {
            cursor,
            limit: WHOLE_CHUNK,
        };
        let mut pages = layout
            .replies(
                scope,
                discussion,
                std::slice::from_ref(&parent.slug),
                &window,
            )
            .await?;
        let Some(page) = pages.remove(&parent.slug) else {
            return Ok(all);
        };
        cursor = page
            .items
            .last()
            .map(|c| Cursor::of_comment(c, crate::domain::CursorKind::Chronological));
        all.extend(page.items);
        if !page.has_next {
            return Ok(all);
        }
    }
}

/// The classes of a list read from the tallies: each value other than 0 with how many voted
/// comments have it, highest first.
fn classes(ranking: &Ranking, of: Scope, rank: Rank) -> Vec<(f64, u64)> {
    let mut classes: Vec<(f64, u64)> = Vec::new();
    for (&(up, down), &count) in ranking.counts(of) {
        let value = rank.value(up, down);
        if value == 0.0 {
            continue;
        }
        match classes
            .iter_mut()
            .find(|(v, _)| v.to_bits() == value.to_bits())
        {
            Some((_, n)) => *n += count,
            None => classes.push((value, count)),
        }
    }
    classes.sort_by(|a, b| b.0.total_cmp(&a.0));
    classes
}

/// How many comments of the list have value 0 (an estimate while votes change).
fn zero_count(ranking: &Ranking, of: Scope, rank: Rank, total: u64) -> u64 {
    let valued: u64 = ranking
        .counts(of)
        .iter()
        .filter(|((up, down), _)| rank.value(*up, *down) != 0.0)
        .map(|(_, n)| *n)
        .sum();
    total.saturating_sub(valued)
}

/// A class of the list, in rank order.
#[derive(Debug, Clone, Copy)]
enum Class {
    /// Read from the tallies: its value and count.
    Tallied(f64, u64),
    /// Value 0, read from the layout.
    Zero,
}

impl Class {
    fn value(self) -> f64 {
        match self {
            Class::Tallied(value, _) => value,
            Class::Zero => 0.0,
        }
    }
}

/// Where a read within a class starts: after (or before) this comment of the class.
type Edge = Option<(Micros, Slug)>;

struct Walker<'a> {
    book: &'a VoteBook,
    layout: &'a dyn CommentStore,
    scope: &'a ReadScope,
    discussion: &'a Discussion,
    rank: Rank,
    of: Scope,
    listing: Listing,
    /// Tallied classes, highest first.
    classes: Vec<(f64, u64)>,
    /// Comments of value 0 (estimated).
    zero: u64,
    /// Comments in the list.
    total: u64,
    /// The walk to keep to (`None` on a walk's first page: everything is shown).
    walk: Option<u64>,
}

impl Walker<'_> {
    /// Every class, highest first.
    fn order(&self) -> Vec<Class> {
        let mut order: Vec<Class> = self
            .classes
            .iter()
            .filter(|(v, _)| *v > 0.0)
            .map(|&(v, n)| Class::Tallied(v, n))
            .collect();
        order.push(Class::Zero);
        order.extend(
            self.classes
                .iter()
                .filter(|(v, _)| *v < 0.0)
                .map(|&(v, n)| Class::Tallied(v, n)),
        );
        order
    }

    /// Whether a comment belongs on a page of this walk.
    fn shown(&self, comment: &Comment) -> bool {
        ranked_in(comment) && self.walk.is_none_or(|walk| comment.votes.seq <= walk)
    }

    /// Up to `want` comments after `from` (from the start without it), in rank order.
    async fn forward(
        &self,
        from: Option<&RankKey<'_>>,
        want: usize,
    ) -> StoreResult<Vec<Arc<Comment>>> {
        self.walk_from(from, want, false).await
    }

    /// Up to `want` comments before `from` (the last ones without it), in rank order.
    async fn backward(
        &self,
        from: Option<&RankKey<'_>>,
        want: usize,
    ) -> StoreResult<Vec<Arc<Comment>>> {
        let mut out = self.walk_from(from, want, true).await?;
        out.reverse();
        Ok(out)
    }

    /// Up to `want` comments on one side of `from` (after it, or before it when `backward`),
    /// nearest first: class by class in the walk's direction, skipping the classes on the
    /// other side of `from`, and within `from`'s own class starting from it.
    async fn walk_from(
        &self,
        from: Option<&RankKey<'_>>,
        want: usize,
        backward: bool,
    ) -> StoreResult<Vec<Arc<Comment>>> {
        let (behind, ahead) = match backward {
            false => (Ordering::Greater, Ordering::Less),
            true => (Ordering::Less, Ordering::Greater),
        };
        let mut classes = self.order();
        if backward {
            classes.reverse();
        }
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for class in classes {
            if out.len() >= want {
                break;
            }
            let edge = match from.map(|at| (at, class.value().total_cmp(&at.value))) {
                Some((_, side)) if side == behind => continue,
                Some((at, Ordering::Equal)) => {
                    Some((at.posted, Slug::from_stored(at.slug.to_owned())))
                }
                Some((_, side)) => {
                    debug_assert_eq!(side, ahead);
                    None
                }
                None => None,
            };
            let left = want - out.len();
            let found = match class {
                Class::Zero => self.zero_class(edge, left, backward).await?,
                Class::Tallied(value, count) => {
                    self.tallied(value, count, edge, left, backward).await?
                }
            };
            for comment in found {
                if seen.insert(comment.slug.clone()) {
                    out.push(comment);
                }
            }
        }
        out.truncate(want);
        Ok(out)
    }

    /// Up to `want` comments of value 0 after (`backward`: before) `edge`, in the walk's
    /// direction, from the layout's chronological list (or its threads).
    async fn zero_class(
        &self,
        edge: Edge,
        want: usize,
        backward: bool,
    ) -> StoreResult<Vec<Arc<Comment>>> {
        // Read about as many as hold `want` comments of value 0, then twice as many each time.
        let share = self.zero.max(1) as f64 / self.total.max(1) as f64;
        let mut chunk = ((want as f64 / share.min(1.0)) * 1.25) as usize + 4;
        chunk = chunk.clamp(want.min(MOST_PER_READ), MOST_PER_READ);
        let mut cursor = edge.map(|(posted, slug)| Cursor::Chronological { posted, slug });
        let mut out = Vec::new();
        loop {
            let window = match (backward, cursor.clone()) {
                (false, cursor) => Window::After {
                    cursor,
                    limit: chunk,
                },
                (true, Some(cursor)) => Window::Before {
                    cursor,
                    limit: chunk,
                },
                (true, None) => Window::FromEnd {
                    skip: 0,
                    limit: chunk,
                },
            };
            let mut page = self
                .layout
                .list(self.scope, self.discussion, self.listing, &window)
                .await?;
            if backward {
                page.items.reverse();
            }
            cursor = page
                .items
                .last()
                .map(|c| Cursor::of_comment(c, crate::domain::CursorKind::Chronological));
            for comment in page.items {
                if self.rank.of(&comment) == 0.0 && self.shown(&comment) {
                    out.push(comment);
                    if out.len() >= want {
                        return Ok(out);
                    }
                }
            }
            if !page.has_next || cursor.is_none() {
                return Ok(out);
            }
            chunk = (chunk * 2).min(MOST_PER_READ);
        }
    }

    /// Up to `want` comments of the tallied class `value` (of `count` comments) after
    /// (`backward`: before) `edge`, in the walk's direction: windows of posting time, each one
    /// bounded index range of the tallies, sized to hold about what is wanted and doubled while
    /// they come back short.
    async fn tallied(
        &self,
        value: f64,
        count: u64,
        edge: Edge,
        want: usize,
        backward: bool,
    ) -> StoreResult<Vec<Arc<Comment>>> {
        let created = self.discussion.created.0;
        let now = Micros::now().0.saturating_add(1_000_000);
        let span = (now - created).max(1) as f64;
        let density = count.max(1) as f64 / span;
        let mut width = ((want as f64 * 1.5 / density) as i64).max(1_000);
        let mut out = Vec::new();
        // Forward: from the edge's time (or the start) up; backward: from it (or now) down.
        let mut mark = match (&edge, backward) {
            (Some((posted, _)), false) => posted.0,
            (Some((posted, _)), true) => posted.0.saturating_add(1),
            (None, false) => created,
            (None, true) => now.saturating_add(1),
        };
        let mut first = true;
        loop {
            let (from, to, last): (i64, Option<i64>, bool) = match backward {
                false => {
                    let lower = if first && edge.is_none() {
                        i64::MIN
                    } else {
                        mark
                    };
                    let upper = mark.saturating_add(width);
                    let last = upper > now;
                    (lower, (!last).then_some(upper), last)
                }
                true => {
                    let lower = mark.saturating_sub(width);
                    let last = lower <= created;
                    // From the end, the first window is open above: a comment may have a time
                    // a little ahead of this clock.
                    let upper = (!first || edge.is_some()).then_some(mark);
                    (if last { i64::MIN } else { lower }, upper, last)
                }
            };
            first = false;
            let mut found = self
                .book
                .probe(
                    &self.discussion.id,
                    (self.of, self.rank, value),
                    Micros(from),
                    to.map(Micros),
                )
                .await?;
            if backward {
                found.reverse();
            }
            let candidates: Vec<_> = found
                .into_iter()
                .filter(|t| match &edge {
                    None => true,
                    Some((posted, slug)) => {
                        let key = (t.posted, t.slug.as_str());
                        match backward {
                            false => key > (*posted, slug.as_str()),
                            true => key < (*posted, slug.as_str()),
                        }
                    }
                })
                .filter(|t| self.walk.is_none_or(|walk| t.votes.seq <= walk))
                .collect();
            for chunk in candidates.chunks(want.clamp(1, MOST_PER_READ)) {
                let wanted: Vec<_> = chunk
                    .iter()
                    .map(|t| (t.slug.clone(), t.home.clone()))
                    .collect();
                let mut read = self
                    .layout
                    .by_homes(self.scope, self.discussion, &wanted)
                    .await?;
                for tally in chunk {
                    let Some(at) = read.iter().position(|c| c.slug == tally.slug) else {
                        continue;
                    };
                    // Placed by the tally it was read with: its cursor says where it stood.
                    let mut comment = read.swap_remove(at);
                    if comment.votes != tally.votes {
                        Arc::make_mut(&mut comment).votes = tally.votes;
                    }
                    if ranked_in(&comment) {
                        out.push(comment);
                        if out.len() >= want {
                            return Ok(out);
                        }
                    }
                }
            }
            if last {
                return Ok(out);
            }
            mark = match backward {
                false => mark.saturating_add(width),
                true => mark.saturating_sub(width),
            };
            width = width.saturating_mul(2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_merge_equal_values_and_leave_out_zero() {
        let mut ranking = Ranking::default();
        ranking.all.insert((1, 1), 4);
        ranking.all.insert((2, 2), 1);
        ranking.all.insert((3, 1), 2);
        ranking.all.insert((2, 0), 5);
        ranking.all.insert((0, 2), 3);
        let top = classes(&ranking, Scope::All, Rank::Top);
        assert_eq!(top, vec![(2.0, 7), (-2.0, 3)]);
        assert_eq!(zero_count(&ranking, Scope::All, Rank::Top, 100), 90);
        let controversial = classes(&ranking, Scope::All, Rank::Controversial);
        assert_eq!(controversial.len(), 3);
        assert_eq!(
            zero_count(&ranking, Scope::All, Rank::Controversial, 100),
            93
        );
    }
}
