//! What the background workers read and write: the events whose notifications are due
//! (`notify` on the event log, claimed under a lease), the notifications stored, and the live
//! stream of notifications as they are stored.

use futures::stream::BoxStream;
use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, DateTime, Document};

use super::codec::{notification_doc, notification_of};
use crate::domain::notifications::Notification;
use crate::domain::{EventRecord, Micros};
use crate::store::events::record_of;
use crate::store::shared::error::{duplicate_indexes, only_duplicates, StoreResult};
use crate::store::shared::inserts::inserted;
use crate::store::shared::metrics::Counted;

fn date(at: Micros) -> DateTime {
    DateTime::from_millis(at.0 / 1000)
}

/// Claims up to `limit` events whose notifications are due: their `notify` moves to the end of
/// the lease, with `notify_by` naming the claim, on condition that it is still due.
pub(super) async fn claim_events(
    events: &Counted<Document>,
    now: Micros,
    until: Micros,
    token: &str,
    limit: usize,
) -> StoreResult<Vec<EventRecord>> {
    let found = crate::store::events::due(events, "notify", now, limit).await?;
    let due = doc! { "$lte": date(now) };
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Bson> = found.iter().filter_map(|d| d.get("_id").cloned()).collect();
    let claimed = events
        .update_many(
            doc! { "_id": { "$in": &ids }, "notify": due },
            doc! { "$set": { "notify": date(until), "notify_by": token } },
        )
        .await?;
    let mine = if claimed.matched_count == ids.len() as u64 {
        found
    } else {
        events
            .find(doc! { "_id": { "$in": &ids }, "notify_by": token })
            .await?
            .try_collect()
            .await?
    };
    let mut records = mine
        .iter()
        .map(record_of)
        .collect::<StoreResult<Vec<_>>>()?;
    records.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(records)
}

/// Stores `notifications`, leaving the ones stored already; how many were new.
pub(super) async fn insert(
    notifications: &Counted<Document>,
    new: &[Notification],
) -> StoreResult<u64> {
    if new.is_empty() {
        return Ok(0);
    }
    let docs: Vec<Document> = new.iter().map(notification_doc).collect();
    match notifications.insert_many(docs).ordered(false).await {
        Ok(done) => Ok(done.inserted_ids.len() as u64),
        Err(err) if only_duplicates(&err) => Ok((new.len() - duplicate_indexes(&err).len()) as u64),
        Err(err) => Err(err.into()),
    }
}

/// Ends the notifications' fan-out of the events `ids` that `token` claimed.
pub(super) async fn finish_events(
    events: &Counted<Document>,
    ids: &[String],
    token: &str,
) -> StoreResult<()> {
    if ids.is_empty() {
        return Ok(());
    }
    events
        .update_many(
            doc! { "_id": { "$in": ids }, "notify_by": token },
            doc! { "$unset": { "notify": "", "notify_by": "" } },
        )
        .await?;
    Ok(())
}

/// The notifications stored from now on (see [`inserted`]).
pub(super) fn received(notifications: Counted<Document>) -> BoxStream<'static, Notification> {
    inserted(notifications, doc! {}, "notifications", notification_of)
}
