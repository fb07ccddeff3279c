//! The page new comments go to: read from the discussion, remembered per process, and moved on when full (seal, then next page).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mongodb::bson::doc;
use mongodb::options::ReturnDocument;

use super::shapes::SEALED;
use super::shapes::{page_filter, Target, FLOOR, NUM_PAGES, SEALED_MAX, SEALED_MIN};
use super::Bucketed;
use crate::domain::{Discussion, DiscussionId};
use crate::store::shared::bson::as_i64;
use crate::store::shared::error::{StoreError, StoreResult};

/// Where each discussion's posts go, as this process last saw it. A stale entry costs one
/// refused `$push` (the page is full or sealed) and a read of the current target.
/// Entries hold the discussion's count of moves between layouts: pages written by an earlier
/// stay in the bucketed layout are never a target.
/// Discussions whose write target a process remembers (the map is emptied beyond this).
pub(super) const REMEMBERED: usize = 10_000;

#[derive(Clone, Default)]
pub(super) struct Targets(Arc<Mutex<HashMap<DiscussionId, (u64, Target)>>>);

impl Targets {
    pub(super) fn get(&self, discussion: &Discussion) -> Option<Target> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&discussion.id)
            .filter(|(moves, _)| *moves == discussion.moves)
            .map(|(_, target)| target.clone())
    }

    pub(super) fn set(&self, discussion: &Discussion, target: &Target) {
        let id = &discussion.id;
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= REMEMBERED && !map.contains_key(id) {
            map.clear();
        }
        let newer = map
            .get(id)
            .is_none_or(|(moves, known)| *moves != discussion.moves || known.page <= target.page);
        if newer {
            map.insert(id.clone(), (discussion.moves, target.clone()));
        }
    }
}

impl Bucketed {
    /// The page new comments go to, as the discussion records it.
    pub(super) async fn target(&self, discussion: &Discussion) -> StoreResult<Target> {
        let id = &discussion.id;
        if let Some(known) = self.targets.get(discussion) {
            return Ok(known);
        }
        let doc = self
            .discussion_docs
            .find_one(doc! { "_id": id.as_str() })
            .projection(Target::projection())
            .await?;
        let target = Target::from_doc(doc);
        self.targets.set(discussion, &target);
        Ok(target)
    }

    /// Page `full` is full: seal it (so no post lands there any more, and its last key is
    /// final), move the discussion on to the next page (a no-op when another post already did)
    /// and return where posts go now.
    pub(super) async fn next_page(
        &self,
        discussion: &Discussion,
        full: &Target,
    ) -> StoreResult<Target> {
        let id = &discussion.id;
        let (full, keyed) = (full.page, full.keyed);
        let sealed = self
            .pages
            .find_one_and_update(
                page_filter(id, full, keyed),
                doc! { "$set": { SEALED: true } },
            )
            .projection(doc! { "last_key": 1, "count": 1 })
            .return_document(ReturnDocument::After)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("page {full} of {id} vanished")))?;
        let last_key = sealed.get_str("last_key").unwrap_or_default();
        let count = sealed.get("count").and_then(as_i64).unwrap_or(0);
        let doc = self
            .discussion_docs
            .find_one_and_update(
                doc! { "_id": id.as_str() },
                doc! {
                    "$max": { NUM_PAGES: full + 1, FLOOR: last_key, SEALED_MAX: count },
                    "$min": { SEALED_MIN: count },
                },
            )
            .projection(Target::projection())
            .return_document(ReturnDocument::After)
            .await?;
        let target = Target::from_doc(doc);
        self.targets.set(discussion, &target);
        Ok(target)
    }
}
