//! `Store`, the storage router: hands each request to its discussion's layout, waits out moves
//! between layouts, promotes full embedded discussions, and remembers the discussions this
//! process posts to.

pub(crate) mod registry;
pub mod shard;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::{BoxStream, StreamExt as _};
use mongodb::bson::doc;
use mongodb::Database;

use super::cache::{weight, CachedDiscussions, CachedLayout, ReadCache};
use super::discussions::{locked, Discussions};
use crate::domain::slug::MonotonicClock;
use crate::domain::{
    Comment, Discussion, DiscussionId, DomainError, Layout, NewComment, Slug, Vote, Window,
};
use crate::store::api::Decide;
use crate::store::api::HeldStore;
use crate::store::api::{CommentStore, DiscussionStore, ModerationStore, Posted, Storage, Watched};
use crate::store::api::{MoveTiming, Moved, Step};
use crate::store::api::{Ranked, RankedPage};
use crate::store::changes;
use crate::store::moderation::held::HeldComments;
use crate::store::moderation::Moderation;
use crate::store::moves::migrate;
use crate::store::shared::connect::{self, Connection, StoreConfig};
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::metrics::{Command, CommandCounter, Counted};
use crate::store::shared::scope::ReadScope;
use crate::store::shared::skeleton::revise;
use crate::store::shared::writer::Writer;
use crate::store::votes::VoteBook;
use crate::telemetry::metrics::Exposition;
use registry::{Layouts, Parts};

/// The MongoDB storage: discussions, the three layouts, and the command counter.
pub struct Store {
    db: Database,
    discussions: Discussions,
    held: HeldComments,
    layouts: Arc<Layouts>,
    /// The read cache of hot discussions; none when it is off.
    cache: Option<Cached>,
    moderation: Moderation,
    votes: VoteBook,
    imports: crate::store::moves::imports::Imports,
    writer: Writer,
    commands: CommandCounter,
    clock: Arc<MonotonicClock>,
    transactions: bool,
    promote_embedded: bool,
    moves: MoveTiming,
    /// Embedded and bucketed discussions this process posted to lately, as it last read them
    /// (see [`Storage::post_to`]).
    posting: std::sync::Mutex<HashMap<DiscussionId, Arc<Discussion>>>,
}

/// The read cache, and the API's reads through it.
struct Cached {
    cache: Arc<ReadCache>,
    /// The layouts, by `Layout::ALL` position.
    layouts: Vec<CachedLayout>,
    discussions: CachedDiscussions,
}

/// The read cache as the change feed keeps it exact; when the feed is dropped, the cache is
/// bypassed.
struct FeedHeard(Arc<ReadCache>);

impl Drop for FeedHeard {
    fn drop(&mut self) {
        self.0.feed_down();
    }
}

