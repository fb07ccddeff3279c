//! The per-process read cache of hot discussions (docs/operations.md, "The read cache").
//!
//! It holds what a layout's reads returned (pages, thread and reply lists, comments by slug,
//! sub-discussions), never GraphQL responses: what depends on the viewer is resolved on top.
//! Entries are keyed by the discussion, its `moves` (a move changes where its comments are) and
//! the read with its arguments, and also by two numbers that make invalidation O(1) and free of
//! races:
//! * the discussion's **generation**, raised by every change of it (a write of this process, or
//!   an event of the change feed): a read takes the generation *before* it reads the database
//!   and stores its result under it, so a result that may predate a change is stored where no
//!   lookup after the change looks;
//! * the cache's **epoch**, raised when the change feed is interrupted or has a gap: nothing
//!   read before may be served after. While the feed is not open, the cache is bypassed.
//!
//! A discussion enters only once it has been read [`ADMIT_AFTER`] times within
//! [`ADMIT_WINDOW`], so a crawler walking cold discussions does not flush the hot ones; entries
//! are weighed in bytes and evicted by TinyLFU under `THREADQL_CACHE_BYTES`.

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use moka::sync::Cache;

use crate::domain::{Comment, DiscussionId};

/// Reads of a discussion within [`ADMIT_WINDOW`] before it is cached.
pub(crate) const ADMIT_AFTER: u32 = 3;
/// How long reads of a discussion count towards its admission.
pub(crate) const ADMIT_WINDOW: Duration = Duration::from_secs(60);
/// Discussions whose generation and reads are tracked (the least recently seen are forgotten;
/// a forgotten generation starts again above every number handed out, see `fresh`).
const TRACKED: u64 = 100_000;

/// What identifies a cached read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    discussion: DiscussionId,
    epoch: u64,
    generation: u64,
    moves: u64,
    read: String,
}

/// A stored result, and its weight in bytes.
#[derive(Clone)]
struct Entry {
    value: Arc<dyn Any + Send + Sync>,
    bytes: u32,
}

/// The counters the metrics show.
#[derive(Debug, Default)]
pub(crate) struct CacheStats {
    /// Reads answered from the cache.
    pub(crate) hits: AtomicU64,
    /// Reads of admitted discussions that went to the database.
    pub(crate) misses: AtomicU64,
    /// Entries evicted for room.
    pub(crate) evictions: AtomicU64,
    /// Discussions invalidated (by this process's writes and by the feed), and whole-cache
    /// invalidations (the feed interrupted).
    pub(crate) invalidations: AtomicU64,
}

/// The cache.
pub(crate) struct ReadCache {
    entries: Cache<Key, Entry>,
    generations: Cache<DiscussionId, u64>,
    reads: Cache<DiscussionId, Arc<AtomicU64>>,
    /// Hands out generations: a discussion seen for the first time (or forgotten) starts above
    /// every generation handed out before.
    counter: AtomicU64,
    epoch: AtomicU64,
    open: AtomicBool,
    stats: Arc<CacheStats>,
}

/// A read the cache may answer: where to look, and where to store what the database gives.
pub(crate) struct Lookup {
    key: Key,
    admitted: bool,
}

impl ReadCache {
    /// A cache of at most `bytes` (`None` for 0: no cache).
    pub(crate) fn new(bytes: u64) -> Option<Self> {
        if bytes == 0 {
            return None;
        }
        let stats = Arc::new(CacheStats::default());
        let evicted = stats.clone();
        let entries = Cache::builder()
            .max_capacity(bytes)
            .weigher(|_: &Key, entry: &Entry| entry.bytes)
            .eviction_listener(move |_, _, cause| {
                if cause == moka::notification::RemovalCause::Size {
                    evicted.evictions.fetch_add(1, Ordering::Relaxed);
                }
            })
            .build();
        Some(Self {
            entries,
            generations: Cache::new(TRACKED),
            reads: Cache::builder()
                .max_capacity(TRACKED)
                .time_to_live(ADMIT_WINDOW)
                .build(),
            counter: AtomicU64::new(1),
            epoch: AtomicU64::new(0),
            open: AtomicBool::new(false),
            stats,
        })
    }

    /// The counters.
    pub(crate) fn stats(&self) -> &CacheStats {
        &self.stats
    }

    /// Bytes held now.
    pub(crate) fn bytes(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.weighted_size()
    }

    fn generation(&self, id: &DiscussionId) -> u64 {
        self.generations
            .get_with(id.clone(), || self.counter.fetch_add(1, Ordering::AcqRel))
    }

