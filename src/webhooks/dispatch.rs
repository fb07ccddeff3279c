//! The dispatcher: every replica runs one. In rounds, it claims events whose fan-out is due and
//! makes one delivery per endpoint that wants each (an endpoint gets the events committed from
//! its creation on: the endpoints are read after the claim), then claims the deliveries due
//! and attempts them, at most `concurrency` at once per endpoint. Every claim is a lease: a
//! replica that dies mid-attempt leaves the delivery to another (or to itself after a
//! restart) once the lease has run out, with the same `webhook-id`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use tokio::sync::{broadcast, watch, Semaphore};

use super::metrics::{Result as Tally, WebhookMetrics};
use super::{jittered, payload, Outcome, RetrySchedule, Secret, Sender};
use crate::domain::webhooks::{AttemptRecord, Delivery, DeliveryStatus, Endpoint};
use crate::domain::{Event, EventRecord, Micros};
use crate::store::{DynStorage, StoreResult};

/// Events fanned out per round.
const FAN_OUT: usize = 256;
/// Deliveries attempted per round.
const ATTEMPTS: usize = 64;
/// The wait between rounds that found nothing to do (a commit in this process wakes it).
const IDLE: Duration = Duration::from_millis(200);
/// How long a round woken by a commit waits for the commits that follow it.
const GATHER: Duration = Duration::from_millis(25);
/// How often the pending deliveries are counted for `/metrics`.
const COUNT_EVERY: Duration = Duration::from_secs(5);

/// How deliveries are made.
#[derive(Debug, Clone)]
pub struct DispatchRules {
    /// How long an attempt waits for its answer.
    pub timeout: Duration,
    /// The waits before each attempt.
    pub schedule: RetrySchedule,
    /// How long an endpoint's attempts may all fail before it is disabled.
    pub disable_after: Duration,
    /// Most attempts in flight per endpoint.
    pub concurrency: usize,
    /// How long a claim holds.
    pub lease: Duration,
    /// Whether `http` and private addresses are allowed.
    pub insecure: bool,
}

