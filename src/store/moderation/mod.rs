//! Moderation's own collections, none sharded (see `shard::UNSHARDED`): held comments and the
//! moderator queues (`held`), and here:
//!
//! * `bans`: one document per banned user, `_id` the user id, so a ban check is one `find` by
//!   `_id`. Each process keeps what it read of a user's ban state, present or absent, for
//!   [`BAN_STATE_LIFETIME`] (at most [`BANS_KEPT`] users): a ban made through another process
//!   applies here within that time, and a ban or unban made through this one at once.
//! * `moderators`: the ids of moderator tokens that have made a mutation (the ones `banUser`
//!   refuses), written once per process and moderator.
//! * `moderation_log`: one document per recorded action, `_id` its number from 1. The numbers
//!   come from the `counters` document `moderation_log` (`seq`, the last number given), so a
//!   page of the log is a range of `_id` of a width known before the read, at any cursor and
//!   at either end; nothing is skipped and no read is cut short by a limit. An entry whose
//!   number was taken but that was never written (a failure between the two commands) leaves a
//!   gap, which a page reads past.
//! * `reserved_names` (`names`): the display names moderators reserved.

pub(crate) mod held;
pub(crate) mod names;

use std::collections::{HashMap, HashSet};
use std::future::IntoFuture;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, Document};
use mongodb::options::ReturnDocument;
use mongodb::Database;

use crate::domain::moderation::{Ban, LogEntry, Logged, ModerationAction, Reason, UserId};
use crate::domain::paging::{Cursor, Span};
use crate::domain::Event;
use crate::domain::{Author, DiscussionId, GuestIds, Micros, Page, Slug, Window};
use crate::store::api::ModerationStore;
use crate::store::events::EventLog;
use crate::store::shared::authors::{rename_ids, Rewritten};
use crate::store::shared::bson::{as_i64, corrupt, to_count};
use crate::store::shared::bson::{author_doc, author_of, micros_of, string_of};
use crate::store::shared::error::{is_duplicate_key, StoreError, StoreResult};
use crate::store::shared::metrics::{CommandCounter, Counted};

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

    /// Whether this process has recorded the moderator with this id.
    fn is_recorded(&self, id: &str) -> bool {
        self.recorded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(id)
    }

    /// The number of the latest log entry (0 before the first).
    async fn last_number(&self) -> StoreResult<u64> {
        let counter = self.counters.find_one(doc! { "_id": LOG_COUNTER }).await?;
        Ok(counter
            .as_ref()
            .and_then(|c| c.get("seq"))
            .and_then(as_i64)
            .map_or(0, to_count))
    }

    /// Renames the banned users whose ids `ids` keys (see `authors::rename_ids`).
    pub(crate) async fn rename_banned(&self, ids: &GuestIds) -> StoreResult<Rewritten> {
        rename_ids(&self.bans, ids).await
    }

    /// Keys the users of log entries whose ids `ids` keys, reading the log in ranges of
    /// [`LOG_BATCH`] entry numbers; each entry is changed on condition that it still names the
    /// user read.
    pub(crate) async fn rename_logged_users(&self, ids: &GuestIds) -> StoreResult<Rewritten> {
        let last = i64::try_from(self.last_number().await?).unwrap_or(i64::MAX);
        let mut done = Rewritten::default();
        let mut from = 1_i64;
        while from <= last {
            let to = from.saturating_add(LOG_BATCH - 1);
            let filter = doc! { "_id": { "$gte": from, "$lte": to } };
            let entries: Vec<Document> = self
                .log
                .find(filter)
                .projection(doc! { "user_id": 1 })
                .await?
                .try_collect()
                .await?;
            for entry in entries {
                let (Some(number), Ok(user)) = (entry.get("_id"), entry.get_str("user_id")) else {
                    continue;
                };
                let Some(new) = ids.keyed(user) else {
                    continue;
                };
                let changed = self
                    .log
                    .update_one(
                        doc! { "_id": number.clone(), "user_id": user },
                        doc! { "$set": { "user_id": new } },
                    )
                    .await?;
                match changed.modified_count {
                    1 => {
                        done.documents += 1;
                        done.ids += 1;
                    }
                    _ => done.missed += 1,
                }
            }
            from = to.saturating_add(1);
        }
        Ok(done)
    }

    /// The entries at the positions of `span` (position `p` is entry `p + 1`), in order; fewer
    /// where numbers were never written.
    async fn entries(&self, span: Span) -> StoreResult<Vec<LogEntry>> {
        if span.count == 0 {
            return Ok(Vec::new());
        }
        let number = |position: u64| i64::try_from(position.saturating_add(1)).unwrap_or(i64::MAX);
        let filter = doc! { "_id": {
            "$gte": number(span.from),
            "$lte": number(span.end().saturating_sub(1)),
        } };
        let docs: Vec<Document> = self
            .log
            .find(filter)
            .sort(doc! { "_id": 1 })
            .await?
            .try_collect()
            .await?;
        docs.iter().map(entry_of).collect()
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

/// The stored form of a ban.
fn ban_doc(ban: &Ban) -> Document {
    let mut doc = doc! {
        "_id": ban.user.as_str(),
        "by": author_doc(&ban.by),
        "at": ban.at.0,
    };
    if let Some(until) = ban.until {
        doc.insert("until", until.0);
    }
    if let Some(reason) = &ban.reason {
        doc.insert("reason", reason.as_str());
    }
    doc
}

fn ban_of(doc: &Document) -> StoreResult<Ban> {
    let corrupt_ban = |e: StoreError| corrupt(format!("a ban: {e}"));
    Ok(Ban {
        user: UserId::from_stored(
            doc.get_str("_id")
                .map_err(|_| corrupt("a ban without a user id"))?
                .to_owned(),
        ),
        until: micros_of(doc, "until").map_err(corrupt_ban)?,
        reason: string_of(doc, "reason")
            .map_err(corrupt_ban)?
            .map(Reason::from_stored),
        by: author_of(doc, "by").map_err(corrupt_ban)?,
        at: micros_of(doc, "at")
            .map_err(corrupt_ban)?
            .ok_or_else(|| corrupt("a ban without its time"))?,
    })
}

/// The stored form of a log entry numbered `seq`.
fn entry_doc(seq: i64, logged: &Logged) -> Document {
    let mut doc = doc! {
        "_id": seq,
        "at": logged.at.0,
        "moderator": author_doc(&logged.moderator),
        "action": logged.action.as_str(),
    };
    let optional = [
        (
            "discussion_id",
            logged.discussion.as_ref().map(|d| d.as_str()),
        ),
        ("slug", logged.slug.as_ref().map(|s| s.as_str())),
        ("user_id", logged.user.as_ref().map(|u| u.as_str())),
        ("reason", logged.reason.as_ref().map(|r| r.as_str())),
        ("detail", logged.detail.as_deref()),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            doc.insert(key, value);
        }
    }
    doc
}

