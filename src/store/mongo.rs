//! `Store`: connects to MongoDB, counts commands, creates indexes and hands out the layouts.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use mongodb::bson::{doc, Document};
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use mongodb::options::{Acknowledgment, ClientOptions, IndexOptions, WriteConcern};
use mongodb::{Client, Database, IndexModel};

use super::bucketed::Bucketed;
use super::discussions::locked;
use super::embedded::Embedded;
use super::metrics::Counted;
use super::migrate::{self, MoveTiming, Moved, Movers, Step};
use super::per_comment::PerComment;
use super::write::{revise, Decide, Writer};
use super::{changes, Posted, Watched};
use super::{
    CommandCounter, CommentStore, DiscussionStore, Discussions, Storage, StoreError, StoreResult,
};
use crate::domain::slug::MonotonicClock;
use crate::domain::{Comment, Discussion, DiscussionId, DomainError, Layout, NewComment, Slug};

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
    /// Whether a post that does not fit in an embedded discussion moves it to the bucketed
    /// layout (and is then posted there) instead of failing with `TooLarge`.
    pub promote_embedded: bool,
    /// How moves between layouts hold their discussion, and how long writes wait for them.
    pub moves: MoveTiming,
    /// Receives every command the driver sends (`None` in production: the driver then builds
    /// no events at all). Tests use it to check what the store sends.
    pub command_events: Option<EventHandler<CommandEvent>>,
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
    per_comment: Arc<PerComment>,
    embedded: Arc<Embedded>,
    bucketed: Arc<Bucketed>,
    commands: CommandCounter,
    clock: Arc<MonotonicClock>,
    transactions: bool,
    promote_embedded: bool,
    moves: MoveTiming,
    /// Embedded and bucketed discussions this process posted to lately, as it last read them
    /// (see [`Storage::post_to`]).
    posting: std::sync::Mutex<HashMap<DiscussionId, Arc<Discussion>>>,
}

/// Discussions whose metadata a process keeps for posting (past this, it starts over).
const POSTING: usize = 1024;

impl Store {
    /// Connects, installs the command counter and creates the indexes (idempotent).
    pub async fn connect(config: &StoreConfig) -> StoreResult<Self> {
        let mut options = ClientOptions::parse(&config.uri).await?;
        let commands = CommandCounter::new();
        options.cmap_event_handler = Some(commands.handler());
        options.command_event_handler = config.command_events.clone();
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
        let (per_comment, embedded, bucketed) = (
            Arc::new(per_comment),
            Arc::new(embedded),
            Arc::new(bucketed),
        );
        let mut layouts: HashMap<Layout, Arc<dyn CommentStore>> = HashMap::new();
        layouts.insert(Layout::PerComment, per_comment.clone());
        layouts.insert(Layout::Embedded, embedded.clone());
        layouts.insert(Layout::Bucketed, bucketed.clone());
        Ok(Self {
            db,
            discussions,
            layouts,
            per_comment,
            embedded,
            bucketed,
            commands,
            clock,
            transactions,
            promote_embedded: config.promote_embedded,
            moves: config.moves,
            posting: std::sync::Mutex::default(),
        })
    }

