//! The bucketed layout's fields on the discussion document, and the hints they give its reads.

use mongodb::bson::{doc, Document, RawDocument};
use serde::Deserialize;

use super::shapes::{BLOCK_KEYS, KEYED, NUM_PAGES, PAGE_BLOCKS, SEALED_MAX, SEALED_MIN, SIZED};
use crate::domain::{Discussion, LayoutHints};
use crate::store::discussions::LayoutFields;
use crate::store::shared::blocks;
use crate::store::shared::bson::to_count;
use crate::store::shared::error::{StoreError, StoreResult};

/// What a bucketed discussion keeps for its reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hints {
    /// Where every page before the one posts go to holds the same number of comments (the
    /// discussion keeps the smallest and largest count of its sealed pages): an offset in
    /// posting order is then a page number and a position in it, with no page list to read.
    pub full_pages: Option<FullPages>,
    /// Where the discussion keeps them (and they account for every comment): per block of
    /// consecutive pages, the comments of the threads started there and the block's first order
    /// key, so that a threaded page reads the headers of the pages it needs, not of all.
    pub page_blocks: Option<Vec<PageBlock>>,
    /// The page posts go to (`num_comment_pages`; 0 where it is not set yet): no page has a
    /// higher number, so the end of the discussion is a bounded range of pages below it.
    pub last_page: Option<i64>,
}

/// A block of consecutive pages of a bucketed discussion (see [`Hints::page_blocks`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageBlock {
    /// The comments of the threads whose top-level comment is in one of its pages.
    pub threaded: u64,
    /// The smallest order key (`<posted>:<slug>`) of its comments.
    pub first_key: String,
}

/// The sealed pages of a bucketed discussion, all of one size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FullPages {
    /// How many pages are sealed (pages `0..count`; page `count` is where posts go).
    pub count: u64,
    /// How many comments each of them holds.
    pub size: u64,
}

/// A discussion without hints (from before they were kept, or in another layout).
pub(super) static NONE: Hints = Hints {
    full_pages: None,
    page_blocks: None,
    last_page: None,
};

impl Hints {
    /// The hints of a bucketed discussion.
    pub fn of(discussion: &Discussion) -> &Hints {
        discussion.hints.get_or(&NONE)
    }
}

/// The fields as stored.
#[derive(Deserialize)]
pub(super) struct Stored {
    #[serde(default)]
    comment_count: i64,
    /// Whether the sealed pages' sizes are tracked (discussions created or moved into the
    /// bucketed layout since they are): `sealed_min` and `sealed_max` then cover every sealed
    /// page, and `num_comment_pages` says how many there are.
    #[serde(default)]
    sized_pages: bool,
    #[serde(default)]
    sealed_min: Option<i64>,
    #[serde(default)]
    sealed_max: Option<i64>,
    #[serde(default)]
    num_comment_pages: Option<i64>,
    /// Per block of pages, the comments of the threads started there (`{"<block>": n}`).
    #[serde(default)]
    page_blocks: Option<Document>,
    /// Per block of pages, its first order key (`{"<block>": key}`).
    #[serde(default)]
    page_block_keys: Option<Document>,
}

impl Stored {
    /// The blocks of pages, where both fields are kept, every block has its first key (in
    /// increasing order) and the counts account for every comment. Counts that do not (a
    /// discussion from before they were kept, whose posts since began them) are not used: reads
    /// then walk every page's header.
    pub(super) fn page_blocks(&self) -> Option<Vec<PageBlock>> {
        let mut counts = blocks::parse(PAGE_BLOCKS, self.page_blocks.as_ref()?).ok()?;
        let mut first_keys: Vec<String> = Vec::new();
        for (block, first) in self.page_block_keys.as_ref()? {
            let block: usize = block.parse().ok()?;
            if first_keys.len() <= block {
                first_keys.resize(block + 1, String::new());
            }
            first_keys[block] = first.as_str()?.to_owned();
        }
        counts.resize(counts.len().max(first_keys.len()), 0);
        first_keys.resize(counts.len(), String::new());
        let total: u64 = counts.iter().sum();
        let keyed = first_keys.iter().all(|k| !k.is_empty());
        let ordered = first_keys.windows(2).all(|pair| pair[0] < pair[1]);
        (total == to_count(self.comment_count) && keyed && ordered).then(|| {
            counts
                .into_iter()
                .zip(first_keys)
                .map(|(threaded, first_key)| PageBlock {
                    threaded,
                    first_key,
                })
                .collect()
        })
    }

