//! Counts database commands cheaply: each command the store sends is named where it is sent
//! ([`Counted`] collections, and the few commands sent another way), and every connection
//! checkout the driver makes is counted (one per command it sends, its own `getMore`s and
//! `killCursors` included). The driver's command monitoring would name them all, but it copies
//! and parses every command and every reply into a `Document` once a handler is installed,
//! which cost about a fifth of a tree query's CPU.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mongodb::action::{
    Aggregate, CountDocuments, CreateIndex, Delete, Find, FindOne, FindOneAndUpdate, InsertMany,
    InsertOne, Multiple, Update, Watch,
};
use mongodb::bson::{doc, Document};
use mongodb::event::cmap::CmapEvent;
use mongodb::event::EventHandler;
use mongodb::options::UpdateModifications;
use mongodb::{ClientSession, Collection, Database, IndexModel};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Label of the commands the driver sends on its own (the rest of a cursor, closing one).
pub(super) const OTHER: &str = "other";

/// Counts every command sent, by command name.
#[derive(Debug, Default, Clone)]
pub struct CommandCounter {
    inner: Arc<Tally>,
}

#[derive(Debug, Default)]
struct Tally {
    /// Commands the store sent, by the name the server sees.
    named: Mutex<BTreeMap<&'static str, u64>>,
    /// Connections checked out: one per command on the wire.
    checkouts: AtomicU64,
}

impl CommandCounter {
    /// A counter starting at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// The connection-pool handler to install in the client options.
    pub fn handler(&self) -> EventHandler<CmapEvent> {
        let inner = self.inner.clone();
        EventHandler::callback(move |event: CmapEvent| {
            if let CmapEvent::ConnectionCheckedOut(_) = event {
                inner.checkouts.fetch_add(1, Ordering::Relaxed);
            }
        })
    }

    /// Records that the store sends a `name` command.
    pub fn sent(&self, name: &'static str) {
        let mut named = self.inner.named.lock().unwrap_or_else(|p| p.into_inner());
        *named.entry(name).or_default() += 1;
    }

    /// The counts so far, by command name; commands the driver sent on its own are counted as `"other"`.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        let named = self
            .inner
            .named
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let total = self.inner.checkouts.load(Ordering::Relaxed);
        let other = total.saturating_sub(named.values().sum());
        let mut out: BTreeMap<String, u64> =
            named.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        if other > 0 {
            out.insert(OTHER.to_owned(), other);
        }
        out
    }

    /// All commands sent so far.
    pub fn total(&self) -> u64 {
        self.inner.checkouts.load(Ordering::Relaxed)
    }
}

/// A collection whose commands are counted: the driver's methods the store uses, each naming
/// its command as the server sees it.
#[derive(Debug, Clone)]
pub(super) struct Counted<T: Send + Sync> {
    coll: Collection<T>,
    db: Database,
    commands: CommandCounter,
}

impl<T: Send + Sync> Counted<T> {
    /// The collection `name` of `db`.
    pub(super) fn new(db: &Database, name: &str, commands: &CommandCounter) -> Self {
        Self {
            coll: db.collection(name),
            db: db.clone(),
            commands: commands.clone(),
        }
    }

    /// The same collection, read as another type.
    pub(super) fn clone_with_type<U: Send + Sync>(&self) -> Counted<U> {
        Counted {
            coll: self.coll.clone_with_type(),
            db: self.db.clone(),
            commands: self.commands.clone(),
        }
    }

    /// One `update` command of several statements (`{q, u, …}` documents), applied in order, in
    /// `session`; outside a transaction it carries the collection's write concern (inside one,
    /// the commit does). Returns the server's reply: statements that failed are in its
    /// `writeErrors`, for the caller to judge.
    pub(super) async fn update_statements(
        &self,
        statements: Vec<Document>,
        in_transaction: bool,
        session: &mut ClientSession,
    ) -> super::StoreResult<Document> {
        let mut command = doc! {
            "update": self.coll.name(), "updates": statements, "ordered": true,
        };
        if let Some(concern) = self.coll.write_concern().filter(|_| !in_transaction) {
            let concern = mongodb::bson::to_document(concern).map_err(super::bson::corrupt)?;
            command.insert("writeConcern", concern);
        }
        self.commands.sent("update");
        Ok(self.db.run_command(command).session(session).await?)
    }

    pub(super) fn aggregate(&self, pipeline: impl IntoIterator<Item = Document>) -> Aggregate<'_> {
        self.commands.sent("aggregate");
        self.coll.aggregate(pipeline)
    }

    pub(super) fn update_one(
        &self,
        query: Document,
        update: impl Into<UpdateModifications>,
    ) -> Update<'_> {
        self.commands.sent("update");
        self.coll.update_one(query, update)
    }

    pub(super) fn delete_many(&self, query: Document) -> Delete<'_> {
        self.commands.sent("delete");
        self.coll.delete_many(query)
    }

    /// Counting documents is an aggregation on the server.
    pub(super) fn count_documents(&self, filter: Document) -> CountDocuments<'_> {
        self.commands.sent("aggregate");
        self.coll.count_documents(filter)
    }

    pub(super) fn create_index(&self, index: IndexModel) -> CreateIndex<'_> {
        self.commands.sent("createIndexes");
        self.coll.create_index(index)
    }

    pub(super) fn create_indexes(
        &self,
        indexes: impl IntoIterator<Item = IndexModel>,
    ) -> CreateIndex<'_, Multiple> {
        self.commands.sent("createIndexes");
        self.coll.create_indexes(indexes)
    }
}

impl<T: DeserializeOwned + Send + Sync> Counted<T> {
    pub(super) fn find(&self, filter: Document) -> Find<'_, T> {
        self.commands.sent("find");
        self.coll.find(filter)
    }

    pub(super) fn find_one(&self, filter: Document) -> FindOne<'_, T> {
        self.commands.sent("find");
        self.coll.find_one(filter)
    }

    pub(super) fn find_one_and_update(
        &self,
        filter: Document,
        update: impl Into<UpdateModifications>,
    ) -> FindOneAndUpdate<'_, T> {
        self.commands.sent("findAndModify");
        self.coll.find_one_and_update(filter, update)
    }
}

impl<T: Serialize + Send + Sync> Counted<T> {
    pub(super) fn insert_one(&self, doc: impl Borrow<T>) -> InsertOne<'_> {
        self.commands.sent("insert");
        self.coll.insert_one(doc)
    }

    pub(super) fn insert_many(
        &self,
        docs: impl IntoIterator<Item = impl Borrow<T>>,
    ) -> InsertMany<'_> {
        self.commands.sent("insert");
        self.coll.insert_many(docs)
    }
}

impl<T: DeserializeOwned + Unpin + Send + Sync> Counted<T> {
    /// Opening a change stream is an aggregation on the server.
    pub(super) fn watch(&self) -> Watch<'_, T> {
        self.commands.sent("aggregate");
        self.coll.watch()
    }
}
