//! The mail worker: every replica runs one when an SMTP server is set. It claims the people
//! whose message is due (under a lease, one replica each), reads their unread notifications not
//! mailed yet, leaves out what their settings do not mail and comments gone since, and sends one
//! message: a single notice or a digest. A temporary failure is tried again later (backoff),
//! a permanent one is logged and dropped.
//!
//! Between the SMTP server's acceptance and the record of it, a crash repeats at most that one
//! message: the notifications it held are marked mailed only after the send.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::fanout::micros;
use super::metrics::{Mailed, NotifyMetrics};
use crate::domain::notifications::{MailPace, Notification, NotificationKind};
use crate::domain::{Discussion, EmailFrequency, Micros, NotificationSettings};
use crate::mail::{compose, Item, ItemKind, Mailer, SendOutcome, UnsubscribeTokens};
use crate::store::Person;
use crate::store::{DynStorage, ReadScope, StoreResult};

/// People claimed per round.
const PEOPLE: usize = 16;
/// Notifications one message holds at most (a longer digest says the rest are in the app).
const ITEMS: usize = 50;
/// The wait between rounds.
const IDLE: Duration = Duration::from_millis(500);
/// Temporary failures of one message before it is given up.
const MAX_TRIES: u32 = 8;
/// The longest wait before a message is tried again.
const MAX_BACKOFF: Duration = Duration::from_secs(3_600);

/// How the worker mails.
#[derive(Debug, Clone)]
pub struct MailRules {
    /// How long a claim on a person's message holds.
    pub lease: Duration,
    /// How often a person who set nothing is mailed.
    pub default: EmailFrequency,
    /// The periods that pace mail.
    pub pace: MailPace,
    /// The wait before the first retry of a message (doubled each time, up to an hour).
    pub retry: Duration,
    /// The server's public URL (links, unsubscribe), without a trailing `/`.
    pub public_url: String,
}

/// One replica's mail worker.
pub struct MailWorker {
    storage: DynStorage,
    mailer: Mailer,
    tokens: UnsubscribeTokens,
    rules: MailRules,
    metrics: Arc<NotifyMetrics>,
}

impl MailWorker {
    /// A worker sending through `mailer`.
    pub fn new(
        storage: DynStorage,
        mailer: Mailer,
        tokens: UnsubscribeTokens,
        rules: MailRules,
        metrics: Arc<NotifyMetrics>,
    ) -> Self {
        Self {
            storage,
            mailer,
            tokens,
            rules,
            metrics,
        }
    }

    /// Runs rounds until `stop` changes.
    pub async fn run(self: Arc<Self>, stop: watch::Receiver<Option<tokio::time::Instant>>) {
        let pace = crate::background::Pace {
            idle: IDLE,
            gather: IDLE,
        };
        crate::background::run_rounds("mail", pace, None, stop, || self.round()).await;
    }

    /// One round; whether it took all it could.
    async fn round(&self) -> StoreResult<bool> {
        let now = Micros::now();
        let until = Micros(now.0.saturating_add(micros(self.rules.lease)));
        let people = self
            .storage
            .notifications()
            .claim_mail(now, until, PEOPLE)
            .await?;
        for person in &people {
            self.mail(person, until).await?;
        }
        Ok(people.len() >= PEOPLE)
    }

