//! Threaded order without counting what comes before: the per-comment layout's threaded pages
//! as bounded ranges.
//!
//! A threaded page is a run of whole threads (a top-level comment and its replies, consecutive
//! in `full_slug` order) cut at both ends. To find where a page starts without reading the
//! threads before it, a sequenced discussion keeps two kinds of counts, both written in the
//! post's transaction:
//! * every top-level comment's `thread_total` (the comments of its thread, itself included), and
//!   every comment's `thread` (its thread's number: the top-level comment's `thread_seq`);
//! * on the discussion, `thread_blocks`: the comments of each block of [`BLOCK`] consecutive
//!   threads (`{"0": n0, "1": n1, …}`).
//!
//! An offset page walks the blocks (on the discussion document the request read anyway) to the
//! one holding its first comment, reads the top-level comments of at most the blocks it spans
//! (a bounded range of `thread_seq`), and reads its comments as one range of `full_slug` from
//! its first thread to its last. A cursor page reads the top-level comments after the cursor's
//! thread until they hold a page (before it, back from the cursor's thread, for a backward
//! page). A page from the end is the offset page that ends there, by the discussion's count.
//! Either way the reads are bounded by the page and the threads it touches, never by the
//! discussion.

use crate::domain::FullSlug;
use crate::store::shared::blocks::window;

/// Threads per block.
pub(super) const BLOCK: i64 = 32;

/// The discussion's field.
pub(super) const FIELD: &str = "thread_blocks";

/// The block of thread number `thread` (from 1).
pub(super) fn block_of(thread: i64) -> i64 {
    (thread - 1).max(0) / BLOCK
}

/// The path of the block's count on the discussion document.
pub(super) fn count_path(thread: i64) -> String {
    format!("{FIELD}.{}", block_of(thread))
}

/// The thread numbers of `block`: `(first, last)`, both included.
pub(super) fn threads_of(block: usize) -> (i64, i64) {
    let first = i64::try_from(block).unwrap_or(i64::MAX / BLOCK - 1) * BLOCK + 1;
    (first, first + BLOCK - 1)
}

/// A top-level comment as the threaded pages need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Root {
    /// Its `thread_seq`.
    pub thread: i64,
    /// The comments of its thread.
    pub total: u64,
    /// Its full slug (its thread is `full_slug ..` its descendant range's end).
    pub full_slug: FullSlug,
}

/// Where a window lies among consecutive threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cut {
    /// Index of the first thread it reads.
    pub first: usize,
    /// Comments of that thread before the window.
    pub skip: u64,
    /// Index of the last thread it reads.
    pub last: usize,
    /// How many comments the window holds (fewer than asked at the end of the discussion).
    pub expected: u64,
}

/// The threads, among `roots` (consecutive, in order), that hold comments `skip+1 ..= skip+want`
/// counted from the first of them; `None` when they hold `skip` comments or fewer.
pub(super) fn cut(roots: &[Root], skip: u64, want: u64) -> Option<Cut> {
    let (first, before, last, expected) = window(roots.iter().map(|r| r.total), skip, want)?;
    Some(Cut {
        first,
        skip: skip - before,
        last,
        expected,
    })
}

/// How many of `roots` (the threads after a cursor's thread, in order) a page of `want` needs:
/// the fewest whose comments are at least `want`, or all of them.
pub(super) fn cover(roots: &[Root], want: u64) -> usize {
    let mut total = 0_u64;
    for (i, root) in roots.iter().enumerate() {
        total += root.total;
        if total >= want {
            return i + 1;
        }
    }
    roots.len()
}

