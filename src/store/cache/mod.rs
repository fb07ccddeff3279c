//! The per-process read cache of hot discussions (docs/operations.md, "The read cache").
//!
//! It holds what the store's reads returned for the API — discussion documents, pages, thread
//! and reply lists, comments by slug, sub-discussions, ranked pages — never GraphQL responses:
//! what depends on the viewer is resolved on top. An entry is keyed by its discussion and the
//! read with its arguments, and also by two numbers that make invalidation O(1) and free of
//! races:
//! * the discussion's **generation**, raised by every change of it (a write of this process, or
//!   an event of the change feed): a read takes the generation *before* it reads the database
//!   and stores its result under it, so a result that may predate a change is stored where no
//!   lookup after the change looks;
//! * the cache's **epoch**, raised when the change feed is interrupted or has a gap: nothing
//!   read before may be served after. While the feed is not open, the cache is bypassed.
//!
//! A read of comments depends on the discussion document it was given (its counts, its
//! layout's hints, its moves), so its entry keeps that document and serves only a read given an
//! equal one.
//!
//! Comments are handed out shared (`Arc<Comment>`): a hit copies a page's pointers, never its
//! comments, and the API's nodes keep the same allocations.
//!
//! A discussion enters only once its document has been read [`ADMIT_AFTER`] times within
//! [`ADMIT_WINDOW`] (a request reads it once), so a crawler walking cold discussions does not
//! flush the hot ones; entries are weighed in bytes and evicted by TinyLFU under
//! `THREADQL_CACHE_BYTES`.

mod discussions;
mod flights;
mod layout;
pub(crate) mod tracking;

use std::any::Any;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use moka::sync::Cache;

pub(crate) use self::discussions::CachedDiscussions;
use self::flights::{Flight, Flights};
pub(crate) use self::layout::CachedLayout;
use self::tracking::{covered, record, Freshness, Reads};
use crate::domain::{Comment, Discussion, DiscussionId, DiscussionKey};
use crate::store::shared::error::StoreResult;

/// Reads of a discussion within [`ADMIT_WINDOW`] before it is cached.
pub(crate) const ADMIT_AFTER: u32 = 3;
/// How long reads of a discussion count towards its admission.
pub(crate) const ADMIT_WINDOW: Duration = Duration::from_secs(60);
/// Discussions (and keys) whose generation and reads are tracked (the least recently seen are
/// forgotten; a forgotten generation starts again above every number handed out, see
/// `generation`).
const TRACKED: u64 = 100_000;

/// What identifies a cached read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    discussion: DiscussionId,
    epoch: u64,
    generation: u64,
    read: String,
}

/// A stored result, and its weight in bytes.
#[derive(Clone)]
struct Entry {
    value: Arc<dyn Any + Send + Sync>,
    bytes: u32,
}

/// `value` as an entry weighing `bytes`.
fn entry<T: Send + Sync + 'static>(value: T, bytes: usize) -> Entry {
    Entry {
        value: Arc::new(value),
        bytes: u32::try_from(bytes).unwrap_or(u32::MAX),
    }
}

/// Which discussion a key named, as of a generation of it.
#[derive(Clone)]
struct Named {
    id: DiscussionId,
    epoch: u64,
    generation: u64,
}

/// The counters the metrics show.
#[derive(Debug, Default)]
pub(crate) struct CacheStats {
    /// Reads answered from the cache.
    pub(crate) hits: AtomicU64,
    /// Reads of admitted discussions that went to the database (and were cached).
    pub(crate) misses: AtomicU64,
    /// Misses that took what a concurrent miss of the same entry read (no read of their own).
    pub(crate) shared: AtomicU64,
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
    keys: Cache<DiscussionKey, Named>,
    /// The refills of comment reads in flight.
    flights: Flights<Key, Entry>,
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

/// The cache as it was before a read whose discussions are not known until it is made (a read
/// by key): what it finds may be stored only if none of them changed since.
pub(crate) struct Mark {
    epoch: u64,
    counter: u64,
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
            keys: Cache::new(TRACKED),
            flights: Flights::new(),
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

