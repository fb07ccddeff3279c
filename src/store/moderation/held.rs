//! Held comments and the moderator queues. A comment held before it was ever public (PRE,
//! PRE_FIRST, a listed word) lives outside every layout, in one collection shared by the three
//! (`held_comments`), so public reads never meet it and every layout's counts and bounds stay as
//! they are; publishing it is a post (see `approveComment`): it then appears at its approval time.
//! The same collection holds one small entry per public comment waiting for a moderator
//! (reported, held by reports, or rejected in place: `public: true`, the comment itself stays in
//! its layout), so that each queue is one index range, oldest first, across the service or in
//! one discussion. `reports` keeps one document per reporter and comment (a repeat is a no-op),
//! and `people` counts, per author, the comments a moderator approved (an author with one is
//! trusted by `PRE_FIRST`) or rejected and the reports counted against them.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongodb::options::ReturnDocument;
use mongodb::Database;

use super::codec::{entry_of, from_doc, key, report_key, to_doc};
use crate::domain::paging::Cursor;
use crate::domain::slug::MonotonicClock;
use crate::domain::GuestIds;
use crate::domain::{
    Comment, CommentStatus, DiscussionId, Event, FullSlug, Held, Micros, NewComment, Placement,
    Queue, Slug, SlugPart, Standing,
};
use crate::store::api::{Claim, HeldStore, QueueEntry, Report, Tallies, Tally};
use crate::store::events::{announced, EventLog};
use crate::store::shared::authored::{join, ByAuthor};
use crate::store::shared::authors::{rename_ids, Rewritten};
use crate::store::shared::connect::index_model;
use crate::store::shared::error::{is_duplicate_key, StoreResult};
use crate::store::shared::metrics::{CommandCounter, Counted};
use crate::store::shared::numbers;
use crate::store::shared::order::{after_filter, limit_plus_one};

/// The collection of held comments and queue entries.
pub(crate) const COLLECTION: &str = "held_comments";
/// The collection of per-person moderation facts.
pub(crate) const PEOPLE: &str = "people";

/// A held comment's key among its author's comments (`shared::numbers`).
const AUTHOR_KEY: &str = "author.k";
/// The collection of reports, one per reporter and comment.
pub(crate) const REPORTS: &str = "reports";
/// Rounds of [`HeldStore::enqueue`] against concurrent writers of the same entry.
const ENQUEUE_ROUNDS: usize = 4;
/// Trusted people a process remembers (past this, it starts over; trust is never withdrawn).
const TRUSTED: usize = 100_000;

/// The held document's field that says since when an approval has claimed it (microseconds).
const PUBLISHING: &str = "publishing";

/// The MongoDB held-comments store.
pub(crate) struct HeldComments {
    coll: Counted<Document>,
    people: Counted<Document>,
    reports: Counted<Document>,
    clock: Arc<MonotonicClock>,
    max_depth: usize,
    trusted: Mutex<HashSet<String>>,
    log: EventLog,
    /// The read cache, which a discussion's placeholders are read through.
    cache: Option<Arc<crate::store::cache::ReadCache>>,
}

/// The filter of a queue, in one discussion or all.
fn queue_filter(queue: Queue, discussion: Option<&DiscussionId>) -> Document {
    let mut filter = doc! {};
    if let Some(discussion) = discussion {
        filter.insert("discussion_id", discussion.as_str());
    }
    filter.insert("status", queue.as_str());
    filter
}

impl HeldComments {
    /// The `people` collection, which holds the authors' counters (`shared::numbers`).
    pub(crate) fn people(&self) -> &Counted<Document> {
        &self.people
    }

    pub(crate) fn new(
        db: &Database,
        commands: &CommandCounter,
        clock: Arc<MonotonicClock>,
        max_depth: usize,
        log: EventLog,
    ) -> Self {
        Self {
            log,
            coll: Counted::new(db, COLLECTION, commands),
            people: Counted::new(db, PEOPLE, commands),
            reports: Counted::new(db, REPORTS, commands),
            clock,
            max_depth,
            trusted: Mutex::default(),
            cache: None,
        }
    }

    /// Reads a discussion's placeholders through `cache` (the pages they are left out of are
    /// cached there too; every change of them is a change of their discussion).
    pub(crate) fn read_through(&mut self, cache: Arc<crate::store::cache::ReadCache>) {
        self.cache = Some(cache);
    }