    /// The sealed pages, when they are tracked and all of one size.
    pub(super) fn full_pages(&self) -> Option<FullPages> {
        if !self.sized_pages {
            return None;
        }
        let count = to_count(self.num_comment_pages.unwrap_or(0));
        if count == 0 {
            return Some(FullPages { count, size: 0 });
        }
        match (self.sealed_min, self.sealed_max) {
            (Some(min), Some(max)) if min == max && min > 0 => Some(FullPages {
                count,
                size: to_count(min),
            }),
            _ => None,
        }
    }
}

/// The bucketed fields of the discussion document.
pub(crate) struct Fields;

impl LayoutFields for Fields {
    fn names(&self) -> &'static [&'static str] {
        &[
            SIZED,
            SEALED_MIN,
            SEALED_MAX,
            NUM_PAGES,
            PAGE_BLOCKS,
            BLOCK_KEYS,
        ]
    }

    fn hints(&self, doc: &RawDocument) -> StoreResult<LayoutHints> {
        let stored: Stored = mongodb::bson::from_slice(doc.as_bytes())
            .map_err(|e| StoreError::Corrupt(format!("a bucketed discussion: {e}")))?;
        Ok(LayoutHints::new(Hints {
            full_pages: stored.full_pages(),
            page_blocks: stored.page_blocks(),
            last_page: Some(stored.num_comment_pages.unwrap_or(0).max(0)),
        }))
    }

    /// Pages with `_id`s `<discussion>:<page>`, sealed pages' sizes tracked, and block counts
    /// from the first post.
    fn initial(&self) -> Document {
        doc! {
            KEYED: true, SIZED: true,
            PAGE_BLOCKS: Document::new(), BLOCK_KEYS: Document::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(comments: i64, blocks: Option<Document>, keys: Option<Document>) -> Stored {
        let mut doc = doc! { "comment_count": comments };
        if let Some(blocks) = blocks {
            doc.insert(PAGE_BLOCKS, blocks);
        }
        if let Some(keys) = keys {
            doc.insert(BLOCK_KEYS, keys);
        }
        mongodb::bson::from_document(doc).expect("a discussion")
    }

    #[test]
    fn page_blocks_count_only_when_they_account_for_every_comment() {
        let keys = doc! { "0": "0001:a", "1": "0005:b", "2": "0009:c" };
        let blocks = doc! { "1": 3_i64, "0": 5_i32, "2": 0_i64 };
        let found = stored(8, Some(blocks.clone()), Some(keys.clone()))
            .page_blocks()
            .expect("blocks");
        let counts: Vec<u64> = found.iter().map(|b| b.threaded).collect();
        assert_eq!(counts, [5, 3, 0]);
        assert_eq!(found[1].first_key, "0005:b");
        // A new discussion: none yet.
        assert_eq!(
            stored(0, Some(Document::new()), Some(Document::new())).page_blocks(),
            Some(vec![])
        );
        // From before they were kept, counts its posts began, or damaged: not used.
        assert_eq!(stored(8, None, None).page_blocks(), None);
        assert_eq!(
            stored(9, Some(blocks.clone()), Some(keys.clone())).page_blocks(),
            None
        );
        assert_eq!(stored(8, Some(blocks.clone()), None).page_blocks(), None);
        let gap = doc! { "0": "0001:a", "2": "0009:c" };
        assert_eq!(
            stored(8, Some(blocks.clone()), Some(gap)).page_blocks(),
            None
        );
        let unordered = doc! { "0": "0001:a", "1": "0010:b", "2": "0009:c" };
        assert_eq!(
            stored(8, Some(blocks.clone()), Some(unordered)).page_blocks(),
            None
        );
        let odd = doc! { "x": 8_i64 };
        assert_eq!(stored(8, Some(odd), Some(keys)).page_blocks(), None);
    }
}
