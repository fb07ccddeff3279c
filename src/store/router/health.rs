//! The database's health and the store's metrics.

use std::collections::BTreeMap;

use async_trait::async_trait;
use mongodb::bson::doc;

use super::Store;
use crate::store::api::Health;
use crate::store::shared::error::StoreResult;
use crate::store::shared::metrics::Command;
use crate::telemetry::metrics::Exposition;

#[async_trait]
impl Health for Store {
    async fn ping(&self) -> StoreResult<()> {
        self.commands.sent("ping");
        let ping = self.db.run_command(doc! { "ping": 1 });
        self.commands.timed(Command::Ping, ping).await?;
        Ok(())
    }

    fn command_counts(&self) -> BTreeMap<String, u64> {
        self.commands.snapshot()
    }

    fn write_metrics(&self, out: &mut Exposition) {
        self.commands.write(out);
        if let Some(cached) = &self.cache {
            cached.cache.write_metrics(out);
        }
    }
}
