//! Pages of a sub-discussion bounded by subtree sizes, without reading the subtree.
//!
//! A sub-discussion in threaded order is one range of `full_slug`, and a page of it is the first
//! `limit + 1` comments of the range after its start (the root's descendants, or what follows a
//! cursor). A range bounded only at its start leaves the server to stop at the limit, and a
//! server that reads every match before applying it reads the whole subtree. Where every comment carries the size of its subtree (`descendants`, counted on every
//! ancestor in the post's transaction), the page can name where it ends instead:
//!
//! * the comments after the start are the subtrees of the *heads*: the replies, later than the
//!   start, of the start and of each of its ancestors up to the root. Every comment keeps its
//!   replies' subtree sizes (`reply_sizes`), so the heads come from those comments' documents
//!   (the root's is read by the request already);
//! * walking the heads in order and adding up their sizes finds the head whose subtree holds
//!   the page's last comment; the page is the range from the start to the end of that subtree;
//! * when that subtree holds many more comments than the page needs, its head is replaced by
//!   itself alone followed by its own replies (one more query, of that head's document), and the
//!   walk runs again.
//!
//! The range read then holds the page and at most [`DEEPER_PAST`] comments more at either end. An offset page
//! starts at the head whose subtree holds its first comment in the same way. The sizes only
//! choose the range: a page that comes back shorter than the sizes promised (sizes that count
//! more than there is) is read again over the whole range.

use mongodb::bson::Document;

use crate::domain::{Cursor, FullSlug, Window};
use crate::store::shared::bson::as_i64;

/// The comment's field that holds the size of its subtree, itself left out.
pub(super) const DESCENDANTS: &str = "descendants";

/// The comment's field that holds the size of each reply's subtree, the reply included, by the
/// reply's last `full_slug` segment (`{"<micros>:<part>": n, …}`).
pub(super) const REPLY_SIZES: &str = "reply_sizes";

/// The segment of `full_slug` one level below `depth`: which reply of its ancestor at `depth`
/// the comment descends from.
pub(super) fn reply_segment(full_slug: &FullSlug, depth: usize) -> &str {
    full_slug
        .as_str()
        .split('/')
        .nth(depth + 1)
        .unwrap_or_default()
}

/// The path of the count a comment adds to its ancestor at `depth`'s `reply_sizes`.
pub(super) fn reply_size_path(full_slug: &FullSlug, depth: usize) -> String {
    format!("{REPLY_SIZES}.{}", reply_segment(full_slug, depth))
}

/// The replies of the comment `full_slug` and their subtrees' sizes, in threaded order, from its
/// stored `reply_sizes` (entries that are not a segment and a count are left out; the caller
/// checks that they add up to the comment's size).
pub(super) fn reply_sizes(full_slug: &FullSlug, stored: Option<&Document>) -> Vec<(FullSlug, u64)> {
    let Some(stored) = stored else {
        return Vec::new();
    };
    let mut sizes: Vec<(FullSlug, u64)> = stored
        .iter()
        .filter_map(|(segment, n)| {
            let n = u64::try_from(as_i64(n)?).ok()?;
            let reply = FullSlug::parse(&format!("{full_slug}/{segment}")).ok()?;
            (reply.depth() == full_slug.depth() + 1).then_some((reply, n))
        })
        .collect();
    sizes.sort();
    sizes
}

