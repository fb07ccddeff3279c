//! Votes and the ranked orders they give: a comment's counters, the three rank formulas, and
//! the order every ranked list follows (highest value first, ties oldest first). What ranks a
//! comment, and who may vote on it, is `ranking`.

use std::cmp::Ordering;

use super::Micros;

/// One user's vote on a comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Vote {
    /// For it.
    Up,
    /// Against it.
    Down,
}

impl Vote {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Vote::Up => "up",
            Vote::Down => "down",
        }
    }

    /// The vote with this stored name.
    pub fn parse(stored: &str) -> Option<Vote> {
        match stored {
            "up" => Some(Vote::Up),
            "down" => Some(Vote::Down),
            _ => None,
        }
    }
}

/// A comment's vote counters, and when they last changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Votes {
    /// Votes for it.
    pub up: u64,
    /// Votes against it.
    pub down: u64,
    /// The discussion's vote number of the last vote that changed these counters (0 before
    /// any): a ranked walk started at vote number `n` leaves out comments with `seq > n`, whose
    /// rank may have moved since its first page.
    pub seq: u64,
}

impl Votes {
    /// Up minus down.
    pub fn score(&self) -> i64 {
        i64::try_from(self.up)
            .unwrap_or(i64::MAX)
            .saturating_sub(i64::try_from(self.down).unwrap_or(i64::MAX))
    }

    /// The counters after `from` changes to `to` (either may be no vote), at vote number `seq`.
    pub fn after(&self, from: Option<Vote>, to: Option<Vote>, seq: u64) -> Votes {
        let mut next = *self;
        match from {
            Some(Vote::Up) => next.up = next.up.saturating_sub(1),
            Some(Vote::Down) => next.down = next.down.saturating_sub(1),
            None => {}
        }
        match to {
            Some(Vote::Up) => next.up += 1,
            Some(Vote::Down) => next.down += 1,
            None => {}
        }
        next.seq = seq;
        next
    }

    /// Whether nobody votes on it (now).
    pub fn is_zero(&self) -> bool {
        self.up == 0 && self.down == 0
    }
}

/// The z of the Wilson interval `BEST` ranks by (80 %, as Reddit's "best").
pub const WILSON_Z: f64 = 1.281551565545;

/// The lower bound of the Wilson score interval for the share of upvotes (0 with no upvote,
/// which is also its value with no vote at all).
pub fn best(up: u64, down: u64) -> f64 {
    if up == 0 {
        return 0.0;
    }
    let n = (up + down) as f64;
    let p = up as f64 / n;
    let z = WILSON_Z;
    #[allow(
        clippy::suboptimal_flops,
        reason = "written as docs/api.md gives it, so that anyone computing it that way gets the same bits"
    )]
    let bound = (p + z * z / (2.0 * n) - z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt())
        / (1.0 + z * z / n);
    bound.max(0.0)
}

/// `(up + down)^(min/max)` when both counts are over 0, else 0.
pub fn controversial(up: u64, down: u64) -> f64 {
    if up == 0 || down == 0 {
        return 0.0;
    }
    let (low, high) = (up.min(down) as f64, up.max(down) as f64);
    ((up + down) as f64).powf(low / high)
}

/// A ranked order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rank {
    /// By score (up − down).
    Top,
    /// By [`best`].
    Best,
    /// By [`controversial`].
    Controversial,
}

impl Rank {
    /// The value a comment with these counters ranks by (highest first). Scores are exact in
    /// an `f64` up to 2^53.
    pub fn value(self, up: u64, down: u64) -> f64 {
        match self {
            Rank::Top => (up as f64) - (down as f64),
            Rank::Best => best(up, down),
            Rank::Controversial => controversial(up, down),
        }
    }

    /// Every ranked order.
    pub const ALL: [Rank; 3] = [Rank::Top, Rank::Best, Rank::Controversial];
}

/// Where an item stands in a ranked order: its value, then its posting time and slug.
#[derive(Debug, Clone, PartialEq)]
pub struct RankKey<'a> {
    /// Its value (higher first).
    pub value: f64,
    /// When it was posted (older first among equal values).
    pub posted: Micros,
    /// Its slug (the last tie-break).
    pub slug: &'a str,
}

impl RankKey<'_> {
    /// The ranked order: highest value first, then oldest, then by slug.
    pub fn order(&self, other: &RankKey<'_>) -> Ordering {
        other
            .value
            .total_cmp(&self.value)
            .then(self.posted.cmp(&other.posted))
            .then(self.slug.cmp(other.slug))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_follows_the_wilson_bound() {
        assert_eq!(best(0, 0), 0.0);
        assert_eq!(best(0, 7), 0.0);
        // One upvote alone ranks below a hundred upvotes and one downvote.
        assert!(best(1, 0) < best(100, 1));
        // Reddit's example: 1 up of 1 is less certain than 90 of 100.
        assert!(best(1, 0) < best(90, 10));
        let bound = best(10, 0);
        assert!(bound > 0.85 && bound < 0.9, "{bound}");
        for up in 1..40 {
            for down in 0..40 {
                let b = best(up, down);
                assert!(b > 0.0 && b < 1.0, "{up}/{down}: {b}");
                assert!(b <= up as f64 / (up + down) as f64);
            }
        }
    }

    #[test]
    fn controversial_needs_both_sides() {
        assert_eq!(controversial(5, 0), 0.0);
        assert_eq!(controversial(0, 5), 0.0);
        assert_eq!(controversial(3, 3), 6.0);
        assert_eq!(controversial(3, 5), controversial(5, 3));
        assert!(controversial(10, 10) > controversial(19, 1));
    }

    #[test]
    fn ranked_order_breaks_ties_oldest_first() {
        let key = |value: f64, posted: i64, slug: &'static str| RankKey {
            value,
            posted: Micros(posted),
            slug,
        };
        let mut keys = [
            key(1.0, 5, "b"),
            key(2.0, 9, "a"),
            key(1.0, 5, "a"),
            key(1.0, 3, "z"),
            key(-1.0, 1, "a"),
        ];
        keys.sort_by(|a, b| a.order(b));
        let order: Vec<_> = keys.iter().map(|k| (k.value, k.posted.0, k.slug)).collect();
        assert_eq!(
            order,
            vec![
                (2.0, 9, "a"),
                (1.0, 3, "z"),
                (1.0, 5, "a"),
                (1.0, 5, "b"),
                (-1.0, 1, "a")
            ]
        );
    }

    #[test]
    fn counters_move_with_a_vote() {
        let none = Votes::default();
        let up = none.after(None, Some(Vote::Up), 1);
        assert_eq!((up.up, up.down, up.seq, up.score()), (1, 0, 1, 1));
        let switched = up.after(Some(Vote::Up), Some(Vote::Down), 2);
        assert_eq!((switched.up, switched.down, switched.score()), (0, 1, -1));
        let removed = switched.after(Some(Vote::Down), None, 3);
        assert!(removed.is_zero());
    }
}
