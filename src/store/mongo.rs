//! `Store`: connects to MongoDB, counts commands, creates indexes and hands out the layouts.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use mongodb::bson::{doc, Document};
use mongodb::options::{Acknowledgment, ClientOptions, IndexOptions, WriteConcern};
use mongodb::{Client, Database, IndexModel};

use super::bucketed::Bucketed;
use super::embedded::Embedded;
use super::metrics::Counted;
use super::per_comment::PerComment;
use super::write::{revise, Decide, Writer};
use super::{changes, Watched};
use super::{
    CommandCounter, CommentStore, DiscussionStore, Discussions, Storage, StoreError, StoreResult,
};
use crate::domain::slug::MonotonicClock;
use crate::domain::{Comment, Discussion, DomainError, Layout, Slug};

/// What the store needs to know to connect and to shape comments.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// MongoDB connection string.
    pub uri: String,
    /// Database name.
    pub database: String,
    /// Deepest comment depth allowed (depth 0 is top-level).
    pub max_depth: usize,
    /// Comments per bucket in the bucketed layout.
    pub bucket_size: u32,
    /// Size cap of a discussion document in the embedded layout, in bytes (MongoDB refuses
    /// documents over 16 MiB).
    pub embedded_max_bytes: usize,
    /// How long to wait for a server to talk to (and for a connection to open) before failing.
    pub timeout: Duration,
    /// Most connections in the pool.
    pub pool_size: u32,
    /// Write concern: `majority`, or a number of nodes.
    pub write_concern: String,
    /// Whether writes wait for the journal.
    pub journal: bool,
}

impl StoreConfig {
    fn write_concern(&self) -> StoreResult<WriteConcern> {
        let w = match self.write_concern.trim() {
            "majority" => Acknowledgment::Majority,
            n => Acknowledgment::Nodes(n.parse().map_err(|_| {
                StoreError::Unsupported(format!(
                    "write concern {n:?}: expected `majority` or a number of nodes"
                ))
            })?),
        };
        Ok(WriteConcern::builder().w(w).journal(self.journal).build())
    }
}

/// The MongoDB storage: discussions, the three layouts, and the command counter.
pub struct Store {
    db: Database,
    discussions: Discussions,
    layouts: HashMap<Layout, Arc<dyn CommentStore>>,
    commands: CommandCounter,
    clock: Arc<MonotonicClock>,
}

impl Store {
    /// Connects, installs the command counter and creates the indexes (idempotent).
    pub async fn connect(config: &StoreConfig) -> StoreResult<Self> {
        let mut options = ClientOptions::parse(&config.uri).await?;
        let commands = CommandCounter::new();
        options.cmap_event_handler = Some(commands.handler());
        options.app_name = Some("threadql".to_owned());
        options.server_selection_timeout = Some(config.timeout);
        options.connect_timeout = Some(config.timeout);
        options.max_pool_size = Some(config.pool_size);
        options.write_concern = Some(config.write_concern()?);
        let client = Client::with_options(options)?;
        let db = client.database(&config.database);
        let clock = Arc::new(MonotonicClock::default());
        commands.sent("hello");
        let transactions = supports_transactions(&db).await?;
        let writer = Writer::new(
            client.clone(),
            transactions,
            clock.clone(),
            config.max_depth.max(1),
            commands.clone(),
        );
        let discussions = Discussions::new(&db, clock.clone(), transactions, &commands);
        let per_comment = PerComment::new(&db, discussions.clone(), writer.clone());
        let embedded = Embedded::new(&db, writer.clone(), config.embedded_max_bytes);
        let bucketed = Bucketed::new(&db, discussions.clone(), writer, config.bucket_size);
        discussions.ensure_indexes().await?;
        per_comment.ensure_indexes().await?;
        bucketed.ensure_indexes().await?;
        let mut layouts: HashMap<Layout, Arc<dyn CommentStore>> = HashMap::new();
        layouts.insert(Layout::PerComment, Arc::new(per_comment));
        layouts.insert(Layout::Embedded, Arc::new(embedded));
        layouts.insert(Layout::Bucketed, Arc::new(bucketed));
        Ok(Self {
            db,
            discussions,
            layouts,
            commands,
            clock,
        })
    }

    /// Database commands sent so far.
    pub fn commands(&self) -> &CommandCounter {
        &self.commands
    }
}

#[async_trait]
impl Storage for Store {
    fn discussions(&self) -> &dyn DiscussionStore {
        &self.discussions
    }

    fn layout(&self, layout: Layout) -> StoreResult<&dyn CommentStore> {
        match self.layouts.get(&layout) {
            Some(store) => Ok(store.as_ref()),
            None => Err(StoreError::Unsupported(format!(
                "the {layout} layout is not available in this build"
            ))),
        }
    }

    async fn ping(&self) -> StoreResult<()> {
        self.commands.sent("ping");
        self.db.run_command(doc! { "ping": 1 }).await?;
        Ok(())
    }

    fn command_counts(&self) -> BTreeMap<String, u64> {
        self.commands.snapshot()
    }

    async fn change_comment(
        &self,
        discussion: &Discussion,
        slug: &Slug,
        decide: &Decide<'_>,
    ) -> Result<Comment, DomainError> {
        let layout = self.layout(discussion.layout)?;
        revise(layout, &self.clock, discussion, slug, decide).await
    }

    fn changes(&self, retry: Duration) -> BoxStream<'static, Watched> {
        changes::feed(
            Counted::new(&self.db, Discussions::COLLECTION, &self.commands),
            retry,
        )
    }
}

/// Whether the deployment runs multi-document transactions: a replica set member or a mongos
/// (a standalone server cannot; then a post's writes go one after the other, with a warning).
async fn supports_transactions(db: &Database) -> StoreResult<bool> {
    let hello = db.run_command(doc! { "hello": 1 }).await?;
    let replicated = hello.get_str("setName").is_ok() || hello.get_str("msg") == Ok("isdbgrid");
    if !replicated {
        tracing::warn!(
            "the database is a standalone server: posts are written without transactions, so a \
             crash between a comment and its counters can leave a counter one low; use a replica set"
        );
    }
    Ok(replicated)
}

/// An index with a name (so re-creating it at start-up is a no-op), unique or not.
pub(super) fn index_model(name: &str, keys: Document, unique: bool) -> IndexModel {
    IndexModel::builder()
        .keys(keys)
        .options(
            IndexOptions::builder()
                .name(name.to_owned())
                .unique(unique.then_some(true))
                .build(),
        )
        .build()
}