    async fn placeholders_stored(&self, discussion: &DiscussionId) -> StoreResult<Vec<Slug>> {
        let statuses = [Queue::Pending.as_str(), Queue::Rejected.as_str()];
        let found: Vec<Document> = self
            .coll
            .find(doc! {
                "discussion_id": discussion.as_str(),
                "status": { "$in": statuses.as_slice() },
                "public": true,
            })
            .projection(doc! { "slug": 1 })
            .await?
            .try_collect()
            .await?;
        Ok(found
            .iter()
            .filter_map(|d| d.get_str("slug").ok())
            .map(|slug| Slug::from_stored(slug.to_owned()))
            .collect())
    }

    /// The collection of reports.
    pub(super) fn reports_collection(&self) -> &Counted<Document> {
        &self.reports
    }

    /// The queue indexes: oldest first, across the service or in one discussion.
    pub(crate) async fn ensure_indexes(&self) -> StoreResult<()> {
        let all = index_model(
            "status_since_id",
            doc! { "status": 1, "since": 1, "_id": 1 },
            false,
        );
        self.coll.create_index(all).await?;
        let one = index_model(
            "discussion_status_since_id",
            doc! { "discussion_id": 1, "status": 1, "since": 1, "_id": 1 },
            false,
        );
        self.coll.create_index(one).await?;
        let numbered = index_model("author_number", doc! { AUTHOR_KEY: 1 }, false);
        self.coll.create_index(numbered).await?;
        // An earlier version's index of an author's held comments, by id.
        self.coll.retire_index("author_submitted").await;
        Ok(())
    }

    /// The stages that give, from the seed, the held comments of the keys asked for, as items:
    /// one equality of the `author_number` index per key (queue entries of public comments
    /// name no author).
    pub(crate) fn authored_branch() -> Vec<Document> {
        let mut stages = join(COLLECTION, AUTHOR_KEY, "h").to_vec();
        stages.push(ByAuthor::item(
            "$h.discussion_id",
            &format!("$h.{AUTHOR_KEY}"),
            "$h.slug",
            "$h",
        ));
        stages
    }

    /// The held comments stored before comments were numbered (`shared::numbers_backfill`;
    /// queue entries of public comments name no author): the collection and the filter.
    pub(crate) fn unnumbered(&self) -> (&Counted<Document>, Document) {
        let filter = doc! { "author.id": { "$exists": true }, AUTHOR_KEY: { "$exists": false } };
        (&self.coll, filter)
    }

    /// A held comment as an author's history gives it (its stored document).
    pub(crate) fn authored_of(doc: &Document) -> StoreResult<Held> {
        from_doc(doc)
    }

    /// The held comments and queue entries of a discussion (their `_id` starts with it): the
    /// collection and the filter, for a rewrite of stored author ids.
    pub(crate) fn documents_of(&self, id: &DiscussionId) -> (&Counted<Document>, Document) {
        let filter = doc! { "_id": { "$gte": format!("{id}:"), "$lt": format!("{id};") } };
        (&self.coll, filter)
    }

    /// Renames the trusted people whose ids `ids` keys (see `authors::rename_ids`).
    pub(crate) async fn rename_trusted(&self, ids: &GuestIds) -> StoreResult<Rewritten> {
        rename_ids(&self.people, ids).await
    }

    fn remember(&self, person: &str) {
        let mut trusted = self.trusted.lock().unwrap_or_else(|p| p.into_inner());
        if trusted.len() >= TRUSTED {
            trusted.clear();
        }
        trusted.insert(person.to_owned());
    }
}

#[async_trait]
impl HeldStore for HeldComments {
    async fn hold(
        &self,
        discussion: &DiscussionId,
        parent: Option<(&Slug, &FullSlug)>,
        new: &NewComment,
        standing: Standing,
    ) -> StoreResult<Held> {
        let submitted = self.clock.now();
        let part = SlugPart::generate();
        let placement = Placement::new(parent, self.max_depth, submitted, &part);
        let mut comment = placement.into_comment(discussion.clone(), submitted, new);
        comment.reply_count = 0;
        comment.standing = standing;
        let drawn = numbers::ensure(&self.people, &mut comment.number, &comment.author).await?;
        let held = Held { comment };
        let (stored, events) = (to_doc(&held), announced(new, &held.comment));
        let coll = &self.coll;
        let written = self
            .log
            .atomically(|mut session| {
                let (stored, events) = (stored.clone(), events.clone());
                async move {
                    let inserted = coll.insert_one(stored).session(&mut session).await;
                    (session, inserted.map(|_| ((), events)).map_err(Into::into))
                }
            })
            .await;
        numbers::settle(&self.people, written, drawn, &held.comment.author.id).await?;
        Ok(held)
    }