    /// Whether discussion `id` is read often enough to be cached, counting this read when
    /// `count`.
    fn admitted(&self, id: &DiscussionId, count: bool) -> bool {
        let seen = match count {
            true => {
                self.reads
                    .get_with(id.clone(), || Arc::new(AtomicU64::new(0)))
                    .fetch_add(1, Ordering::Relaxed)
                    + 1
            }
            false => self
                .reads
                .get(id)
                .map_or(0, |reads| reads.load(Ordering::Relaxed)),
        };
        seen >= u64::from(ADMIT_AFTER)
    }

    /// Where a read of discussion `id` described by `read` is cached; `None` while the cache is
    /// bypassed. Counts towards the discussion's admission when `count` (the read of its
    /// document: once per request). Take it before reading the database.
    fn lookup_with(&self, id: &DiscussionId, read: String, count: bool) -> Option<Lookup> {
        if !self.open.load(Ordering::Acquire) {
            return None;
        }
        let epoch = self.epoch.load(Ordering::Acquire);
        let generation = self.generation(id);
        record(id, epoch, generation);
        Some(Lookup {
            key: Key {
                discussion: id.clone(),
                epoch,
                generation,
                read,
            },
            admitted: self.admitted(id, count),
        })
    }

    /// Where a read of discussion `id` described by `read` is cached (see `lookup_with`); it
    /// does not count towards admission.
    pub(crate) fn lookup(&self, id: &DiscussionId, read: String) -> Option<Lookup> {
        self.lookup_with(id, read, false)
    }

    /// The cache as it is before a read by key (`None` while it is bypassed).
    pub(crate) fn mark(&self) -> Option<Mark> {
        if !self.open.load(Ordering::Acquire) {
            return None;
        }
        Some(Mark {
            epoch: self.epoch.load(Ordering::Acquire),
            counter: self.counter.load(Ordering::Acquire),
        })
    }

    /// Where a read of discussion `id` made after `mark` may be stored: only when the
    /// discussion has not changed since `mark` and the feed stayed open (a discussion seen for
    /// the first time is tracked from now on, and stored from its next read). Counts towards
    /// admission when `count`.
    fn lookup_since(
        &self,
        mark: &Mark,
        id: &DiscussionId,
        read: String,
        count: bool,
    ) -> Option<Lookup> {
        let admitted = self.admitted(id, count);
        if !self.open.load(Ordering::Acquire) || self.epoch.load(Ordering::Acquire) != mark.epoch {
            return None;
        }
        let generation = self.generation(id);
        (generation < mark.counter).then(|| Lookup {
            key: Key {
                discussion: id.clone(),
                epoch: mark.epoch,
                generation,
                read,
            },
            admitted,
        })
    }

    /// Remembers that `key` named discussion `id` in a read made after `mark` (when that may
    /// be relied on: see `lookup_since`).
    fn remember_key(&self, mark: &Mark, key: &DiscussionKey, id: &DiscussionId) {
        if let Some(lookup) = self.lookup_since(mark, id, String::new(), false) {
            let named = Named {
                id: id.clone(),
                epoch: lookup.key.epoch,
                generation: lookup.key.generation,
            };
            self.keys.insert(key.clone(), named);
        }
    }

    /// The discussion `key` names, when it named it in a read no change since has made stale.
    fn id_of_key(&self, key: &DiscussionKey) -> Option<DiscussionId> {
        if !self.open.load(Ordering::Acquire) {
            return None;
        }
        let named = self.keys.get(key)?;
        let current = named.epoch == self.epoch.load(Ordering::Acquire)
            && self.generations.get(&named.id) == Some(named.generation);
        current.then_some(named.id)
    }

