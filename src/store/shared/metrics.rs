//! Counts and times database commands cheaply: each command the store sends is named where it
//! is sent ([`Counted`] collections, and the few commands sent another way), and every
//! connection checkout the driver makes is counted (one per command it sends, its own
//! `getMore`s and `killCursors` included). The driver's command monitoring would name them all,
//! but it copies and parses every command and every reply into a `Document` once a handler is
//! installed, which cost about a fifth of a tree query's CPU. So a command is timed where the
//! store awaits it ([`Timed`]: two clock readings and a histogram bucket; the traces have the
//! driver's own span of each command, made only while traces are exported), and the pool is
//! watched through the connection events the counter already receives: checkouts and checkins
//! (connections in use) and how long each checkout waited.
//!
//! The same counter holds the change feed's figures (events read, and how far behind the
//! database's clock the last one was read), since the feed reads through a [`Counted`]
//! collection too.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use mongodb::action::{
    Aggregate, CountDocuments, CreateIndex, Delete, Find, FindOne, FindOneAndDelete,
    FindOneAndUpdate, InsertMany, InsertOne, Multiple, ReplaceOne, Update, Watch,
};
use mongodb::bson::{doc, Document};
use mongodb::change_stream::event::ResumeToken;
use mongodb::event::cmap::CmapEvent;
use mongodb::event::EventHandler;
use mongodb::options::{ReturnDocument, UpdateModifications};
use mongodb::{ClientSession, Collection, Database, IndexModel};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::telemetry::metrics::{gauge, Counter, Exposition, Histogram};

/// Label of the commands the driver sends on its own (the rest of a cursor, closing one).
pub(crate) const OTHER: &str = "other";

/// The commands the store times, each under the name the server sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    Find,
    Aggregate,
    Update,
    Insert,
    Delete,
    FindAndModify,
    CreateIndexes,
    CommitTransaction,
    AbortTransaction,
    Ping,
    Hello,
}

impl Command {
    const ALL: [Command; 11] = [
        Command::Find,
        Command::Aggregate,
        Command::Update,
        Command::Insert,
        Command::Delete,
        Command::FindAndModify,
        Command::CreateIndexes,
        Command::CommitTransaction,
        Command::AbortTransaction,
        Command::Ping,
        Command::Hello,
    ];

    /// The command's name, as the server sees it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Command::Find => "find",
            Command::Aggregate => "aggregate",
            Command::Update => "update",
            Command::Insert => "insert",
            Command::Delete => "delete",
            Command::FindAndModify => "findAndModify",
            Command::CreateIndexes => "createIndexes",
            Command::CommitTransaction => "commitTransaction",
            Command::AbortTransaction => "abortTransaction",
            Command::Ping => "ping",
            Command::Hello => "hello",
        }
    }
}

/// Counts every command sent, by command name, and times the commands the store awaits.
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
    /// Connections checked back in (checked out less checked in: in use now).
    checkins: AtomicU64,
    /// How long each checkout took: at once with a free connection, else the wait for one to
    /// come back or to be opened.
    checkout_wait: Histogram,
    /// Checkouts that failed (the wait ran out, or a new connection could not be opened).
    checkout_failures: Counter,
    /// Most connections in the pool.
    pool_size: AtomicU64,
    /// How long the commands the store awaited took, by [`Command`] (in its order).
    durations: [Histogram; Command::ALL.len()],
    /// Change events read from the change stream.
    change_events: Counter,
    /// Microseconds from the last change event's time on the database to when it was read.
    change_lag_micros: AtomicI64,
}

impl Tally {
    fn duration(&self, command: Command) -> Option<&Histogram> {
        self.durations.get(command as usize)
    }
}

