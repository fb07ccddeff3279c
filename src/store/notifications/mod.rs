//! Notifications (`notifications`), follows (`follows`) and people (`people`).
//!
//! Three indexes, since each costs every one of a fan-out's writes: `_id` (`<once>|<recipient>`,
//! where `once` is the comment for a reply or a follow and the event for a moderation notice)
//! keeps one comment from notifying a person twice and makes a re-run of a fan-out store nothing
//! new; `{recipient, read, key}` (`key`, the API's id, `<event>:<recipient>`, sorts by commit
//! time) holds an inbox page (both values of `read`), an unread page, the unread count (exact
//! whatever runs at once: it counts what is stored) and marking read; a TTL index keeps them.
//!
//! Requests read and write through the main connections; the background workers (the fan-out,
//! the mail, the live stream) through their own, so their commands never mix with requests'.

mod codec;
mod follows;
mod people;
pub(crate) use people::IGNORING;
mod workers;

use std::collections::HashSet;

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongodb::Database;

use crate::domain::notifications::{Notification, NotificationSettings};
use crate::domain::{DiscussionId, EventRecord, Micros};
use crate::store::api::{Following, NotificationStore, Person};
use crate::store::shared::connect::index_model;
use crate::store::shared::error::{as_limit, StoreResult};
use crate::store::shared::metrics::{CommandCounter, Counted};
use crate::store::shared::ttl::{ensure_ttl, Ttl};

/// The collections, through one set of connections.
#[derive(Clone)]
struct Collections {
    notifications: Counted<Document>,
    follows: Counted<Document>,
    people: Counted<Document>,
    events: Counted<Document>,
}

impl Collections {
    fn new(db: &Database, commands: &CommandCounter) -> Self {
        Self {
            notifications: Counted::new(db, Notifications::NOTIFICATIONS, commands),
            follows: Counted::new(db, Notifications::FOLLOWS, commands),
            people: Counted::new(db, Notifications::PEOPLE, commands),
            events: Counted::new(db, crate::store::events::COLLECTION, commands),
        }
    }
}

/// Inboxes, follows and people.
pub(crate) struct Notifications {
    db: Database,
    /// Through the requests' connections.
    front: Collections,
    /// Through the background workers'.
    back: Collections,
}

impl Notifications {
    /// The collection of notifications.
    pub(crate) const NOTIFICATIONS: &str = "notifications";
    /// The collection of follows.
    pub(crate) const FOLLOWS: &str = "follows";
    /// The collection of people: the document per person that moderation keeps its trust count
    /// in also holds their address, settings and mail state.
    pub(crate) const PEOPLE: &str = crate::store::moderation::held::PEOPLE;

    /// The store over `front` (requests) and `back` (background work).
    pub(crate) fn new(
        front: (&Database, &CommandCounter),
        back: (&Database, &CommandCounter),
    ) -> Self {
        Self {
            db: front.0.clone(),
            front: Collections::new(front.0, front.1),
            back: Collections::new(back.0, back.1),
        }
    }

    /// The indexes: an inbox by id and by unread, one comment's notice once per person, the
    /// TTL index of `retention`; followers by discussion, follows by person; people by when
    /// their message is due (sparse: only those with one due).
    pub(crate) async fn ensure_indexes(&self, retention: std::time::Duration) -> StoreResult<()> {
        let ttl = Ttl {
            name: "created_ttl",
            field: "created",
            keep: retention,
            sparse: false,
        };
        ensure_ttl(&self.db, Self::NOTIFICATIONS, &ttl).await?;
        self.front
            .notifications
            .create_indexes([index_model(
                "recipient_read_key",
                doc! { "recipient": 1, "read": 1, "key": 1 },
                false,
            )])
            .await?;
        follows::ensure_indexes(&self.front.follows).await?;
        people::ensure_indexes(&self.front.people).await?;
        Ok(())
    }
}

#[async_trait]
impl NotificationStore for Notifications {
    async fn inbox(
        &self,
        recipient: &str,
        before: Option<&str>,
        unread_only: bool,
        limit: usize,
    ) -> StoreResult<Vec<Notification>> {
        let Some(limit) = as_limit(limit) else {
            return Ok(Vec::new());
        };
        let read = match unread_only {
            true => Bson::Boolean(false),
            false => Bson::Document(doc! { "$in": [false, true] }),
        };
        let mut filter = doc! { "recipient": recipient, "read": read };
        if let Some(before) = before {
            filter.insert("key", doc! { "$lt": before });
        }
        let docs: Vec<Document> = self
            .front
            .notifications
            .find(filter)
            .sort(doc! { "key": -1 })
            .limit(limit)
            .await?
            .try_collect()
            .await?;
        docs.iter().map(codec::notification_of).collect()
    }

