//! Moderation's own collections, none sharded (see `shard::UNSHARDED`): held comments and the
//! moderator queues (`held`), and here:
//!
//! * `bans`: one document per banned user, `_id` the user id, so a ban check is one `find` by
//!   `_id`; the list of current bans is one range of `{at, _id}`, newest first. Each process keeps what it read of a user's ban state, present or absent, for
//!   [`BAN_STATE_LIFETIME`] (at most [`BANS_KEPT`] users): a ban made through another process
//!   applies here within that time, and a ban or unban made through this one at once.
//! * `moderators`: the ids of moderator tokens that have made a mutation (the ones `banUser`
//!   refuses), written once per process and moderator.
//! * `moderation_log` (`log`): one document per recorded action, numbered.
//! * `reserved_names` (`names`): the display names moderators reserved.

mod codec;
pub(crate) mod held;
mod log;
pub(crate) mod names;
pub(crate) mod reports;

use std::collections::{HashMap, HashSet};
use std::future::IntoFuture;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, Document};
use mongodb::Database;

use crate::domain::moderation::{Ban, LogEntry, LogFilter, Logged, Reason, UserId};
use crate::domain::paging::Cursor;
use crate::domain::Event;
use crate::domain::{Author, GuestIds, Micros, Page, Window};
use crate::store::api::ModerationStore;
use crate::store::events::EventLog;
use crate::store::shared::authors::{rename_ids, Rewritten};
use crate::store::shared::bson::corrupt;
use crate::store::shared::bson::{author_doc, author_of, micros_of, string_of};
use crate::store::shared::connect::index_model;
use crate::store::shared::error::{is_duplicate_key, StoreError, StoreResult};
use crate::store::shared::metrics::{CommandCounter, Counted};
use crate::store::shared::order::{before_filter, limit_plus_one};

/// How long a process trusts what it read of a user's ban state: a ban made through another
/// process applies here at most this long after it was stored.
pub const BAN_STATE_LIFETIME: Duration = Duration::from_secs(5);

/// Users whose ban state a process keeps at most (past this, it forgets what is out of date,
/// and then everything).
pub const BANS_KEPT: usize = 100_000;

/// Moderator ids a process remembers having recorded (past this, it starts over).
const MODERATORS_KEPT: usize = 10_000;

/// Tries to take a log entry's number (the first entry needs two: the counter is made between).
const COUNTER_TRIES: usize = 3;

/// Log entries read per command by a rewrite of user ids.
const LOG_BATCH: i64 = 1_000;

/// The `counters` document that numbers the log's entries.
const LOG_COUNTER: &str = "moderation_log";

/// Bans, moderators and the moderation log.
pub(crate) struct Moderation {
    bans: Counted<Document>,
    moderators: Counted<Document>,
    log: Counted<Document>,
    counters: Counted<Document>,
    known: BanStates,
    /// Moderators this process has recorded.
    recorded: Mutex<HashSet<String>>,
    /// The event log, which bans join in their transaction.
    events: EventLog,
}

impl Moderation {
    /// The collection of bans.
    pub(crate) const BANS: &'static str = "bans";
    /// The collection of moderators seen acting.
    pub(crate) const MODERATORS: &'static str = "moderators";
    /// The collection of log entries.
    pub(crate) const LOG: &'static str = "moderation_log";
    /// The collection of counters (the log's numbers).
    pub(crate) const COUNTERS: &'static str = "counters";

    pub(crate) fn new(db: &Database, commands: &CommandCounter, events: EventLog) -> Self {
        Self {
            events,
            bans: Counted::new(db, Self::BANS, commands),
            moderators: Counted::new(db, Self::MODERATORS, commands),
            log: Counted::new(db, Self::LOG, commands),
            counters: Counted::new(db, Self::COUNTERS, commands),
            known: BanStates::default(),
            recorded: Mutex::default(),
        }
    }

    /// The indexes of the moderation log's filtered pages and of the list of bans.
    pub(crate) async fn ensure_indexes(&self) -> StoreResult<()> {
        self.ensure_log_indexes().await?;
        self.bans
            .create_index(index_model("newest", doc! { "at": -1, "_id": -1 }, false))
            .await?;
        Ok(())
    }