    /// Where a read of discussion `id` (with `moves`) described by `read` is cached; `None`
    /// while the cache is bypassed. Counts the read towards the discussion's admission. Take it
    /// before reading the database.
    pub(crate) fn lookup(&self, id: &DiscussionId, moves: u64, read: String) -> Option<Lookup> {
        if !self.open.load(Ordering::Acquire) {
            return None;
        }
        let epoch = self.epoch.load(Ordering::Acquire);
        let generation = self.generation(id);
        let count = self
            .reads
            .get_with(id.clone(), || Arc::new(AtomicU64::new(0)))
            .fetch_add(1, Ordering::Relaxed)
            + 1;
        Some(Lookup {
            key: Key {
                discussion: id.clone(),
                epoch,
                generation,
                moves,
                read,
            },
            admitted: count >= u64::from(ADMIT_AFTER),
        })
    }

    /// The cached result of `lookup`, if there is one of type `T`.
    pub(crate) fn get<T: Clone + Send + Sync + 'static>(&self, lookup: &Lookup) -> Option<T> {
        if !lookup.admitted {
            return None;
        }
        let found = self
            .entries
            .get(&lookup.key)
            .and_then(|entry| entry.value.downcast_ref::<T>().cloned());
        let counter = match found {
            Some(_) => &self.stats.hits,
            None => &self.stats.misses,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Stores what the database gave for `lookup` (weighing `bytes`), when the discussion is
    /// admitted.
    pub(crate) fn put<T: Send + Sync + 'static>(&self, lookup: Lookup, value: T, bytes: usize) {
        if !lookup.admitted {
            return;
        }
        let entry = Entry {
            value: Arc::new(value),
            bytes: u32::try_from(bytes).unwrap_or(u32::MAX),
        };
        self.entries.insert(lookup.key, entry);
    }

    /// Forgets everything read of discussion `id` so far (its entries are left to age out).
    pub(crate) fn invalidate(&self, id: &DiscussionId) {
        let next = self.counter.fetch_add(1, Ordering::AcqRel);
        self.generations.insert(id.clone(), next);
        self.stats.invalidations.fetch_add(1, Ordering::Relaxed);
    }

    /// Writes the cache's metrics.
    pub(crate) fn write_metrics(&self, out: &mut crate::telemetry::metrics::Exposition) {
        use crate::telemetry::metrics::Kind;
        let stats = self.stats();
        let counters = [
            ("threadql_cache_hits_total", "Reads of hot discussions answered from the read cache.", &stats.hits),
            ("threadql_cache_misses_total", "Reads of hot discussions that went to the database (and were cached).", &stats.misses),
            ("threadql_cache_evictions_total", "Read cache entries evicted to stay under THREADQL_CACHE_BYTES.", &stats.evictions),
            ("threadql_cache_invalidations_total", "Discussions whose cached reads were dropped after a change, and whole-cache drops when the change feed was interrupted.", &stats.invalidations),
        ];
        for (name, help, value) in counters {
            out.family(name, Kind::Counter, help);
            out.sample(name, &[], value.load(Ordering::Relaxed));
        }
        out.family(
            "threadql_cache_bytes",
            Kind::Gauge,
            "Bytes the read cache holds now (as weighed).",
        );
        out.sample("threadql_cache_bytes", &[], self.bytes());
    }

    /// The change feed is open: every change from now on is heard.
    pub(crate) fn feed_open(&self) {
        self.open.store(true, Ordering::Release);
    }

    /// The change feed is down or lost changes: nothing read so far may be served, and nothing
    /// is cached until it is open again.
    pub(crate) fn feed_down(&self) {
        self.open.store(false, Ordering::Release);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.entries.invalidate_all();
        self.stats.invalidations.fetch_add(1, Ordering::Relaxed);
    }
}

/// About how many bytes `comments` take in memory.
pub(crate) fn weight<'a>(comments: impl IntoIterator<Item = &'a Comment>) -> usize {
    comments
        .into_iter()
        .map(|c| {
            256 + c.slug.as_str().len() * 2
                + c.full_slug.as_str().len()
                + c.text.as_ref().map_or(0, String::len)
                + c.author.id.len()
                + c.author.name.len()
                + c.revisions.iter().map(|r| r.text.len() + 64).sum::<usize>()
        })
        .sum()
}

/// A layout's reads through the cache (what the API reads with); writes, and reads the store
/// makes for its own writes, go to the layout itself.
pub(crate) struct CachedLayout {
    layouts: Arc<super::registry::Layouts>,
    layout: crate::domain::Layout,
    cache: Arc<ReadCache>,
}

impl CachedLayout {
    pub(crate) fn new(
        layouts: Arc<super::registry::Layouts>,
        layout: crate::domain::Layout,
        cache: Arc<ReadCache>,
    ) -> Self {
        Self {
            layouts,
            layout,
            cache,
        }
    }

    fn inner(&self) -> &dyn super::api::CommentStore {
        self.layouts.get(self.layout)
    }