    async fn unread_count(&self, recipient: &str) -> StoreResult<u64> {
        Ok(self
            .front
            .notifications
            .count_documents(doc! { "recipient": recipient, "read": false })
            .await?)
    }

    async fn mark_read(&self, recipient: &str, up_to: Option<&str>) -> StoreResult<u64> {
        let mut filter = doc! { "recipient": recipient, "read": false };
        if let Some(up_to) = up_to {
            filter.insert("key", doc! { "$lte": up_to });
        }
        let done = self
            .front
            .notifications
            .update_many(filter, doc! { "$set": { "read": true } })
            .await?;
        Ok(done.modified_count)
    }

    async fn follow(
        &self,
        user: &str,
        discussion: &DiscussionId,
        follow: bool,
        at: Micros,
    ) -> StoreResult<bool> {
        follows::follow(&self.front.follows, user, discussion, follow, at).await
    }

    async fn follows(
        &self,
        user: &str,
        discussions: &[DiscussionId],
    ) -> StoreResult<HashSet<DiscussionId>> {
        follows::follows(&self.front.follows, user, discussions).await
    }

    async fn following(
        &self,
        user: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Following> {
        follows::following(&self.front.follows, user, after, limit).await
    }

    async fn following_count(&self, user: &str) -> StoreResult<u64> {
        Ok(self
            .front
            .follows
            .count_documents(doc! { "user": user })
            .await?)
    }

    async fn followers(
        &self,
        discussion: &DiscussionId,
        by: Micros,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<String>> {
        follows::followers(&self.back.follows, discussion, by, after, limit).await
    }

    async fn person(&self, user: &str) -> StoreResult<Option<Person>> {
        people::person(&self.front.people, user).await
    }

    async fn set_settings(&self, user: &str, settings: &NotificationSettings) -> StoreResult<()> {
        people::set_settings(&self.front.people, user, settings).await
    }

    async fn ignoring(&self, user: &str) -> StoreResult<Vec<String>> {
        people::ignoring(&self.front.people, user).await
    }

    async fn set_ignoring(
        &self,
        user: &str,
        target: &str,
        ignored: bool,
        cap: usize,
    ) -> StoreResult<bool> {
        people::set_ignoring(&self.front.people, user, target, ignored, cap).await
    }

    async fn remember_address(&self, user: &str, address: &str) -> StoreResult<()> {
        people::remember_address(&self.front.people, user, address).await
    }

    async fn with_address(&self, users: &[String]) -> StoreResult<Vec<Person>> {
        people::with_address(&self.back.people, users).await
    }

    async fn claim_events(
        &self,
        now: Micros,
        until: Micros,
        token: &str,
        limit: usize,
    ) -> StoreResult<Vec<EventRecord>> {
        workers::claim_events(&self.back.events, now, until, token, limit).await
    }

    async fn insert(&self, notifications: &[Notification]) -> StoreResult<u64> {
        workers::insert(&self.back.notifications, notifications).await
    }

    async fn finish_events(&self, ids: &[String], token: &str) -> StoreResult<()> {
        workers::finish_events(&self.back.events, ids, token).await
    }

    async fn mail_due(&self, user: &str, due: Micros) -> StoreResult<()> {
        people::mail_due(&self.back.people, user, due).await
    }

    async fn claim_mail(
        &self,
        now: Micros,
        until: Micros,
        limit: usize,
    ) -> StoreResult<Vec<Person>> {
        people::claim_mail(&self.back.people, now, until, limit).await
    }

    async fn unmailed(&self, user: &str, limit: usize) -> StoreResult<Vec<Notification>> {
        let Some(limit) = as_limit(limit) else {
            return Ok(Vec::new());
        };
        let filter = doc! { "recipient": user, "read": false, "mailed": { "$ne": true } };
        let docs: Vec<Document> = self
            .back
            .notifications
            .find(filter)
            .sort(doc! { "key": 1 })
            .limit(limit)
            .await?
            .try_collect()
            .await?;
        docs.iter().map(codec::notification_of).collect()
    }

    async fn mailed(
        &self,
        user: &str,
        ids: &[String],
        at: Option<Micros>,
        claimed: Micros,
    ) -> StoreResult<()> {
        if !ids.is_empty() {
            self.back
                .notifications
                .update_many(
                    doc! { "recipient": user, "read": false, "key": { "$in": ids } },
                    doc! { "$set": { "mailed": true } },
                )
                .await?;
        }
        people::mailed(&self.back.people, user, at, claimed).await
    }

    async fn mail_failed(&self, user: &str, tries: u32, retry: Micros) -> StoreResult<()> {
        people::mail_failed(&self.back.people, user, tries, retry).await
    }

    fn received(&self) -> BoxStream<'static, Notification> {
        workers::received(self.back.notifications.clone())
    }
}
