//! Counts per block of consecutive threads or pages, as a discussion document keeps them
//! (`{"0": n0, "1": n1, …}`), and where a window of comments lies among such groups.

use mongodb::bson::Document;

use super::bson::{as_i64, corrupt, to_count};
use super::error::StoreResult;

/// The stored counts as a list indexed by block (a block with no count reads as 0).
pub(crate) fn parse(field: &str, stored: &Document) -> StoreResult<Vec<u64>> {
    let mut blocks = Vec::new();
    for (key, value) in stored {
        let block: usize = key
            .parse()
            .map_err(|_| corrupt(format!("{field} has a key {key:?} that is not a block")))?;
        let count =
            as_i64(value).ok_or_else(|| corrupt(format!("{field}.{key} is not an integer")))?;
        if blocks.len() <= block {
            blocks.resize(block + 1, 0);
        }
        blocks[block] = to_count(count);
    }
    Ok(blocks)
}

/// The stored form of a list of block counts.
pub(crate) fn stored(blocks: &[u64]) -> Document {
    blocks
        .iter()
        .enumerate()
        .map(|(block, n)| {
            (
                block.to_string(),
                mongodb::bson::Bson::Int64(i64::try_from(*n).unwrap_or(i64::MAX)),
            )
        })
        .collect()
}

/// The blocks an offset window lies in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    /// The block of its first comment.
    pub(crate) first: usize,
    /// The block of its last comment (or the discussion's last block).
    pub(crate) last: usize,
    /// Comments in the blocks before `first`.
    pub(crate) before: u64,
}

/// The blocks that hold comments `skip+1 ..= skip+want` of the threaded order; `None` when the
/// discussion has `skip` comments or fewer.
pub(crate) fn span(blocks: &[u64], skip: u64, want: u64) -> Option<Span> {
    let (first, before, last, _) = window(blocks.iter().copied(), skip, want)?;
    Some(Span {
        first,
        last,
        before,
    })
}

/// Where comments `skip+1 ..= skip+want` lie among consecutive groups of `totals` comments:
/// the group of the first, the comments before it, the group of the last (or the last group),
/// and how many the window holds. `None` when the groups hold `skip` comments or fewer.
pub(crate) fn window(
    totals: impl Iterator<Item = u64>,
    skip: u64,
    want: u64,
) -> Option<(usize, u64, usize, u64)> {
    let end = skip.saturating_add(want);
    let (mut seen, mut first, mut last) = (0_u64, None, 0);
    for (i, n) in totals.enumerate() {
        if first.is_none() && seen + n > skip {
            first = Some((i, seen));
        }
        seen += n;
        last = i;
        if first.is_some() && seen >= end {
            break;
        }
    }
    let (first, before) = first?;
    Some((first, before, last, seen.min(end) - skip))
}
