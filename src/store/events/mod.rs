//! `events`: the event log, a transactional outbox. Every change writes its events here in its
//! own transaction ([`EventLog::append`] inside a write's session, or [`EventLog::atomically`]
//! around a write of one document), so an event exists exactly when its change committed.
//!
//! An event keeps ids, never texts (the comment and discussion are read when it is shown), so
//! a deleted comment leaves nothing here. Its `_id` is 16 digits of the commit clock's
//! microseconds and 8 random characters: every change of a discussion writes the discussion's
//! document in its transaction, so changes of one discussion commit one after the other, and
//! the id, taken after that write, sorts in commit order within the discussion. `created` (a
//! date) carries the TTL index that keeps [`Retention`] days.
//!
//! `dispatch` (a date, the commit time at first) is there while the event's webhook fan-out is
//! to do: the fan-out removes it once the event's deliveries are stored, so its sparse index
//! holds only the events still to fan out. `notify` does the same for the notifications'
//! fan-out, on the events that may notify anyone.

mod codec;

pub(crate) use codec::record_of;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongodb::error::TRANSIENT_TRANSACTION_ERROR;
use mongodb::options::IndexOptions;
use mongodb::{Client, ClientSession, Database, IndexModel};

use crate::domain::slug::MonotonicClock;
use crate::domain::{Event, EventRecord, EventType, GuestIds, Micros};
use crate::store::api::EventStore;
use crate::store::shared::authors::Rewritten;
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::inserts::inserted;
use crate::store::shared::metrics::{CommandCounter, Counted};
use crate::store::shared::transactions::{abort, commit, pause};
use crate::store::shared::ttl::{ensure_ttl, Ttl};

/// The collection of events.
pub(crate) const COLLECTION: &str = "events";

/// How often a write and its events meet a concurrent transaction before giving up.
const CONFLICTS: u32 = 200;

/// Up to `limit` events whose fan-out marked by `field` (`dispatch`, `notify`: a date) is due at
/// `now`, the longest due first: one range of that field's sparse index.
pub(crate) async fn due(
    events: &Counted<Document>,
    field: &str,
    now: crate::domain::Micros,
    limit: usize,
) -> StoreResult<Vec<Document>> {
    let Some(limit) = crate::store::shared::error::as_limit(limit) else {
        return Ok(Vec::new());
    };
    let at = mongodb::bson::DateTime::from_millis(now.0 / 1000);
    Ok(events
        .find(doc! { field: { "$lte": at } })
        .sort(doc! { field: 1 })
        .limit(limit)
        .await?
        .try_collect()
        .await?)
}

/// How long events are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention(pub Duration);

/// The event log, and the transactions writes of one document run in to join it.
#[derive(Clone)]
pub(crate) struct EventLog {
    events: Counted<Document>,
    db: Database,
    client: Client,
    transactions: bool,
    clock: Arc<MonotonicClock>,
    /// The log as the live stream reads it: on connections of their own, so that opening it
    /// counts among no request's commands (the log itself, until `watched_on`).
    watched: Counted<Document>,
}

impl EventLog {
    /// The log in `db`; with `transactions`, events join their change's transaction.
    pub(crate) fn new(
        db: &Database,
        client: Client,
        transactions: bool,
        clock: Arc<MonotonicClock>,
        commands: &CommandCounter,
    ) -> Self {
        let events = Counted::new(db, COLLECTION, commands);
        Self {
            watched: events.clone(),
            events,
            db: db.clone(),
            client,
            transactions,
            clock,
        }
    }

    /// The same log, whose live stream reads through `db` (a client of its own).
    pub(crate) fn watched_on(mut self, db: &Database, commands: &CommandCounter) -> Self {
        self.watched = Counted::new(db, COLLECTION, commands);
        self
    }

    /// The indexes: the TTL index on `created` (kept at `retention`: an index made with another
    /// one is changed in place), the kinds by id for the feed, and the events still to fan out
    /// to webhooks by when that is due (sparse: `dispatch` is removed once they are).
    pub(crate) async fn ensure_indexes(&self, retention: Retention) -> StoreResult<()> {
        let ttl = Ttl {
            name: "created_ttl",
            field: "created",
            keep: retention.0,
            sparse: false,
        };
        ensure_ttl(&self.db, COLLECTION, &ttl).await?;
        self.events
            .create_index(
                IndexModel::builder()
                    .keys(doc! { "type": 1, "_id": 1 })
                    .build(),
            )
            .await?;
        for due in ["dispatch", "notify"] {
            self.events
                .create_index(
                    IndexModel::builder()
                        .keys(doc! { due: 1 })
                        .options(IndexOptions::builder().sparse(true).build())
                        .build(),
                )
                .await?;
        }
        Ok(())
    }

