//! Connecting to MongoDB: the client, its command counting, the deployment's abilities, and the
//! helper every collection's indexes are made with.

use std::time::Duration;

use mongodb::bson::{doc, Document};
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use mongodb::options::{Acknowledgment, ClientOptions, IndexOptions, WriteConcern};
use mongodb::{Client, Database, IndexModel};

use super::error::{StoreError, StoreResult};
use super::metrics::{Command, CommandCounter};
use crate::store::api::MoveTiming;

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
    /// The most bytes the read cache of hot discussions holds (0: no cache).
    pub cache_bytes: u64,
    /// Whether a post that does not fit in an embedded discussion moves it to the bucketed
    /// layout (and is then posted there) instead of failing with `TooLarge`.
    pub promote_embedded: bool,
    /// How moves between layouts hold their discussion, and how long writes wait for them.
    pub moves: MoveTiming,
    /// Receives every command the driver sends (`None` in production: the driver then builds
    /// no events at all). Tests use it to check what the store sends.
    pub command_events: Option<EventHandler<CommandEvent>>,
    /// Whether the driver makes a span of each operation and command it sends, for the global
    /// OpenTelemetry tracer provider (set while traces are exported).
    pub traces: bool,
    /// How long the event log keeps events.
    pub event_retention: crate::store::Retention,
    /// How long notifications are kept.
    pub notification_retention: std::time::Duration,
    /// Whether connecting makes the indexes (a second store over the same database, for
    /// background work, leaves them to the first).
    pub ensure_indexes: bool,
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

/// An open connection: the client, its database, the command counter, and whether the
/// deployment runs multi-document transactions.
pub(crate) struct Connection {
    /// The client.
    pub(crate) client: Client,
    /// The configured database.
    pub(crate) db: Database,
    /// Counts every command sent.
    pub(crate) commands: CommandCounter,
    /// Whether the deployment runs transactions.
    pub(crate) transactions: bool,
}

/// Connects and installs the command counter.
pub(crate) async fn open(config: &StoreConfig) -> StoreResult<Connection> {
    let mut options = ClientOptions::parse(&config.uri).await?;
    let commands = CommandCounter::new();
    commands.set_pool_size(config.pool_size);
    options.cmap_event_handler = Some(commands.handler());
    options.command_event_handler = config.command_events.clone();
    options.app_name = Some("threadql".to_owned());
    options.server_selection_timeout = Some(config.timeout);
    options.connect_timeout = Some(config.timeout);
    options.max_pool_size = Some(config.pool_size);
    options.write_concern = Some(config.write_concern()?);
    options.tracing = Some(
        mongodb::otel::OpentelemetryOptions::builder()
            .enabled(config.traces)
            .build(),
    );
    let client = Client::with_options(options)?;
    let db = client.database(&config.database);
    commands.sent("hello");
    let transactions = commands
        .timed(Command::Hello, supports_transactions(&db))
        .await?;
    Ok(Connection {
        client,
        db,
        commands,
        transactions,
    })
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
pub(crate) fn index_model(name: &str, keys: Document, unique: bool) -> IndexModel {
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