    /// Sends `person` their message, if there is anything to say.
    async fn mail(&self, person: &Person, claimed: Micros) -> StoreResult<()> {
        let store = self.storage.notifications();
        let now = Micros::now();
        let settings = person
            .settings
            .unwrap_or_else(|| NotificationSettings::defaults(self.rules.default));
        let Some(address) = person
            .address
            .as_deref()
            .filter(|_| settings.email != EmailFrequency::Never)
        else {
            return store.mailed(&person.id, &[], None, claimed).await;
        };
        if settings.email == EmailFrequency::Immediate {
            // A notification since the last message made it due early: wait out the interval.
            if let Some(due) = self
                .rules
                .pace
                .next(settings.email, person.last_mailed, now)
            {
                if due.0 > now.0 {
                    return store.mail_failed(&person.id, person.mail_tries, due).await;
                }
            }
        }
        let unmailed = store.unmailed(&person.id, ITEMS).await?;
        let ids: Vec<String> = unmailed.iter().map(|n| n.id.clone()).collect();
        let wanted: Vec<&Notification> =
            unmailed.iter().filter(|n| settings.mails(n.kind)).collect();
        let items = self.items(&wanted).await?;
        if items.is_empty() {
            return store.mailed(&person.id, &ids, None, claimed).await;
        }
        let unsubscribe = format!(
            "{}/notifications/unsubscribe?token={}",
            self.rules.public_url,
            self.tokens.sign(&person.id)
        );
        let host = url::Url::parse(&self.rules.public_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_else(|| "threadql.invalid".to_owned());
        let message = compose(address, &items, &host, &unsubscribe);
        match self.mailer.send(&message).await {
            SendOutcome::Sent => {
                self.metrics.mailed(Mailed::Sent);
                store
                    .mailed(&person.id, &ids, Some(Micros::now()), claimed)
                    .await
            }
            SendOutcome::Temporary(why) if person.mail_tries + 1 < MAX_TRIES => {
                let tries = person.mail_tries + 1;
                let wait = backoff(self.rules.retry, tries);
                tracing::warn!(user = %person.id, tries, why, "a notification e-mail failed for now: trying again in {} s", wait.as_secs());
                self.metrics.mailed(Mailed::Retried);
                let retry = Micros(now.0.saturating_add(micros(wait)));
                store.mail_failed(&person.id, tries, retry).await
            }
            SendOutcome::Temporary(why) | SendOutcome::Permanent(why) => {
                tracing::warn!(user = %person.id, why, "a notification e-mail was refused: dropped");
                self.metrics.mailed(Mailed::Dropped);
                store.mailed(&person.id, &ids, None, claimed).await
            }
        }
    }

    /// The items of a message: each notification with its discussion and comment as they are
    /// now. A reply or a followed comment that is no longer public is left out.
    async fn items(&self, notifications: &[&Notification]) -> StoreResult<Vec<Item>> {
        let ids: Vec<_> = notifications.iter().map(|n| n.discussion.clone()).collect();
        let discussions = self.storage.discussions().by_ids_map(&ids).await?;
        let mut items = Vec::new();
        for notification in notifications {
            let Some(discussion) = discussions.get(&notification.discussion) else {
                continue;
            };
            let layout = self.storage.layout(discussion.layout)?;
            let comment = layout
                .by_slugs(
                    &ReadScope::new(),
                    discussion,
                    std::slice::from_ref(&notification.slug),
                )
                .await?
                .into_iter()
                .next()
                .filter(|c| !c.deleted && c.standing.is_public());
            if comment.is_none() && notification.kind != NotificationKind::Moderation {
                continue;
            }
            items.push(Item {
                kind: match notification.kind {
                    NotificationKind::Reply => ItemKind::Reply,
                    NotificationKind::Moderation => ItemKind::Moderation,
                    NotificationKind::Followed => ItemKind::Followed,
                },
                discussion_id: discussion.id.to_string(),
                discussion_title: discussion.title.clone(),
                link: self.link(discussion, notification),
                actor_name: Some(notification.actor.name.clone()),
                comment_html: comment.as_ref().and_then(|c| c.html.clone()),
                comment_text: comment.as_ref().and_then(|c| c.text.clone()),
                reason: notification.reason.clone(),
                approved: notification.approved,
            });
        }
        Ok(items)
    }

    /// Where a notification's comment is read: its discussion's page, else this server's demo
    /// page of the discussion's key, else this server.
    fn link(&self, discussion: &Discussion, notification: &Notification) -> String {
        let anchor = format!("#comment-{}", notification.slug.as_str());
        match (&discussion.url, &discussion.key) {
            (Some(url), _) => format!("{}{anchor}", url.split('#').next().unwrap_or(url)),
            (None, Some(key)) => format!(
                "{}/embed/demo?key={}{anchor}",
                self.rules.public_url,
                url::form_urlencoded::byte_serialize(key.as_str().as_bytes()).collect::<String>()
            ),
            (None, None) => format!("{}/", self.rules.public_url),
        }
    }
}

/// The wait before try `tries + 1`: `first`, doubled each time, at most an hour.
fn backoff(first: Duration, tries: u32) -> Duration {
    let factor = 2u32.saturating_pow(tries.saturating_sub(1).min(16));
    first.saturating_mul(factor).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_longer_each_time_up_to_an_hour() {
        let first = Duration::from_secs(30);
        assert_eq!(backoff(first, 1), first);
        assert_eq!(backoff(first, 2), Duration::from_secs(60));
        assert_eq!(backoff(first, 4), Duration::from_secs(240));
        assert_eq!(backoff(first, 30), MAX_BACKOFF);
    }
}
