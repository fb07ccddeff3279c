//! The deliveries' claims (of those due again), attempts and reads.

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, DateTime, Document};
use mongodb::options::ReturnDocument;

use super::codec::delivery_of;
use crate::domain::webhooks::{AttemptRecord, Delivery, DeliveryStatus};
use crate::domain::Micros;
use crate::store::shared::error::StoreResult;
use crate::store::shared::metrics::Counted;

/// The stored name of pending deliveries.
const PENDING: &str = "pending";
/// The deliveries.
pub(super) struct Deliveries {
    pub(super) deliveries: Counted<Document>,
}

pub(super) use crate::store::shared::error::{as_limit, duplicate_indexes, only_duplicates};

/// A time as a date (milliseconds): the event log's `dispatch`, a delivery's `finished`.
pub(super) fn dispatch_date(at: Micros) -> DateTime {
    DateTime::from_millis(at.0 / 1000)
}

/// The write of one attempt: its result, the next due time while pending, one more attempt.
fn attempt_update(attempt: &AttemptRecord) -> Document {
    let mut set = doc! {
        "status": attempt.then.as_str(),
        "last_attempt_at": attempt.at.0,
    };
    let mut unset = doc! { "claim": "" };
    if attempt.then == DeliveryStatus::Pending {
        // Pending with no time given: due again at once.
        set.insert("next_at", attempt.next_at.unwrap_or(attempt.at).0);
    } else {
        unset.insert("next_at", "");
        set.insert("finished", dispatch_date(attempt.at));
    }
    let mut last = |key: &str, value: Option<Bson>| match value {
        Some(value) => set.insert(key, value),
        None => unset.insert(key, ""),
    };
    last(
        "last_status",
        attempt.status.map(|s| Bson::Int32(i32::from(s))),
    );
    last("last_error", attempt.error.clone().map(Bson::String));
    last("last_body", attempt.body.clone().map(Bson::String));
    doc! { "$set": set, "$unset": unset, "$inc": { "attempts": 1_i64 } }
}

impl Deliveries {
    /// Claims the pending deliveries due at `now`, soonest first: the first `limit` of the
    /// (status, time) range are moved to `until` under `token` in one update, on condition that
    /// they are still due (another process may win some), then read back: three commands
    /// however many. `token` names one claim: a later claim has another.
    pub(super) async fn claim(
        &self,
        now: Micros,
        until: Micros,
        token: &str,
        limit: usize,
    ) -> StoreResult<Vec<Delivery>> {
        let Some(limit) = as_limit(limit) else {
            return Ok(Vec::new());
        };
        let due: Vec<Document> = self
            .deliveries
            .find(doc! { "next_at": { "$lte": now.0 } })
            .sort(doc! { "next_at": 1 })
            .limit(limit)
            .projection(doc! { "_id": 1, "next_at": 1 })
            .await?
            .try_collect()
            .await?;
        let ids: Vec<Bson> = due
            .into_iter()
            .filter_map(|mut d| d.remove("_id"))
            .collect();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.deliveries
            .update_many(
                doc! { "_id": { "$in": ids.clone() }, "status": PENDING, "next_at": { "$lte": now.0 } },
                doc! { "$set": { "next_at": until.0, "claim": token } },
            )
            .await?;
        let claimed: Vec<Document> = self
            .deliveries
            .find(doc! { "_id": { "$in": ids }, "claim": token })
            .await?
            .try_collect()
            .await?;
        claimed.iter().map(delivery_of).collect()
    }

