//! The fan-out: every replica runs one. In rounds, it claims the events whose notifications
//! are due (under a lease: a replica that dies leaves them to another once it has run out),
//! works out who each notifies, stores the notifications in batches (`insertMany`; one stored
//! already is left as it is, so a re-run after a crash adds nothing), makes the messages of
//! those who are mailed due, and ends the events' fan-out. A post never waits for any of it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};

use super::metrics::NotifyMetrics;
use crate::domain::notifications::{plan, MailPace, Notification, NotificationSettings, Plan};
use crate::domain::{Author, EmailFrequency, Event, EventRecord, EventType, Micros, Slug};
use crate::store::{DynStorage, ReadScope, StoreResult};

/// Events claimed per round.
const EVENTS: usize = 64;
/// Followers read (and notifications stored) at once.
const BATCH: usize = 1_000;
/// How much longer than a batch took the fan-out rests after it: a fan-out works a third of the
/// time, so posts meanwhile keep most of the database and the cores. On two shared cores, with
/// posts 100 ms apart into a discussion of 10 000 followers, no rest made their p50 1.49-1.54x
/// that of posts nobody follows, a rest of twice the batch about 1.10x (BENCHMARKS.md,
/// "Notifications"); a lone post's 10 000 followers are then all notified in about 2 s.
const REST: u32 = 2;
/// The wait between rounds that found nothing to do (a commit in this process wakes it).
const IDLE: Duration = Duration::from_millis(250);
/// How long a round woken by a commit waits for the commits that follow it.
const GATHER: Duration = Duration::from_millis(50);

/// How the fan-out works and mails.
#[derive(Debug, Clone)]
pub struct FanOutRules {
    /// How long a claim on events holds.
    pub lease: Duration,
    /// Whether mail can be sent at all (an SMTP server is set).
    pub mail: bool,
    /// How often a person who set nothing is mailed.
    pub email_default: EmailFrequency,
    /// The periods that pace mail.
    pub pace: MailPace,
}

/// One replica's fan-out.
pub struct FanOut {
    /// The storage its reads of comments go through (connections of their own).
    storage: DynStorage,
    rules: FanOutRules,
    token: String,
    claims: AtomicU64,
    metrics: Arc<NotifyMetrics>,
}

impl FanOut {
    /// A fan-out over `storage`.
    pub fn new(storage: DynStorage, rules: FanOutRules, metrics: Arc<NotifyMetrics>) -> Self {
        Self {
            storage,
            rules,
            metrics,
            token: format!("{:032x}@{}", rand::random::<u128>(), std::process::id()),
            claims: AtomicU64::new(0),
        }
    }

    /// Runs rounds until `stop` changes: at once while there is work, else after a short wait
    /// or soon after this process commits an event (`wake`).
    pub async fn run(
        self: Arc<Self>,
        wake: broadcast::Receiver<Arc<Event>>,
        stop: watch::Receiver<Option<tokio::time::Instant>>,
    ) {
        let pace = crate::background::Pace {
            idle: IDLE,
            gather: GATHER,
        };
        crate::background::run_rounds("notification", pace, Some(wake), stop, || self.round())
            .await;
    }

    /// One round; whether it took all it could (and should run again at once).
    pub async fn round(&self) -> StoreResult<bool> {
        let store = self.storage.notifications();
        let now = Micros::now();
        let until = Micros(now.0.saturating_add(micros(self.rules.lease)));
        let n = self.claims.fetch_add(1, Ordering::Relaxed);
        let token = format!("{}#{n}", self.token);
        let events = store.claim_events(now, until, &token, EVENTS).await?;
        for event in &events {
            self.fan_out(event).await?;
            let lag = Micros::now().0.saturating_sub(event.at.0);
            self.metrics
                .fanned_out_after(Duration::from_micros(u64::try_from(lag).unwrap_or(0)));
        }
        let ids: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
        store.finish_events(&ids, &token).await?;
        Ok(events.len() >= EVENTS)
    }

    /// Stores the notifications of `event` and makes its recipients' messages due.
    async fn fan_out(&self, event: &EventRecord) -> StoreResult<()> {
        let store = self.storage.notifications();
        let (parent_author, published_by) = self.authors(event).await?;
        let plan = plan(event, parent_author.as_deref(), published_by.as_ref());
        self.metrics.stored(store.insert(&plan.direct).await?);
        self.mail(&plan.direct).await?;
        if !plan.followers {
            return Ok(());
        }
        let Some(discussion) = &event.discussion else {
            return Ok(());
        };
        let mut after: Option<String> = None;
        loop {
            let began = std::time::Instant::now();
            let followers = store
                .followers(discussion, event.at, after.as_deref(), BATCH)
                .await?;
            let batch: Vec<Notification> = followers
                .iter()
                .filter_map(|f| Plan::followed(&plan, event, f))
                .collect();
            self.metrics.stored(store.insert(&batch).await?);
            self.mail(&batch).await?;
            if followers.len() < BATCH {
                return Ok(());
            }
            tokio::time::sleep(began.elapsed() * REST).await;
            after = followers.last().cloned();
        }
    }

    /// The author of the comment `event`'s comment replies to, when it is a reply whose parent
    /// is still there (a post names its parent; an approval's is its slug's parent), and for an
    /// approval, the author of the comment it publishes as stored (a post's is its actor). One
    /// read of both.
    async fn authors(&self, event: &EventRecord) -> StoreResult<(Option<String>, Option<Author>)> {
        let (parent, published): (Option<Slug>, Option<Slug>) = match event.kind {
            EventType::CommentPosted => (event.parent.clone(), None),
            EventType::CommentApproved => (
                event.slug.as_ref().and_then(Slug::parent),
                event.slug.clone(),
            ),
            _ => (None, None),
        };
        let slugs: Vec<Slug> = parent.iter().chain(published.iter()).cloned().collect();
        let (false, Some(id)) = (slugs.is_empty(), &event.discussion) else {
            return Ok((None, None));
        };
        let Some(discussion) = self
            .storage
            .discussions()
            .by_ids(std::slice::from_ref(id))
            .await?
            .into_iter()
            .next()
        else {
            return Ok((None, None));
        };
        let layout = self.storage.layout(discussion.layout)?;
        let found = layout
            .by_slugs(&ReadScope::new(), &discussion, &slugs)
            .await?;
        let of = |slug: &Option<Slug>| {
            let slug = slug.as_ref()?;
            found.iter().find(|c| &c.slug == slug)
        };
        Ok((
            of(&parent)
                .filter(|c| !c.deleted)
                .map(|c| c.author.id.clone()),
            of(&published).map(|c| c.author.clone()),
        ))
    }

    /// Makes the messages of the recipients of `notifications` who are mailed for their kind
    /// due, when mail can be sent.
    async fn mail(&self, notifications: &[Notification]) -> StoreResult<()> {
        if !self.rules.mail || notifications.is_empty() {
            return Ok(());
        }
        let store = self.storage.notifications();
        let users: Vec<String> = notifications.iter().map(|n| n.recipient.clone()).collect();
        let now = Micros::now();
        for person in store.with_address(&users).await? {
            let settings = person
                .settings
                .unwrap_or_else(|| NotificationSettings::defaults(self.rules.email_default));
            let wanted = notifications
                .iter()
                .any(|n| n.recipient == person.id && settings.mails(n.kind));
            if !wanted {
                continue;
            }
            if let Some(due) = self
                .rules
                .pace
                .next(settings.email, person.last_mailed, now)
            {
                store.mail_due(&person.id, due).await?;
            }
        }
        Ok(())
    }
}

/// `d` in microseconds.
pub(super) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}