    /// `read` of the discussion from the cache, or from the layout (stored when admitted).
    async fn through<T, F>(
        &self,
        discussion: &crate::domain::Discussion,
        describe: impl FnOnce() -> String,
        read: F,
        weigh: impl FnOnce(&T) -> usize,
    ) -> super::error::StoreResult<T>
    where
        T: Clone + Send + Sync + 'static,
        F: std::future::Future<Output = super::error::StoreResult<T>>,
    {
        let Some(lookup) = self
            .cache
            .lookup(&discussion.id, discussion.moves, describe())
        else {
            return read.await;
        };
        if let Some(found) = self.cache.get::<T>(&lookup) {
            return Ok(found);
        }
        let value = read.await?;
        let bytes = weigh(&value);
        self.cache.put(lookup, value.clone(), bytes);
        Ok(value)
    }
}

fn page_weight(page: &crate::domain::Page<Comment>) -> usize {
    64 + weight(&page.items)
}

#[async_trait::async_trait]
impl super::api::CommentStore for CachedLayout {
    async fn replace(
        &self,
        scope: &super::scope::ReadScope,
        discussion: &crate::domain::Discussion,
        current: &Comment,
        next: &Comment,
    ) -> super::error::StoreResult<bool> {
        self.inner().replace(scope, discussion, current, next).await
    }

    async fn replace_in(
        &self,
        session: &mut mongodb::ClientSession,
        scope: &super::scope::ReadScope,
        discussion: &crate::domain::Discussion,
        current: &Comment,
        next: &Comment,
    ) -> super::error::StoreResult<bool> {
        self.inner()
            .replace_in(session, scope, discussion, current, next)
            .await
    }

    async fn list(
        &self,
        scope: &super::scope::ReadScope,
        discussion: &crate::domain::Discussion,
        listing: crate::domain::tree::Listing,
        window: &crate::domain::Window,
    ) -> super::error::StoreResult<crate::domain::Page<Comment>> {
        let read = self.inner().list(scope, discussion, listing, window);
        self.through(
            discussion,
            || format!("list {listing:?} {window:?}"),
            read,
            page_weight,
        )
        .await
    }

    async fn list_shallow(
        &self,
        scope: &super::scope::ReadScope,
        discussion: &crate::domain::Discussion,
        listing: crate::domain::tree::Listing,
        window: &crate::domain::Window,
    ) -> super::error::StoreResult<crate::domain::Page<Comment>> {
        let read = self
            .inner()
            .list_shallow(scope, discussion, listing, window);
        self.through(
            discussion,
            || format!("shallow {listing:?} {window:?}"),
            read,
            page_weight,
        )
        .await
    }

    async fn posted_after(
        &self,
        discussion: &crate::domain::Discussion,
        after: Option<&Comment>,
        limit: usize,
    ) -> super::error::StoreResult<crate::domain::Page<Comment>> {
        self.inner().posted_after(discussion, after, limit).await
    }

    async fn by_slugs(
        &self,
        scope: &super::scope::ReadScope,
        discussion: &crate::domain::Discussion,
        slugs: &[crate::domain::Slug],
    ) -> super::error::StoreResult<Vec<Comment>> {
        let read = self.inner().by_slugs(scope, discussion, slugs);
        self.through(
            discussion,
            || format!("slugs {slugs:?}"),
            read,
            |found: &Vec<Comment>| weight(found),
        )
        .await
    }

    fn home_of(
        &self,
        scope: &super::scope::ReadScope,
        discussion: &crate::domain::Discussion,
        slug: &crate::domain::Slug,
    ) -> Option<mongodb::bson::Bson> {
        self.inner().home_of(scope, discussion, slug)
    }

    async fn by_homes(
        &self,
        scope: &super::scope::ReadScope,
        discussion: &crate::domain::Discussion,
        wanted: &[(crate::domain::Slug, Option<mongodb::bson::Bson>)],
    ) -> super::error::StoreResult<Vec<Comment>> {
        self.inner().by_homes(scope, discussion, wanted).await
    }

    async fn replies(
        &self,
        scope: &super::scope::ReadScope,
        discussion: &crate::domain::Discussion,
        parents: &[crate::domain::Slug],
        window: &crate::domain::Window,
    ) -> super::error::StoreResult<
        std::collections::HashMap<crate::domain::Slug, crate::domain::Page<Comment>>,
    > {
        let read = self.inner().replies(scope, discussion, parents, window);
        self.through(
            discussion,
            || format!("replies {parents:?} {window:?}"),
            read,
            |pages: &std::collections::HashMap<_, crate::domain::Page<Comment>>| {
                pages.values().map(page_weight).sum()
            },
        )
        .await
    }

