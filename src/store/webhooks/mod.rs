//! Webhooks' collections, all unsharded (see `shard::UNSHARDED`):
//!
//! * `webhook_endpoints`: one document per endpoint, `_id` its id; its kinds by name (null for
//!   every kind), its signing secrets as `[{secret, until}]`, newest first. A rotation reads
//!   them and writes the new list only over the list it read, so two rotations never lose one.
//! * `webhook_deliveries` (`deliveries.rs`): one document per event and endpoint, `_id`
//!   `<event id>:<endpoint id>`, so a fan-out made twice stores each once. `next_at` is there
//!   while it is pending; a claim moves it forward by a lease and names the claim's token,
//!   which the attempt's write must still find.
//!
//! * `webhook_rounds` (`rounds.rs`): one document per round of the fan-out still attempting,
//!   `_id` its token: the events it claimed from the event log (by their `dispatch` time), its
//!   holder and until when it holds.

mod codec;
mod deliveries;
mod rounds;

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongodb::options::{IndexOptions, ReturnDocument};
use mongodb::{Database, IndexModel};

use crate::domain::webhooks::{
    AttemptRecord, Delivery, DeliveryStatus, Endpoint, EndpointPatch, SigningSecret,
};
use crate::domain::Micros;
use crate::store::api::{StoredEvent, WebhookStore};
use crate::store::events::Retention;
use crate::store::shared::connect::index_model;
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::metrics::{CommandCounter, Counted};
use crate::store::shared::ttl::{ensure_ttl, Ttl};
use codec::{endpoint_doc, endpoint_of, kinds_bson, rotated, secrets_bson};
use deliveries::Deliveries;
use rounds::Rounds;

/// Times a rotation reads the secrets again after another change of them won the race.
const ROTATIONS: usize = 5;

/// Webhook endpoints and their deliveries.
pub(crate) struct Webhooks {
    db: Database,
    endpoints: Counted<Document>,
    deliveries: Deliveries,
    rounds: Rounds,
}

impl Webhooks {
    /// The collection of endpoints.
    pub(crate) const ENDPOINTS: &str = "webhook_endpoints";
    /// The collection of deliveries.
    pub(crate) const DELIVERIES: &str = "webhook_deliveries";
    /// The collection of the fan-out's rounds.
    pub(crate) const ROUNDS: &str = "webhook_rounds";

    pub(crate) fn new(db: &Database, commands: &CommandCounter) -> Self {
        Self {
            db: db.clone(),
            endpoints: Counted::new(db, Self::ENDPOINTS, commands),
            deliveries: Deliveries {
                deliveries: Counted::new(db, Self::DELIVERIES, commands),
            },
            rounds: Rounds {
                rounds: Counted::new(db, Self::ROUNDS, commands),
                events: Counted::new(db, crate::store::events::COLLECTION, commands),
                deliveries: Counted::new(db, Self::DELIVERIES, commands),
            },
        }
    }

    /// The deliveries' indexes, sparse where only some deliveries have the field (fewer keys
    /// to write per attempt): the pending ones by when they are due (`due`: the claims, and the
    /// count), each endpoint's by id (its pages), and the TTL index that keeps a finished one
    /// (succeeded or failed) as long as events are kept. Endpoints are read by `_id`, or all.
    pub(crate) async fn ensure_indexes(&self, retention: Retention) -> StoreResult<()> {
        let ttl = Ttl {
            name: "finished_ttl",
            field: "finished",
            keep: retention.0,
            sparse: true,
        };
        ensure_ttl(&self.db, Self::DELIVERIES, &ttl).await?;
        let due = IndexModel::builder()
            .keys(doc! { "next_at": 1 })
            .options(
                IndexOptions::builder()
                    .name("due".to_owned())
                    .sparse(true)
                    .build(),
            )
            .build();
        let deliveries = &self.deliveries.deliveries;
        deliveries
            .create_indexes([
                due,
                index_model("endpoint_id", doc! { "endpoint": 1, "_id": 1 }, false),
            ])
            .await?;
        self.rounds
            .rounds
            .create_indexes([
                index_model("until", doc! { "until": 1 }, false),
                index_model("holder", doc! { "holder": 1 }, false),
            ])
            .await?;
        // Before the sparse `due`, pending deliveries were found by (status, next_at).
        let raw = self.db.collection::<Document>(Self::DELIVERIES);
        let _ = raw.drop_index("status_next_at").await;
        Ok(())
    }

