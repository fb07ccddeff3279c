//! `Store`, the storage router: builds the store, hands each request to its discussion's layout
//! (through the registry), waits out moves between layouts, promotes discussions that outgrow
//! their layout, and remembers the discussions this process posts to. Each capability `Storage`
//! hands out is implemented in a file of its own.

mod feed;
mod health;
mod history;
mod moves;
mod posting;
pub(crate) mod registry;
mod server;
pub mod shard;
mod votes;

use std::collections::HashMap;
use std::sync::Arc;

use mongodb::Database;

use super::cache::{CachedDiscussions, CachedLayout, ReadCache};
use super::discussions::Discussions;
use super::events::EventLog;
use crate::domain::slug::MonotonicClock;
use crate::domain::{Discussion, DiscussionId, Layout};
use crate::store::api::MoveTiming;
use crate::store::api::{
    ChangeFeed, EventStore, Health, ImportStore, MoveStore, NotificationStore, PostStore,
    ServerStore, VoteStore, WebhookStore,
};
use crate::store::api::{CommentStore, DiscussionStore, ModerationStore, NameStore, Storage};
use crate::store::api::{HeldStore, HistoryStore};
use crate::store::moderation::held::HeldComments;
use crate::store::moderation::names::ReservedNames;
use crate::store::moderation::Moderation;
use crate::store::moves::migrate;
use crate::store::notifications::Notifications;
use crate::store::shared::connect::{self, Connection, StoreConfig};
use crate::store::shared::error::StoreResult;
use crate::store::shared::metrics::CommandCounter;
use crate::store::shared::writer::Writer;
use crate::store::votes::VoteBook;
use crate::store::webhooks::Webhooks;
use registry::{Layouts, Parts};

/// Connections of the webhook dispatcher's own pool.
const WEBHOOK_POOL: u32 = 4;

/// The MongoDB storage: discussions, the three layouts, and the command counter.
pub struct Store {
    db: Database,
    discussions: Discussions,
    held: HeldComments,
    layouts: Arc<Layouts>,
    /// The read cache of hot discussions; none when it is off.
    cache: Option<Cached>,
    moderation: Moderation,
    names: ReservedNames,
    votes: VoteBook,
    imports: crate::store::moves::imports::Imports,
    server: crate::store::server::ServerDocs,
    guests: crate::store::guests::Guests,
    personal: crate::store::personal::Personal,
    webhooks: Webhooks,
    notifications: Notifications,
    writer: Writer,
    log: EventLog,
    commands: CommandCounter,
    clock: Arc<MonotonicClock>,
    transactions: bool,
    promote_embedded: bool,
    moves: MoveTiming,
    /// Embedded and bucketed discussions this process posted to lately, as it last read them
    /// (see [`PostStore::post_to`]).
    posting: std::sync::Mutex<HashMap<DiscussionId, Arc<Discussion>>>,
}

/// The read cache, and the API's reads through it.
struct Cached {
    cache: Arc<ReadCache>,
    /// The layouts, by `Layout::ALL` position.
    layouts: Vec<CachedLayout>,
    discussions: CachedDiscussions,
}

