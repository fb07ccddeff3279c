//! `Health`: whether the database answers, and the store's figures for `/metrics`.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::store::shared::error::StoreResult;
use crate::telemetry::metrics::Exposition;

/// The database's health and the store's metrics.
#[async_trait]
pub trait Health: Send + Sync {
    /// Checks that the database answers.
    async fn ping(&self) -> StoreResult<()>;

    /// Database commands sent so far, by command name.
    fn command_counts(&self) -> BTreeMap<String, u64>;

    /// Writes the store's metrics but the command counts: command durations, the connection
    /// pool and the change feed.
    fn write_metrics(&self, out: &mut Exposition);
}