    /// The cached result of `lookup`, if there is one of type `T` that `fits`.
    fn get_if<T: Clone + Send + Sync + 'static>(
        &self,
        lookup: &Lookup,
        fits: impl FnOnce(&T) -> bool,
    ) -> Option<T> {
        if !lookup.admitted {
            return None;
        }
        let found = self
            .entries
            .get(&lookup.key)
            .and_then(|entry| entry.value.downcast_ref::<T>().filter(|v| fits(v)).cloned());
        let counter = match found {
            Some(_) => &self.stats.hits,
            None => &self.stats.misses,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// The cached result of `lookup`, if there is one of type `T`.
    pub(crate) fn get<T: Clone + Send + Sync + 'static>(&self, lookup: &Lookup) -> Option<T> {
        self.get_if(lookup, |_| true)
    }

    /// Stores what the database gave for `lookup` (weighing `bytes`), when the discussion is
    /// admitted.
    pub(crate) fn put<T: Send + Sync + 'static>(&self, lookup: Lookup, value: T, bytes: usize) {
        if lookup.admitted {
            self.entries.insert(lookup.key, entry(value, bytes));
        }
    }

    /// Whether what was read under `key` may still be served: the feed stayed open, and
    /// neither the epoch nor the discussion's generation moved.
    fn current(&self, key: &Key) -> bool {
        self.open.load(Ordering::Acquire)
            && self.epoch.load(Ordering::Acquire) == key.epoch
            && self.generations.get(&key.discussion) == Some(key.generation)
    }

    /// `read` of `discussion`'s comments from the cache, or from the database (stored when
    /// admitted). The entry keeps the discussion document the read was given, and serves only
    /// a read given an equal one. Of concurrent misses of one entry, one reads and the others
    /// take what it read, if their discussion has not changed meanwhile (else they read too).
    pub(crate) async fn through<T, F>(
        &self,
        discussion: &Discussion,
        describe: impl FnOnce() -> String,
        read: F,
        weigh: impl FnOnce(&T) -> usize,
    ) -> StoreResult<T>
    where
        T: Clone + Send + Sync + 'static,
        F: Future<Output = StoreResult<T>>,
    {
        let Some(lookup) = self.lookup(&discussion.id, describe()) else {
            return read.await;
        };
        // Its commands are read under the generation the lookup took (and recorded).
        let read = covered(read);
        let fits = |(basis, _): &(Arc<Discussion>, T)| **basis == *discussion;
        if let Some((_, value)) = self.get_if(&lookup, fits) {
            return Ok(value);
        }
        if !lookup.admitted {
            return read.await;
        }
        match self.flights.join(&lookup.key) {
            Flight::Wait(waiting) => {
                let landed = flights::wait(waiting)
                    .await
                    .filter(|_| self.current(&lookup.key));
                let taken = landed.as_ref().and_then(|entry| {
                    entry
                        .value
                        .downcast_ref::<(Arc<Discussion>, T)>()
                        .filter(|v| fits(v))
                        .map(|(_, value)| value.clone())
                });
                if let Some(value) = taken {
                    self.stats.shared.fetch_add(1, Ordering::Relaxed);
                    return Ok(value);
                }
                let value = read.await?;
                let bytes = weigh(&value) + discussion_weight(discussion);
                self.put(lookup, (Arc::new(discussion.clone()), value.clone()), bytes);
                Ok(value)
            }
            Flight::Lead(lead) => {
                let value = read.await?;
                let bytes = weigh(&value) + discussion_weight(discussion);
                let stored = entry((Arc::new(discussion.clone()), value.clone()), bytes);
                self.entries.insert(lookup.key, stored.clone());
                lead.land(stored);
                Ok(value)
            }
        }
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
            ("threadql_cache_shared_misses_total", "Misses answered by what a concurrent miss of the same entry read (one database read for all of them).", &stats.shared),
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
        self.keys.invalidate_all();
        self.stats.invalidations.fetch_add(1, Ordering::Relaxed);
    }
}

