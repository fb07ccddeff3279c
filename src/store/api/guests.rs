//! `GuestStore`: what guest posting keeps.

use async_trait::async_trait;

use crate::store::shared::error::StoreResult;

/// What guest posting keeps across replicas.
#[async_trait]
pub trait GuestStore: Send + Sync {
    /// Spends the proof of work of `challenge`, which expires at `expires` (unix seconds): true
    /// the first time, on any replica; false when it was spent already (a replay). The record
    /// goes when the challenge expires (a proof is refused past it anyway).
    async fn spend_proof(&self, challenge: &str, expires: i64) -> StoreResult<bool>;
}