fn entry_of(doc: &Document) -> StoreResult<LogEntry> {
    let seq = doc
        .get("_id")
        .and_then(as_i64)
        .ok_or_else(|| corrupt("a log entry without its number"))?;
    let action = doc.get_str("action").unwrap_or_default();
    let bad = |e: String| corrupt(format!("log entry {seq}: {e}"));
    let logged = Logged {
        at: micros_of(doc, "at")
            .map_err(|e| bad(e.to_string()))?
            .ok_or_else(|| bad("no time".into()))?,
        moderator: author_of(doc, "moderator").map_err(|e| bad(e.to_string()))?,
        action: ModerationAction::from_stored(action)
            .ok_or_else(|| bad(format!("unknown action {action:?}")))?,
        discussion: string_of(doc, "discussion_id")
            .map_err(|e| bad(e.to_string()))?
            .map(|id| DiscussionId::parse(&id))
            .transpose()
            .map_err(|e| bad(e.to_string()))?,
        slug: string_of(doc, "slug")
            .map_err(|e| bad(e.to_string()))?
            .map(|slug| Slug::parse(&slug))
            .transpose()
            .map_err(|e| bad(e.to_string()))?,
        user: string_of(doc, "user_id")
            .map_err(|e| bad(e.to_string()))?
            .map(UserId::from_stored),
        reason: string_of(doc, "reason")
            .map_err(|e| bad(e.to_string()))?
            .map(Reason::from_stored),
        detail: string_of(doc, "detail").map_err(|e| bad(e.to_string()))?,
    };
    Ok(LogEntry {
        seq: to_count(seq),
        logged,
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
        let (stored, bans) = (ban_doc(ban), &self.bans);
        self.events
            .atomically(|mut session| {
                let stored = stored.clone();
                async move {
                    let replaced = bans
                        .replace_one(
                            doc! { "_id": stored.get_str("_id").unwrap_or_default() },
                            &stored,
                        )
                        .upsert(true)
                        .session(&mut session)
                        .await;
                    (
                        session,
                        replaced.map(|_| ((), events.to_vec())).map_err(Into::into),
                    )
                }
            })
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
        let bans = &self.bans;
        let removed = self
            .events
            .atomically(|mut session| async move {
                let removed = bans
                    .find_one_and_delete(doc! { "_id": user.as_str() })
                    .session(&mut session)
                    .await;
                let ban = match removed {
                    Ok(removed) => removed.as_ref().map(ban_of).transpose(),
                    Err(err) => Err(err.into()),
                };
                let told = ban.map(|ban| {
                    let events = ban.as_ref().map(announce).unwrap_or_default();
                    (ban, events)
                });
                (session, told)
            })
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

    async fn record(&self, logged: Logged) -> StoreResult<LogEntry> {
        // The counter is made by the first entry, by an insert: racing upserts of a document not
        // there yet can fail on its `_id`, or (on the development database) take a number and
        // answer with no document.
        let mut counter = None;
        for _ in 0..COUNTER_TRIES {
            counter = self
                .counters
                .find_one_and_update(
                    doc! { "_id": LOG_COUNTER },
                    doc! { "$inc": { "seq": 1_i64 } },
                )
                .return_document(ReturnDocument::After)
                .await?;
            if counter.is_some() {
                break;
            }
            let made = self
                .counters
                .insert_one(doc! { "_id": LOG_COUNTER, "seq": 0_i64 })
                .await;
            match made {
                Err(err) if !is_duplicate_key(&err) => return Err(err.into()),
                _ => {}
            }
        }
        let counter = counter.ok_or_else(|| {
            StoreError::Exhausted(format!(
                "the moderation log's counter returned no number in {COUNTER_TRIES} tries"
            ))
        })?;
        let seq = counter
            .get("seq")
            .and_then(as_i64)
            .ok_or_else(|| corrupt("the log counter is not a number"))?;
        self.log.insert_one(entry_doc(seq, &logged)).await?;
        Ok(LogEntry {
            seq: to_count(seq),
            logged,
        })
    }

    async fn log_page(&self, window: &Window) -> StoreResult<Page<LogEntry>> {
        let at = match window.cursor() {
            None => None,
            Some(Cursor::Log(seq)) => Some(seq.saturating_sub(1)),
            Some(_) => {
                return Err(StoreError::Unsupported(
                    "a cursor of another list cannot page the moderation log".into(),
                ))
            }
        };
        let mut last = None;
        if matches!(window, Window::FromEnd { .. }) {
            last = Some(self.last_number().await?);
        }
        let span = window
            .span(last, at)
            .ok_or_else(|| StoreError::Unsupported("a window the log cannot read".into()))?;
        let more = window.more();
        let mut items = self.entries(span).await?;
        let mut read = span;
        // Numbers taken but never written leave gaps: read on past them, in the window's
        // direction, each time twice as far, until the page is full or the log ends.
        let mut width = more;
        while (items.len() as u64) < more {
            width = width.saturating_mul(2);
            if window.is_backward() {
                if read.from == 0 {
                    break;
                }
                // Nothing lies past the log's end: from a cursor beyond it, read from the end.
                if last.is_none() {
                    let end = *last.insert(self.last_number().await?);
                    if read.from > end {
                        read = Span {
                            from: end,
                            count: 0,
                        };
                        width = more;
                    }
                }
                let from = read.from.saturating_sub(width);
                let next = Span {
                    from,
                    count: read.from - from,
                };
                let mut earlier = self.entries(next).await?;
                earlier.append(&mut items);
                items = earlier;
                read = Span {
                    from,
                    count: read.count + next.count,
                };
            } else {
                let end = match last {
                    Some(end) => end,
                    None => *last.insert(self.last_number().await?),
                };
                if read.end() >= end {
                    break;
                }
                let next = Span {
                    from: read.end(),
                    count: width,
                };
                items.extend(self.entries(next).await?);
                read.count = read.count.saturating_add(width);
            }
        }
        Ok(window.page(items))
    }
}
