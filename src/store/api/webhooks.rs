//! `WebhookStore`: webhook endpoints, the fan-out of events to them, and their deliveries.

use async_trait::async_trait;
use mongodb::bson::Bson;

use crate::domain::webhooks::{
    AttemptRecord, Delivery, DeliveryStatus, Endpoint, EndpointPatch, SigningSecret,
};
use crate::domain::{EventRecord, Micros};
use crate::store::shared::error::StoreResult;

/// An event as its deliveries read it: the record, and where its comment was stored when it
/// committed (its layout's home, see [`crate::store::CommentStore::home_of`]; `None` when the
/// layout did not say), so that a body reads the comment there rather than by slug.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// The event.
    pub record: EventRecord,
    /// Its comment's home.
    pub home: Option<Bson>,
}

/// Webhook endpoints (`webhook_endpoints`), the events still to fan out (`events` with a
/// `dispatch` time), the rounds fanning them out (`webhook_rounds`) and the deliveries
/// (`webhook_deliveries`). Claims are leases: a claim
/// moves a time forward by the lease and names its `token`, and only the holder of a claim
/// writes its result, so a replica that dies leaves its work to another once the lease ends.
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Stores a new endpoint.
    async fn create_endpoint(&self, endpoint: &Endpoint) -> StoreResult<()>;

    /// Every endpoint, enabled or not, oldest first.
    async fn endpoints(&self) -> StoreResult<Vec<Endpoint>>;

    /// The endpoint `id`, if there is one.
    async fn endpoint(&self, id: &str) -> StoreResult<Option<Endpoint>>;

    /// Applies `patch`; the endpoint as it is now, `None` when there is no such endpoint.
    async fn update_endpoint(
        &self,
        id: &str,
        patch: &EndpointPatch,
    ) -> StoreResult<Option<Endpoint>>;

    /// Removes the endpoint and its pending deliveries; whether there was one.
    async fn delete_endpoint(&self, id: &str) -> StoreResult<bool>;

    /// Makes `secret` the newest signing secret, the others signing until `until` at the latest
    /// (those already ending sooner keep their end; ended ones are dropped). `None` when there
    /// is no such endpoint.
    async fn rotate_secret(
        &self,
        id: &str,
        secret: &SigningSecret,
        until: Micros,
    ) -> StoreResult<Option<Endpoint>>;

    /// Disables the endpoint with `reason`, and fails its pending deliveries.
    async fn disable_endpoint(&self, id: &str, reason: &str) -> StoreResult<()>;

    /// Records how the endpoint's last attempt went: a success clears `failing_since`, a
    /// failure sets it to `at` unless it is set. Returns it as it is now.
    async fn endpoint_attempted(
        &self,
        id: &str,
        succeeded: bool,
        at: Micros,
    ) -> StoreResult<Option<Endpoint>>;

    /// Claims up to `limit` events whose fan-out is due at `now` (the longest due first) for
    /// the round `token`, held until `until`; returns them in id order. Of two replicas
    /// claiming at once, one gets each event. The round holds until [`Self::finish_round`].
    async fn claim_events(
        &self,
        now: Micros,
        until: Micros,
        token: &str,
        limit: usize,
    ) -> StoreResult<Vec<StoredEvent>>;

    /// Takes over one round whose hold ended at `now` (its holder died), for `holder` until
    /// `until`; returns its events (`None` when there is no such round). Which of their
    /// deliveries were stored, [`Self::stored_deliveries`] says.
    async fn take_round(
        &self,
        now: Micros,
        until: Micros,
        holder: &str,
    ) -> StoreResult<Option<Vec<StoredEvent>>>;

    /// Which of the deliveries `ids` are stored.
    async fn stored_deliveries(&self, ids: &[String]) -> StoreResult<Vec<String>>;

    /// Holds `holder`'s rounds, and the deliveries `claimed` it claimed, until `until` (a
    /// round whose attempts outlast the lease).
    async fn renew(&self, holder: &str, claimed: &[String], until: Micros) -> StoreResult<()>;

    /// Stores `deliveries` (first attempts, with their results; one stored already keeps what
    /// it has), then ends `holder`'s rounds; returns the ids stored now.
    async fn finish_round(&self, deliveries: &[Delivery], holder: &str)
        -> StoreResult<Vec<String>>;

    /// The events with these ids (missing ones are left out).
    async fn events(&self, ids: &[String]) -> StoreResult<Vec<StoredEvent>>;

    /// Claims up to `limit` pending deliveries due at `now` (soonest first), until `until`, for
    /// `token`; returns those claimed.
    async fn claim_deliveries(
        &self,
        now: Micros,
        until: Micros,
        token: &str,
        limit: usize,
    ) -> StoreResult<Vec<Delivery>>;

    /// Records attempts of deliveries `token` claimed; returns the ids whose claim held.
    /// Where a claim was lost (the delivery was claimed again after its lease ended, or
    /// redelivered), nothing is written.
    async fn record_attempts(
        &self,
        token: &str,
        attempts: &[(String, AttemptRecord)],
    ) -> StoreResult<Vec<String>>;

    /// Records one attempt (see [`WebhookStore::record_attempts`]); whether its claim held.
    async fn record_attempt(
        &self,
        id: &str,
        token: &str,
        attempt: &AttemptRecord,
    ) -> StoreResult<bool> {
        let held = self
            .record_attempts(token, &[(id.to_owned(), attempt.clone())])
            .await?;
        Ok(!held.is_empty())
    }

    /// Makes a delivery pending again, due now (a redelivery: its attempts go on counting);
    /// the delivery as it is now, `None` when there is none.
    async fn redeliver(&self, id: &str, now: Micros) -> StoreResult<Option<Delivery>>;

    /// The delivery `id`, if there is one.
    async fn delivery(&self, id: &str) -> StoreResult<Option<Delivery>>;

    /// The deliveries of an endpoint after `after` (by id: event order), with `status` when
    /// given, at most `limit`.
    async fn deliveries_of(
        &self,
        endpoint: &str,
        after: Option<&str>,
        status: Option<DeliveryStatus>,
        limit: usize,
    ) -> StoreResult<Vec<Delivery>>;

    /// How many deliveries are pending.
    async fn pending(&self) -> StoreResult<u64>;
}