    /// The endpoint as `update` leaves it (`None`: there is none).
    async fn endpoint_updated(&self, id: &str, update: Document) -> StoreResult<Option<Endpoint>> {
        let updated = self
            .endpoints
            .find_one_and_update(doc! { "_id": id }, update)
            .return_document(ReturnDocument::After)
            .await?;
        updated.as_ref().map(endpoint_of).transpose()
    }
}

/// `$set` and `$unset` as one update, leaving out an empty one.
fn set_and_unset(set: Document, unset: Document) -> Document {
    let mut update = Document::new();
    if !set.is_empty() {
        update.insert("$set", set);
    }
    if !unset.is_empty() {
        update.insert("$unset", unset);
    }
    update
}

#[async_trait]
impl WebhookStore for Webhooks {
    async fn create_endpoint(&self, endpoint: &Endpoint) -> StoreResult<()> {
        self.endpoints.insert_one(endpoint_doc(endpoint)).await?;
        Ok(())
    }

    async fn endpoints(&self) -> StoreResult<Vec<Endpoint>> {
        let docs: Vec<Document> = self
            .endpoints
            .find(doc! {})
            .sort(doc! { "created": 1, "_id": 1 })
            .await?
            .try_collect()
            .await?;
        docs.iter().map(endpoint_of).collect()
    }

    async fn endpoint(&self, id: &str) -> StoreResult<Option<Endpoint>> {
        let found = self.endpoints.find_one(doc! { "_id": id }).await?;
        found.as_ref().map(endpoint_of).transpose()
    }

    async fn update_endpoint(
        &self,
        id: &str,
        patch: &EndpointPatch,
    ) -> StoreResult<Option<Endpoint>> {
        let (mut set, mut unset) = (Document::new(), Document::new());
        if let Some(url) = &patch.url {
            set.insert("url", url);
        }
        if let Some(kinds) = &patch.events {
            set.insert("events", kinds_bson(kinds.as_deref()));
        }
        match &patch.description {
            Some(Some(description)) => {
                set.insert("description", description);
            }
            Some(None) => {
                unset.insert("description", "");
            }
            None => {}
        }
        if let Some(enabled) = patch.enabled {
            set.insert("enabled", enabled);
            if enabled {
                unset.insert("disabled_reason", "");
                unset.insert("failing_since", "");
            }
        }
        let update = set_and_unset(set, unset);
        if update.is_empty() {
            return self.endpoint(id).await;
        }
        self.endpoint_updated(id, update).await
    }

    async fn delete_endpoint(&self, id: &str) -> StoreResult<bool> {
        let deleted = self.endpoints.delete_one(doc! { "_id": id }).await?;
        // Also when it was gone already: a delete that stopped between the two is finished.
        self.deliveries.remove_pending_of(id).await?;
        Ok(deleted.deleted_count == 1)
    }

    async fn rotate_secret(
        &self,
        id: &str,
        secret: &SigningSecret,
        until: Micros,
    ) -> StoreResult<Option<Endpoint>> {
        for _ in 0..ROTATIONS {
            let Some(stored) = self.endpoints.find_one(doc! { "_id": id }).await? else {
                return Ok(None);
            };
            let endpoint = endpoint_of(&stored)?;
            let secrets = rotated(&endpoint.secrets, secret, until, Micros::now());
            // Written only over the list read: another rotation in between makes this one
            // read again.
            let read = stored.get("secrets").cloned().unwrap_or(Bson::Null);
            let updated = self
                .endpoints
                .find_one_and_update(
                    doc! { "_id": id, "secrets": read },
                    doc! { "$set": { "secrets": secrets_bson(&secrets) } },
                )
                .return_document(ReturnDocument::After)
                .await?;
            if let Some(updated) = updated {
                return endpoint_of(&updated).map(Some);
            }
        }
        Err(StoreError::Exhausted(format!(
            "the secrets of webhook endpoint {id} changed {ROTATIONS} times during its rotation"
        )))
    }

