//! The moderation log: one document per recorded action, `_id` its number from 1. The numbers
//! come from the `counters` document `moderation_log` (`seq`, the last number given), so a page
//! of the whole log is a range of `_id` of a width known before the read, at any cursor and at
//! either end; nothing is skipped and no read is cut short by a limit. An entry whose number was
//! taken but that was never written (a failure between the two commands) leaves a gap, which a
//! page reads past. A page of one action's or one moderator's entries is an index range
//! (`{action, _id}`, `{moderator.id, _id}`) from the cursor, cut by a limit: bounded where the
//! database stops a scan at its limit (MongoDB), the whole range before the cursor otherwise.

use futures::TryStreamExt;
use mongodb::bson::{doc, Document};
use mongodb::options::ReturnDocument;

use super::{Moderation, COUNTER_TRIES, LOG_BATCH, LOG_COUNTER};
use crate::domain::moderation::{LogEntry, LogFilter, Logged, ModerationAction, Reason, UserId};
use crate::domain::paging::{Cursor, Span};
use crate::domain::{DiscussionId, GuestIds, Page, Slug, Window};
use crate::store::shared::authors::Rewritten;
use crate::store::shared::bson::{as_i64, corrupt, to_count};
use crate::store::shared::bson::{author_doc, author_of, micros_of, string_of};
use crate::store::shared::connect::index_model;
use crate::store::shared::error::{is_duplicate_key, StoreError, StoreResult};
use crate::store::shared::order::limit_plus_one;

impl Moderation {
    /// The number of the latest log entry (0 before the first).
    async fn last_number(&self) -> StoreResult<u64> {
        let counter = self.counters.find_one(doc! { "_id": LOG_COUNTER }).await?;
        Ok(counter
            .as_ref()
            .and_then(|c| c.get("seq"))
            .and_then(as_i64)
            .map_or(0, to_count))
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

    pub(super) async fn record_entry(&self, logged: Logged) -> StoreResult<LogEntry> {
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

    pub(super) async fn numbered_page(&self, window: &Window) -> StoreResult<Page<LogEntry>> {
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

    /// One page of the entries `filter` keeps, in stored order: the newest first page, or the
    /// entries before a cursor (the API lists the log newest first, so these are its forward
    /// pages). Other windows are `Unsupported`.
    pub(super) async fn filtered_page(
        &self,
        window: &Window,
        filter: &LogFilter,
    ) -> StoreResult<Page<LogEntry>> {
        let (before, limit) = match window {
            Window::FromEnd { skip: 0, limit } => (None, *limit),
            Window::Before {
                cursor: Cursor::Log(seq),
                limit,
            } => (Some(*seq), *limit),
            _ => {
                return Err(StoreError::Unsupported(
                    "a filtered moderation log pages newest first only: `first` and `after`".into(),
                ))
            }
        };
        let mut query = Document::new();
        if let Some(action) = filter.action {
            query.insert("action", action.as_str());
        }
        if let Some(moderator) = &filter.moderator {
            query.insert("moderator.id", moderator.as_str());
        }
        if let Some(seq) = before {
            query.insert(
                "_id",
                doc! { "$lt": i64::try_from(seq).unwrap_or(i64::MAX) },
            );
        }
        let docs: Vec<Document> = self
            .log
            .find(query)
            .sort(doc! { "_id": -1 })
            .limit(limit_plus_one(limit))
            .await?
            .try_collect()
            .await?;
        let mut items = docs.iter().map(entry_of).collect::<StoreResult<Vec<_>>>()?;
        items.reverse();
        Ok(window.page(items))
    }

    /// The log's indexes for filtered pages (its numbered pages read `_id`).
    pub(super) async fn ensure_log_indexes(&self) -> StoreResult<()> {
        self.log
            .create_indexes([
                index_model("by_action", doc! { "action": 1, "_id": 1 }, false),
                index_model("by_moderator", doc! { "moderator.id": 1, "_id": 1 }, false),
            ])
            .await?;
        Ok(())
    }
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