/// Where a read of a page of a comment's replies can stop, from the comment's replies with their
/// sizes (as [`reply_sizes`] gives them: in threaded order, which among siblings is posting
/// order): for a forward window, the latest posting time the page's replies and the one after
/// it reach (the read stops there); for a backward window, the earliest time the page's replies
/// and the one before it reach (the read starts there). `None` when the page reaches the last
/// reply (the first, backward: there is nothing to leave out) or the window is not one of
/// replies.
///
/// Entries the sizes lack only make the bound later (earlier, backward) than it could be;
/// entries they have in excess can make it cut the page, which the caller sees as a page
/// shorter than promised.
pub(super) fn replies_bound(replies: &[(FullSlug, u64)], window: &Window) -> Option<i64> {
    let micros = |full: &FullSlug| -> Option<i64> {
        let segment = full.as_str().rsplit('/').next()?;
        segment.split_once(':')?.0.parse().ok()
    };
    // Replies posted at a time: up to and including it, or strictly before it.
    let up_to = |posted: i64, inclusive: bool| {
        replies
            .iter()
            .take_while(|(full, _)| {
                micros(full).is_some_and(|m| m < posted || (inclusive && m == posted))
            })
            .count()
    };
    let len = u64::try_from(replies.len()).ok()?;
    let index = match window {
        Window::Offset { skip, limit } => usize::try_from(*skip).ok()?.checked_add(*limit)?,
        Window::After {
            cursor: None,
            limit,
        } => *limit,
        Window::After {
            cursor: Some(Cursor::Chronological { posted, .. }),
            limit,
        } => {
            // Every reply posted at or before the cursor's time may precede it: counting them
            // all keeps the bound at or after the page's end.
            up_to(posted.0, true).checked_add(*limit)?
        }
        Window::FromEnd { .. } => {
            let first = window.span(Some(len), None)?.from;
            return match first {
                0 => None,
                n => micros(&replies[usize::try_from(n).ok()?].0),
            };
        }
        Window::Before {
            cursor: Cursor::Chronological { posted, .. },
            limit,
        } => {
            // Only the replies posted before the cursor's time surely precede it: counting
            // just those keeps the bound at or before the page's start.
            let first = up_to(posted.0, false).checked_sub(limit.checked_add(1)?)?;
            return match first {
                0 => None,
                n => micros(&replies[n].0),
            };
        }
        Window::After {
            cursor: Some(_), ..
        }
        | Window::Before { .. } => return None,
    };
    if index.saturating_add(1) >= replies.len() {
        // The page reaches the last reply: there is nothing after it to leave out.
        return None;
    }
    micros(&replies[index].0)
}

/// How many comments a range may read beyond the ones its page needs, at either end, before the
/// walk looks one level deeper. A level costs a point read of one comment, about what reading a
/// hundred more index entries of a range costs (see docs/ARCHITECTURE.md).
pub(super) const DEEPER_PAST: u64 = 100;

/// How many times a walk may look one level deeper (each is a query).
pub(super) const MAX_DEEPER: usize = 4;

/// A comment that heads a run of threaded order: the comment with its subtree, or alone (its
/// replies then follow as heads of their own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Head {
    /// The comment's full slug.
    pub full_slug: FullSlug,
    /// The comments in the run (`None`: not known).
    pub size: Option<u64>,
    /// Whether the run is the comment alone.
    pub alone: bool,
}

impl Head {
    /// A comment with its subtree, as stored: `descendants` is its subtree's size without it.
    pub(super) fn whole(full_slug: FullSlug, descendants: Option<i64>) -> Self {
        let size = descendants
            .and_then(|n| u64::try_from(n).ok())
            .map(|n| n + 1);
        Self {
            full_slug,
            size,
            alone: false,
        }
    }

    /// The comment alone.
    pub(super) fn alone(full_slug: FullSlug) -> Self {
        Self {
            full_slug,
            size: Some(1),
            alone: true,
        }
    }

    /// The first full slug after the run.
    pub(super) fn end(&self) -> String {
        let (lo, hi) = self.full_slug.descendant_range();
        if self.alone {
            lo
        } else {
            hi
        }
    }

    pub(super) fn deeper(&self) -> bool {
        !self.alone && self.size.is_some_and(|n| n > 1)
    }
}

/// What to do next for a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Plan {
    /// Read the replies of these heads (indexes, increasing), replace each by itself alone
    /// followed by its replies, and plan again.
    Deeper(Vec<usize>),
    /// Read the range from head `from` (skipping `skip` comments of it) to the end of head `to`
    /// (`None`: to the end of the sub-discussion); `expected` is how many comments the sizes
    /// promise there after the skip, up to what the page needs.
    Read {
        from: usize,
        skip: u64,
        to: Option<usize>,
        expected: u64,
    },
}