/// How many of `roots` (the threads before a cursor's thread, in order) a backward page of
/// `want` needs: the fewest at their end whose comments are at least `want`, or all of them.
pub(super) fn cover_back(roots: &[Root], want: u64) -> usize {
    let mut total = 0_u64;
    for (i, root) in roots.iter().rev().enumerate() {
        total += root.total;
        if total >= want {
            return i + 1;
        }
    }
    roots.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::shared::blocks::{parse, span, stored, Span};

    fn roots(totals: &[u64]) -> Vec<Root> {
        totals
            .iter()
            .enumerate()
            .map(|(i, &total)| Root {
                thread: i64::try_from(i).unwrap() + 1,
                total,
                full_slug: FullSlug::from_stored(format!("{i:016}:a")),
            })
            .collect()
    }

    #[test]
    fn blocks_number_threads_from_one() {
        assert_eq!(block_of(1), 0);
        assert_eq!(block_of(BLOCK), 0);
        assert_eq!(block_of(BLOCK + 1), 1);
        assert_eq!(threads_of(0), (1, BLOCK));
        assert_eq!(threads_of(2), (2 * BLOCK + 1, 3 * BLOCK));
        assert_eq!(count_path(BLOCK + 1), "thread_blocks.1");
    }

    #[test]
    fn stored_counts_read_back() {
        let blocks = vec![40, 0, 7];
        assert_eq!(parse(FIELD, &stored(&blocks)).unwrap(), blocks);
        let sparse = mongodb::bson::doc! { "2": 5_i32, "0": 3_i64 };
        assert_eq!(parse(FIELD, &sparse).unwrap(), vec![3, 0, 5]);
        assert!(parse(FIELD, &mongodb::bson::doc! { "x": 1 }).is_err());
        assert!(parse(FIELD, &mongodb::bson::doc! { "0": "1" }).is_err());
    }

    #[test]
    fn a_span_covers_the_window() {
        let blocks = [10, 20, 5, 40];
        assert_eq!(
            span(&blocks, 0, 5),
            Some(Span {
                first: 0,
                last: 0,
                before: 0
            })
        );
        assert_eq!(
            span(&blocks, 9, 2),
            Some(Span {
                first: 0,
                last: 1,
                before: 0
            })
        );
        assert_eq!(
            span(&blocks, 10, 26),
            Some(Span {
                first: 1,
                last: 3,
                before: 10
            })
        );
        // Past the end: the window runs to the last block.
        assert_eq!(
            span(&blocks, 70, 51),
            Some(Span {
                first: 3,
                last: 3,
                before: 35
            })
        );
        assert_eq!(span(&blocks, 75, 1), None);
        assert_eq!(span(&[], 0, 1), None);
    }

    #[test]
    fn a_cut_names_the_threads_and_the_skip_inside_the_first() {
        let r = roots(&[3, 1, 4, 1, 5]);
        assert_eq!(
            cut(&r, 0, 2),
            Some(Cut {
                first: 0,
                skip: 0,
                last: 0,
                expected: 2
            })
        );
        assert_eq!(
            cut(&r, 2, 3),
            Some(Cut {
                first: 0,
                skip: 2,
                last: 2,
                expected: 3
            })
        );
        assert_eq!(
            cut(&r, 4, 6),
            Some(Cut {
                first: 2,
                skip: 0,
                last: 4,
                expected: 6
            })
        );
        assert_eq!(
            cut(&r, 10, 51),
            Some(Cut {
                first: 4,
                skip: 1,
                last: 4,
                expected: 4
            })
        );
        assert_eq!(cut(&r, 14, 1), None);
    }

    #[test]
    fn cover_takes_the_fewest_threads_that_fill_the_page() {
        let r = roots(&[3, 1, 4]);
        assert_eq!(cover(&r, 1), 1);
        assert_eq!(cover(&r, 4), 2);
        assert_eq!(cover(&r, 5), 3);
        assert_eq!(cover(&r, 50), 3);
        assert_eq!(cover(&[], 50), 0);
        assert_eq!(cover_back(&r, 4), 1);
        assert_eq!(cover_back(&r, 5), 2);
        assert_eq!(cover_back(&r, 8), 3);
        assert_eq!(cover_back(&r, 50), 3);
        assert_eq!(cover_back(&[], 50), 0);
    }
}