impl Freshness for ReadCache {
    fn current(&self, reads: &Reads) -> bool {
        self.open.load(Ordering::Acquire)
            && reads
                .epoch
                .is_none_or(|epoch| epoch == self.epoch.load(Ordering::Acquire))
            && reads
                .discussions
                .iter()
                .all(|(id, generation)| self.generations.get(id) == Some(*generation))
    }
}

/// About how many bytes `comments` take in memory.
pub(crate) fn weight<'a>(comments: impl IntoIterator<Item = &'a Arc<Comment>>) -> usize {
    comments
        .into_iter()
        .map(|c| {
            256 + c.slug.as_str().len() * 2
                + c.full_slug.as_str().len()
                + c.text.as_ref().map_or(0, String::len)
                + c.html.as_ref().map_or(0, String::len)
                + c.author.id.len()
                + c.author.name.len()
                + c.revisions.iter().map(|r| r.text.len() + 64).sum::<usize>()
        })
        .sum()
}

/// About how many bytes a discussion document takes in memory.
fn discussion_weight(discussion: &Discussion) -> usize {
    512 + discussion.title.len()
        + discussion.url.as_ref().map_or(0, String::len)
        + discussion.key.as_ref().map_or(0, |k| k.as_str().len())
        + discussion.pinned.len() * 64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> DiscussionId {
        DiscussionId::generate()
    }

    /// Reads discussion `d`'s document often enough to admit it.
    fn admit(cache: &ReadCache, d: &DiscussionId) {
        for _ in 0..ADMIT_AFTER {
            let _ = cache.lookup_with(d, "doc".into(), true);
        }
    }

    #[test]
    fn nothing_is_served_before_the_feed_opens_or_before_admission() {
        let cache = ReadCache::new(1 << 20).expect("a cache of 1 MiB");
        let d = id();
        assert!(
            cache.lookup(&d, "r".into()).is_none(),
            "bypassed until open"
        );
        cache.feed_open();
        for _ in 1..ADMIT_AFTER {
            let _ = cache.lookup_with(&d, "doc".into(), true);
            // Reads of comments do not count towards admission: a request reads many.
            for _ in 0..10 {
                let lookup = cache.lookup(&d, "r".into()).expect("open");
                assert_eq!(cache.get::<u32>(&lookup), None);
                cache.put(lookup, 7_u32, 4);
            }
        }
        let _ = cache.lookup_with(&d, "doc".into(), true);
        let lookup = cache.lookup(&d, "r".into()).expect("open");
        assert_eq!(
            cache.get::<u32>(&lookup),
            None,
            "admitted now, not stored before"
        );
        cache.put(lookup, 7_u32, 4);
        let lookup = cache.lookup(&d, "r".into()).expect("open");
        assert_eq!(cache.get::<u32>(&lookup), Some(7));
        assert_eq!(cache.stats().hits.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_result_read_before_a_change_is_never_served_after_it() {
        let cache = ReadCache::new(1 << 20).expect("cache");
        cache.feed_open();
        let d = id();
        admit(&cache, &d);
        // A read takes its lookup, the discussion changes, then the read stores its result.
        let before = cache.lookup(&d, "r".into()).expect("open");
        cache.invalidate(&d);
        cache.put(before, 1_u32, 4);
        let after = cache.lookup(&d, "r".into()).expect("open");
        assert_eq!(cache.get::<u32>(&after), None);
        cache.put(after, 2_u32, 4);
        let again = cache.lookup(&d, "r".into()).expect("open");
        assert_eq!(cache.get::<u32>(&again), Some(2));
        // Another read is another entry.
        let other = cache.lookup(&d, "s".into()).expect("open");
        assert_eq!(cache.get::<u32>(&other), None);
    }

    #[test]
    fn a_read_by_key_is_kept_only_when_its_discussion_did_not_change_during_it() {
        let cache = ReadCache::new(1 << 20).expect("cache");
        cache.feed_open();
        let (d, key) = (id(), DiscussionKey::parse("page-1").expect("a key"));
        admit(&cache, &d);
        // The read by key starts, the discussion changes, the read ends.
        let mark = cache.mark().expect("open");
        cache.invalidate(&d);
        cache.remember_key(&mark, &key, &d);
        assert!(cache.lookup_since(&mark, &d, "doc".into(), false).is_none());
        assert_eq!(cache.id_of_key(&key), None);
        // A read with nothing changing during it is kept, until the discussion changes.
        let mark = cache.mark().expect("open");
        cache.remember_key(&mark, &key, &d);
        assert!(cache.lookup_since(&mark, &d, "doc".into(), false).is_some());
        assert_eq!(cache.id_of_key(&key), Some(d.clone()));
        cache.invalidate(&d);
        assert_eq!(cache.id_of_key(&key), None);
        // A discussion seen first in a read by key is tracked from then on.
        let (e, other) = (id(), DiscussionKey::parse("page-2").expect("a key"));
        let mark = cache.mark().expect("open");
        cache.remember_key(&mark, &other, &e);
        assert_eq!(cache.id_of_key(&other), None);
        let mark = cache.mark().expect("open");
        cache.remember_key(&mark, &other, &e);
        assert_eq!(cache.id_of_key(&other), Some(e));
    }

    #[test]
    fn a_feed_outage_empties_it_and_bypasses_it_until_the_feed_opens() {
        let cache = ReadCache::new(1 << 20).expect("cache");
        cache.feed_open();
        let (d, key) = (id(), DiscussionKey::parse("page-1").expect("a key"));
        admit(&cache, &d);
        let read = cache.lookup(&d, "r".into()).expect("open");
        let _ = cache.lookup_since(&cache.mark().expect("open"), &d, "doc".into(), false);
        cache.remember_key(&cache.mark().expect("open"), &key, &d);
        assert_eq!(cache.id_of_key(&key), Some(d.clone()));
        cache.feed_down();
        assert!(cache.lookup(&d, "r".into()).is_none());
        assert!(cache.mark().is_none());
        cache.put(read, 1_u32, 4);
        cache.feed_open();
        let lookup = cache.lookup(&d, "r".into()).expect("open");
        assert_eq!(
            cache.get::<u32>(&lookup),
            None,
            "what was read before the outage is gone"
        );
        assert_eq!(cache.id_of_key(&key), None);
    }

    #[test]
    fn it_holds_no_more_than_its_bytes() {
        let cache = ReadCache::new(10_000).expect("cache");
        cache.feed_open();
        let d = id();
        admit(&cache, &d);
        for i in 0..100 {
            let lookup = cache.lookup(&d, format!("read {i}")).expect("open");
            cache.put(lookup, vec![0_u8; 1000], 1000);
        }
        assert!(cache.bytes() <= 10_000, "{}", cache.bytes());
        assert!(ReadCache::new(0).is_none(), "0 turns it off");
    }

    fn cached_discussion() -> Discussion {
        Discussion {
            id: id(),
            title: "hot".into(),
            key: None,
            url: None,
            layout: crate::domain::Layout::PerComment,
            created: crate::domain::Micros(0),
            comment_count: 0,
            thread_count: 0,
            locked: false,
            moderation: None,
            guests: None,
            closing: None,
            pinned: Vec::new(),
            moves: 0,
            hints: crate::domain::LayoutHints::default(),
        }
    }

    /// `through` with a read that counts itself, answers `value` after `wait`, and fails
    /// when `value` is 0.
    async fn counted_read(
        cache: &ReadCache,
        d: &Discussion,
        reads: &AtomicU64,
        value: u32,
        wait: Duration,
    ) -> StoreResult<u32> {
        let read = async {
            reads.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(wait).await;
            match value {
                0 => Err(crate::store::StoreError::Corrupt("planted".into())),
                v => Ok(v),
            }
        };
        cache.through(d, || "tree".into(), read, |_| 4).await
    }

    #[tokio::test]
    async fn concurrent_misses_of_one_entry_make_one_read() {
        let cache = ReadCache::new(1 << 20).expect("cache");
        cache.feed_open();
        let d = cached_discussion();
        admit(&cache, &d.id);
        let reads = AtomicU64::new(0);
        let wait = Duration::from_millis(50);
        let all = (0..8).map(|_| counted_read(&cache, &d, &reads, 7, wait));
        let got = futures::future::join_all(all).await;
        assert!(got.iter().all(|g| matches!(g, Ok(7))), "{got:?}");
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        assert_eq!(cache.stats().shared.load(Ordering::SeqCst), 7);
        assert_eq!(cache.flights.len(), 0);
        // Then it is a hit.
        assert_eq!(counted_read(&cache, &d, &reads, 9, wait).await.unwrap(), 7);
        assert_eq!(reads.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn hits_hand_out_the_cached_items_themselves() {
        let cache = ReadCache::new(1 << 20).expect("cache");
        cache.feed_open();
        let d = cached_discussion();
        admit(&cache, &d.id);
        let read = |text: &str| {
            let items = vec![Arc::new(text.to_owned())];
            async move {
                Ok(crate::domain::Page {
                    items,
                    has_next: false,
                })
            }
        };
        let first = cache.through(&d, || "page".into(), read("a"), |_| 64);
        let first = first.await.expect("a read");
        let second = cache.through(&d, || "page".into(), read("b"), |_| 64);
        let second = second.await.expect("a hit");
        assert!(
            Arc::ptr_eq(&first.items[0], &second.items[0]),
            "a hit shares the cached item, it does not copy it"
        );
    }

    #[tokio::test]
    async fn a_waiter_whose_discussion_changed_meanwhile_reads_for_itself() {
        let cache = ReadCache::new(1 << 20).expect("cache");
        cache.feed_open();
        let d = cached_discussion();
        admit(&cache, &d.id);
        let reads = AtomicU64::new(0);
        let leader = counted_read(&cache, &d, &reads, 1, Duration::from_millis(100));
        let waiter = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let waiting = counted_read(&cache, &d, &reads, 2, Duration::from_millis(10));
            let change = async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                cache.invalidate(&d.id);
            };
            tokio::join!(waiting, change).0
        };
        let (led, waited) = tokio::join!(leader, waiter);
        assert_eq!(led.unwrap(), 1);
        // The waiter joined before the change and was handed the leader's result after it:
        // it read again, and saw what the database says now.
        assert_eq!(waited.unwrap(), 2);
        assert_eq!(reads.load(Ordering::SeqCst), 2);
        assert_eq!(cache.stats().shared.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn when_the_leader_fails_its_waiters_read_for_themselves() {
        let cache = ReadCache::new(1 << 20).expect("cache");
        cache.feed_open();
        let d = cached_discussion();
        admit(&cache, &d.id);
        let reads = AtomicU64::new(0);
        let leader = counted_read(&cache, &d, &reads, 0, Duration::from_millis(50));
        let waiter = async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            counted_read(&cache, &d, &reads, 3, Duration::from_millis(10)).await
        };
        let (led, waited) = tokio::join!(leader, waiter);
        assert!(led.is_err());
        assert_eq!(waited.unwrap(), 3);
        assert_eq!(reads.load(Ordering::SeqCst), 2);
        // A leader dropped mid-read hands nothing either.
        let d = cached_discussion();
        admit(&cache, &d.id);
        let dropped = tokio::time::timeout(
            Duration::from_millis(10),
            counted_read(&cache, &d, &reads, 4, Duration::from_secs(60)),
        );
        assert!(dropped.await.is_err());
        assert_eq!(cache.flights.len(), 0, "a dropped leader leaves no flight");
        let after = counted_read(&cache, &d, &reads, 5, Duration::ZERO).await;
        assert_eq!(after.unwrap(), 5);
    }
}