    async fn restore(&self, held: &Held) -> StoreResult<()> {
        let id = key(&held.comment.discussion_id, &held.comment.slug);
        let mut held = held.clone();
        if held.comment.number.is_none() {
            // A comment restored again keeps the number it was given the first time.
            let kept = self
                .coll
                .find_one(doc! { "_id": &id })
                .projection(doc! { "author": 1 })
                .await?;
            let number = kept
                .as_ref()
                .and_then(|d| d.get_document("author").ok())
                .and_then(|a| a.get_str(numbers::KEY).ok())
                .and_then(numbers::number_of);
            held.comment.number = match number {
                Some(n) => Some(n),
                None => Some(numbers::draw(&self.people, &held.comment.author.id, 1).await?),
            };
        }
        let doc = to_doc(&held);
        self.coll
            .replace_one(doc! { "_id": &id }, doc)
            .upsert(true)
            .await?;
        Ok(())
    }

    async fn held_in(
        &self,
        discussion: &DiscussionId,
        after: Option<&Slug>,
        limit: usize,
    ) -> StoreResult<Vec<Held>> {
        // Entries are keyed `<discussion>:<slug>`: the discussion's are the keys from its
        // prefix up to the prefix with `:` raised to `;`.
        let from = match after {
            Some(slug) => doc! { "$gt": key(discussion, slug) },
            None => doc! { "$gt": format!("{discussion}:") },
        };
        let mut range = from;
        range.insert("$lt", format!("{discussion};"));
        let found: Vec<Document> = self
            .coll
            .find(doc! { "_id": range, "discussion_id": discussion.as_str(), "public": { "$ne": true } })
            .sort(doc! { "_id": 1 })
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .await?
            .try_collect()
            .await?;
        found.iter().map(from_doc).collect()
    }

    async fn store_html(
        &self,
        discussion: &DiscussionId,
        slug: &Slug,
        text: &str,
        html: &str,
    ) -> StoreResult<bool> {
        let stored = self
            .coll
            .update_one(
                doc! {
                    "_id": key(discussion, slug),
                    "public": { "$ne": true },
                    "text": text,
                    "html": { "$exists": false },
                },
                doc! { "$set": { "html": html } },
            )
            .await?;
        Ok(stored.modified_count == 1)
    }

    async fn find(&self, discussion: &DiscussionId, slug: &Slug) -> StoreResult<Option<Held>> {
        let found = self
            .coll
            .find_one(doc! { "_id": key(discussion, slug), "public": { "$ne": true } })
            .await?;
        found.as_ref().map(from_doc).transpose()
    }