/// One replica's dispatcher.
pub struct Dispatcher {
    storage: DynStorage,
    rules: DispatchRules,
    sender: Sender,
    metrics: Arc<WebhookMetrics>,
    /// This process's claim tokens' prefix.
    token: String,
    /// Claims made so far (each claim's token ends with its number).
    claims: std::sync::atomic::AtomicU64,
    /// The in-flight limit of each endpoint.
    limits: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Dispatcher {
    /// A dispatcher over `storage`; `Err` when the HTTP client cannot be built.
    pub fn new(
        storage: DynStorage,
        rules: DispatchRules,
        metrics: Arc<WebhookMetrics>,
    ) -> Result<Self, String> {
        let sender = Sender::new(rules.timeout, rules.insecure)?;
        Ok(Self {
            storage,
            rules,
            sender,
            metrics,
            token: format!("{:032x}@{}", rand::random::<u128>(), std::process::id()),
            claims: std::sync::atomic::AtomicU64::new(0),
            limits: Mutex::default(),
        })
    }

    /// Runs rounds until `stop` changes: at once while there is work, else after a short wait
    /// or as soon as this process commits an event (`wake`).
    pub async fn run(
        self: Arc<Self>,
        mut wake: broadcast::Receiver<Arc<Event>>,
        mut stop: watch::Receiver<Option<tokio::time::Instant>>,
    ) {
        let mut counted = tokio::time::Instant::now() - COUNT_EVERY;
        loop {
            if stop.borrow().is_some() {
                return;
            }
            let busy = match self.round().await {
                Ok(busy) => busy,
                Err(err) => {
                    tracing::warn!(%err, "a webhook dispatch round failed: trying again");
                    false
                }
            };
            if counted.elapsed() >= COUNT_EVERY {
                counted = tokio::time::Instant::now();
                if let Ok(pending) = self.storage.webhooks().pending().await {
                    self.metrics.set_pending(pending);
                }
            }
            if busy {
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(IDLE) => {}
                // A commit here: the commits of the next moments go in the same round.
                _ = wake.recv() => tokio::time::sleep(GATHER).await,
                _ = stop.changed() => return,
            }
        }
    }

    /// One round: the fan-out, then the attempts; whether it found work.
    async fn round(&self) -> StoreResult<bool> {
        let fanned = self.fan_out().await?;
        let attempted = self.attempt_due().await?;
        Ok(fanned + attempted > 0)
    }

    /// Claims due events and makes their deliveries; how many events it claimed.
    async fn fan_out(&self) -> StoreResult<usize> {
        let hooks = self.storage.webhooks();
        let now = Micros::now();
        let token = self.claim_token();
        let events = hooks
            .claim_events(now, self.lease_end(now), &token, FAN_OUT)
            .await?;
        if events.is_empty() {
            return Ok(0);
        }
        // Read after the claim: an endpoint created before an event committed is seen.
        let endpoints = hooks.endpoints().await?;
        let first = self.wait_before(1).unwrap_or_default();
        let deliveries: Vec<Delivery> = events
            .iter()
            .flat_map(|event| {
                endpoints
                    .iter()
                    .filter(|e| e.enabled && e.wants(event.kind) && e.created <= event.at)
                    .map(move |endpoint| new_delivery(event, endpoint, Micros(now.0 + first)))
            })
            .collect();
        let ids: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
        hooks.fan_out(&deliveries, &ids, &token).await?;
        Ok(events.len())
    }

    /// Claims due deliveries and attempts them; how many it claimed.
    async fn attempt_due(&self) -> StoreResult<usize> {
        let hooks = self.storage.webhooks();
        let now = Micros::now();
        let token = self.claim_token();
        let due = hooks
            .claim_deliveries(now, self.lease_end(now), &token, ATTEMPTS)
            .await?;
        if due.is_empty() {
            return Ok(0);
        }
        let endpoints: HashMap<String, Endpoint> = hooks
            .endpoints()
            .await?
            .into_iter()
            .map(|e| (e.id.clone(), e))
            .collect();
        let mut ids: Vec<String> = due.iter().map(|d| d.event.clone()).collect();
        ids.sort();
        ids.dedup();
        let events: HashMap<String, EventRecord> = hooks
            .events(&ids)
            .await?
            .into_iter()
            .map(|e| (e.id.clone(), e))
            .collect();
        let bodies = payload::bodies(self.storage.as_ref(), events.values()).await?;
        let attempts = due.iter().map(|delivery| {
            let endpoint = endpoints.get(&delivery.endpoint);
            let event = events.get(&delivery.event);
            let body = bodies.get(&delivery.event);
            self.attempt(&token, delivery, endpoint, event.zip(body))
        });
        for result in join_all(attempts).await {
            if let Err(err) = result {
                tracing::warn!(%err, "a webhook attempt could not be recorded");
            }
        }
        Ok(due.len())
    }

    /// One attempt of `delivery` (claimed by this process), recorded with its delivery and
    /// its endpoint.
    async fn attempt(
        &self,
        token: &str,
        delivery: &Delivery,
        endpoint: Option<&Endpoint>,
        event: Option<(&EventRecord, &Vec<u8>)>,
    ) -> StoreResult<()> {
        let hooks = self.storage.webhooks();
        let (Some(endpoint), Some((event, body))) = (endpoint.filter(|e| e.enabled), event) else {
            // The endpoint was disabled or deleted, or the event is past its retention.
            let record = AttemptRecord {
                at: Micros::now(),
                status: None,
                error: Some("the endpoint is disabled or gone, or the event has expired".into()),
                body: None,
                then: DeliveryStatus::Failed,
                next_at: None,
            };
            hooks.record_attempt(&delivery.id, token, &record).await?;
            self.metrics.attempted(Tally::Failed);
            return Ok(());
        };
        let _permit = self.permit(&endpoint.id).acquire_owned().await;
        let secrets: Vec<Secret> = endpoint
            .signing_at(Micros::now())
            .into_iter()
            .filter_map(|s| Secret::parse(s).ok())
            .collect();
        let signing: Vec<&Secret> = secrets.iter().collect();
        let sent = self
            .sender
            .send(&endpoint.url, &event.id, body, &signing)
            .await;
        let now = Micros::now();
        let attempt = delivery.attempts + 1;
        let (then, next_at, tally) = match sent.outcome {
            Outcome::Succeeded => (DeliveryStatus::Succeeded, None, Tally::Succeeded),
            Outcome::Gone => (DeliveryStatus::Failed, None, Tally::Gone),
            Outcome::Retry => match self.wait_before(attempt + 1) {
                Some(wait) => (
                    DeliveryStatus::Pending,
                    Some(Micros(now.0 + wait)),
                    Tally::Retried,
                ),
                None => (DeliveryStatus::Failed, None, Tally::Failed),
            },
        };
        let record = AttemptRecord {
            at: now,
            status: sent.status,
            error: sent.error.clone(),
            body: (!sent.body.is_empty()).then(|| sent.body.clone()),
            then,
            next_at,
        };
        if !hooks.record_attempt(&delivery.id, token, &record).await? {
            tracing::info!(delivery = %delivery.id, "a webhook attempt outlived its claim: another replica has it");
            return Ok(());
        }
        self.metrics.attempted(tally);
        if then == DeliveryStatus::Succeeded {
            let lag = u64::try_from(now.0 - delivery.committed.0).unwrap_or_default();
            self.metrics.delivered_after(Duration::from_micros(lag));
        }
        if sent.outcome == Outcome::Gone {
            tracing::warn!(endpoint = %endpoint.id, "a webhook endpoint answered 410 Gone: disabled");
            return hooks
                .disable_endpoint(&endpoint.id, "the endpoint answered 410 Gone")
                .await;
        }
        let succeeded = then == DeliveryStatus::Succeeded;
        let after = hooks
            .endpoint_attempted(&endpoint.id, succeeded, now)
            .await?;
        let failing = after.and_then(|e| e.failing_since);
        let limit = i64::try_from(self.rules.disable_after.as_micros()).unwrap_or(i64::MAX);
        if failing.is_some_and(|since| now.0 - since.0 >= limit) {
            let reason = format!(
                "every attempt failed for {} s (THREADQL_WEBHOOK_DISABLE_AFTER_SECS)",
                self.rules.disable_after.as_secs()
            );
            tracing::warn!(endpoint = %endpoint.id, %reason, "a webhook endpoint was disabled");
            hooks.disable_endpoint(&endpoint.id, &reason).await?;
        }
        Ok(())
    }

    /// A token for one claim: this process's, numbered, so a claim taken again after its lease
    /// ran out never matches an attempt of the one before.
    fn claim_token(&self) -> String {
        let n = self
            .claims
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{}#{n}", self.token)
    }

    /// The in-flight limit of `endpoint`.
    fn permit(&self, endpoint: &str) -> Arc<Semaphore> {
        let mut limits = self.limits.lock().unwrap_or_else(|p| p.into_inner());
        limits
            .entry(endpoint.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(self.rules.concurrency.max(1))))
            .clone()
    }

    /// The wait before attempt `attempt` (1-based), jittered, in microseconds; `None` past the
    /// last.
    fn wait_before(&self, attempt: u32) -> Option<i64> {
        let wait = jittered(self.rules.schedule.wait_before(attempt)?);
        Some(i64::try_from(wait.as_micros()).unwrap_or(i64::MAX))
    }

    /// When a claim made at `now` ends.
    fn lease_end(&self, now: Micros) -> Micros {
        let lease = i64::try_from(self.rules.lease.as_micros()).unwrap_or(i64::MAX);
        Micros(now.0.saturating_add(lease))
    }
}

/// The first delivery of `event` to `endpoint`, due at `due`.
fn new_delivery(event: &EventRecord, endpoint: &Endpoint, due: Micros) -> Delivery {
    Delivery {
        id: Delivery::id_of(&event.id, &endpoint.id),
        endpoint: endpoint.id.clone(),
        event: event.id.clone(),
        kind: event.kind,
        status: DeliveryStatus::Pending,
        attempts: 0,
        next_at: Some(due),
        last_attempt_at: None,
        last_status: None,
        last_error: None,
        last_body: None,
        committed: event.at,
    }
}