    /// Keys the imported guest ids the log holds (a comment's author, the user banned, the
    /// actor): each event is read once, in the ranges of the unkeyed ids, and updated on
    /// condition that the ids are as read (see `ServerStore::key_guest_ids`).
    pub(crate) async fn key_guest_ids(&self, ids: &GuestIds) -> StoreResult<Rewritten> {
        let mut branches = Vec::new();
        for prefix in GuestIds::prefixes() {
            let end = format!("{};", prefix.trim_end_matches(':'));
            for field in ["author", "user", "actor.id"] {
                branches.push(doc! { field: { "$gte": &prefix, "$lt": &end } });
            }
        }
        let mut done = Rewritten::default();
        let mut found = self.events.find(doc! { "$or": branches }).await?;
        while let Some(event) = found.try_next().await? {
            let Some(id) = event.get("_id").cloned() else {
                continue;
            };
            let (mut guard, mut set) = (doc! { "_id": id }, Document::new());
            let actor = event
                .get_document("actor")
                .ok()
                .and_then(|a| a.get_str("id").ok());
            let fields = [
                ("author", event.get_str("author").ok()),
                ("user", event.get_str("user").ok()),
                ("actor.id", actor),
            ];
            for (field, old) in fields {
                if let Some((old, new)) = old.and_then(|old| Some((old, ids.keyed(old)?))) {
                    guard.insert(field, old);
                    set.insert(field, new);
                }
            }
            if set.is_empty() {
                continue;
            }
            let changed = set.len() as u64;
            match self
                .events
                .update_one(guard, doc! { "$set": set })
                .await?
                .modified_count
            {
                1 => {
                    done.documents += 1;
                    done.ids += changed;
                }
                _ => done.missed += 1,
            }
        }
        Ok(done)
    }

    /// Whether events join their change's transaction (a replica set or a sharded cluster).
    pub(crate) fn transactional(&self) -> bool {
        self.transactions
    }

    /// Writes `events` in `session`: in its transaction, when it has one.
    pub(crate) async fn append(
        &self,
        session: &mut ClientSession,
        events: &[Event],
    ) -> StoreResult<()> {
        self.append_homed(session, events, &[]).await
    }

