//! A person's own records across the collections (see `PersonalStore`): the indexes that find
//! them by person, their reads for an export, and what an erasure removes or rewrites. Each
//! step is one command over one of those indexes, so it costs what the person has, never what
//! the collection holds; and each is idempotent, so an erasure cut short is finished by running
//! it again.

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, oid::ObjectId, Bson, Document};
use mongodb::Database;

use crate::domain::erasure::{erased_actor, ERASED};
use crate::domain::{DiscussionId, Event, Slug, Vote};
use crate::store::api::{CastVote, Forgotten, PersonalStore, Report};
use crate::store::events::{self, EventLog};
use crate::store::guests;
use crate::store::moderation::held::{PEOPLE, REPORTS};
use crate::store::moderation::reports::report_of;
use crate::store::moderation::Moderation;
use crate::store::notifications::{Notifications, IGNORING};
use crate::store::shared::bson::{author_doc, corrupt};
use crate::store::shared::connect::index_model;
use crate::store::shared::error::StoreResult;
use crate::store::shared::metrics::{CommandCounter, Counted};
use crate::store::votes::VOTES;

/// The collections that hold a person's records.
pub(crate) struct Personal {
    votes: Counted<Document>,
    reports: Counted<Document>,
    follows: Counted<Document>,
    notifications: Counted<Document>,
    people: Counted<Document>,
    events: Counted<Document>,
    log: Counted<Document>,
    moderators: Counted<Document>,
    details: Counted<Document>,
    log_of_events: EventLog,
}

/// A sparse index (only the documents that have the field).
fn sparse(name: &str, keys: Document) -> mongodb::IndexModel {
    let mut model = index_model(name, keys, false);
    if let Some(options) = model.options.as_mut() {
        options.sparse = Some(true);
    }
    model
}

impl Personal {
    pub(crate) fn new(db: &Database, commands: &CommandCounter, log_of_events: EventLog) -> Self {
        let coll = |name: &str| Counted::new(db, name, commands);
        Self {
            votes: coll(VOTES),
            reports: coll(REPORTS),
            follows: coll(Notifications::FOLLOWS),
            notifications: coll(Notifications::NOTIFICATIONS),
            people: coll(PEOPLE),
            events: coll(events::COLLECTION),
            log: coll(Moderation::LOG),
            moderators: coll(Moderation::MODERATORS),
            details: coll(guests::DETAILS),
            log_of_events,
        }
    }

    /// The indexes by person (idempotent).
    pub(crate) async fn ensure_indexes(&self) -> StoreResult<()> {
        self.votes
            .create_index(index_model(
                "voter_id",
                doc! { "voter": 1, "_id": 1 },
                false,
            ))
            .await?;
        self.reports
            .create_index(index_model(
                "reporter_id",
                doc! { "reporter": 1, "_id": 1 },
                false,
            ))
            .await?;
        self.notifications
            .create_index(index_model("actor", doc! { "actor.id": 1 }, false))
            .await?;
        self.events
            .create_indexes([
                index_model("actor", doc! { "actor.id": 1 }, false),
                sparse("author", doc! { "author": 1 }),
                sparse("user", doc! { "user": 1 }),
            ])
            .await?;
        self.log
            .create_indexes([
                index_model("moderator", doc! { "moderator.id": 1 }, false),
                sparse("user", doc! { "user_id": 1 }),
            ])
            .await?;
        Ok(())
    }

    /// Up to `limit` documents of `coll` whose `field` is the person, by `_id`, after `after`:
    /// one range of the `{field, _id}` index.
    async fn page_of(
        coll: &Counted<Document>,
        (field, person): (&str, &str),
        after: Option<Bson>,
        limit: usize,
    ) -> StoreResult<Vec<Document>> {
        let mut filter = doc! { field: person };
        if let Some(after) = after {
            filter.insert("_id", doc! { "$gt": after });
        }
        Ok(coll
            .find(filter)
            .sort(doc! { field: 1, "_id": 1 })
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .await?
            .try_collect()
            .await?)
    }

