//! `Store`: connects to MongoDB, counts commands, creates indexes and hands out the layouts.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use mongodb::bson::{doc, Document};
use mongodb::options::{ClientOptions, IndexOptions};
use mongodb::{Client, Database, IndexModel};

use super::bucketed::Bucketed;
use super::embedded::Embedded;
use super::per_comment::PerComment;
use super::{CommandCounter, Discussions, DynCommentStore, StoreError, StoreResult};
use crate::domain::slug::MonotonicClock;
use crate::domain::Layout;

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
}

impl StoreConfig {
    /// Settings for a connection string and database, with every other value at its default.
    pub fn new(uri: String, database: String) -> Self {
        Self {
            uri,
            database,
            max_depth: 32,
            bucket_size: 100,
            embedded_max_bytes: 8 * 1024 * 1024,
        }
    }
}

/// The storage layer as the rest of the program holds it.
pub struct Store {
    db: Database,
    /// Discussion metadata, shared by every layout.
    pub discussions: Discussions,
    layouts: HashMap<Layout, DynCommentStore>,
    commands: CommandCounter,
}

impl Store {
    /// Connects, installs the command counter and creates the indexes (idempotent).
    pub async fn connect(config: &StoreConfig) -> StoreResult<Self> {
        let mut options = ClientOptions::parse(&config.uri).await?;
        let commands = CommandCounter::new();
        options.command_event_handler = Some(commands.handler());
        options.app_name = Some("threadql".to_owned());
        if options.server_selection_timeout.is_none() {
            options.server_selection_timeout = Some(Duration::from_secs(10));
        }
        let client = Client::with_options(options)?;
        let db = client.database(&config.database);
        let clock = Arc::new(MonotonicClock::default());
        let discussions = Discussions::new(&db, clock.clone());
        let per_comment = PerComment::new(
            &db,
            discussions.clone(),
            clock.clone(),
            config.max_depth.max(1),
        );
        let embedded = Embedded::new(
            &db,
            clock.clone(),
            config.max_depth.max(1),
            config.embedded_max_bytes,
        );
        let bucketed = Bucketed::new(
            &db,
            discussions.clone(),
            clock,
            config.max_depth.max(1),
            config.bucket_size,
        );
        discussions.ensure_indexes().await?;
        per_comment.ensure_indexes().await?;
        bucketed.ensure_indexes().await?;
        let mut layouts: HashMap<Layout, DynCommentStore> = HashMap::new();
        layouts.insert(Layout::PerComment, Arc::new(per_comment));
        layouts.insert(Layout::Embedded, Arc::new(embedded));
        layouts.insert(Layout::Bucketed, Arc::new(bucketed));
        Ok(Self {
            db,
            discussions,
            layouts,
            commands,
        })
    }

    /// The implementation of a layout.
    pub fn layout(&self, layout: Layout) -> StoreResult<&DynCommentStore> {
        self.layouts.get(&layout).ok_or_else(|| {
            StoreError::Unsupported(format!(
                "the {layout} layout is not available in this build"
            ))
        })
    }

    /// Whether a layout is available.
    pub fn supports(&self, layout: Layout) -> bool {
        self.layouts.contains_key(&layout)
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> StoreResult<()> {
        self.db.run_command(doc! { "ping": 1 }).await?;
        Ok(())
    }

    /// Database commands sent so far, by command name.
    pub fn commands(&self) -> &CommandCounter {
        &self.commands
    }
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
