//! Offset windows: the seed's skip/limit walk, cut from the page list (or, in posting order
//! over pages of one size, by arithmetic) into slices of just the pages that hold the window.

use mongodb::bson::{doc, Bson};

use super::hints::{FullPages, Hints};
use super::shapes::PageInfo;
use super::Bucketed;
use crate::domain::{Comment, Discussion};
use crate::store::shared::error::StoreResult;
use crate::store::shared::scope::ReadScope;

impl Bucketed {
    /// The seed's skip/limit walk: the page list says which pages hold the window (or, in posting
    /// order where the sealed pages are all of one size, arithmetic does); one query `$slice`s
    /// just those pages.
    pub(super) async fn walk(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        top_level: bool,
        skip: u64,
        need: u64,
    ) -> StoreResult<Vec<Comment>> {
        let slices = match Hints::of(discussion).full_pages {
            Some(full) if !top_level => uniform_slices(full, skip, need),
            _ => {
                let pages = self.page_list(scope, &discussion.id).await?;
                window_slices(&pages, top_level, skip, need)
            }
        };
        if slices.is_empty() {
            return Ok(Vec::new());
        }
        let input = if top_level {
            Bson::from(doc! { "$filter": {
                "input": "$comments", "as": "c", "cond": { "$eq": ["$$c.parent", Bson::Null] },
            } })
        } else {
            Bson::from("$comments")
        };
        let branches: Vec<Bson> = slices
            .iter()
            .map(|s| {
                doc! {
                    "case": { "$eq": ["$page", s.page] },
                    "then": { "$slice": [input.clone(), to_i64(s.skip), to_i64(s.take)] },
                }
                .into()
            })
            .collect();
        let pages_wanted: Vec<i64> = slices.iter().map(|s| s.page).collect();
        let pipeline = vec![
            doc! { "$match": { "discussion_id": discussion.id.as_str(), "page": { "$in": pages_wanted } } },
            doc! { "$sort": { "page": 1 } },
            doc! { "$project": { "_id": 0, "comments": {
                "$switch": { "branches": branches, "default": [] },
            } } },
        ];
        self.run(scope, discussion, pipeline).await
    }
}

/// Part of one page that a window needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Slice {
    page: i64,
    skip: u64,
    take: u64,
}

/// The slices of the pages that hold items `skip..skip + need` of the walk.
pub(super) fn window_slices(
    pages: &[PageInfo],
    top_level: bool,
    skip: u64,
    need: u64,
) -> Vec<Slice> {
    let end = skip.saturating_add(need);
    let mut before = 0_u64;
    let mut out = Vec::new();
    for page in pages {
        let weight = page.weight(top_level);
        let (start, stop) = (before, before + weight);
        before = stop;
        if stop <= skip || weight == 0 {
            continue;
        }
        if start >= end {
            break;
        }
        let from = skip.saturating_sub(start);
        let take = stop.min(end) - start.max(skip);
        out.push(Slice {
            page: page.page,
            skip: from,
            take,
        });
    }
    out
}

/// The slices holding items `skip..skip + need` of the posting order when pages `0..full.count`
/// hold `full.size` comments each and the rest is in page `full.count` (which may hold fewer:
/// `$slice` then returns what there is).
pub(super) fn uniform_slices(full: FullPages, skip: u64, need: u64) -> Vec<Slice> {
    let sealed = full.count.saturating_mul(full.size);
    let end = skip.saturating_add(need);
    let mut out = Vec::new();
    let mut at = skip;
    while at < end {
        let (page, offset, room) = if at < sealed && full.size > 0 {
            let page = at / full.size;
            let offset = at % full.size;
            (page, offset, full.size - offset)
        } else {
            (full.count, at - sealed, end - at)
        };
        let take = room.min(end - at);
        out.push(Slice {
            page: i64::try_from(page).unwrap_or(i64::MAX),
            skip: offset,
            take,
        });
        at += take;
    }
    out
}

pub(super) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::bucketed::shapes::test_page as page;

    #[test]
    fn the_seeds_worked_example() {
        // Pages of 100, 102, 101 and 22 comments; skip 300, limit 50 (plus one to see more).
        let pages = [
            page(0, 100, 0),
            page(1, 102, 0),
            page(2, 101, 0),
            page(3, 22, 0),
        ];
        assert_eq!(
            window_slices(&pages, false, 300, 51),
            vec![
                Slice {
                    page: 2,
                    skip: 98,
                    take: 3
                },
                Slice {
                    page: 3,
                    skip: 0,
                    take: 22
                },
            ]
        );
    }

    #[test]
    fn windows_skip_whole_pages_and_empty_ones() {
        let pages = [page(0, 5, 2), page(1, 5, 0), page(2, 5, 3), page(3, 2, 1)];
        assert_eq!(
            window_slices(&pages, false, 5, 5),
            vec![Slice {
                page: 1,
                skip: 0,
                take: 5
            }]
        );
        assert_eq!(
            window_slices(&pages, true, 1, 3),
            vec![
                Slice {
                    page: 0,
                    skip: 1,
                    take: 1
                },
                Slice {
                    page: 2,
                    skip: 0,
                    take: 2
                },
            ]
        );
        assert!(window_slices(&pages, false, 17, 5).is_empty());
    }

    #[test]
    fn uniform_pages_are_cut_by_arithmetic() {
        let full = FullPages {
            count: 3,
            size: 100,
        };
        // Same window as the page list would give for three full pages and an open fourth.
        let pages = [
            page(0, 100, 0),
            page(1, 100, 0),
            page(2, 100, 0),
            page(3, 22, 0),
        ];
        for (skip, need) in [(0, 51), (99, 2), (250, 51), (290, 40), (300, 51), (310, 5)] {
            let listed: Vec<Slice> = window_slices(&pages, false, skip, need);
            let computed = uniform_slices(full, skip, need);
            // The open page's slice may ask for more than it holds: `$slice` returns what is there.
            let trimmed: Vec<Slice> = computed
                .into_iter()
                .filter_map(|s| {
                    let held = if s.page == 3 { 22 } else { 100 };
                    let take = s.take.min(held - s.skip.min(held));
                    (take > 0).then_some(Slice { take, ..s })
                })
                .collect();
            assert_eq!(trimmed, listed, "skip {skip}, need {need}");
        }
        let empty = FullPages { count: 0, size: 0 };
        assert_eq!(
            uniform_slices(empty, 7, 3),
            vec![Slice {
                page: 0,
                skip: 7,
                take: 3
            }]
        );
    }
}
