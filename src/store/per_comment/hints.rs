//! The per-comment layout's fields on the discussion document, and the hints they give its reads.

use mongodb::bson::{doc, Document, RawDocument};
use serde::Deserialize;

use super::thread_blocks;
use crate::domain::{Discussion, LayoutHints};
use crate::store::discussions::LayoutFields;
use crate::store::shared::blocks;
use crate::store::shared::error::{StoreError, StoreResult};

/// The discussion's field that says every comment carries the size of its subtree.
pub(crate) const SUBTREE_SIZES: &str = "subtree_sizes";

/// The posting time of a sequenced discussion's latest comment (read by posts only).
pub(crate) const LAST_POSTED: &str = "last_posted";

/// What a per-comment discussion keeps for its reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hints {
    /// Whether its comments carry per-discussion sequence numbers in posting order (discussions
    /// created on a deployment with transactions), so that pages are read as bounded ranges of
    /// them.
    pub sequenced: bool,
    /// Comments per block of consecutive threads, where the discussion keeps them (sequenced
    /// discussions), so that a threaded page finds its threads without counting the ones before
    /// it.
    pub thread_blocks: Option<Vec<u64>>,
    /// Whether every comment carries the size of its subtree (sequenced discussions), so that a
    /// page of a sub-discussion finds where it ends without reading the whole subtree.
    pub subtree_sizes: bool,
}

/// A discussion without hints (from before they were kept, or in another layout).
pub(super) static NONE: Hints = Hints {
    sequenced: false,
    thread_blocks: None,
    subtree_sizes: false,
};

impl Hints {
    /// The hints of a per-comment discussion.
    pub fn of(discussion: &Discussion) -> &Hints {
        discussion.hints.get_or(&NONE)
    }
}

/// The fields as stored.
#[derive(Deserialize)]
pub(super) struct Stored {
    #[serde(default)]
    sequenced: bool,
    #[serde(default)]
    thread_blocks: Option<Document>,
    #[serde(default)]
    subtree_sizes: bool,
}

/// The per-comment fields of the discussion document.
pub(crate) struct Fields {
    /// Whether new discussions number their comments (needs transactions: a number is taken in
    /// the same transaction as the comment's insert).
    pub(crate) sequences: bool,
}

impl LayoutFields for Fields {
    fn names(&self) -> &'static [&'static str] {
        &["sequenced", thread_blocks::FIELD, SUBTREE_SIZES]
    }

    fn hints(&self, doc: &RawDocument) -> StoreResult<LayoutHints> {
        let stored: Stored = mongodb::bson::from_slice(doc.as_bytes())
            .map_err(|e| StoreError::Corrupt(format!("a per-comment discussion: {e}")))?;
        Ok(LayoutHints::new(Hints {
            sequenced: stored.sequenced,
            thread_blocks: stored
                .thread_blocks
                .as_ref()
                .map(|b| blocks::parse(thread_blocks::FIELD, b))
                .transpose()?,
            subtree_sizes: stored.subtree_sizes,
        }))
    }

    fn initial(&self) -> Document {
        let mut fields = doc! { "sequenced": self.sequences };
        if self.sequences {
            fields.insert(thread_blocks::FIELD, Document::new());
            fields.insert(SUBTREE_SIZES, true);
        }
        fields
    }
}
