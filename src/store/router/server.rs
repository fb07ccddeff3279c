//! The installation's own settings through the router: its key, and the keying of the guest ids
//! already stored (over every layout, held comments and moderation).

use async_trait::async_trait;

use super::Store;
use crate::domain::{GuestIds, ServerKey};
use crate::store::api::{KeyedGuests, ServerStore};
use crate::store::server::guests::Keying;
use crate::store::server::{COMMENT_NUMBERS, EMBEDDED_AUTHORS, GUEST_IDS, NAME_KEYS};
use crate::store::shared::name_keys::record_names;
use crate::store::shared::numbers_backfill::{number_stored, Numbered};

/// Passes of the numbering of stored comments at most, in one run.
const NUMBERING_PASSES: usize = 3;
use crate::store::shared::error::StoreResult;

#[async_trait]
impl ServerStore for Store {
    async fn server_key(&self, candidate: &ServerKey) -> StoreResult<ServerKey> {
        self.server.key(candidate).await
    }

    async fn guest_ids_keyed(&self) -> StoreResult<bool> {
        self.server.is_done(GUEST_IDS).await
    }

    async fn key_guest_ids(
        &self,
        ids: &GuestIds,
        progress: &(dyn Fn(KeyedGuests) + Send + Sync),
    ) -> StoreResult<KeyedGuests> {
        let keying = Keying {
            discussions: &self.discussions,
            movers: self.layouts.movers(),
            held: &self.held,
            moderation: &self.moderation,
            events: &self.log,
        };
        let keyed = keying.run(ids, progress).await?;
        self.server.record_done(GUEST_IDS).await?;
        Ok(keyed)
    }

    async fn embedded_authors_indexed(&self) -> StoreResult<bool> {
        self.server.is_done(EMBEDDED_AUTHORS).await
    }

    async fn comments_numbered(&self) -> StoreResult<bool> {
        self.server.is_done(COMMENT_NUMBERS).await
    }

    async fn number_comments(&self) -> StoreResult<u64> {
        let (per_comment, embedded, bucketed) = self.layouts.authored();
        let people = self.held.people();
        let mut total = 0;
        for _ in 0..NUMBERING_PASSES {
            let mut pass = Numbered::default();
            for (coll, filter, bytes) in [
                per_comment.unnumbered(),
                bucketed.unnumbered(),
                embedded.unnumbered(),
            ] {
                pass += number_stored(coll, people, filter, bytes).await?;
            }
            let (held, filter) = self.held.unnumbered();
            pass += number_stored(held, people, filter, None).await?;
            total += pass.comments;
            if pass.comments == 0 && pass.missed == 0 {
                self.server.record_done(COMMENT_NUMBERS).await?;
                break;
            }
        }
        Ok(total)
    }

    async fn names_recorded(&self) -> StoreResult<bool> {
        self.server.is_done(NAME_KEYS).await
    }

    async fn record_names(&self) -> StoreResult<u64> {
        let (per_comment, embedded, bucketed) = self.layouts.authored();
        let people = self.held.people();
        let (held, _) = self.held.unnumbered();
        let mut authors = 0;
        for coll in [
            per_comment.unnumbered().0,
            bucketed.unnumbered().0,
            embedded.unnumbered().0,
            held,
        ] {
            authors += record_names(coll, people).await?;
        }
        self.server.record_done(NAME_KEYS).await?;
        Ok(authors)
    }

    async fn index_embedded_authors(&self) -> StoreResult<u64> {
        let (_, embedded, _) = self.layouts.authored();
        let (written, left) = embedded.backfill_authored(&self.discussions).await?;
        if left == 0 {
            self.server.record_done(EMBEDDED_AUTHORS).await?;
        }
        Ok(written)
    }
}