    /// Rewrites `field` from `person` to `to` in every document of `coll` that has it.
    async fn rewrite(
        coll: &Counted<Document>,
        field: &str,
        person: &str,
        to: Bson,
    ) -> StoreResult<u64> {
        let done = coll
            .update_many(doc! { field: person }, doc! { "$set": { field: to } })
            .await?;
        Ok(done.modified_count)
    }
}

#[async_trait]
impl PersonalStore for Personal {
    async fn votes_by(
        &self,
        voter: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<CastVote>> {
        let after = after
            .map(|after| {
                ObjectId::parse_str(after)
                    .map(Bson::ObjectId)
                    .map_err(|_| corrupt(format!("a vote's key {after:?}")))
            })
            .transpose()?;
        let found = Self::page_of(&self.votes, ("voter", voter), after, limit).await?;
        found
            .iter()
            .map(|doc| {
                let text = |field: &str| {
                    doc.get_str(field)
                        .map_err(|_| corrupt(format!("a vote without its {field}")))
                };
                let key = doc
                    .get_object_id("_id")
                    .map_err(|_| corrupt("a vote without its id"))?;
                Ok(CastVote {
                    key: key.to_hex(),
                    discussion: DiscussionId::parse(text("discussion_id")?)
                        .map_err(|e| corrupt(format!("a vote's discussion: {e}")))?,
                    slug: Slug::parse(text("slug")?)
                        .map_err(|e| corrupt(format!("a vote's comment: {e}")))?,
                    vote: Vote::parse(text("value")?)
                        .ok_or_else(|| corrupt("a vote of an unknown value"))?,
                })
            })
            .collect()
    }

    async fn reports_by(
        &self,
        reporter: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<(String, Report)>> {
        let after = after.map(Bson::from);
        let found = Self::page_of(&self.reports, ("reporter", reporter), after, limit).await?;
        found
            .iter()
            .map(|doc| {
                let id = doc
                    .get_str("_id")
                    .map_err(|_| corrupt("a report without its id"))?;
                Ok((id.to_owned(), report_of(doc)?))
            })
            .collect()
    }

    async fn forget(&self, person: &str, events: &[Event]) -> StoreResult<Forgotten> {
        let mut done = Forgotten::default();
        for (coll, filter) in [
            (&self.votes, doc! { "voter": person }),
            (&self.reports, doc! { "reporter": person }),
            (&self.follows, doc! { "user": person }),
            (&self.notifications, doc! { "recipient": person }),
            (&self.details, doc! { "_id": person }),
            (&self.moderators, doc! { "_id": person }),
        ] {
            done.removed += coll.delete_many(filter).await?.deleted_count;
        }
        let nobody = Bson::from(ERASED);
        let stand_in = Bson::Document(author_doc(&erased_actor()));
        for (coll, field, to) in [
            (&self.notifications, "actor.id", None),
            (&self.events, "actor.id", None),
            (&self.events, "author", Some(&nobody)),
            (&self.events, "user", Some(&nobody)),
            (&self.log, "moderator.id", None),
            (&self.log, "user_id", Some(&nobody)),
        ] {
            done.rewritten += match to {
                Some(to) => Self::rewrite(coll, field, person, to.clone()).await?,
                // A person sub-document: replaced whole (`actor.id` → `actor`).
                None => {
                    let whole = field.trim_end_matches(".id");
                    coll.update_many(
                        doc! { field: person },
                        doc! { "$set": { whole: stand_in.clone() } },
                    )
                    .await?
                    .modified_count
                }
            };
        }
        done.rewritten += self
            .people
            .update_many(
                doc! { IGNORING: person },
                doc! { "$pull": { IGNORING: person } },
            )
            .await?
            .modified_count;
        let people = &self.people;
        done.removed += self
            .log_of_events
            .atomically(|mut session| async move {
                let removed = people
                    .delete_one(doc! { "_id": person })
                    .session(&mut session)
                    .await;
                let told = removed
                    .map(|r| (r.deleted_count, events.to_vec()))
                    .map_err(Into::into);
                (session, told)
            })
            .await?;
        Ok(done)
    }
}
