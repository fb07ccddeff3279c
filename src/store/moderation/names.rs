//! `reserved_names`: one document per name moderators reserved, `_id` its name key
//! (`domain::name_key`), so reserving is one upsert by `_id` and two spellings of one name
//! are one reservation. Each process reads the whole collection (it is kept small by the
//! service) into its copy of the reserved names every few seconds: that background read has
//! a command counter of its own, so it is not in `threadql_db_commands_total` (nor in the
//! counts of whatever request it happens to run beside); reserving, releasing and listing are.

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, Document};
use mongodb::Database;

use super::{author_doc, author_of, micros_of, string_of};
use crate::domain::{DisplayName, Event, Reason, ReservedName};
use crate::store::api::NameStore;
use crate::store::events::EventLog;
use crate::store::shared::bson::corrupt;
use crate::store::shared::error::StoreResult;
use crate::store::shared::metrics::{CommandCounter, Counted};

/// The collection of reserved names.
pub(crate) const COLLECTION: &str = "reserved_names";

/// The names moderators reserved.
pub(crate) struct ReservedNames {
    names: Counted<Document>,
    /// The same collection, for the background read ([`NameStore::poll`]).
    polled: Counted<Document>,
    /// The event log, which reservations join in their transaction.
    events: EventLog,
}

impl ReservedNames {
    pub(crate) fn new(db: &Database, commands: &CommandCounter, events: EventLog) -> Self {
        Self {
            events,
            names: Counted::new(db, COLLECTION, commands),
            polled: Counted::new(db, COLLECTION, &CommandCounter::new()),
        }
    }
}

/// Every reservation in `names`, by key, at most `limit`.
async fn read_all(names: &Counted<Document>, limit: u64) -> StoreResult<Vec<ReservedName>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let docs: Vec<Document> = names
        .find(doc! {})
        .sort(doc! { "_id": 1 })
        .limit(limit)
        .await?
        .try_collect()
        .await?;
    docs.iter().map(reserved_of).collect()
}

/// The stored form of a reservation.
fn reserved_doc(reserved: &ReservedName) -> Document {
    let mut doc = doc! {
        "_id": reserved.name.key(),
        "name": reserved.name.as_str(),
        "by": author_doc(&reserved.by),
        "at": reserved.at.0,
    };
    if let Some(reason) = &reserved.reason {
        doc.insert("reason", reason.as_str());
    }
    doc
}

fn reserved_of(doc: &Document) -> StoreResult<ReservedName> {
    let bad = |e: String| corrupt(format!("a reserved name: {e}"));
    Ok(ReservedName {
        name: DisplayName::from_stored(
            doc.get_str("name")
                .map_err(|_| bad("no name".into()))?
                .to_owned(),
        ),
        reason: string_of(doc, "reason")
            .map_err(|e| bad(e.to_string()))?
            .map(Reason::from_stored),
        by: author_of(doc, "by").map_err(|e| bad(e.to_string()))?,
        at: micros_of(doc, "at")
            .map_err(|e| bad(e.to_string()))?
            .ok_or_else(|| bad("no time".into()))?,
    })
}

#[async_trait]
impl NameStore for ReservedNames {
    async fn reserve(&self, reserved: &ReservedName, events: &[Event]) -> StoreResult<()> {
        let key = reserved.name.key();
        self.events
            .replace_with(&self.names, &key, &reserved_doc(reserved), events)
            .await
    }

    async fn release(
        &self,
        key: &str,
        announce: &(dyn for<'r> Fn(&'r ReservedName) -> Vec<Event> + Send + Sync),
    ) -> StoreResult<Option<ReservedName>> {
        self.events
            .remove_with(&self.names, key, &reserved_of, announce)
            .await
    }

    async fn count(&self) -> StoreResult<u64> {
        Ok(self.names.count_documents(doc! {}).await?)
    }

    async fn all(&self, limit: u64) -> StoreResult<Vec<ReservedName>> {
        read_all(&self.names, limit).await
    }

    async fn poll(&self, limit: u64) -> StoreResult<Vec<ReservedName>> {
        read_all(&self.polled, limit).await
    }
}
