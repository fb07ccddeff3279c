//! `GuestStore`: what guest posting keeps.

use std::collections::HashMap;

use async_trait::async_trait;

use crate::domain::{Cidr, Event, GuestDetails, NetworkBan};
use crate::store::shared::error::StoreResult;

/// What guest posting keeps across replicas.
#[async_trait]
pub trait GuestStore: Send + Sync {
    /// Spends the proof of work of `challenge`, which expires at `expires` (unix seconds): true
    /// the first time, on any replica; false when it was spent already (a replay). The record
    /// goes when the challenge expires (a proof is refused past it anyway).
    async fn spend_proof(&self, challenge: &str, expires: i64) -> StoreResult<bool>;

    /// Whether a signed-in user has posted under a name with this name key.
    async fn name_taken(&self, name_key: &str) -> StoreResult<bool>;

    /// Keeps what moderators see of the guest `guest` (replacing what was kept).
    async fn keep_details(&self, guest: &str, details: &GuestDetails) -> StoreResult<()>;

    /// What is kept of each of these guests (one read; ids without details are left out).
    async fn details_of(&self, guests: &[String]) -> StoreResult<HashMap<String, GuestDetails>>;

    /// Bans a network (replacing its ban, if any), with `events`.
    async fn ban_network(&self, ban: &NetworkBan, events: &[Event]) -> StoreResult<()>;

    /// Lifts a network's ban, with the events `announce` makes of it; the ban lifted, if any.
    async fn unban_network(
        &self,
        network: &Cidr,
        announce: &(dyn for<'b> Fn(&'b NetworkBan) -> Vec<Event> + Send + Sync),
    ) -> StoreResult<Option<NetworkBan>>;

    /// The network bans that have not ended (at most 1 000), newest first.
    async fn network_bans(&self) -> StoreResult<Vec<NetworkBan>>;
}

/// The most network bans in force at once.
pub(crate) const MAX_NETWORK_BANS: usize = 1_000;
