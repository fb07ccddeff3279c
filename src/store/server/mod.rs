//! The installation's own settings, in the `server` collection, one document each, read and
//! written by `_id`: `server_key` (the root secret, see `domain::secrets`), and a record per
//! migration of stored data that ran to its end (`guest_ids`, `embedded_authors`,
//! `comment_numbers`). The keying of guest ids itself is
//! in `guests`.

pub(crate) mod guests;

use mongodb::bson::{doc, spec::BinarySubtype, Binary, Bson, Document};

use crate::domain::{Micros, ServerKey};
use crate::store::shared::bson::corrupt;
use crate::store::shared::error::{is_duplicate_key, StoreResult};
use crate::store::shared::metrics::{CommandCounter, Counted};

/// The collection of the installation's settings.
pub(crate) const COLLECTION: &str = "server";

/// The `_id` of the server key's document.
const KEY: &str = "server_key";

/// The `_id` of the record that every imported guest id is keyed.
pub(crate) const GUEST_IDS: &str = "guest_ids";

/// The `_id` of the record that every embedded discussion keeps its flat array of authors.
pub(crate) const EMBEDDED_AUTHORS: &str = "embedded_authors";

/// The `_id` of the record that every stored comment has its number among its author's.
pub(crate) const COMMENT_NUMBERS: &str = "comment_numbers";

/// The `_id` of the record that the names signed-in users posted under are recorded.
pub(crate) const NAME_KEYS: &str = "name_keys";

/// The `server` collection.
pub(crate) struct ServerDocs {
    coll: Counted<Document>,
}

impl ServerDocs {
    pub(crate) fn new(db: &mongodb::Database, commands: &CommandCounter) -> Self {
        Self {
            coll: Counted::new(db, COLLECTION, commands),
        }
    }

    /// The stored key; `candidate` is stored first when there is none (an insert: of starts
    /// racing, one insert wins and the others meet its `_id`, then all read the winner's).
    pub(crate) async fn key(&self, candidate: &ServerKey) -> StoreResult<ServerKey> {
        let bytes = Binary {
            subtype: BinarySubtype::Generic,
            bytes: candidate.to_stored(),
        };
        let made = self
            .coll
            .insert_one(doc! { "_id": KEY, "key": bytes, "since": Micros::now().0 })
            .await;
        match made {
            Err(err) if !is_duplicate_key(&err) => return Err(err.into()),
            _ => {}
        }
        let stored = self
            .coll
            .find_one(doc! { "_id": KEY })
            .await?
            .ok_or_else(|| corrupt("the server key was stored but cannot be read"))?;
        match stored.get("key") {
            Some(Bson::Binary(binary)) => ServerKey::from_bytes(binary.bytes.clone())
                .map_err(|e| corrupt(format!("the stored server key is refused: {e}"))),
            _ => Err(corrupt("the stored server key is not binary")),
        }
    }

    /// Whether the migration `name` was recorded as done.
    pub(crate) async fn is_done(&self, name: &str) -> StoreResult<bool> {
        let found = self.coll.find_one(doc! { "_id": name }).await?;
        Ok(found.is_some_and(|d| d.get_bool("done").unwrap_or(false)))
    }

    /// Records that the migration `name` ran to its end (an upsert, once more when a racing
    /// one inserted the record first).
    pub(crate) async fn record_done(&self, name: &str) -> StoreResult<()> {
        let record = || {
            self.coll
                .update_one(
                    doc! { "_id": name },
                    doc! { "$set": { "done": true, "at": Micros::now().0 } },
                )
                .upsert(true)
        };
        match record().await {
            Err(err) if is_duplicate_key(&err) => {
                record().await?;
            }
            other => {
                other?;
            }
        }
        Ok(())
    }
}