    async fn sub_discussions(
        &self,
        scope: &super::scope::ReadScope,
        discussion: &crate::domain::Discussion,
        roots: &[crate::domain::FullSlug],
        window: &crate::domain::Window,
    ) -> super::error::StoreResult<
        std::collections::HashMap<crate::domain::FullSlug, crate::domain::Page<Comment>>,
    > {
        let read = self
            .inner()
            .sub_discussions(scope, discussion, roots, window);
        self.through(
            discussion,
            || format!("subs {roots:?} {window:?}"),
            read,
            |pages: &std::collections::HashMap<_, crate::domain::Page<Comment>>| {
                pages.values().map(page_weight).sum()
            },
        )
        .await
    }

    async fn sub_discussion_counts(
        &self,
        scope: &super::scope::ReadScope,
        discussion: &crate::domain::Discussion,
        roots: &[crate::domain::FullSlug],
    ) -> super::error::StoreResult<std::collections::HashMap<crate::domain::FullSlug, u64>> {
        let read = self.inner().sub_discussion_counts(scope, discussion, roots);
        self.through(
            discussion,
            || format!("counts {roots:?}"),
            read,
            |counts: &std::collections::HashMap<_, u64>| 64 + counts.len() * 96,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> DiscussionId {
        DiscussionId::generate()
    }

    #[test]
    fn nothing_is_served_before_the_feed_opens_or_before_admission() {
        let Some(cache) = ReadCache::new(1 << 20) else {
            panic!("a cache of 1 MiB");
        };
        let d = id();
        assert!(
            cache.lookup(&d, 0, "r".into()).is_none(),
            "bypassed until open"
        );
        cache.feed_open();
        for _ in 1..ADMIT_AFTER {
            let lookup = cache.lookup(&d, 0, "r".into()).expect("open");
            assert_eq!(cache.get::<u32>(&lookup), None);
            cache.put(lookup, 7_u32, 4);
        }
        let lookup = cache.lookup(&d, 0, "r".into()).expect("open");
        assert_eq!(
            cache.get::<u32>(&lookup),
            None,
            "admitted now, not stored before"
        );
        cache.put(lookup, 7_u32, 4);
        let lookup = cache.lookup(&d, 0, "r".into()).expect("open");
        assert_eq!(cache.get::<u32>(&lookup), Some(7));
        assert_eq!(cache.stats().hits.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_result_read_before_a_change_is_never_served_after_it() {
        let cache = ReadCache::new(1 << 20).expect("cache");
        cache.feed_open();
        let d = id();
        for _ in 0..ADMIT_AFTER {
            let _ = cache.lookup(&d, 0, "r".into());
        }
        // A read takes its lookup, the discussion changes, then the read stores its result.
        let before = cache.lookup(&d, 0, "r".into()).expect("open");
        cache.invalidate(&d);
        cache.put(before, 1_u32, 4);
        let after = cache.lookup(&d, 0, "r".into()).expect("open");
        assert_eq!(cache.get::<u32>(&after), None);
        cache.put(after, 2_u32, 4);
        let again = cache.lookup(&d, 0, "r".into()).expect("open");
        assert_eq!(cache.get::<u32>(&again), Some(2));
        // Another discussion, another read or another move count are other entries.
        assert_eq!(
            cache.get::<u32>(&cache.lookup(&d, 1, "r".into()).expect("open")),
            None
        );
        assert_eq!(
            cache.get::<u32>(&cache.lookup(&d, 0, "s".into()).expect("open")),
            None
        );
    }

    #[test]
    fn a_feed_outage_empties_it_and_bypasses_it_until_the_feed_opens() {
        let cache = ReadCache::new(1 << 20).expect("cache");
        cache.feed_open();
        let d = id();
        for _ in 0..ADMIT_AFTER {
            let _ = cache.lookup(&d, 0, "r".into());
        }
        let read = cache.lookup(&d, 0, "r".into()).expect("open");
        cache.feed_down();
        assert!(cache.lookup(&d, 0, "r".into()).is_none());
        cache.put(read, 1_u32, 4);
        cache.feed_open();
        let lookup = cache.lookup(&d, 0, "r".into()).expect("open");
        assert_eq!(
            cache.get::<u32>(&lookup),
            None,
            "what was read before the outage is gone"
        );
    }

    #[test]
    fn it_holds_no_more_than_its_bytes() {
        let cache = ReadCache::new(10_000).expect("cache");
        cache.feed_open();
        let d = id();
        for _ in 0..ADMIT_AFTER {
            let _ = cache.lookup(&d, 0, "warm".into());
        }
        for i in 0..100 {
            let lookup = cache.lookup(&d, 0, format!("read {i}")).expect("open");
            cache.put(lookup, vec![0_u8; 1000], 1000);
        }
        assert!(cache.bytes() <= 10_000, "{}", cache.bytes());
        assert!(ReadCache::new(0).is_none(), "0 turns it off");
    }
}
