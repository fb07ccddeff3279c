//! The rounds of the fan-out (`webhook_rounds`): a round claims the events it fans out by
//! ending their fan-out (`dispatch` removed, on condition that it is still due, so of two
//! replicas one gets each event), after writing down which events it took under a lease. Its
//! first attempts are then stored as deliveries with their results, one insert each, and the
//! round removed. A replica that dies between the two leaves its round to another once the
//! lease has run out: that one sends what was not stored (a repeat only for an attempt cut
//! by the death, with the same `webhook-id`).

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongodb::options::ReturnDocument;

use super::codec::delivery_doc;
use super::deliveries::{dispatch_date, duplicate_indexes, only_duplicates};
use crate::domain::webhooks::Delivery;
use crate::domain::Micros;
use crate::store::api::StoredEvent;
use crate::store::events::record_of;
use crate::store::shared::error::StoreResult;
use crate::store::shared::metrics::Counted;

/// The rounds, the event log they claim from and the deliveries they store.
pub(super) struct Rounds {
    pub(super) rounds: Counted<Document>,
    pub(super) events: Counted<Document>,
    pub(super) deliveries: Counted<Document>,
}

/// The event stored as `doc`, with its comment's home.
pub(super) fn stored_event_of(doc: &Document) -> StoreResult<StoredEvent> {
    Ok(StoredEvent {
        record: record_of(doc)?,
        home: doc.get("home").cloned(),
    })
}

impl Rounds {
    /// Claims up to `limit` events whose fan-out is due at `now` (the longest due first) for
    /// round `token`, held until `until`: the round is written first, then the events' fan-out
    /// is ended where it is still due, and the events this round ended are returned, in id
    /// order. Four commands, five when another replica took some of them in between.
    pub(super) async fn claim_events(
        &self,
        now: Micros,
        until: Micros,
        token: &str,
        limit: usize,
    ) -> StoreResult<Vec<StoredEvent>> {
        let found = crate::store::events::due(&self.events, "dispatch", now, limit).await?;
        let due = doc! { "$lte": dispatch_date(now) };
        if found.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Bson> = found.iter().filter_map(|d| d.get("_id").cloned()).collect();
        self.rounds
            .insert_one(doc! { "_id": token, "holder": token, "until": until.0, "events": &ids })
            .await?;
        let ended = self
            .events
            .update_many(
                doc! { "_id": { "$in": &ids }, "dispatch": due },
                doc! { "$unset": { "dispatch": "" }, "$set": { "round": token } },
            )
            .await?;
        let mine: Vec<Document> = if ended.matched_count == ids.len() as u64 {
            found
        } else {
            let mine: Vec<Document> = self
                .events
                .find(doc! { "_id": { "$in": &ids }, "round": token })
                .await?
                .try_collect()
                .await?;
            // The round names only what it took (and is gone when it took nothing).
            let taken: Vec<Bson> = mine.iter().filter_map(|d| d.get("_id").cloned()).collect();
            if taken.is_empty() {
                self.rounds.delete_one(doc! { "_id": token }).await?;
            } else {
                self.rounds
                    .update_one(doc! { "_id": token }, doc! { "$set": { "events": taken } })
                    .await?;
            }
            mine
        };
        let mut events = mine
            .iter()
            .map(stored_event_of)
            .collect::<StoreResult<Vec<_>>>()?;
        events.sort_by(|a, b| a.record.id.cmp(&b.record.id));
        Ok(events)
    }

    /// Takes over one round whose lease ended at `now` (its holder died or stalled), for
    /// `holder` until `until`: its events still in the log, in id order (`None`: no such round).
    pub(super) async fn take_round(
        &self,
        now: Micros,
        until: Micros,
        holder: &str,
    ) -> StoreResult<Option<Vec<StoredEvent>>> {
        let taken = self
            .rounds
            .find_one_and_update(
                doc! { "until": { "$lte": now.0 } },
                doc! { "$set": { "until": until.0, "holder": holder } },
            )
            .return_document(ReturnDocument::After)
            .await?;
        let Some(round) = taken else {
            return Ok(None);
        };
        let ids = round.get_array("events").cloned().unwrap_or_default();
        self.events_in(ids).await.map(Some)
    }

    /// The events with these ids, in id order.
    pub(super) async fn events(&self, ids: &[String]) -> StoreResult<Vec<StoredEvent>> {
        self.events_in(ids.iter().map(|id| Bson::from(id.as_str())).collect())
            .await
    }

    /// The events with the ids `ids` (missing ones left out), in id order.
    async fn events_in(&self, ids: Vec<Bson>) -> StoreResult<Vec<StoredEvent>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let docs: Vec<Document> = self
            .events
            .find(doc! { "_id": { "$in": ids } })
            .sort(doc! { "_id": 1 })
            .await?
            .try_collect()
            .await?;
        docs.iter().map(stored_event_of).collect()
    }

    /// Which of the deliveries `ids` are stored.
    pub(super) async fn stored(&self, ids: &[String]) -> StoreResult<Vec<String>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let docs: Vec<Document> = self
            .deliveries
            .find(doc! { "_id": { "$in": ids } })
            .projection(doc! { "_id": 1 })
            .await?
            .try_collect()
            .await?;
        Ok(docs
            .iter()
            .filter_map(|d| d.get_str("_id").ok().map(str::to_owned))
            .collect())
    }

    /// Holds `holder`'s rounds until `until`.
    pub(super) async fn renew(&self, holder: &str, until: Micros) -> StoreResult<()> {
        self.rounds
            .update_many(
                doc! { "holder": holder },
                doc! { "$set": { "until": until.0 } },
            )
            .await?;
        Ok(())
    }

    /// Stores the first attempts of `holder`'s rounds as deliveries (one stored already keeps
    /// what it has), then removes the rounds; the ids stored now.
    pub(super) async fn finish(
        &self,
        deliveries: &[Delivery],
        holder: &str,
    ) -> StoreResult<Vec<String>> {
        let mut stored: Vec<String> = deliveries.iter().map(|d| d.id.clone()).collect();
        if !deliveries.is_empty() {
            let docs: Vec<Document> = deliveries.iter().map(delivery_doc).collect();
            match self.deliveries.insert_many(docs).ordered(false).await {
                Ok(_) => {}
                Err(err) if only_duplicates(&err) => {
                    let taken = duplicate_indexes(&err);
                    stored = stored
                        .into_iter()
                        .enumerate()
                        .filter(|(i, _)| !taken.contains(i))
                        .map(|(_, id)| id)
                        .collect();
                }
                Err(err) => return Err(err.into()),
            }
        }
        self.rounds.delete_many(doc! { "holder": holder }).await?;
        Ok(stored)
    }
}