/// Plans the read of comments `skip .. skip + take` of the runs `heads` (in threaded order).
/// `deeper` says whether the walk may still look one level deeper.
pub(super) fn plan(heads: &[Head], skip: u64, take: u64, deeper: bool) -> Plan {
    let end = skip.saturating_add(take);
    let mut before = 0_u64;
    let mut start: Option<(usize, u64)> = None;
    for (i, head) in heads.iter().enumerate() {
        let Some(size) = head.size else {
            // Nothing is known from here on: read from the start to the end of the range.
            let (from, skip_in) = start.unwrap_or((i, skip.saturating_sub(before)));
            return Plan::Read {
                from,
                skip: skip_in,
                to: None,
                expected: 0,
            };
        };
        let stop = before.saturating_add(size);
        if start.is_none() && stop > skip {
            start = Some((i, skip - before));
        }
        if let (Some((from, skip_in)), true) = (start, stop >= end) {
            let mut wide = Vec::new();
            if deeper {
                if skip_in > DEEPER_PAST && heads[from].deeper() {
                    wide.push(from);
                }
                if stop - end > DEEPER_PAST && heads[i].deeper() && !wide.contains(&i) {
                    wide.push(i);
                }
            }
            if !wide.is_empty() {
                return Plan::Deeper(wide);
            }
            return Plan::Read {
                from,
                skip: skip_in,
                to: Some(i),
                expected: take,
            };
        }
        before = stop;
    }
    // The runs hold fewer comments than the page reaches: read to the end of the range.
    match start {
        Some((from, skip_in)) => Plan::Read {
            from,
            skip: skip_in,
            to: None,
            expected: before.saturating_sub(skip).min(take),
        },
        None => Plan::Read {
            from: 0,
            skip,
            to: None,
            expected: 0,
        },
    }
}

/// `heads` with each of `wide` replaced by itself alone followed by its replies (`replies[k]`
/// are the replies of `wide[k]`, in threaded order).
pub(super) fn widen(heads: Vec<Head>, wide: &[usize], mut replies: Vec<Vec<Head>>) -> Vec<Head> {
    let mut out = Vec::with_capacity(heads.len() + replies.iter().map(Vec::len).sum::<usize>());
    let mut next = 0;
    for (i, head) in heads.into_iter().enumerate() {
        if wide.get(next) == Some(&i) {
            out.push(Head::alone(head.full_slug));
            out.append(&mut replies[next]);
            next += 1;
        } else {
            out.push(head);
        }
    }
    out
}

/// The comments whose later replies head the runs after `after` inside the sub-discussion of
/// `root` (`after` itself and its ancestors up to the root), or just the root when there is no
/// `after`. `None` when `after` is not inside the sub-discussion.
pub(super) fn parents_after(root: &FullSlug, after: Option<&FullSlug>) -> Option<Vec<FullSlug>> {
    let Some(after) = after else {
        return Some(vec![root.clone()]);
    };
    if !root.is_ancestor_of(after) {
        return None;
    }
    Some(
        (root.depth()..=after.depth())
            .map(|depth| after.ancestor_at(depth))
            .collect(),
    )
}

/// The comments whose earlier replies head the runs before `before` inside the sub-discussion
/// of `root`: the root and `before`'s ancestors below it, down to its parent. `None` when
/// `before` is not inside the sub-discussion.
pub(super) fn parents_before(root: &FullSlug, before: &FullSlug) -> Option<Vec<FullSlug>> {
    if !root.is_ancestor_of(before) {
        return None;
    }
    Some(
        (root.depth()..before.depth())
            .map(|depth| before.ancestor_at(depth))
            .collect(),
    )
}