    /// A page of the bans in force at `now`, newest first, after `after`: one range of
    /// `{at, _id}` cut by a limit (expired bans, kept until lifted, are passed over).
    async fn current_bans(
        &self,
        after: Option<&Cursor>,
        limit: usize,
        now: Micros,
    ) -> StoreResult<Page<Ban>> {
        let mut filter = doc! { "$or": [
            { "until": { "$exists": false } },
            { "until": { "$gt": now.0 } },
        ] };
        if let Some(cursor) = after {
            filter = doc! { "$and": [filter, before_filter(cursor)] };
        }
        let docs: Vec<Document> = self
            .bans
            .find(filter)
            .sort(doc! { "at": -1, "_id": -1 })
            .limit(limit_plus_one(limit))
            .await?
            .try_collect()
            .await?;
        let bans = docs.iter().map(ban_of).collect::<StoreResult<Vec<_>>>()?;
        Ok(Page::from_overfetch(bans, limit))
    }

    /// Whether this process has recorded the moderator with this id.
    fn is_recorded(&self, id: &str) -> bool {
        self.recorded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(id)
    }

    /// Renames the banned users whose ids `ids` keys (see `authors::rename_ids`).
    pub(crate) async fn rename_banned(&self, ids: &GuestIds) -> StoreResult<Rewritten> {
        rename_ids(&self.bans, ids).await
    }
}

/// What a process knows of users' ban states, each as read at a time.
#[derive(Default)]
struct BanStates {
    users: Mutex<HashMap<String, Known>>,
}

/// A user's ban state (`None`: not banned) and when it was read.
#[derive(Clone)]
struct Known {
    read: Instant,
    ban: Option<Arc<Ban>>,
}

impl BanStates {
    /// The state read less than [`BAN_STATE_LIFETIME`] ago, if there is one.
    fn fresh(&self, user: &str) -> Option<Known> {
        let users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        users
            .get(user)
            .filter(|known| known.read.elapsed() < BAN_STATE_LIFETIME)
            .cloned()
    }

    /// Keeps a state whose read began at `read`, unless one read (or written) later is kept.
    fn keep(&self, user: &str, read: Instant, ban: Option<Arc<Ban>>) {
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        if users.get(user).is_some_and(|known| known.read > read) {
            return;
        }
        if users.len() >= BANS_KEPT && !users.contains_key(user) {
            users.retain(|_, known| known.read.elapsed() < BAN_STATE_LIFETIME);
            if users.len() >= BANS_KEPT {
                users.clear();
            }
        }
        users.insert(user.to_owned(), Known { read, ban });
    }
}

/// Runs an upsert by `_id`, and once more when a concurrent upsert of the same `_id` inserted
/// the document first (two upserts racing to insert can meet a duplicate-key error; the second
/// try finds the document and updates it).
async fn upserted<T, F, U>(upsert: F) -> StoreResult<T>
where
    F: Fn() -> U,
    U: IntoFuture<Output = Result<T, mongodb::error::Error>>,
{
    match upsert().await {
        Err(err) if is_duplicate_key(&err) => Ok(upsert().await?),
        other => Ok(other?),
    }
}

/// What every kind of ban stores beside its `_id` (a user's, a network's): who, when, until
/// when, why.
pub(crate) struct BanTerms {
    pub until: Option<Micros>,
    pub reason: Option<Reason>,
    pub by: Author,
    pub at: Micros,
}

impl BanTerms {
    /// The stored ban: `_id` and the terms.
    pub(crate) fn to_doc(&self, id: &str) -> Document {
        let mut doc = doc! { "_id": id, "by": author_doc(&self.by), "at": self.at.0 };
        if let Some(until) = self.until {
            doc.insert("until", until.0);
        }
        if let Some(reason) = &self.reason {
            doc.insert("reason", reason.as_str());
        }
        doc
    }