impl Store {
    /// Connects, installs the command counter and creates the indexes (idempotent).
    pub async fn connect(config: &StoreConfig) -> StoreResult<Self> {
        let Connection {
            client,
            db,
            commands,
            transactions,
        } = connect::open(config).await?;
        let clock = Arc::new(MonotonicClock::default());
        let log = EventLog::new(&db, client.clone(), transactions, clock.clone(), &commands);
        let writer = Writer::new(
            client,
            transactions,
            clock.clone(),
            config.max_depth.max(1),
            commands.clone(),
            log.clone(),
        );
        let discussions = Discussions::new(
            &db,
            clock.clone(),
            Layouts::fields(transactions),
            &commands,
            log.clone(),
        );
        let parts = Parts {
            db: &db,
            writer: writer.clone(),
            bucket_size: config.bucket_size,
            embedded_max_bytes: config.embedded_max_bytes,
        };
        let layouts = Arc::new(Layouts::new(parts, &discussions));
        let mut held = HeldComments::new(
            &db,
            &commands,
            clock.clone(),
            config.max_depth.max(1),
            log.clone(),
        );
        let moderation = Moderation::new(&db, &commands, log.clone());
        let names = ReservedNames::new(&db, &commands, log.clone());
        let votes = VoteBook::new(&db, &commands);
        let imports = crate::store::moves::imports::Imports::new(&db, &commands);
        let server = crate::store::server::ServerDocs::new(&db, &commands);
        let guests = crate::store::guests::Guests::new(&db, &commands, log.clone());
        let personal = crate::store::personal::Personal::new(&db, &commands, log.clone());
        // The dispatcher polls in the background on connections of its own (a small pool), so
        // neither its commands nor its waits land among the requests', in their counts or as
        // spans of traces of their own.
        let hooks = connect::open(&StoreConfig {
            pool_size: WEBHOOK_POOL,
            command_events: None,
            traces: false,
            ..config.clone()
        })
        .await?;
        let webhooks = Webhooks::new(&hooks.db, &hooks.commands);
        let notifications = Notifications::new((&db, &commands), (&hooks.db, &hooks.commands));
        if config.ensure_indexes {
            log.ensure_indexes(config.event_retention).await?;
            discussions.ensure_indexes().await?;
            held.ensure_indexes().await?;
            moderation.ensure_indexes().await?;
            layouts.ensure_indexes().await?;
            votes.ensure_indexes().await?;
            imports.ensure_indexes().await?;
            guests.ensure_indexes().await?;
            personal.ensure_indexes().await?;
            webhooks.ensure_indexes(config.event_retention).await?;
            notifications
                .ensure_indexes(config.notification_retention)
                .await?;
        }
        let cache = ReadCache::new(config.cache_bytes).map(|cache| {
            let cache = Arc::new(cache);
            Cached {
                layouts: Layout::ALL
                    .into_iter()
                    .map(|layout| CachedLayout::new(layouts.clone(), layout, cache.clone()))
                    .collect(),
                discussions: CachedDiscussions::new(discussions.clone(), cache.clone()),
                cache,
            }
        });
        if let Some(cached) = &cache {
            held.read_through(cached.cache.clone());
        }
        Ok(Self {
            db,
            discussions,
            held,
            layouts,
            cache,
            moderation,
            names,
            votes,
            imports,
            server,
            guests,
            personal,
            webhooks,
            notifications,
            writer,
            // The queues' live stream opens on the background connections, as the inboxes' does.
            log: log.watched_on(&hooks.db, &hooks.commands),
            commands,
            clock,
            transactions,
            promote_embedded: config.promote_embedded,
            moves: config.moves,
            posting: std::sync::Mutex::default(),
        })
    }

    /// What this process read of the discussion may be out of date: a write of it was just
    /// made (or tried), so the writer reads its own write.
    fn touched(&self, id: &DiscussionId) {
        if let Some(cached) = &self.cache {
            cached.cache.invalidate(id);
        }
    }

    /// Waits while a move of the discussion holds it, then reads it again.
    async fn after_move(&self, id: &DiscussionId) -> StoreResult<Discussion> {
        migrate::until_unfenced(&self.discussions.raw(), id, self.moves.wait).await?;
        self.discussions.by_id(id).await
    }

    /// Shards the collections on a sharded cluster (see `shard`).
    pub async fn shard_setup(&self) -> StoreResult<Vec<String>> {
        shard::setup(&self.db).await
    }

    /// Database commands sent so far.
    pub fn commands(&self) -> &CommandCounter {
        &self.commands
    }
}

impl Storage for Store {
    fn discussions(&self) -> &dyn DiscussionStore {
        match &self.cache {
            Some(cached) => &cached.discussions,
            None => &self.discussions,
        }
    }

    fn moderation(&self) -> &dyn ModerationStore {
        &self.moderation
    }

    fn names(&self) -> &dyn NameStore {
        &self.names
    }

    fn held(&self) -> &dyn HeldStore {
        &self.held
    }

    fn history(&self) -> &dyn HistoryStore {
        self
    }

    fn layout(&self, layout: Layout) -> StoreResult<&dyn CommentStore> {
        let cached = self.cache.as_ref().and_then(|cached| {
            let at = Layout::ALL.iter().position(|l| *l == layout)?;
            cached.layouts.get(at)
        });
        Ok(match cached {
            Some(cached) => cached,
            None => self.layouts.get(layout),
        })
    }

    fn posting(&self) -> &dyn PostStore {
        self
    }

    fn votes(&self) -> &dyn VoteStore {
        self
    }

    fn moves(&self) -> &dyn MoveStore {
        self
    }

    fn imports(&self) -> &dyn ImportStore {
        self
    }

    fn health(&self) -> &dyn Health {
        self
    }

    fn changes(&self) -> &dyn ChangeFeed {
        self
    }

    fn events(&self) -> &dyn EventStore {
        &self.log
    }

    fn server(&self) -> &dyn ServerStore {
        self
    }

    fn guests(&self) -> &dyn crate::store::api::GuestStore {
        &self.guests
    }

    fn personal(&self) -> &dyn crate::store::api::PersonalStore {
        &self.personal
    }

    fn webhooks(&self) -> &dyn WebhookStore {
        &self.webhooks
    }

    fn notifications(&self) -> &dyn NotificationStore {
        &self.notifications
    }

    fn freshness(&self) -> Option<&dyn crate::store::Freshness> {
        self.cache
            .as_ref()
            .map(|cached| cached.cache.as_ref() as &dyn crate::store::Freshness)
    }
}