    /// [`Self::append`], with where each event's comment is stored (its layout's home, by
    /// position; none past the end): a webhook delivery reads it there.
    pub(crate) async fn append_homed(
        &self,
        session: &mut ClientSession,
        events: &[Event],
        homes: &[Option<Bson>],
    ) -> StoreResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        let docs: Vec<Document> = events
            .iter()
            .enumerate()
            .map(|(i, event)| {
                let at = self.clock.now();
                let mut doc = codec::event_doc(&event.record(new_id(at), at));
                if let Some(Some(home)) = homes.get(i) {
                    doc.insert("home", home.clone());
                }
                doc
            })
            .collect();
        self.events.insert_many(docs).session(session).await?;
        Ok(())
    }

    /// Stores `stored` as the document `_id` of `coll` (replacing it, or inserting it) with
    /// `events`, in one transaction (see [`EventLog::atomically`]).
    pub(crate) async fn replace_with(
        &self,
        coll: &Counted<Document>,
        id: &str,
        stored: &Document,
        events: &[Event],
    ) -> StoreResult<()> {
        self.atomically(|mut session| async move {
            let replaced = coll
                .replace_one(doc! { "_id": id }, stored)
                .upsert(true)
                .session(&mut session)
                .await;
            (
                session,
                replaced.map(|_| ((), events.to_vec())).map_err(Into::into),
            )
        })
        .await
    }

    /// Removes the document `_id` of `coll`, read as `read` makes it, with the events
    /// `announce` makes of it, in one transaction; what was removed, if anything.
    pub(crate) async fn remove_with<T: Send>(
        &self,
        coll: &Counted<Document>,
        id: &str,
        read: &(dyn Fn(&Document) -> StoreResult<T> + Send + Sync),
        announce: &(dyn for<'b> Fn(&'b T) -> Vec<Event> + Send + Sync),
    ) -> StoreResult<Option<T>> {
        self.atomically(|mut session| async move {
            let removed = coll
                .find_one_and_delete(doc! { "_id": id })
                .session(&mut session)
                .await;
            let found = match removed {
                Ok(removed) => removed.as_ref().map(read).transpose(),
                Err(err) => Err(err.into()),
            };
            let told = found.map(|found| {
                let events = found.as_ref().map(announce).unwrap_or_default();
                (found, events)
            });
            (session, told)
        })
        .await
    }

    /// Runs `write` (given a session, returning it with the value and the events the write
    /// made) and appends its events, in one transaction: both commit, or neither does. A
    /// transaction that met a concurrent one runs again (after a short random wait). Without
    /// transactions the events are written right after the change.
    pub(crate) async fn atomically<T, F, Fut>(&self, write: F) -> StoreResult<T>
    where
        F: Fn(ClientSession) -> Fut + Send + Sync,
        Fut: Future<Output = (ClientSession, StoreResult<(T, Vec<Event>)>)> + Send,
        T: Send,
    {
        let mut round = 0;
        loop {
            let mut session = self.client.start_session().await?;
            if self.transactions {
                session.start_transaction().await?;
            }
            let (mut session, written) = write(session).await;
            let outcome = match written {
                Ok((value, events)) => match self.append(&mut session, &events).await {
                    Ok(()) if self.transactions => commit(&mut session, self.events.commands())
                        .await
                        .map(|()| value),
                    Ok(()) => Ok(value),
                    Err(err) => Err(err),
                },
                Err(err) => Err(err),
            };
            let err = match outcome {
                Ok(value) => return Ok(value),
                Err(err) => err,
            };
            if self.transactions {
                abort(&mut session, self.events.commands()).await;
            }
            match &err {
                StoreError::Db(e) if e.contains_label(TRANSIENT_TRANSACTION_ERROR) => {
                    round += 1;
                    if round >= CONFLICTS {
                        return Err(StoreError::Exhausted(format!(
                            "the change met concurrent writes {round} times"
                        )));
                    }
                    pause(round).await;
                }
                _ => return Err(err),
            }
        }
    }
}

#[async_trait]
impl EventStore for EventLog {
    /// A page of the log: events after `after` (by id), of `kinds` (every kind when empty),
    /// committed before `before`, oldest first, at most `limit`. One range of `_id` (per kind).
    async fn page(
        &self,
        after: Option<&str>,
        kinds: &[EventType],
        before: Micros,
        limit: usize,
    ) -> StoreResult<Vec<EventRecord>> {
        let mut range = doc! { "$lt": format!("{:016}", before.0.max(0)) };
        if let Some(after) = after {
            range.insert("$gt", after);
        }
        let mut filter = doc! { "_id": range };
        if !kinds.is_empty() {
            let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
            filter.insert("type", doc! { "$in": names });
        }
        let docs: Vec<Document> = self
            .events
            .find(filter)
            .sort(doc! { "_id": 1 })
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .await?
            .try_collect()
            .await?;
        docs.iter().map(codec::record_of).collect()
    }

    async fn latest(
        &self,
        kinds: &[EventType],
        before: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<EventRecord>> {
        let Some(limit) = crate::store::shared::error::as_limit(limit) else {
            return Ok(Vec::new());
        };
        if kinds.is_empty() {
            return Ok(Vec::new());
        }
        let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        let mut filter = doc! { "type": { "$in": names } };
        if let Some(before) = before {
            filter.insert("_id", doc! { "$lt": before });
        }
        let docs: Vec<Document> = self
            .events
            .find(filter)
            .sort(doc! { "_id": -1 })
            .limit(limit)
            .await?
            .try_collect()
            .await?;
        docs.iter().map(codec::record_of).collect()
    }

    fn committed(&self, kinds: &[EventType]) -> BoxStream<'static, EventRecord> {
        let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        let filter = doc! { "fullDocument.type": { "$in": names } };
        inserted(self.watched.clone(), filter, "events", codec::record_of)
    }
}

/// The event `new` announces, made as `comment`.
pub(crate) fn announced(
    new: &crate::domain::NewComment,
    comment: &crate::domain::Comment,
) -> Vec<Event> {
    new.announce.iter().map(|a| a.event(comment)).collect()
}

/// A new event id: the commit clock's microseconds `at`, then 8 random characters.
fn new_id(at: Micros) -> String {
    format!(
        "{:016}{}",
        at.0.max(0),
        crate::domain::SlugPart::generate().as_str()
    )
}