    /// The layouts as a move sees them.
    fn movers(&self) -> Movers<'_> {
        let mut movers: Movers<'_> = HashMap::new();
        movers.insert(Layout::PerComment, self.per_comment.as_ref());
        movers.insert(Layout::Embedded, self.embedded.as_ref());
        movers.insert(Layout::Bucketed, self.bucketed.as_ref());
        movers
    }

    /// Waits while a move of the discussion holds it, then reads it again.
    async fn after_move(&self, id: &DiscussionId) -> StoreResult<Discussion> {
        migrate::until_unfenced(&self.discussions.raw(), id, self.moves.wait).await?;
        self.discussions.by_id(id).await
    }

    /// Shards the collections on a sharded cluster (see `shard`).
    pub async fn shard_setup(&self) -> StoreResult<Vec<String>> {
        super::shard::setup(&self.db).await
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
        let mut discussion = discussion.clone();
        loop {
            let layout = self.layout(discussion.layout)?;
            match revise(layout, &self.clock, &discussion, slug, decide).await {
                Err(DomainError::Moving(_)) => {
                    discussion = self.after_move(&discussion.id).await?;
                }
                other => return other,
            }
        }
    }

    async fn post(&self, discussion: &Discussion, new: NewComment) -> StoreResult<Posted> {
        let start = discussion.moves;
        let mut discussion = discussion.clone();
        let mut promoted = false;
        loop {
            let layout = self.layout(discussion.layout)?;
            match layout.post_comment(&discussion, new.clone()).await {
                Err(StoreError::Moving(_)) => {
                    discussion = self.after_move(&discussion.id).await?;
                    if discussion.locked {
                        return Err(locked(&discussion.id));
                    }
                }
                Err(StoreError::TooLarge(why))
                    if discussion.layout == Layout::Embedded
                        && self.promote_embedded
                        && !promoted =>
                {
                    promoted = true;
                    tracing::info!(discussion = %discussion.id, %why, "promoting a full embedded discussion to the bucketed layout");
                    match self
                        .migrate(&discussion.id, Layout::Bucketed, &|_| {})
                        .await
                    {
                        Ok(moved) => discussion = moved.discussion,
                        // Another post is promoting it already.
                        Err(StoreError::Busy(_)) => {
                            discussion = self.after_move(&discussion.id).await?;
                        }
                        Err(err) => return Err(err),
                    }
                }
                Ok(mut posted) => {
                    if discussion.moves != start {
                        posted.moved = Some(discussion);
                    }
                    return Ok(posted);
                }
                Err(err) => return Err(err),
            }
        }
    }

    async fn post_to(
        &self,
        id: &DiscussionId,
        new: NewComment,
    ) -> StoreResult<(Arc<Discussion>, Posted)> {
        let kept = {
            let posting = self.posting.lock().unwrap_or_else(|p| p.into_inner());
            posting.get(id).cloned()
        };
        // Per-comment posts read the discussion's thread counts, so only the other layouts
        // post from what the process kept.
        let discussion = match kept {
            Some(discussion) => discussion,
            None => {
                let discussion = self.discussions.by_id(id).await?;
                if discussion.locked {
                    return Err(locked(id));
                }
                Arc::new(discussion)
            }
        };
        let mut discussion = discussion;
        let result = loop {
            match self.post(&discussion, new.clone()).await {
                // The parent may have been looked for where a move just took it from (the
                // discussion as kept, or as read a moment before the move): look again where
                // the discussion is now.
                Err(StoreError::NotFound(why)) => {
                    let now = self.discussions.by_id(id).await?;
                    if now.moves == discussion.moves {
                        break Err(StoreError::NotFound(why));
                    }
                    if now.locked {
                        break Err(locked(id));
                    }
                    discussion = Arc::new(now);
                }
                other => break other,
            }
        };
        let mut posting = self.posting.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(mut posted) => {
                let now = posted.moved.take().map_or(discussion, Arc::new);
                if now.layout != Layout::PerComment {
                    if posting.len() >= POSTING && !posting.contains_key(id) {
                        posting.clear();
                    }
                    posting.insert(id.clone(), now.clone());
                } else {
                    posting.remove(id);
                }
                Ok((now, posted))
            }
            Err(err) => {
                posting.remove(id);
                Err(err)
            }
        }
    }

    async fn migrate(
        &self,
        id: &DiscussionId,
        to: Layout,
        report: &(dyn Fn(Step) + Send + Sync),
    ) -> StoreResult<Moved> {
        if !self.transactions {
            return Err(StoreError::Unsupported(
                "moving a discussion between layouts needs transactions (a replica set or a \
                 sharded cluster): on a standalone server a write could land in the old layout \
                 after it was copied"
                    .into(),
            ));
        }
        let movers = self.movers();
        migrate::run(&self.discussions, &movers, id, to, self.moves, report).await
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