    async fn disable_endpoint(&self, id: &str, reason: &str) -> StoreResult<()> {
        self.endpoints
            .update_one(
                doc! { "_id": id },
                doc! { "$set": { "enabled": false, "disabled_reason": reason } },
            )
            .await?;
        self.deliveries.fail_pending_of(id).await
    }

    async fn endpoint_attempted(
        &self,
        id: &str,
        succeeded: bool,
        at: Micros,
    ) -> StoreResult<Option<Endpoint>> {
        if succeeded {
            return self
                .endpoint_updated(id, doc! { "$unset": { "failing_since": "" } })
                .await;
        }
        // Failing since the first failure after a success: set only where it is not.
        let updated = self
            .endpoints
            .find_one_and_update(
                doc! { "_id": id, "failing_since": Bson::Null },
                doc! { "$set": { "failing_since": at.0 } },
            )
            .return_document(ReturnDocument::After)
            .await?;
        match updated {
            Some(updated) => endpoint_of(&updated).map(Some),
            None => self.endpoint(id).await,
        }
    }

    async fn claim_events(
        &self,
        now: Micros,
        until: Micros,
        token: &str,
        limit: usize,
    ) -> StoreResult<Vec<StoredEvent>> {
        self.rounds.claim_events(now, until, token, limit).await
    }

    async fn take_round(
        &self,
        now: Micros,
        until: Micros,
        holder: &str,
    ) -> StoreResult<Option<Vec<StoredEvent>>> {
        self.rounds.take_round(now, until, holder).await
    }

    async fn stored_deliveries(&self, ids: &[String]) -> StoreResult<Vec<String>> {
        self.rounds.stored(ids).await
    }

    async fn renew(&self, holder: &str, claimed: &[String], until: Micros) -> StoreResult<()> {
        self.rounds.renew(holder, until).await?;
        self.deliveries.renew(claimed, holder, until).await
    }

    async fn finish_round(
        &self,
        deliveries: &[Delivery],
        holder: &str,
    ) -> StoreResult<Vec<String>> {
        self.rounds.finish(deliveries, holder).await
    }

    async fn events(&self, ids: &[String]) -> StoreResult<Vec<StoredEvent>> {
        self.rounds.events(ids).await
    }

    async fn claim_deliveries(
        &self,
        now: Micros,
        until: Micros,
        token: &str,
        limit: usize,
    ) -> StoreResult<Vec<Delivery>> {
        self.deliveries.claim(now, until, token, limit).await
    }

    async fn record_attempts(
        &self,
        token: &str,
        attempts: &[(String, AttemptRecord)],
    ) -> StoreResult<Vec<String>> {
        self.deliveries.record_attempts(token, attempts).await
    }

    async fn redeliver(&self, id: &str, now: Micros) -> StoreResult<Option<Delivery>> {
        self.deliveries.redeliver(id, now).await
    }

    async fn delivery(&self, id: &str) -> StoreResult<Option<Delivery>> {
        self.deliveries.delivery(id).await
    }

    async fn deliveries_of(
        &self,
        endpoint: &str,
        after: Option<&str>,
        status: Option<DeliveryStatus>,
        limit: usize,
    ) -> StoreResult<Vec<Delivery>> {
        self.deliveries
            .of_endpoint(endpoint, after, status, limit)
            .await
    }

    async fn pending(&self) -> StoreResult<u64> {
        self.deliveries.pending().await
    }
}