impl Collector for Tally {
    fn encode(&self, mut out: DescriptorEncoder<'_>) -> fmt::Result {
        let mut family = out.encode_descriptor(
            "threadql_db_command_duration_seconds",
            "Time from sending a database command to having its reply (a cursor's first batch), as the store awaits it, by command name; a cursor's later batches (getMore) are not timed.",
            None,
            MetricType::Histogram,
        )?;
        for (command, histogram) in Command::ALL.iter().zip(&self.durations) {
            if histogram.count() > 0 {
                histogram.encode(family.encode_family(&[("command", command.name())])?)?;
            }
        }
        let checkouts = self.checkouts.load(Ordering::Relaxed);
        let checkins = self.checkins.load(Ordering::Relaxed);
        gauge(
            &mut out,
            "threadql_db_pool_connections_in_use",
            "Database connections checked out of the pool now.",
            checkouts.saturating_sub(checkins),
        )?;
        gauge(
            &mut out,
            "threadql_db_pool_connections_max",
            "Most database connections the pool opens (THREADQL_DB_POOL_SIZE).",
            self.pool_size.load(Ordering::Relaxed),
        )?;
        self.checkout_wait.encode(out.encode_descriptor(
            "threadql_db_pool_wait_seconds",
            "Time each connection checkout took: near zero with a free connection, else the wait for one to come back or to be opened.",
            None,
            MetricType::Histogram,
        )?)?;
        self.checkout_failures.encode(out.encode_descriptor(
            "threadql_db_pool_checkout_failures",
            "Connection checkouts that failed (the wait ran out, or a connection could not be opened).",
            None,
            MetricType::Counter,
        )?)?;
        self.change_events.encode(out.encode_descriptor(
            "threadql_change_events",
            "Change events this process read from its change stream (one per write that marked a discussion).",
            None,
            MetricType::Counter,
        )?)?;
        if self.change_events.get() > 0 {
            let lag = self.change_lag_micros.load(Ordering::Relaxed) as f64 / 1e6;
            gauge(
                &mut out,
                "threadql_change_stream_lag_seconds",
                "For the last change event read: seconds from its time on the database (wallTime, else clusterTime) to when this process read it; includes any clock difference between the two machines.",
                lag,
            )?;
        }
        Ok(())
    }
}

impl CommandCounter {
    /// A counter starting at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the pool's size, for `/metrics`.
    pub(crate) fn set_pool_size(&self, size: u32) {
        self.inner
            .pool_size
            .store(u64::from(size), Ordering::Relaxed);
    }

    /// The connection-pool handler to install in the client options.
    pub fn handler(&self) -> EventHandler<CmapEvent> {
        let inner = self.inner.clone();
        EventHandler::callback(move |event: CmapEvent| match event {
            CmapEvent::ConnectionCheckedOut(out) => {
                inner.checkouts.fetch_add(1, Ordering::Relaxed);
                inner.checkout_wait.observe(out.duration);
            }
            CmapEvent::ConnectionCheckedIn(_) => {
                inner.checkins.fetch_add(1, Ordering::Relaxed);
            }
            CmapEvent::ConnectionCheckoutFailed(_) => {
                inner.checkout_failures.inc();
            }
            _ => {}
        })
    }

    /// Awaits `command`, timed (see [`Timed`]); for the commands the store does not send
    /// through a [`Counted`] collection.
    pub(crate) async fn timed<F: IntoFuture>(&self, command: Command, sent: F) -> F::Output {
        crate::store::cache::tracking::untracked();
        let started = Instant::now();
        let done = sent.await;
        if let Some(histogram) = self.inner.duration(command) {
            histogram.observe(started.elapsed());
        }
        done
    }

    /// Counts a change event read from the change stream, `lag_micros` after the time the
    /// database gave it (when it gave one; negative when this machine's clock is behind).
    pub(crate) fn change_event(&self, lag_micros: Option<i64>) {
        self.inner.change_events.inc();
        if let Some(lag) = lag_micros {
            self.inner.change_lag_micros.store(lag, Ordering::Relaxed);
        }
    }

    /// Adds the store's metrics but the command counts to the page: command durations, the
    /// pool and the change feed.
    pub fn write(&self, out: &mut Exposition) {
        out.collect(self.inner.clone());
    }

