//! Discussions by key: the claims that keep keys unique, creating a discussion with a key,
//! finding or creating one (`ensure`), and reading many by key in one command.
//!
//! The discussions collection is sharded on its hashed `_id`, and a unique index on a sharded
//! collection must start with the shard key, so the key cannot be unique there. Each key is
//! claimed instead in `discussion_keys` (`{_id: key, discussion: id}`, unique by `_id`, which is
//! also its shard key), in the transaction that inserts the discussion; the discussion keeps its
//! key too, read through a plain index in one command.

use std::time::Duration;

use futures::TryStreamExt;
use mongodb::bson::{doc, Document, RawDocumentBuf};
use mongodb::error::TRANSIENT_TRANSACTION_ERROR;

use super::Discussions;
use crate::domain::Event;
use crate::domain::{Discussion, DiscussionId, DiscussionKey, NewDiscussion};
use crate::store::shared::bson::corrupt;
use crate::store::shared::error::{is_duplicate_key, StoreError, StoreResult};
use crate::store::shared::transactions::{abort, commit, pause};

/// The collection of key claims.
pub(super) const CLAIMS: &str = "discussion_keys";

/// Rounds a write of a key goes through (write conflicts with concurrent creations of the same
/// key, claims found without their discussion) before it gives up with `Exhausted`.
const ROUNDS: u32 = 64;

/// How old a claim without its discussion must be before it is taken as left behind, on a
/// deployment without transactions (where a creation writes the claim, then the discussion).
const LEFT_BEHIND: Duration = Duration::from_secs(2);

/// What one try at inserting a discussion with a key did.
enum Inserted {
    /// The claim and the discussion are stored.
    Stored,
    /// The key is claimed already.
    Taken,
    /// A concurrent creation of the same key holds it: try again.
    Conflict,
}

impl Discussions {
    /// The document of a new discussion with id `id`, in its layout's initial shape.
    pub(super) fn document_of(
        &self,
        new: &NewDiscussion,
        id: &DiscussionId,
    ) -> StoreResult<Document> {
        let shared = super::DiscussionDoc {
            id: id.to_string(),
            title: new.title.clone().into_inner(),
            key: new.key.as_ref().map(|k| k.as_str().to_owned()),
            url: new.url.as_ref().map(|u| u.as_str().to_owned()),
            layout: new.layout.as_str().to_owned(),
            created: new.created.unwrap_or_else(|| self.clock.now()).0,
            comment_count: 0,
            thread_count: 0,
            locked: false,
            moderation: None,
            guests: None,
            closes: None,
            pinned: Vec::new(),
            moves: 0,
        };
        let mut doc = mongodb::bson::to_document(&shared)
            .map_err(|e| StoreError::Corrupt(format!("a new discussion: {e}")))?;
        if let Some(fields) = self.fields.get(&new.layout) {
            doc.extend(fields.initial());
        }
        Ok(doc)
    }

    /// The discussion as stored from `doc`.
    pub(super) fn stored(&self, doc: &Document) -> StoreResult<Discussion> {
        self.read(&RawDocumentBuf::from_document(doc).map_err(corrupt)?)
    }

    /// Inserts a new discussion that has a key: `KeyTaken` when another discussion has it.
    pub(super) async fn add_keyed(
        &self,
        key: &DiscussionKey,
        new: &NewDiscussion,
        events: &[Event],
    ) -> StoreResult<Discussion> {
        let doc = self.document_of(new, &new.id.clone().unwrap_or_else(DiscussionId::generate))?;
        // A key that has a decomposed form may be stored so from before keys were composed.
        if key.decomposed().is_some()
            && !self.read_keys(std::slice::from_ref(key)).await?.is_empty()
        {
            return Err(StoreError::KeyTaken(key.to_string()));
        }
        for round in 0..ROUNDS {
            match self.insert_keyed(key, &doc, events).await? {
                Inserted::Stored => return self.stored(&doc),
                Inserted::Taken => return Err(StoreError::KeyTaken(key.to_string())),
                Inserted::Conflict => pause(round).await,
            }
        }
        Err(exhausted(key))
    }

    /// The discussion with the key of `new`, or `new`, created with it.
    pub(super) async fn ensure_keyed(
        &self,
        key: &DiscussionKey,
        new: &NewDiscussion,
        events: &[Event],
    ) -> StoreResult<Discussion> {
        let mut doc =
            self.document_of(new, &new.id.clone().unwrap_or_else(DiscussionId::generate))?;
        for round in 0..ROUNDS {
            if let Some(found) = self.read_keys(std::slice::from_ref(key)).await?.pop() {
                return Ok(found);
            }
            match self.insert_keyed(key, &doc, events).await? {
                Inserted::Stored => return self.stored(&doc),
                Inserted::Conflict => pause(round).await,
                Inserted::Taken => {
                    // Committed by another creation since the read (found on the next one),
                    // or a claim without its discussion.
                    if self.complete_claim(key, &mut doc).await? {
                        return self.stored(&doc);
                    }
                    pause(round).await;
                }
            }
        }
        Err(exhausted(key))
    }

