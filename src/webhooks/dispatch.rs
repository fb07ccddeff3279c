//! The dispatcher: every replica runs one. In rounds, it reads the events whose fan-out is due
//! and stores one delivery per endpoint that wants each (an endpoint gets the events committed
//! from its creation on: the endpoints are read after the events), claimed as it is stored, so
//! of two replicas fanning out one event, one stores and attempts each delivery. It claims
//! the deliveries due again too, attempts them all, at most `concurrency` at once per endpoint,
//! and records the results together. Every claim is a lease: a replica that dies mid-attempt
//! leaves the delivery to another (or to itself after a restart) once the lease has run out,
//! with the same `webhook-id`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use tokio::sync::{broadcast, watch, Semaphore};

use super::metrics::{Result as Tally, WebhookMetrics};
use super::{jittered, payload, Outcome, RetrySchedule, Secret, Sender};
use crate::domain::webhooks::{AttemptRecord, Delivery, DeliveryStatus, Endpoint};
use crate::domain::{Event, EventRecord, Micros};
use crate::store::{DynStorage, StoreResult, StoredEvent};

/// Events fanned out per round.
const FAN_OUT: usize = 256;
/// Deliveries attempted per round.
const ATTEMPTS: usize = 64;
/// The wait between rounds that found nothing to do (a commit in this process wakes it).
const IDLE: Duration = Duration::from_millis(200);
/// How long a round woken by a commit waits for the commits that follow it: under load, the
/// gap between rounds. 100 ms kept 16 writers at 0.95 of their posts/s without an endpoint
/// where 25 ms (four times the rounds) kept 0.84 (BENCHMARKS.md, "Webhooks").
const GATHER: Duration = Duration::from_millis(100);
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
        wake: broadcast::Receiver<Arc<Event>>,
        stop: watch::Receiver<Option<tokio::time::Instant>>,
    ) {
        let counted = Mutex::new(tokio::time::Instant::now() - COUNT_EVERY);
        let pace = crate::background::Pace {
            idle: IDLE,
            gather: GATHER,
        };
        crate::background::run_rounds("webhook dispatch", pace, Some(wake), stop, || {
            let (this, counted) = (&self, &counted);
            async move {
                let full = this.round().await;
                let due = {
                    let mut last = counted.lock().unwrap_or_else(|e| e.into_inner());
                    let due = last.elapsed() >= COUNT_EVERY;
                    if due {
                        *last = tokio::time::Instant::now();
                    }
                    due
                };
                if due {
                    if let Ok(pending) = this.storage.webhooks().pending().await {
                        this.metrics.set_pending(pending);
                    }
                }
                full
            }
        })
        .await;
    }

    /// One round; whether it should run again at once (it took all it could). It claims the
    /// events due (and takes over a round whose holder died), makes one delivery per endpoint
    /// that wants each, claims the deliveries due again (retries, redeliveries), attempts
    /// them all at once (at most `concurrency` per endpoint, holding its claims while that
    /// lasts), then stores the first attempts (one insert each) and records the others.
    async fn round(&self) -> StoreResult<bool> {
        let hooks = self.storage.webhooks();
        let now = Micros::now();
        let token = self.claim_token();
        let until = self.lease_end(now);
        let mut events = hooks.claim_events(now, until, &token, FAN_OUT).await?;
        let claimed_all = events.len() >= FAN_OUT;
        let taken = hooks.take_round(now, until, &token).await?;
        let holding = !events.is_empty() || taken.is_some();
        // Read after the events: an endpoint created before an event committed is seen.
        let endpoints = hooks.endpoints().await?;
        let mut fresh = new_deliveries(&events, &endpoints);
        if let Some(taken) = taken {
            // Of a dead holder's round, what it did not store.
            let owed = new_deliveries(&taken, &endpoints);
            let ids: Vec<String> = owed.iter().map(|d| d.id.clone()).collect();
            let stored = hooks.stored_deliveries(&ids).await?;
            fresh.extend(owed.into_iter().filter(|d| !stored.contains(&d.id)));
            events.extend(taken);
        }
        let first = self.wait_before(1).unwrap_or_default();
        if holding && first > 0 {
            // Not due yet: stored pending, for a later claim.
            for delivery in &mut fresh {
                delivery.next_at = Some(Micros(now.0 + first));
            }
            hooks.finish_round(&fresh, &token).await?;
            fresh.clear();
        }
        let again = hooks.claim_deliveries(now, until, &token, ATTEMPTS).await?;
        let full = claimed_all || again.len() >= ATTEMPTS;
        if fresh.is_empty() && again.is_empty() {
            if holding && first == 0 {
                hooks.finish_round(&[], &token).await?;
            }
            return Ok(full);
        }
        let mut records: HashMap<String, StoredEvent> = events
            .into_iter()
            .map(|e| (e.record.id.clone(), e))
            .collect();
        let mut missing: Vec<String> = again
            .iter()
            .filter(|d| !records.contains_key(&d.event))
            .map(|d| d.event.clone())
            .collect();
        missing.sort();
        missing.dedup();
        records.extend(
            hooks
                .events(&missing)
                .await?
                .into_iter()
                .map(|e| (e.record.id.clone(), e)),
        );
        let bodies = payload::bodies(self.storage.as_ref(), records.values()).await?;
        let endpoints: HashMap<&str, &Endpoint> =
            endpoints.iter().map(|e| (e.id.as_str(), e)).collect();
        let attempts = fresh.iter().chain(&again).map(|delivery| {
            let event = records.get(&delivery.event).map(|e| &e.record);
            let body = bodies.get(&delivery.event);
            self.attempt(
                delivery,
                endpoints.get(delivery.endpoint.as_str()).copied(),
                event.zip(body),
            )
        });
        let claimed: Vec<String> = again.iter().map(|d| d.id.clone()).collect();
        let mut attempted = self.holding(&token, &claimed, join_all(attempts)).await;
        let retried = attempted.split_off(fresh.len());
        let at = Micros::now();
        let done: Vec<Delivery> = fresh
            .iter()
            .zip(&attempted)
            .map(|(delivery, a)| a.applied_to(delivery, at))
            .collect();
        let stored = hooks.finish_round(&done, &token).await?;
        let writes: Vec<(String, AttemptRecord)> = again
            .iter()
            .zip(&retried)
            .map(|(delivery, a)| (delivery.id.clone(), a.record(at)))
            .collect();
        let recorded = hooks.record_attempts(&token, &writes).await?;
        let held: HashSet<&str> = stored.iter().chain(&recorded).map(String::as_str).collect();
        let results: Vec<(&Delivery, &Attempted)> = fresh
            .iter()
            .zip(&attempted)
            .chain(again.iter().zip(&retried))
            .collect();
        self.after_attempts(&results, &held, &endpoints, at).await?;
        Ok(full)
    }

    /// Runs `attempts`, holding this round's claims (its rounds and the deliveries `claimed`)
    /// every third of the lease while they last, so that a slow endpoint never lets another
    /// replica take them over mid-attempt.
    async fn holding<T>(
        &self,
        token: &str,
        claimed: &[String],
        attempts: impl std::future::Future<Output = T>,
    ) -> T {
        let every = (self.rules.lease / 3).max(Duration::from_millis(100));
        tokio::pin!(attempts);
        loop {
            tokio::select! {
                done = &mut attempts => return done,
                _ = tokio::time::sleep(every) => {
                    let until = self.lease_end(Micros::now());
                    if let Err(err) = self.storage.webhooks().renew(token, claimed, until).await {
                        tracing::warn!(%err, "a webhook round could not hold its claims");
                    }
                }
            }
        }
    }

    /// One attempt of `delivery` (claimed by this process): what it came to, not yet recorded.
    async fn attempt(
        &self,
        delivery: &Delivery,
        endpoint: Option<&Endpoint>,
        event: Option<(&EventRecord, &Vec<u8>)>,
    ) -> Attempted {
        let (Some(endpoint), Some((event, body))) = (endpoint.filter(|e| e.enabled), event) else {
            // The endpoint was disabled or deleted, or the event is past its retention.
            return Attempted {
                status: None,
                error: Some("the endpoint is disabled or gone, or the event has expired".into()),
                body: None,
                then: DeliveryStatus::Failed,
                next_at: None,
                tally: Tally::Failed,
                answered: Micros::now(),
            };
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
        let answered = Micros::now();
        let (then, next_at, tally) = match sent.outcome {
            Outcome::Succeeded => (DeliveryStatus::Succeeded, None, Tally::Succeeded),
            Outcome::Gone => (DeliveryStatus::Failed, None, Tally::Gone),
            Outcome::Retry => match self.wait_before(delivery.attempts + 2) {
                Some(wait) => (
                    DeliveryStatus::Pending,
                    Some(Micros(answered.0 + wait)),
                    Tally::Retried,
                ),
                None => (DeliveryStatus::Failed, None, Tally::Failed),
            },
        };
        Attempted {
            status: sent.status,
            error: sent.error,
            body: (!sent.body.is_empty()).then_some(sent.body),
            then,
            next_at,
            tally,
            answered,
        }
    }

    /// Counts the attempts whose claim held (`held`), and disables the endpoints that
    /// answered 410 or have failed for too long. An endpoint's failing streak is written only
    /// when it changes.
    async fn after_attempts(
        &self,
        results: &[(&Delivery, &Attempted)],
        held: &HashSet<&str>,
        endpoints: &HashMap<&str, &Endpoint>,
        at: Micros,
    ) -> StoreResult<()> {
        let hooks = self.storage.webhooks();
        // Per endpoint: whether an attempt succeeded, and whether one was answered 410.
        let mut outcomes: HashMap<&str, (bool, bool)> = HashMap::new();
        for (delivery, a) in results {
            if !held.contains(delivery.id.as_str()) {
                tracing::info!(delivery = %delivery.id, "a webhook attempt outlived its claim: another replica has it");
                continue;
            }
            self.metrics.attempted(a.tally);
            if a.then == DeliveryStatus::Succeeded {
                let lag = u64::try_from(a.answered.0 - delivery.committed.0).unwrap_or_default();
                self.metrics.delivered_after(Duration::from_micros(lag));
            }
            if endpoints
                .get(delivery.endpoint.as_str())
                .is_some_and(|e| e.enabled)
            {
                let outcome = outcomes.entry(delivery.endpoint.as_str()).or_default();
                outcome.0 |= a.then == DeliveryStatus::Succeeded;
                outcome.1 |= a.tally == Tally::Gone;
            }
        }
        for (id, (succeeded, gone)) in outcomes {
            if gone {
                tracing::warn!(endpoint = %id, "a webhook endpoint answered 410 Gone: disabled");
                hooks
                    .disable_endpoint(id, "the endpoint answered 410 Gone")
                    .await?;
                continue;
            }
            let streak = endpoints.get(id).and_then(|e| e.failing_since);
            let failing = match (succeeded, streak) {
                (true, None) => continue,
                (false, Some(since)) => Some(since),
                _ => hooks
                    .endpoint_attempted(id, succeeded, at)
                    .await?
                    .and_then(|e| e.failing_since),
            };
            let limit = i64::try_from(self.rules.disable_after.as_micros()).unwrap_or(i64::MAX);
            if failing.is_some_and(|since| at.0 - since.0 >= limit) {
                let reason = format!(
                    "every attempt failed for {} s (THREADQL_WEBHOOK_DISABLE_AFTER_SECS)",
                    self.rules.disable_after.as_secs()
                );
                tracing::warn!(endpoint = %id, %reason, "a webhook endpoint was disabled");
                hooks.disable_endpoint(id, &reason).await?;
            }
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

/// What an attempt came to, before it is recorded.
struct Attempted {
    status: Option<u16>,
    error: Option<String>,
    body: Option<String>,
    then: DeliveryStatus,
    next_at: Option<Micros>,
    tally: Tally,
    /// When the answer came (for the lag).
    answered: Micros,
}

impl Attempted {
    /// The record of this attempt, written at `at`.
    fn record(&self, at: Micros) -> AttemptRecord {
        AttemptRecord {
            at,
            status: self.status,
            error: self.error.clone(),
            body: self.body.clone(),
            then: self.then,
            next_at: self.next_at,
        }
    }

    /// `delivery` after this attempt, written at `at`.
    fn applied_to(&self, delivery: &Delivery, at: Micros) -> Delivery {
        Delivery {
            status: self.then,
            attempts: delivery.attempts + 1,
            next_at: self.next_at,
            last_attempt_at: Some(at),
            last_status: self.status,
            last_error: self.error.clone(),
            last_body: self.body.clone(),
            ..delivery.clone()
        }
    }
}

/// One delivery per endpoint that wants each event (an endpoint gets the events committed from
/// its creation on), not yet attempted.
fn new_deliveries(events: &[StoredEvent], endpoints: &[Endpoint]) -> Vec<Delivery> {
    events
        .iter()
        .map(|e| &e.record)
        .flat_map(|event| {
            endpoints
                .iter()
                .filter(|e| e.enabled && e.wants(event.kind) && e.created <= event.at)
                .map(move |endpoint| new_delivery(event, endpoint, event.at))
        })
        .collect()
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