    /// Records that the store sends a `name` command.
    /// An execution being recorded for the response cache is untracked from here, unless the
    /// command is a read the read cache covers with a generation.
    pub fn sent(&self, name: &'static str) {
        crate::store::cache::tracking::untracked();
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
pub(crate) struct Counted<T: Send + Sync> {
    coll: Collection<T>,
    db: Database,
    commands: CommandCounter,
}

impl<T: Send + Sync> Counted<T> {
    /// The collection `name` of `db`.
    pub(crate) fn new(db: &Database, name: &str, commands: &CommandCounter) -> Self {
        Self {
            coll: db.collection(name),
            db: db.clone(),
            commands: commands.clone(),
        }
    }

    /// The counter its commands are counted in.
    pub(crate) fn commands(&self) -> &CommandCounter {
        &self.commands
    }

    /// The same collection, read as another type.
    pub(crate) fn clone_with_type<U: Send + Sync>(&self) -> Counted<U> {
        Counted {
            coll: self.coll.clone_with_type(),
            db: self.db.clone(),
            commands: self.commands.clone(),
        }
    }

    /// `action`, sending `command` when it is awaited, timed.
    fn timed<'a, A>(&'a self, command: Command, action: A) -> Timed<'a, A> {
        Timed {
            action,
            command,
            tally: &self.commands.inner,
        }
    }

    /// One `update` command of several statements (`{q, u, …}` documents), applied in order, in
    /// `session`; outside a transaction it carries the collection's write concern (inside one,
    /// the commit does). Returns the server's reply: statements that failed are in its
    /// `writeErrors`, for the caller to judge.
    pub(crate) async fn update_statements(
        &self,
        statements: Vec<Document>,
        in_transaction: bool,
        session: &mut ClientSession,
    ) -> super::error::StoreResult<Document> {
        let mut command = doc! {
            "update": self.coll.name(), "updates": statements, "ordered": true,
        };
        if let Some(concern) = self.coll.write_concern().filter(|_| !in_transaction) {
            let concern = mongodb::bson::to_document(concern).map_err(super::bson::corrupt)?;
            command.insert("writeConcern", concern);
        }
        self.commands.sent("update");
        let sent = self.db.run_command(command).session(session);
        Ok(self.commands.timed(Command::Update, sent).await?)
    }

    pub(crate) fn aggregate(
        &self,
        pipeline: impl IntoIterator<Item = Document>,
    ) -> Timed<'_, Aggregate<'_>> {
        self.commands.sent("aggregate");
        self.timed(Command::Aggregate, self.coll.aggregate(pipeline))
    }

    pub(crate) fn update_one(
        &self,
        query: Document,
        update: impl Into<UpdateModifications>,
    ) -> Timed<'_, Update<'_>> {
        self.commands.sent("update");
        self.timed(Command::Update, self.coll.update_one(query, update))
    }

    pub(crate) fn replace_one(
        &self,
        query: Document,
        replacement: impl Borrow<T>,
    ) -> Timed<'_, ReplaceOne<'_>>
    where
        T: Serialize,
    {
        self.commands.sent("update");
        self.timed(Command::Update, self.coll.replace_one(query, replacement))
    }

    pub(crate) fn update_many(
        &self,
        query: Document,
        update: impl Into<UpdateModifications>,
    ) -> Timed<'_, Update<'_>> {
        self.commands.sent("update");
        self.timed(Command::Update, self.coll.update_many(query, update))
    }

    pub(crate) fn delete_one(&self, query: Document) -> Timed<'_, Delete<'_>> {
        self.commands.sent("delete");
        self.timed(Command::Delete, self.coll.delete_one(query))
    }

    pub(crate) fn delete_many(&self, query: Document) -> Timed<'_, Delete<'_>> {
        self.commands.sent("delete");
        self.timed(Command::Delete, self.coll.delete_many(query))
    }

    /// Counting documents is an aggregation on the server.
    pub(crate) fn count_documents(&self, filter: Document) -> Timed<'_, CountDocuments<'_>> {
        self.commands.sent("aggregate");
        self.timed(Command::Aggregate, self.coll.count_documents(filter))
    }

    pub(crate) fn create_index(&self, index: IndexModel) -> Timed<'_, CreateIndex<'_>> {
        self.commands.sent("createIndexes");
        self.timed(Command::CreateIndexes, self.coll.create_index(index))
    }

    /// Drops the index `name` where there is one (an earlier version's); a failure, such as
    /// there being none, is ignored.
    pub(crate) async fn retire_index(&self, name: &str) {
        self.commands.sent("dropIndexes");
        let _ = self.coll.drop_index(name).await;
    }

    pub(crate) fn create_indexes(
        &self,
        indexes: impl IntoIterator<Item = IndexModel>,
    ) -> Timed<'_, CreateIndex<'_, Multiple>> {
        self.commands.sent("createIndexes");
        self.timed(Command::CreateIndexes, self.coll.create_indexes(indexes))
    }
}

