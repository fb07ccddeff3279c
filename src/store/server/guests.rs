//! Keying the imported guest ids already stored (see `ServerStore::key_guest_ids`): in passes
//! over every discussion's documents in its layout and its held comments, then bans, trusted
//! people, the moderation log and the event log, until a pass changes nothing.

use std::time::Duration;

use mongodb::bson::{doc, Document};

use crate::domain::paging::Cursor;
use crate::domain::{Discussion, GuestIds, Window};
use crate::store::api::{DiscussionStore, KeyedGuests};
use crate::store::changes::{rewritten_mark, FIELD};
use crate::store::discussions::{Discussions, FENCE};
use crate::store::events::EventLog;
use crate::store::moderation::held::HeldComments;
use crate::store::moderation::Moderation;
use crate::store::moves::migrate::Movers;
use crate::store::shared::authors::{rewrite_ids, Rewritten};
use crate::store::shared::error::{StoreError, StoreResult};

/// Discussions listed per command.
const LIST_PAGE: usize = 100;

/// Passes at most: the first changes, the second finds nothing left; more only while
/// discussions move between layouts under the keying.
const MAX_PASSES: u64 = 5;

/// The wait before another pass, when a discussion was moving during the last one.
const BUSY_WAIT: Duration = Duration::from_secs(1);

/// What the keying reads and writes.
pub(crate) struct Keying<'a> {
    pub discussions: &'a Discussions,
    pub movers: Movers<'a>,
    pub held: &'a HeldComments,
    pub moderation: &'a Moderation,
    pub events: &'a EventLog,
}

/// A pass's findings.
#[derive(Default)]
struct Pass {
    discussions: u64,
    changed: Rewritten,
    /// Discussions moving between layouts while they were read.
    busy: u64,
}

impl Keying<'_> {
    /// Runs passes until one changes nothing (see `ServerStore::key_guest_ids`).
    pub(crate) async fn run(
        &self,
        ids: &GuestIds,
        progress: &(dyn Fn(KeyedGuests) + Send + Sync),
    ) -> StoreResult<KeyedGuests> {
        let map = |id: &str| ids.keyed(id);
        let mut total = KeyedGuests::default();
        loop {
            total.passes += 1;
            let pass = self.pass(ids, &map, &mut total, progress).await?;
            if pass.changed == Rewritten::default() && pass.busy == 0 {
                return Ok(total);
            }
            if total.passes >= MAX_PASSES {
                return Err(StoreError::Busy(format!(
                    "guest ids are not all keyed after {MAX_PASSES} passes ({} discussions were \
                     moving between layouts, {} documents changed under the keying): run it again",
                    pass.busy, pass.changed.missed
                )));
            }
            if pass.busy > 0 {
                tokio::time::sleep(BUSY_WAIT).await;
            }
        }
    }

    async fn pass(
        &self,
        ids: &GuestIds,
        map: &(dyn Fn(&str) -> Option<String> + Sync),
        total: &mut KeyedGuests,
        progress: &(dyn Fn(KeyedGuests) + Send + Sync),
    ) -> StoreResult<Pass> {
        let mut pass = Pass::default();
        let mut cursor = None;
        loop {
            let window = Window::After {
                cursor: cursor.take(),
                limit: LIST_PAGE,
            };
            let page = self.discussions.list(&window).await?;
            for discussion in &page.items {
                match self.discussion(discussion, map).await? {
                    Some(changed) => {
                        pass.changed += changed;
                        total.documents += changed.documents;
                        total.ids += changed.ids;
                    }
                    None => pass.busy += 1,
                }
                pass.discussions += 1;
                total.discussions += 1;
                progress(*total);
            }
            match page.items.last() {
                Some(last) if page.has_next => cursor = Some(Cursor::of_discussion(last)),
                _ => break,
            }
        }
        let mut others = self.held.rename_trusted(ids).await?;
        others += self.moderation.rename_banned(ids).await?;
        others += self.moderation.rename_logged_users(ids).await?;
        others += self.events.key_guest_ids(ids).await?;
        total.documents += others.documents;
        total.ids += others.ids;
        pass.changed += others;
        Ok(pass)
    }

    /// Keys the ids of one discussion's comments and held comments; `None` when it was moving
    /// between layouts (the next pass reads it again).
    async fn discussion(
        &self,
        discussion: &Discussion,
        map: &(dyn Fn(&str) -> Option<String> + Sync),
    ) -> StoreResult<Option<Rewritten>> {
        let raw = self.discussions.raw();
        let id = &discussion.id;
        let state =
            |doc: Option<Document>| doc.map(|d| (d.contains_key(FENCE), d.get("moves").cloned()));
        let projection = doc! { FENCE: 1, "moves": 1 };
        let before = state(
            raw.find_one(doc! { "_id": id.as_str() })
                .projection(projection.clone())
                .await?,
        );
        let Some((false, moves)) = before else {
            // Moving, or gone since it was listed.
            return Ok(before.is_none().then(Rewritten::default));
        };
        let mut changed = Rewritten::default();
        if let Some(layout) = self.movers.get(&discussion.layout) {
            for (coll, filter) in layout.documents_of(id) {
                changed += rewrite_ids(coll, filter, map).await?;
            }
        }
        let (coll, filter) = self.held.documents_of(id);
        changed += rewrite_ids(coll, filter, map).await?;
        if changed.documents > 0 {
            raw.update_one(
                doc! { "_id": id.as_str() },
                doc! { "$set": { FIELD: rewritten_mark() } },
            )
            .await?;
        }
        let after = state(
            raw.find_one(doc! { "_id": id.as_str() })
                .projection(projection)
                .await?,
        );
        Ok(match after {
            // Switched layouts (or began to) meanwhile: what was read may be gone.
            Some((fenced, now)) if fenced || now != moves => None,
            _ => Some(changed),
        })
    }
}
