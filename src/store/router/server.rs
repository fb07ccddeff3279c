//! The installation's own settings through the router: its key, and the keying of the guest ids
//! already stored (over every layout, held comments and moderation).

use async_trait::async_trait;

use super::Store;
use crate::domain::{GuestIds, ServerKey};
use crate::store::api::{KeyedGuests, ServerStore};
use crate::store::server::guests::Keying;
use crate::store::server::{EMBEDDED_AUTHORS, GUEST_IDS};
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

    async fn index_embedded_authors(&self) -> StoreResult<u64> {
        let (_, embedded, _) = self.layouts.authored();
        let (written, left) = embedded.backfill_authored(&self.discussions).await?;
        if left == 0 {
            self.server.record_done(EMBEDDED_AUTHORS).await?;
        }
        Ok(written)
    }
}