impl<T: DeserializeOwned + Send + Sync> Counted<T> {
    pub(crate) fn find(&self, filter: Document) -> Timed<'_, Find<'_, T>> {
        self.commands.sent("find");
        self.timed(Command::Find, self.coll.find(filter))
    }

    pub(crate) fn find_one(&self, filter: Document) -> Timed<'_, FindOne<'_, T>> {
        self.commands.sent("find");
        self.timed(Command::Find, self.coll.find_one(filter))
    }

    pub(crate) fn find_one_and_update(
        &self,
        filter: Document,
        update: impl Into<UpdateModifications>,
    ) -> Timed<'_, FindOneAndUpdate<'_, T>> {
        self.commands.sent("findAndModify");
        self.timed(
            Command::FindAndModify,
            self.coll.find_one_and_update(filter, update),
        )
    }

    pub(crate) fn find_one_and_delete(
        &self,
        filter: Document,
    ) -> Timed<'_, FindOneAndDelete<'_, T>> {
        self.commands.sent("findAndModify");
        self.timed(
            Command::FindAndModify,
            self.coll.find_one_and_delete(filter),
        )
    }
}

impl<T: Serialize + Send + Sync> Counted<T> {
    pub(crate) fn insert_one(&self, doc: impl Borrow<T>) -> Timed<'_, InsertOne<'_>> {
        self.commands.sent("insert");
        self.timed(Command::Insert, self.coll.insert_one(doc))
    }

    pub(crate) fn insert_many(
        &self,
        docs: impl IntoIterator<Item = impl Borrow<T>>,
    ) -> Timed<'_, InsertMany<'_>> {
        self.commands.sent("insert");
        self.timed(Command::Insert, self.coll.insert_many(docs))
    }
}

impl<T: DeserializeOwned + Unpin + Send + Sync> Counted<T> {
    /// Opening a change stream is an aggregation on the server.
    pub(crate) fn watch(&self) -> Timed<'_, Watch<'_, T>> {
        self.commands.sent("aggregate");
        self.timed(Command::Aggregate, self.coll.watch())
    }
}

/// A driver action of a [`Counted`] collection, timed when it is awaited: from the first poll
/// to the reply, into its command's histogram. It takes the options the store sets on the
/// action as the action does.
#[must_use]
pub(crate) struct Timed<'a, A> {
    action: A,
    command: Command,
    tally: &'a Tally,
}

impl<'a, A> Timed<'a, A> {
    fn map<B>(self, set: impl FnOnce(A) -> B) -> Timed<'a, B> {
        Timed {
            action: set(self.action),
            command: self.command,
            tally: self.tally,
        }
    }
}

impl<'a, A> IntoFuture for Timed<'a, A>
where
    A: IntoFuture,
    A::IntoFuture: Unpin,
{
    type Output = A::Output;
    type IntoFuture = TimedFuture<'a, A::IntoFuture>;

    fn into_future(self) -> Self::IntoFuture {
        TimedFuture {
            histogram: self.tally.duration(self.command),
            started: Instant::now(),
            sent: self.action.into_future(),
        }
    }
}

/// The future of a [`Timed`] action.
pub(crate) struct TimedFuture<'a, F> {
    sent: F,
    started: Instant,
    histogram: Option<&'a Histogram>,
}

impl<F: Future + Unpin> Future for TimedFuture<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.sent).poll(cx);
        if polled.is_ready() {
            if let Some(histogram) = this.histogram {
                histogram.observe(this.started.elapsed());
            }
        }
        polled
    }
}

impl<'a, T: Send + Sync, S> Timed<'a, Find<'a, T, S>> {
    pub(crate) fn sort(self, sort: Document) -> Self {
        self.map(|a| a.sort(sort))
    }

    pub(crate) fn limit(self, limit: i64) -> Self {
        self.map(|a| a.limit(limit))
    }

    pub(crate) fn skip(self, skip: u64) -> Self {
        self.map(|a| a.skip(skip))
    }

    pub(crate) fn projection(self, projection: Document) -> Self {
        self.map(|a| a.projection(projection))
    }

    pub(crate) fn batch_size(self, size: u32) -> Self {
        self.map(|a| a.batch_size(size))
    }

    /// Names the command in the database's logs and profiles (and for the tests' checks).
    pub(crate) fn comment(self, comment: &str) -> Self {
        self.map(|a| a.comment(mongodb::bson::Bson::from(comment)))
    }
}