/// The runs before `before` among the replies (in threaded order, with their subtrees) of the
/// comments [`parents_before`] names: a reply before it is a run with its subtree, an ancestor
/// of it is a run of itself alone (its replies before the path follow as runs of their own),
/// and the replies after it are left out. In threaded order.
pub(super) fn heads_before(replies: Vec<Head>, before: &FullSlug) -> Vec<Head> {
    let mut heads: Vec<Head> = replies
        .into_iter()
        .filter_map(|head| {
            if head.full_slug.is_ancestor_of(before) {
                Some(Head::alone(head.full_slug))
            } else {
                (head.full_slug < *before).then_some(head)
            }
        })
        .collect();
    heads.sort_by(|a, b| a.full_slug.cmp(&b.full_slug));
    heads
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(raw: &str) -> FullSlug {
        FullSlug::from_stored(raw.to_owned())
    }

    /// A head named by the time of its only segment under the root `0:r`.
    fn head(t: u32, size: Option<u64>) -> Head {
        Head {
            full_slug: full(&format!("0:r/{t:016}:a")),
            size,
            alone: false,
        }
    }

    #[test]
    fn a_page_ends_at_the_subtree_that_holds_its_last_comment() {
        let heads = vec![
            head(1, Some(10)),
            head(2, Some(30)),
            head(3, Some(20)),
            head(4, Some(5)),
        ];
        assert_eq!(
            plan(&heads, 0, 51, true),
            Plan::Read {
                from: 0,
                skip: 0,
                to: Some(2),
                expected: 51
            }
        );
        // An offset page starts at the subtree that holds its first comment.
        assert_eq!(
            plan(&heads, 45, 10, true),
            Plan::Read {
                from: 2,
                skip: 5,
                to: Some(2),
                expected: 10
            }
        );
    }

    #[test]
    fn a_large_subtree_is_looked_into() {
        let heads = vec![head(1, Some(10)), head(2, Some(4_000)), head(3, Some(5))];
        assert_eq!(plan(&heads, 0, 51, true), Plan::Deeper(vec![1]));
        // Not once the walk may not look deeper.
        assert_eq!(
            plan(&heads, 0, 51, false),
            Plan::Read {
                from: 0,
                skip: 0,
                to: Some(1),
                expected: 51
            }
        );
        // Both ends of an offset page, when both are far.
        let heads = vec![head(1, Some(1_000)), head(2, Some(4_000))];
        assert_eq!(plan(&heads, 500, 1_000, true), Plan::Deeper(vec![0, 1]));
        // One subtree holding both ends is looked into once.
        let heads = vec![head(1, Some(4_000))];
        assert_eq!(plan(&heads, 500, 51, true), Plan::Deeper(vec![0]));
    }

    #[test]
    fn unknown_sizes_read_to_the_end() {
        let heads = vec![head(1, Some(10)), head(2, None), head(3, Some(5))];
        assert_eq!(
            plan(&heads, 0, 51, true),
            Plan::Read {
                from: 0,
                skip: 0,
                to: None,
                expected: 0
            }
        );
        assert_eq!(
            plan(&heads, 12, 5, true),
            Plan::Read {
                from: 1,
                skip: 2,
                to: None,
                expected: 0
            }
        );
    }

    #[test]
    fn short_runs_read_what_there_is() {
        let heads = vec![head(1, Some(3)), head(2, Some(4))];
        assert_eq!(
            plan(&heads, 0, 51, true),
            Plan::Read {
                from: 0,
                skip: 0,
                to: None,
                expected: 7
            }
        );
        assert_eq!(
            plan(&heads, 9, 51, true),
            Plan::Read {
                from: 0,
                skip: 9,
                to: None,
                expected: 0
            }
        );
    }

    #[test]
    fn a_head_alone_ends_before_its_replies() {
        let lone = Head::alone(full("0:r/01:a"));
        assert_eq!(lone.end(), "0:r/01:a/");
        assert_eq!(head(1, Some(3)).end(), format!("0:r/{:016}:a0", 1));
        let widened = widen(
            vec![head(1, Some(1)), head(2, Some(3)), head(3, Some(1))],
            &[1],
            vec![vec![
                Head::whole(full(&format!("0:r/{:016}:a/05:b", 2)), Some(0)),
                Head::whole(full(&format!("0:r/{:016}:a/06:c", 2)), Some(0)),
            ]],
        );
        let sizes: Vec<_> = widened.iter().map(|h| (h.size, h.alone)).collect();
        assert_eq!(
            sizes,
            vec![
                (Some(1), false),
                (Some(1), true),
                (Some(1), false),
                (Some(1), false),
                (Some(1), false)
            ]
        );
    }

    #[test]
    fn the_parents_after_a_cursor_run_up_to_the_root() {
        let root = full("01:r/02:a");
        assert_eq!(parents_after(&root, None), Some(vec![root.clone()]));
        assert_eq!(
            parents_after(&root, Some(&full("01:r/02:a/03:b/04:c"))),
            Some(vec![
                root.clone(),
                full("01:r/02:a/03:b"),
                full("01:r/02:a/03:b/04:c"),
            ])
        );
        assert_eq!(parents_after(&root, Some(&full("01:r/05:z"))), None);
    }

    #[test]
    fn the_runs_before_a_cursor_are_its_elders_and_its_ancestors_alone() {
        let root = full("01:r");
        let before = full("01:r/03:b/05:d");
        assert_eq!(
            parents_before(&root, &before),
            Some(vec![root.clone(), full("01:r/03:b")])
        );
        assert_eq!(parents_before(&before, &root), None);
        assert_eq!(parents_before(&root, &root), None);
        let whole = |raw: &str, n| Head::whole(full(raw), Some(n));
        let heads = heads_before(
            vec![
                whole("01:r/02:a", 2),
                whole("01:r/03:b", 6),
                whole("01:r/09:z", 1),
                whole("01:r/03:b/04:c", 1),
                whole("01:r/03:b/05:d", 3),
                whole("01:r/03:b/06:e", 0),
            ],
            &before,
        );
        let named: Vec<(&str, Option<u64>, bool)> = heads
            .iter()
            .map(|h| (h.full_slug.as_str(), h.size, h.alone))
            .collect();
        assert_eq!(
            named,
            vec![
                ("01:r/02:a", Some(3), false),
                ("01:r/03:b", Some(1), true),
                ("01:r/03:b/04:c", Some(2), false),
            ]
        );
    }

    #[test]
    fn a_page_of_replies_stops_at_the_reply_after_it() {
        let parent = full("0000000000000001:r");
        let replies: Vec<(FullSlug, u64)> = (0..10)
            .map(|i| (full(&format!("{parent}/{:016}:c{i}", 100 + i)), 1))
            .collect();
        let first = |limit| Window::After {
            cursor: None,
            limit,
        };
        // A first page of 3 reads the replies up to the fourth (it says whether more follow).
        assert_eq!(replies_bound(&replies, &first(3)), Some(103));
        // A page that reaches the last reply has nothing to stop before.
        assert_eq!(replies_bound(&replies, &first(9)), None);
        assert_eq!(replies_bound(&replies, &first(20)), None);
        let offset = Window::Offset { skip: 4, limit: 2 };
        assert_eq!(replies_bound(&replies, &offset), Some(106));
        let after = |posted| Window::After {
            cursor: Some(Cursor::Chronological {
                posted: crate::domain::Micros(posted),
                slug: crate::domain::Slug::from_stored("r/c1".into()),
            }),
            limit: 2,
        };
        // After the reply posted at 101: replies 102 and 103, and 104 to say more follow.
        assert_eq!(replies_bound(&replies, &after(101)), Some(104));
        // A cursor between replies counts the ones before it.
        assert_eq!(replies_bound(&replies, &after(99)), Some(102));
        assert_eq!(replies_bound(&replies, &after(107)), None);
        let threaded = Window::After {
            cursor: Some(Cursor::Threaded(replies[0].0.clone())),
            limit: 2,
        };
        assert_eq!(replies_bound(&replies, &threaded), None);
        // Backward: the final 3 read from the fourth-last reply (it says whether more precede).
        let from_end = |skip, limit| Window::FromEnd { skip, limit };
        assert_eq!(replies_bound(&replies, &from_end(0, 3)), Some(106));
        assert_eq!(replies_bound(&replies, &from_end(2, 3)), Some(104));
        assert_eq!(replies_bound(&replies, &from_end(0, 9)), None);
        assert_eq!(replies_bound(&replies, &from_end(5, 9)), None);
        let before = |posted, limit| Window::Before {
            cursor: Cursor::Chronological {
                posted: crate::domain::Micros(posted),
                slug: crate::domain::Slug::from_stored("r/c1".into()),
            },
            limit,
        };
        // Before the reply posted at 107: replies 105 and 106, and 104 to say more precede.
        assert_eq!(replies_bound(&replies, &before(107, 2)), Some(104));
        assert_eq!(replies_bound(&replies, &before(104, 2)), Some(101));
        assert_eq!(replies_bound(&replies, &before(103, 2)), None);
        assert_eq!(replies_bound(&replies, &before(102, 2)), None);
        assert_eq!(replies_bound(&replies, &before(200, 2)), Some(107));
    }

    #[test]
    fn reply_sizes_are_read_in_threaded_order_and_checked() {
        let parent = full("0000000000000001:rrrrrrrr");
        let stored = mongodb::bson::doc! {
            "0000000000000009:bbbbbbbb": 3_i64,
            "0000000000000002:aaaaaaaa": 1_i32,
            "not a segment": 4_i64,
            "0000000000000003:cccccccc/0000000000000004:dddddddd": 2_i64,
        };
        assert_eq!(
            reply_sizes(&parent, Some(&stored)),
            vec![
                (
                    full("0000000000000001:rrrrrrrr/0000000000000002:aaaaaaaa"),
                    1
                ),
                (
                    full("0000000000000001:rrrrrrrr/0000000000000009:bbbbbbbb"),
                    3
                ),
            ]
        );
        assert_eq!(reply_sizes(&parent, None), Vec::new());
        let reply =
            full("0000000000000001:rrrrrrrr/0000000000000002:aaaaaaaa/0000000000000005:eeeeeeee");
        assert_eq!(
            reply_size_path(&reply, 0),
            "reply_sizes.0000000000000002:aaaaaaaa"
        );
        assert_eq!(reply_segment(&reply, 1), "0000000000000005:eeeeeeee");
    }
}
