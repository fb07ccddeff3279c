//! Moves and imports through the router (both need transactions; the read cache forgets the
//! discussion after either), and the record of what imports brought in.

use crate::store::shared::numbers;
use std::collections::HashSet;

use async_trait::async_trait;

use super::Store;
use crate::domain::{Comment, DiscussionId, Layout, Slug};
use crate::store::api::{ImportStore, MoveStore, Moved, Step};
use crate::store::moves::migrate;
use crate::store::shared::error::{StoreError, StoreResult};

#[async_trait]
impl MoveStore for Store {
    async fn migrate(
        &self,
        id: &DiscussionId,
        to: Layout,
        report: &(dyn Fn(Step) + Send + Sync),
        announce: &(dyn Fn(Layout) -> Vec<crate::domain::Event> + Send + Sync),
    ) -> StoreResult<Moved> {
        self.moved(id, to, &[], (report, announce)).await
    }
}

#[async_trait]
impl ImportStore for Store {
    async fn import(
        &self,
        id: &DiscussionId,
        to: Layout,
        adding: &[Comment],
        report: &(dyn Fn(Step) + Send + Sync),
    ) -> StoreResult<Moved> {
        let mut adding = adding.to_vec();
        numbers::number_all(self.held.people(), &mut adding).await?;
        self.moved(id, to, &adding, (report, &|_| Vec::new())).await
    }

    fn import_scratch(&self, layout: Layout) -> Layout {
        self.layouts.get(layout).import_scratch()
    }

    async fn imported(&self, id: &DiscussionId) -> StoreResult<HashSet<String>> {
        self.imports.sources(id).await
    }

    async fn record_imported(
        &self,
        id: &DiscussionId,
        entries: &[(String, Slug)],
    ) -> StoreResult<()> {
        self.imports.record(id, entries).await
    }
}

impl Store {
    /// A move, adding the comments of `adding` (see `migrate::run`), with its events.
    async fn moved(
        &self,
        id: &DiscussionId,
        to: Layout,
        adding: &[Comment],
        (report, announce): (&(dyn Fn(Step) + Send + Sync), &migrate::Announce<'_>),
    ) -> StoreResult<Moved> {
        if !self.transactions {
            return Err(StoreError::Unsupported(
                "moving a discussion between layouts needs transactions (a replica set or a \
                 sharded cluster): on a standalone server a write could land in the old layout \
                 after it was copied"
                    .into(),
            ));
        }
        let movers = self.layouts.movers();
        let moved = migrate::run(
            &self.discussions,
            &movers,
            (id, to),
            adding,
            self.moves,
            (report, announce),
        )
        .await;
        self.touched(id);
        moved
    }
}