/// Discussions whose metadata a process keeps for posting (past this, it starts over).
const POSTING: usize = 1024;

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
        let writer = Writer::new(
            client,
            transactions,
            clock.clone(),
            config.max_depth.max(1),
            commands.clone(),
        );
        let discussions = Discussions::new(
            &db,
            clock.clone(),
            Layouts::fields(transactions),
            &commands,
            transactions,
        );
        let parts = Parts {
            db: &db,
            writer: writer.clone(),
            bucket_size: config.bucket_size,
            embedded_max_bytes: config.embedded_max_bytes,
        };
        let layouts = Arc::new(Layouts::new(parts, &discussions));
        let held = HeldComments::new(&db, &commands, clock.clone(), config.max_depth.max(1));
        discussions.ensure_indexes().await?;
        held.ensure_indexes().await?;
        layouts.ensure_indexes().await?;
        // Moderation's collections are read and written by `_id` only: no index of their own.
        let moderation = Moderation::new(&db, &commands);
        let votes = VoteBook::new(&db, &commands);
        votes.ensure_indexes().await?;
        let imports = crate::store::moves::imports::Imports::new(&db, &commands);
        imports.ensure_indexes().await?;
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
        Ok(Self {
            db,
            discussions,
            held,
            layouts,
            cache,
            moderation,
            votes,
            imports,
            writer,
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

    /// Casts a vote (checking that the voter may vote when `checked`), in the layout the
    /// discussion has once a move that holds it is over.
    async fn cast(
        &self,
        discussion: &Discussion,
        (slug, voter): (&Slug, &str),
        vote: Option<Vote>,
        checked: bool,
    ) -> Result<Comment, DomainError> {
        let mut discussion = discussion.clone();
        loop {
            let layout = self.layouts.get(discussion.layout);
            let cast = crate::store::votes::cast(
                &self.votes,
                (layout, &self.writer),
                &discussion,
                (slug, voter),
                vote,
                checked,
            );
            let cast = cast.await;
            self.touched(&discussion.id);
            match cast {
                Err(DomainError::Moving(_)) => {
                    discussion = self.after_move(&discussion.id).await?;
                }
                other => return other,
            }
        }
    }

    /// Waits while a move of the discussion holds it, then reads it again.
    async fn after_move(&self, id: &DiscussionId) -> StoreResult<Discussion> {
        migrate::until_unfenced(&self.discussions.raw(), id, self.moves.wait).await?;
        self.discussions.by_id(id).await
    }

    /// Shards the collections on a sharded cluster (see `shard`).
    pub async fn shard_setup(&self) -> StoreResult<Vec<String>> {
        crate::store::router::shard::setup(&self.db).await
    }

    /// Database commands sent so far.
    pub fn commands(&self) -> &CommandCounter {
        &self.commands
    }
}

#[async_trait]
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

    fn held(&self) -> &dyn HeldStore {
        &self.held
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

    async fn ping(&self) -> StoreResult<()> {
        self.commands.sent("ping");
        let ping = self.db.run_command(doc! { "ping": 1 });
        self.commands.timed(Command::Ping, ping).await?;
        Ok(())
    }

    fn command_counts(&self) -> BTreeMap<String, u64> {
        self.commands.snapshot()
    }

    fn write_metrics(&self, out: &mut Exposition) {
        self.commands.write(out);
        if let Some(cached) = &self.cache {
            cached.cache.write_metrics(out);
        }
    }

    async fn change_comment(
        &self,
        discussion: &Discussion,
        slug: &Slug,
        decide: &Decide<'_>,
    ) -> Result<Comment, DomainError> {
        let mut discussion = discussion.clone();
        loop {
            let layout = self.layouts.get(discussion.layout);
            let revised = revise(layout, &self.clock, &discussion, slug, decide).await;
            self.touched(&discussion.id);
            match revised {
                Err(DomainError::Moving(_)) => {
                    discussion = self.after_move(&discussion.id).await?;
                }
                other => return other,
            }
        }
    }

    async fn vote(
        &self,
        discussion: &Discussion,
        slug: &Slug,
        voter: &str,
        vote: Option<Vote>,
    ) -> Result<Comment, DomainError> {
        self.cast(discussion, (slug, voter), vote, true).await
    }

    async fn restore_vote(
        &self,
        discussion: &Discussion,
        slug: &Slug,
        voter: &str,
        vote: Vote,
    ) -> Result<Comment, DomainError> {
        self.cast(discussion, (slug, voter), Some(vote), false)
            .await
    }

    async fn imported(&self, id: &DiscussionId) -> StoreResult<HashSet<String>> {
        self.imports.sources(id).await
    }

    async fn record_imported(
        &self,
        id: &DiscussionId,
        entries: &[(String, Slug)],
    ) -> StoreResult<()> {
        self.imports.record(id, entries).await
    }

    async fn votes_in(
        &self,
        discussion: &DiscussionId,
        after: Option<(&Slug, &str)>,
        limit: usize,
    ) -> StoreResult<Vec<(Slug, String, Vote)>> {
        self.votes.votes_in(discussion, after, limit).await
    }

    async fn votes_of(
        &self,
        voter: &str,
        comments: &[(DiscussionId, Slug)],
    ) -> StoreResult<HashMap<(DiscussionId, Slug), Vote>> {
        self.votes.votes_of(voter, comments).await
    }

    async fn ranked(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        list: Ranked<'_>,
        window: &Window,
    ) -> StoreResult<RankedPage> {
        let layout = self.layouts.get(discussion.layout);
        let read =
            crate::store::votes::ranked_page(&self.votes, layout, scope, discussion, list, window);
        match &self.cache {
            Some(cached) => {
                let describe = || format!("ranked {list:?} {window:?}");
                let weigh = |ranked: &RankedPage| 64 + weight(&ranked.page.items);
                cached
                    .cache
                    .through(discussion, describe, read, weigh)
                    .await
            }
            None => read.await,
        }
    }

    async fn post(&self, discussion: &Discussion, new: NewComment) -> StoreResult<Posted> {
        let start = discussion.moves;
        let mode = discussion.moderation;
        let mut discussion = discussion.clone();
        let mut promoted = false;
        loop {
            match self.layouts.post(&self.writer, &discussion, &new).await {
                Err(StoreError::Moving(_)) => {
                    discussion = self.after_move(&discussion.id).await?;
                    if discussion.locked {
                        return Err(locked(&discussion.id));
                    }
                    // Whether to hold the comment was decided by the mode it had.
                    if discussion.moderation != mode {
                        return Err(StoreError::Exhausted(format!(
                            "discussion {} changed how it moderates while the comment was posted: send it again",
                            discussion.id
                        )));
                    }
                }
                Err(StoreError::TooLarge(why)) if self.promote_embedded && !promoted => {
                    let Some(to) = self.layouts.get(discussion.layout).promotes_to() else {
                        return Err(StoreError::TooLarge(why));
                    };
                    promoted = true;
                    tracing::info!(discussion = %discussion.id, %why, from = %discussion.layout, %to, "promoting a full discussion to another layout");
                    match self.migrate(&discussion.id, to, &|_| {}).await {
                        Ok(moved) => discussion = moved.discussion,
                        // Another post is promoting it already.
                        Err(StoreError::Busy(_)) => {
                            discussion = self.after_move(&discussion.id).await?;
                        }
                        Err(err) => return Err(err),
                    }
                }
                Ok(mut posted) => {
                    self.touched(&discussion.id);
                    if discussion.moves != start {
                        posted.moved = Some(discussion);
                    }
                    return Ok(posted);
                }
                Err(err) => return Err(err),
            }
        }
    }

    fn kept(&self, id: &DiscussionId) -> Option<Arc<Discussion>> {
        let posting = self.posting.lock().unwrap_or_else(|p| p.into_inner());
        posting.get(id).cloned()
    }

    fn forget(&self, id: &DiscussionId) {
        let mut posting = self.posting.lock().unwrap_or_else(|p| p.into_inner());
        posting.remove(id);
    }

    async fn post_to(
        &self,
        id: &DiscussionId,
        new: NewComment,
    ) -> StoreResult<(Arc<Discussion>, Posted)> {
        // Only discussions whose layout posts from what the process kept are kept (see
        // `CommentStore::posts_from_kept`).
        let discussion = match self.kept(id) {
            Some(discussion) => discussion,
            None => Arc::new(self.discussions.by_id(id).await?),
        };
        self.post_from(discussion, new).await
    }

    async fn post_from(
        &self,
        discussion: Arc<Discussion>,
        new: NewComment,
    ) -> StoreResult<(Arc<Discussion>, Posted)> {
        let id = &discussion.id.clone();
        if discussion.locked {
            return Err(locked(id));
        }
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
                if self.layouts.get(now.layout).posts_from_kept() {
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
        self.import(id, to, &[], report).await
    }

    fn import_scratch(&self, layout: Layout) -> Layout {
        self.layouts.get(layout).import_scratch()
    }

    async fn import(
        &self,
        id: &DiscussionId,
        to: Layout,
        adding: &[Comment],
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
        let movers = self.layouts.movers();
        let moved = migrate::run(
            &self.discussions,
            &movers,
            (id, to),
            adding,
            self.moves,
            report,
        )
        .await;
        self.touched(id);
        moved
    }

    fn changes(&self, retry: Duration) -> BoxStream<'static, Watched> {
        let feed = changes::feed(
            Counted::new(&self.db, Discussions::COLLECTION, &self.commands),
            retry,
        );
        let Some(cached) = &self.cache else {
            return feed;
        };
        // The cache hears every report before the feed's reader does: a change read after its
        // event is read past the cache.
        // Once the feed is dropped (the process is shutting down), nothing keeps the cache
        // exact: it is bypassed from then on.
        let heard = FeedHeard(cached.cache.clone());
        Box::pin(feed.inspect(move |watched| {
            let cache = &heard.0;
            match watched {
                Watched::Open => cache.feed_open(),
                Watched::Interrupted | Watched::Gap => cache.feed_down(),
                Watched::Change(change) => cache.invalidate(&change.discussion),
                Watched::Discussion(id) => cache.invalidate(id),
            }
        }))
    }
}