    async fn reject(
        &self,
        discussion: &DiscussionId,
        slug: &Slug,
        reason: Option<String>,
        announce: &(dyn for<'c> Fn(&'c Comment) -> Vec<Event> + Send + Sync),
    ) -> StoreResult<Option<(Held, bool)>> {
        let id = key(discussion, slug);
        let rejected = CommentStatus::Rejected.as_str();
        // A pending one enters the REJECTED queue now; a rejected one keeps its place there
        // and gets the new reason.
        let steps = [
            (
                doc! { "_id": &id, "public": { "$ne": true }, "status": { "$ne": rejected } },
                doc! { "$set": { "status": rejected, "reason": reason.as_deref(), "since": Micros::now().0 } },
            ),
            (
                doc! { "_id": &id, "public": { "$ne": true } },
                doc! { "$set": { "status": rejected, "reason": reason.as_deref() } },
            ),
        ];
        let coll = &self.coll;
        for (step, (filter, update)) in steps.into_iter().enumerate() {
            let rejected = self
                .log
                .atomically(|mut session| {
                    let (filter, update) = (filter.clone(), update.clone());
                    async move {
                        let after = coll
                            .find_one_and_update(filter, update)
                            .return_document(ReturnDocument::After)
                            .session(&mut session)
                            .await;
                        let held = match after {
                            Ok(Some(after)) => from_doc(&after).map(Some),
                            Ok(None) => Ok(None),
                            Err(err) => Err(err.into()),
                        };
                        let events = match &held {
                            Ok(Some(held)) => announce(&held.comment),
                            _ => Vec::new(),
                        };
                        let told = held.map(|held| (held, events));
                        (session, told)
                    }
                })
                .await?;
            if let Some(held) = rejected {
                return Ok(Some((held, step == 0)));
            }
        }
        Ok(None)
    }

    async fn remove(&self, discussion: &DiscussionId, slug: &Slug) -> StoreResult<bool> {
        let removed = self
            .coll
            .delete_many(doc! { "_id": key(discussion, slug) })
            .await?;
        Ok(removed.deleted_count > 0)
    }

    async fn claim(
        &self,
        discussion: &DiscussionId,
        slug: &Slug,
        lease: std::time::Duration,
    ) -> StoreResult<Claim> {
        let id = key(discussion, slug);
        let now = Micros::now().0;
        let lease = i64::try_from(lease.as_micros()).unwrap_or(i64::MAX);
        let claimed = self
            .coll
            .find_one_and_update(
                doc! { "_id": &id, "public": { "$ne": true }, "$or": [
                    { PUBLISHING: { "$exists": false } },
                    { PUBLISHING: { "$lt": now.saturating_sub(lease) } },
                ] },
                doc! { "$set": { PUBLISHING: now } },
            )
            .return_document(ReturnDocument::After)
            .await?;
        if let Some(doc) = claimed {
            return Ok(Claim::Claimed(Box::new(from_doc(&doc)?)));
        }
        let found = self
            .coll
            .find_one(doc! { "_id": &id, "public": { "$ne": true } })
            .await?;
        Ok(if found.is_some() {
            Claim::Busy
        } else {
            Claim::Gone
        })
    }

    async fn release(&self, discussion: &DiscussionId, slug: &Slug) -> StoreResult<()> {
        self.coll
            .update_one(
                doc! { "_id": key(discussion, slug), "public": { "$ne": true } },
                doc! { "$unset": { PUBLISHING: "" } },
            )
            .await?;
        Ok(())
    }

    async fn dismiss(&self, discussion: &DiscussionId, slug: &Slug) -> StoreResult<bool> {
        let filter = doc! {
            "_id": key(discussion, slug),
            "public": true,
            "status": Queue::Reported.as_str(),
        };
        Ok(self.coll.delete_many(filter).await?.deleted_count > 0)
    }

    async fn enqueue(
        &self,
        discussion: &DiscussionId,
        slug: &Slug,
        queue: Queue,
        at: Micros,
    ) -> StoreResult<()> {
        let id = key(discussion, slug);
        let movable: Vec<&str> = Queue::ESCALATION
            .iter()
            .take_while(|q| **q != queue)
            .map(|q| q.as_str())
            .collect();
        let entry = doc! {
            "_id": &id,
            "discussion_id": discussion.as_str(),
            "slug": slug.as_str(),
            "public": true,
            "status": queue.as_str(),
            "since": at.0,
        };
        // Move a milder entry up, or add one; an entry added meanwhile by someone else (the
        // insert's duplicate) may be milder, so it is tried again. Entries only move up until an
        // approval removes them, so this ends within a few rounds.
        for _ in 0..ENQUEUE_ROUNDS {
            let moved = self
                .coll
                .update_one(
                    doc! { "_id": &id, "public": true, "status": { "$in": &movable } },
                    doc! { "$set": { "status": queue.as_str(), "since": at.0 } },
                )
                .await?;
            if moved.matched_count > 0 {
                return Ok(());
            }
            match self.coll.insert_one(entry.clone()).await {
                Ok(_) => return Ok(()),
                Err(err) if is_duplicate_key(&err) => {}
                Err(err) => return Err(err.into()),
            }
        }
        // Still there and not milder: in this queue or a stricter one, kept as it is.
        Ok(())
    }

    async fn queue_page(
        &self,
        queue: Queue,
        discussion: Option<&DiscussionId>,
        after: Option<&Cursor>,
        limit: usize,
    ) -> StoreResult<(Vec<QueueEntry>, bool)> {
        let mut filter = queue_filter(queue, discussion);
        if let Some(cursor) = after {
            filter.extend(after_filter(cursor));
        }
        let docs: Vec<Document> = self
            .coll
            .find(filter)
            .sort(doc! { "since": 1, "_id": 1 })
            .limit(limit_plus_one(limit))
            .await?
            .try_collect()
            .await?;
        let more = docs.len() > limit;
        let entries = docs
            .iter()
            .take(limit)
            .map(entry_of)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((entries, more))
    }

    async fn queue_size(
        &self,
        queue: Queue,
        discussion: Option<&DiscussionId>,
    ) -> StoreResult<u64> {
        Ok(self
            .coll
            .count_documents(queue_filter(queue, discussion))
            .await?)
    }

    async fn placeholders(&self, discussion: &DiscussionId) -> StoreResult<Vec<Slug>> {
        let lookup = self.cache.as_ref().and_then(|cache| {
            let lookup = cache.lookup(discussion, "placeholders".into())?;
            Some((cache, lookup))
        });
        let Some((cache, lookup)) = lookup else {
            return self.placeholders_stored(discussion).await;
        };
        if let Some(found) = cache.get::<Vec<Slug>>(&lookup) {
            return Ok(found);
        }
        let found =
            crate::store::cache::tracking::covered(self.placeholders_stored(discussion)).await?;
        let bytes = 64 + found.iter().map(|s| 32 + s.as_str().len()).sum::<usize>();
        cache.put(lookup, found.clone(), bytes);
        Ok(found)
    }

    async fn unreport(&self, report: &Report) -> StoreResult<()> {
        self.reports
            .delete_many(doc! { "_id": report_key(report) })
            .await?;
        Ok(())
    }

    async fn queue_of(&self, discussion: &DiscussionId, slug: &Slug) -> StoreResult<Option<Queue>> {
        let found = self
            .coll
            .find_one(doc! { "_id": key(discussion, slug) })
            .projection(doc! { "status": 1 })
            .await?;
        Ok(found
            .as_ref()
            .and_then(|d| d.get_str("status").ok())
            .and_then(Queue::from_stored))
    }

    async fn reports_of(
        &self,
        comments: &[(DiscussionId, Slug)],
        each: usize,
    ) -> StoreResult<Vec<Report>> {
        self.reports_of_comments(comments, each).await
    }

    async fn report(&self, report: &Report) -> StoreResult<bool> {
        let document = doc! {
            "_id": report_key(report),
            "discussion_id": report.discussion.as_str(),
            "slug": report.slug.as_str(),
            "reporter": &report.reporter,
            "reason": report.reason.as_str(),
            "note": report.note.as_deref(),
            "at": report.at.0,
        };
        match self.reports.insert_one(document).await {
            Ok(_) => Ok(true),
            Err(err) if is_duplicate_key(&err) => Ok(false),
            Err(err) => Err(err.into()),
        }
    }

    async fn trusted(&self, person: &str) -> StoreResult<bool> {
        {
            let trusted = self.trusted.lock().unwrap_or_else(|p| p.into_inner());
            if trusted.contains(person) {
                return Ok(true);
            }
        }
        let found = self.people.find_one(doc! { "_id": person }).await?;
        let approved = match found.as_ref().and_then(|d| d.get(Tally::Approved.field())) {
            Some(Bson::Int32(n)) => i64::from(*n),
            Some(Bson::Int64(n)) => *n,
            _ => 0,
        };
        if approved > 0 {
            self.remember(person);
        }
        Ok(approved > 0)
    }

    async fn trust(&self, person: &str) -> StoreResult<()> {
        self.count(person, Tally::Approved).await?;
        self.remember(person);
        Ok(())
    }

    async fn count(&self, person: &str, tally: Tally) -> StoreResult<()> {
        self.people
            .update_one(
                doc! { "_id": person },
                doc! { "$inc": { tally.field(): 1 } },
            )
            .upsert(true)
            .await?;
        Ok(())
    }

    async fn tallies(&self, person: &str) -> StoreResult<Tallies> {
        let found = self.people.find_one(doc! { "_id": person }).await?;
        let count = |tally: Tally| {
            found
                .as_ref()
                .and_then(|d| d.get(tally.field()))
                .and_then(crate::store::shared::bson::as_i64)
                .and_then(|n| u64::try_from(n).ok())
                .unwrap_or(0)
        };
        let (drawn, gaps) = numbers::counter_of(found.as_ref());
        Ok(Tallies {
            approved: count(Tally::Approved),
            rejected: count(Tally::Rejected),
            reported: count(Tally::Reported),
            comments: drawn.saturating_sub(gaps),
        })
    }
}