    /// The `_id` and the terms of a stored ban (`what` names the kind, in errors).
    pub(crate) fn of<'d>(doc: &'d Document, what: &str) -> StoreResult<(&'d str, BanTerms)> {
        let corrupt_ban = |e: StoreError| corrupt(format!("{what}: {e}"));
        let id = doc
            .get_str("_id")
            .map_err(|_| corrupt(format!("{what} without its `_id`")))?;
        let terms = BanTerms {
            until: micros_of(doc, "until").map_err(corrupt_ban)?,
            reason: string_of(doc, "reason")
                .map_err(corrupt_ban)?
                .map(Reason::from_stored),
            by: author_of(doc, "by").map_err(corrupt_ban)?,
            at: micros_of(doc, "at")
                .map_err(corrupt_ban)?
                .ok_or_else(|| corrupt(format!("{what} without its time")))?,
        };
        Ok((id, terms))
    }
}

/// The stored form of a ban.
fn ban_doc(ban: &Ban) -> Document {
    let terms = BanTerms {
        until: ban.until,
        reason: ban.reason.clone(),
        by: ban.by.clone(),
        at: ban.at,
    };
    terms.to_doc(ban.user.as_str())
}

fn ban_of(doc: &Document) -> StoreResult<Ban> {
    let (user, terms) = BanTerms::of(doc, "a ban")?;
    Ok(Ban {
        user: UserId::from_stored(user.to_owned()),
        until: terms.until,
        reason: terms.reason,
        by: terms.by,
        at: terms.at,
    })
}

#[async_trait]
impl ModerationStore for Moderation {
    async fn ban_of(&self, user: &str) -> StoreResult<Option<Arc<Ban>>> {
        if let Some(known) = self.known.fresh(user) {
            return Ok(known.ban);
        }
        // An id no ban can name (see `UserId`) is never banned: nothing to read.
        if UserId::parse(user).is_err() {
            return Ok(None);
        }
        let read = Instant::now();
        let found = self.bans.find_one(doc! { "_id": user }).await?;
        let ban = found.as_ref().map(ban_of).transpose()?.map(Arc::new);
        self.known.keep(user, read, ban.clone());
        Ok(ban)
    }

    async fn ban(&self, ban: &Ban, events: &[Event]) -> StoreResult<()> {
        self.events
            .replace_with(&self.bans, ban.user.as_str(), &ban_doc(ban), events)
            .await?;
        self.known.keep(
            ban.user.as_str(),
            Instant::now(),
            Some(Arc::new(ban.clone())),
        );
        Ok(())
    }

    async fn unban(
        &self,
        user: &UserId,
        announce: &(dyn for<'b> Fn(&'b Ban) -> Vec<Event> + Send + Sync),
    ) -> StoreResult<Option<Ban>> {
        let removed = self
            .events
            .remove_with(&self.bans, user.as_str(), &ban_of, announce)
            .await?;
        self.known.keep(user.as_str(), Instant::now(), None);
        Ok(removed)
    }

    async fn moderator_acted(&self, moderator: &Author) -> StoreResult<()> {
        if self.is_recorded(&moderator.id) {
            return Ok(());
        }
        // Counted once stored: a request dropped before that leaves it to the next action.
        let update = doc! {
            "$set": { "name": &moderator.name },
            "$setOnInsert": { "since": Micros::now().0 },
        };
        upserted(|| {
            self.moderators
                .update_one(doc! { "_id": &moderator.id }, update.clone())
                .upsert(true)
        })
        .await?;
        let mut recorded = self.recorded.lock().unwrap_or_else(|p| p.into_inner());
        if recorded.len() >= MODERATORS_KEPT {
            recorded.clear();
        }
        recorded.insert(moderator.id.clone());
        Ok(())
    }

    async fn record(&self, logged: Logged) -> StoreResult<LogEntry> {
        self.record_entry(logged).await
    }

    async fn log_page(&self, window: &Window, filter: &LogFilter) -> StoreResult<Page<LogEntry>> {
        match filter.is_empty() {
            true => self.numbered_page(window).await,
            false => self.filtered_page(window, filter).await,
        }
    }

    async fn bans_page(
        &self,
        after: Option<&Cursor>,
        limit: usize,
        now: Micros,
    ) -> StoreResult<Page<Ban>> {
        self.current_bans(after, limit, now).await
    }

    async fn is_moderator(&self, user: &UserId) -> StoreResult<bool> {
        if self.is_recorded(user.as_str()) {
            return Ok(true);
        }
        let found = self
            .moderators
            .find_one(doc! { "_id": user.as_str() })
            .await?;
        Ok(found.is_some())
    }
}