impl<'a> Timed<'a, InsertMany<'a>> {
    pub(crate) fn session(self, session: impl Into<&'a mut ClientSession>) -> Self {
        self.map(|a| a.session(session))
    }
}

impl<'a, T: Send + Sync> Timed<'a, FindOne<'a, T>> {
    pub(crate) fn session(self, session: impl Into<&'a mut ClientSession>) -> Self {
        self.map(|a| a.session(session))
    }

    pub(crate) fn projection(self, projection: Document) -> Self {
        self.map(|a| a.projection(projection))
    }
}

impl<'a, T: Send + Sync> Timed<'a, FindOneAndUpdate<'a, T>> {
    pub(crate) fn projection(self, projection: Document) -> Self {
        self.map(|a| a.projection(projection))
    }

    pub(crate) fn upsert(self, upsert: bool) -> Self {
        self.map(|a| a.upsert(upsert))
    }

    pub(crate) fn return_document(self, which: ReturnDocument) -> Self {
        self.map(|a| a.return_document(which))
    }

    pub(crate) fn session(self, session: impl Into<&'a mut ClientSession>) -> Self {
        self.map(|a| a.session(session))
    }
}

impl<'a, S, T> Timed<'a, Aggregate<'a, S, T>> {
    pub(crate) fn batch_size(self, size: u32) -> Self {
        self.map(|a| a.batch_size(size))
    }

    pub(crate) fn with_type<U>(self) -> Timed<'a, Aggregate<'a, S, U>> {
        self.map(|a| a.with_type::<U>())
    }
}

impl<'a> Timed<'a, Update<'a>> {
    pub(crate) fn upsert(self, upsert: bool) -> Self {
        self.map(|a| a.upsert(upsert))
    }

    pub(crate) fn session(self, session: impl Into<&'a mut ClientSession>) -> Self {
        self.map(|a| a.session(session))
    }
}

impl<'a> Timed<'a, Delete<'a>> {
    pub(crate) fn session(self, session: impl Into<&'a mut ClientSession>) -> Self {
        self.map(|a| a.session(session))
    }
}

impl<'a> Timed<'a, ReplaceOne<'a>> {
    pub(crate) fn upsert(self, upsert: bool) -> Self {
        self.map(|a| a.upsert(upsert))
    }

    pub(crate) fn session(self, session: impl Into<&'a mut ClientSession>) -> Self {
        self.map(|a| a.session(session))
    }
}

impl<'a, T: Send + Sync> Timed<'a, FindOneAndDelete<'a, T>> {
    pub(crate) fn session(self, session: impl Into<&'a mut ClientSession>) -> Self {
        self.map(|a| a.session(session))
    }
}

impl<'a> Timed<'a, InsertMany<'a>> {
    pub(crate) fn ordered(self, ordered: bool) -> Self {
        self.map(|a| a.ordered(ordered))
    }
}

impl<'a> Timed<'a, InsertOne<'a>> {
    pub(crate) fn session(self, session: impl Into<&'a mut ClientSession>) -> Self {
        self.map(|a| a.session(session))
    }
}

impl<'a, T> Timed<'a, Watch<'a, T>> {
    pub(crate) fn pipeline(self, pipeline: impl IntoIterator<Item = Document>) -> Self {
        self.map(|a| a.pipeline(pipeline))
    }

    pub(crate) fn resume_after(self, token: impl Into<Option<ResumeToken>>) -> Self {
        self.map(|a| a.resume_after(token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_timed_command_counts_in_its_histogram_only() {
        let counter = CommandCounter::new();
        assert_eq!(counter.timed(Command::Ping, std::future::ready(7)).await, 7);
        let mut page = Exposition::new();
        counter.write(&mut page);
        let text = page.into_text();
        assert!(
            text.contains("threadql_db_command_duration_seconds_count{command=\"ping\"} 1"),
            "{text}"
        );
        assert!(!text.contains("command=\"find\""), "{text}");
    }
}