    /// After a refused claim: when the claim of `key` has no discussion and was left behind (by
    /// a creation on a deployment without transactions that stopped between its two inserts),
    /// stores `doc` as that discussion, under the claimed id, and says so. `false` when the
    /// discussion exists (or may still come).
    async fn complete_claim(&self, key: &DiscussionKey, doc: &mut Document) -> StoreResult<bool> {
        let Some(claim) = self.claims.find_one(doc! { "_id": key.as_str() }).await? else {
            return Ok(false);
        };
        let id = claim
            .get_str("discussion")
            .map_err(|e| StoreError::Corrupt(format!("the claim of key {key:?}: {e}")))?;
        if self
            .coll
            .find_one(doc! { "_id": id })
            .projection(doc! { "_id": 1 })
            .await?
            .is_some()
        {
            return Ok(false);
        }
        let claimed = claim.get_i64("created").unwrap_or(0);
        let age = self.clock.now().0.saturating_sub(claimed);
        let left_behind =
            self.transactions || u128::try_from(age).unwrap_or(0) > LEFT_BEHIND.as_micros();
        if !left_behind {
            return Ok(false);
        }
        tracing::warn!(key = %key, discussion = id, "a discussion key was claimed without its discussion: creating it");
        doc.insert("_id", id);
        match self.coll.insert_one(&*doc).await {
            Ok(_) => Ok(true),
            Err(err) if is_duplicate_key(&err) => Ok(false),
            Err(err) => Err(err.into()),
        }
    }

    /// Claims `key` for the discussion `doc` and inserts it: in one transaction where the
    /// deployment has them, else the claim first (a claim left without its discussion is
    /// completed by `ensure`).
    async fn insert_keyed(
        &self,
        key: &DiscussionKey,
        doc: &Document,
        events: &[Event],
    ) -> StoreResult<Inserted> {
        let id = doc
            .get_str("_id")
            .map_err(|e| StoreError::Corrupt(format!("a new discussion: {e}")))?;
        let claim = doc! {
            "_id": key.as_str(),
            "discussion": id,
            "created": doc.get_i64("created").unwrap_or_else(|_| self.clock.now().0),
        };
        if !self.transactions {
            match self.claims.insert_one(&claim).await {
                Ok(_) => {}
                Err(err) if is_duplicate_key(&err) => return Ok(Inserted::Taken),
                Err(err) => return Err(err.into()),
            }
            if let Err(err) = self.coll.insert_one(doc).await {
                // Give the key back, so nothing waits for a discussion that will not come.
                let _ = self
                    .claims
                    .delete_many(doc! { "_id": key.as_str(), "discussion": id })
                    .await;
                return Err(err.into());
            }
            let mut session = self.client.start_session().await?;
            self.log.append(&mut session, events).await?;
            return Ok(Inserted::Stored);
        }
        let mut session = self.client.start_session().await?;
        session.start_transaction().await?;
        let written = async {
            self.claims.insert_one(&claim).session(&mut session).await?;
            self.coll.insert_one(doc).session(&mut session).await?;
            self.log.append(&mut session, events).await?;
            Ok::<_, StoreError>(())
        }
        .await;
        match written {
            Ok(()) => match commit(&mut session, &self.commands).await {
                Ok(()) => Ok(Inserted::Stored),
                Err(StoreError::Db(err)) if err.contains_label(TRANSIENT_TRANSACTION_ERROR) => {
                    Ok(Inserted::Conflict)
                }
                Err(err) => Err(err),
            },
            Err(StoreError::Db(err)) => {
                abort(&mut session, &self.commands).await;
                if is_duplicate_key(&err) {
                    Ok(Inserted::Taken)
                } else if err.contains_label(TRANSIENT_TRANSACTION_ERROR) {
                    Ok(Inserted::Conflict)
                } else {
                    Err(err.into())
                }
            }
            Err(err) => {
                abort(&mut session, &self.commands).await;
                Err(err)
            }
        }
    }

    /// The discussions with these keys (unknown ones left out), in one command. A key is
    /// looked for as it is (composed) and decomposed, as a key sent before keys were composed
    /// may be stored; where both are stored, the composed one is the key's discussion.
    pub(super) async fn read_keys(&self, keys: &[DiscussionKey]) -> StoreResult<Vec<Discussion>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut wanted: Vec<String> = Vec::with_capacity(keys.len());
        for key in keys {
            wanted.push(key.as_str().to_owned());
            wanted.extend(key.decomposed());
        }
        let docs: Vec<RawDocumentBuf> = self
            .coll
            .clone_with_type::<RawDocumentBuf>()
            .find(doc! { "key": { "$in": &wanted } })
            .projection(self.projection())
            .await?
            .try_collect()
            .await?;
        let mut found: Vec<(bool, Discussion)> = Vec::with_capacity(docs.len());
        for raw in &docs {
            let discussion = self.read(raw)?;
            let composed = discussion.key.as_ref().map(DiscussionKey::as_str);
            let exact = raw.get_str("key").ok() == composed;
            found.push((exact, discussion));
        }
        // One discussion per key: those stored composed first.
        found.sort_by_key(|(exact, _)| !exact);
        let mut one_each: Vec<Discussion> = Vec::with_capacity(found.len());
        for (_, discussion) in found {
            if !one_each.iter().any(|d| d.key == discussion.key) {
                one_each.push(discussion);
            }
        }
        Ok(one_each)
    }
}

/// The error of a key write that kept meeting concurrent ones.
fn exhausted(key: &DiscussionKey) -> StoreError {
    StoreError::Exhausted(format!(
        "the discussion with key {key:?} kept meeting concurrent writes of the same key"
    ))
}