    /// Records attempts under `token`'s claims; the ids whose claim still held (the others
    /// are left as they are). Attempts whose writes are the same (the usual run of 2xx with
    /// one answer, recorded at one time) go in one update.
    pub(super) async fn record_attempts(
        &self,
        token: &str,
        attempts: &[(String, AttemptRecord)],
    ) -> StoreResult<Vec<String>> {
        let mut groups: Vec<(Document, Vec<&str>)> = Vec::new();
        for (id, attempt) in attempts {
            let update = attempt_update(attempt);
            match groups.iter_mut().find(|(u, _)| *u == update) {
                Some((_, ids)) => ids.push(id),
                None => groups.push((update, vec![id])),
            }
        }
        let mut held = Vec::new();
        for (mut update, ids) in groups {
            // Marks this write, to tell which were written when some claims were lost.
            let mark = format!("{:016x}", rand::random::<u64>());
            if let Ok(set) = update.get_document_mut("$set") {
                set.insert("recorded", &mark);
            }
            let written = self
                .deliveries
                .update_many(
                    doc! { "_id": { "$in": &ids }, "claim": token, "status": PENDING },
                    update,
                )
                .await?;
            if written.matched_count == ids.len() as u64 {
                held.extend(ids.into_iter().map(str::to_owned));
                continue;
            }
            let written: Vec<Document> = self
                .deliveries
                .find(doc! { "_id": { "$in": &ids }, "recorded": &mark })
                .projection(doc! { "_id": 1 })
                .await?
                .try_collect()
                .await?;
            held.extend(
                written
                    .iter()
                    .filter_map(|d| d.get_str("_id").ok().map(str::to_owned)),
            );
        }
        Ok(held)
    }

    /// Holds the deliveries `ids` that `token` claimed until `until`.
    pub(super) async fn renew(
        &self,
        ids: &[String],
        token: &str,
        until: Micros,
    ) -> StoreResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        self.deliveries
            .update_many(
                doc! { "_id": { "$in": ids }, "claim": token, "status": PENDING },
                doc! { "$set": { "next_at": until.0 } },
            )
            .await?;
        Ok(())
    }

    /// Makes the delivery pending again, due at `now`, unclaimed (its attempts go on).
    pub(super) async fn redeliver(&self, id: &str, now: Micros) -> StoreResult<Option<Delivery>> {
        let updated = self
            .deliveries
            .find_one_and_update(
                doc! { "_id": id },
                doc! {
                    "$set": { "status": PENDING, "next_at": now.0 },
                    "$unset": { "claim": "", "finished": "" },
                },
            )
            .return_document(ReturnDocument::After)
            .await?;
        updated.as_ref().map(delivery_of).transpose()
    }

    /// The delivery `id`.
    pub(super) async fn delivery(&self, id: &str) -> StoreResult<Option<Delivery>> {
        let found = self.deliveries.find_one(doc! { "_id": id }).await?;
        found.as_ref().map(delivery_of).transpose()
    }

    /// An endpoint's deliveries after `after`, by id (a range of the (endpoint, id) index).
    pub(super) async fn of_endpoint(
        &self,
        endpoint: &str,
        after: Option<&str>,
        status: Option<DeliveryStatus>,
        limit: usize,
    ) -> StoreResult<Vec<Delivery>> {
        let Some(limit) = as_limit(limit) else {
            return Ok(Vec::new());
        };
        let mut filter = doc! { "endpoint": endpoint };
        if let Some(after) = after {
            filter.insert("_id", doc! { "$gt": after });
        }
        if let Some(status) = status {
            filter.insert("status", status.as_str());
        }
        let docs: Vec<Document> = self
            .deliveries
            .find(filter)
            .sort(doc! { "_id": 1 })
            .limit(limit)
            .await?
            .try_collect()
            .await?;
        docs.iter().map(delivery_of).collect()
    }

    /// How many deliveries are pending (those with a due time: a range of its sparse index).
    pub(super) async fn pending(&self) -> StoreResult<u64> {
        Ok(self
            .deliveries
            .count_documents(doc! { "next_at": { "$gte": i64::MIN } })
            .await?)
    }

    /// Fails the endpoint's pending deliveries (claimed or not: a claim's attempt then finds
    /// it no longer pending and writes nothing).
    pub(super) async fn fail_pending_of(&self, endpoint: &str) -> StoreResult<()> {
        self.deliveries
            .update_many(
                doc! { "endpoint": endpoint, "status": PENDING },
                doc! {
                    "$set": {
                        "status": DeliveryStatus::Failed.as_str(),
                        "finished": DateTime::now(),
                    },
                    "$unset": { "next_at": "", "claim": "" },
                },
            )
            .await?;
        Ok(())
    }

    /// Removes the endpoint's pending deliveries.
    pub(super) async fn remove_pending_of(&self, endpoint: &str) -> StoreResult<()> {
        self.deliveries
            .delete_many(doc! { "endpoint": endpoint, "status": PENDING })
            .await?;
        Ok(())
    }
}
