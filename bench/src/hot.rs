//! The hot-discussion scenario (`--hot-discussion`): many readers and a few writers on one
//! discussion, served by two processes with the read cache (A and B) and one without it (U).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use rand::rngs::StdRng;
use rand::SeedableRng as _;
use serde::Serialize;
use serde_json::Value;
use threadql::auth::JwtKeys;
use threadql::domain::{DiscussionId, DiscussionTitle, Layout, Slug};
use threadql::store::{Storage as _, Store};
use tokio::sync::watch;

use crate::client::GraphqlClient;
use crate::measure::{self, Throughput};
use crate::plan::Plan;
use crate::reads::{self, Fixtures, Read};
use crate::report::group;
use crate::server::Server;
use crate::stats::{percentile, RunStats};

/// The peer's read mix, each read measured on its own.
const MIX: [Read; 4] = [
    Read::FirstPage,
    Read::CursorPage,
    Read::Tree,
    Read::DirectLink,
];
/// Least cached ÷ uncached requests per second of the tree, nothing written meanwhile.
const TREE_TARGET: f64 = 3.0;
/// The same for the mix's other reads.
const OTHER_TARGET: f64 = 1.5;
/// The same for the tree while a writer posts once a second.
const TREE_WRITES_TARGET: f64 = 2.0;
/// Most cached ÷ uncached p50 of a read of a cold discussion.
const COLD_TARGET: f64 = 1.05;
/// Comments of each cold discussion: fewer than a page, so one read shows them all.
pub(crate) const COLD_COMMENTS: usize = 20;
/// Cold discussions loaded at once.
const COLD_LOADS_AT_ONCE: usize = 4;
/// How often the writer posts.
const WRITE_EVERY: Duration = Duration::from_secs(1);
/// Longest A may keep reading a discussion before one read is answered from its cache.
const ADMIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest a post through B may take to show on a polled server.
const SHOW_TIMEOUT: Duration = Duration::from_secs(10);
/// The cache's setting; unset, the server's default size holds.
const CACHE_BYTES: &str = "THREADQL_CACHE_BYTES";

/// How much the scenario measures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Settings {
    /// Comments of the hot discussion.
    pub comments: usize,
    /// Concurrent readers (a closed loop: each sends its next read when the last is answered).
    pub clients: usize,
    /// Rounds of one timed run on U, then one on A; the results are medians over the rounds.
    pub rounds: usize,
    /// Length of a timed run, seconds.
    pub run_secs: f64,
    /// Untimed closed loop before each timed run, seconds (none when 0).
    pub warmup_secs: f64,
    /// Posts through B while A and B are polled for them.
    pub staleness_posts: usize,
    /// Cold discussions read once through each of A and U (half before the hot reads, half
    /// after).
    pub cold_discussions: usize,
    /// Comments of each cold discussion.
    pub cold_comments: usize,
    /// Posts in flight while loading.
    pub load_concurrency: usize,
    /// Seed of the generated discussions and of the writer.
    pub seed: u64,
}

impl Settings {
    fn run(&self) -> Duration {
        Duration::from_secs_f64(self.run_secs.max(0.01))
    }

    /// The untimed run before each timed one, if any.
    fn warmup(&self) -> Option<Duration> {
        (self.warmup_secs > 0.0).then(|| Duration::from_secs_f64(self.warmup_secs))
    }
}

/// One layout's data, loaded before the servers start.
pub(crate) struct Prepared {
    layout: Layout,
    /// What the reads of the hot discussion point at.
    fixtures: Fixtures,
    /// Comments of the hot discussion the writer may reply to.
    parents: Arc<Vec<Slug>>,
    /// Cold discussions in pairs, all of the same shape: the first of a pair read through A,
    /// the second through U; half of the pairs read before the hot reads, half after.
    cold: Vec<(DiscussionId, DiscussionId)>,
}

/// Loads the hot discussion of `layout` (posted in `load_in`, then moved to `layout`, as the
/// other measurements load theirs) and the cold discussions (posted in `layout`).
pub(crate) async fn prepare(
    store: &Store,
    (layout, load_in): (Layout, Layout),
    settings: &Settings,
) -> anyhow::Result<Prepared> {
    let label = format!("{layout} {} (hot)", group(settings.comments));
    let plan = Plan::generate(settings.comments, settings.seed);
    let title = DiscussionTitle::parse(&format!(
        "benchmark hot discussion: {layout}, {} comments",
        settings.comments
    ))?;
    let discussion = store.discussions().create(title, load_in).await?;
    let none = HashSet::new();
    let loaded = crate::load::load(
        store,
        discussion,
        &plan,
        &none,
        settings.load_concurrency,
        Duration::MAX,
        &label,
    )
    .await?;
    if let Some(why) = &loaded.stopped {
        bail!("{label}: loading stopped: {why}");
    }
    let (loaded, _) = crate::move_to(store, loaded, layout, &label).await?;
    let fixtures = crate::fixtures_of(store, &loaded, &plan).await?;
    let parents = Arc::new(crate::reply_targets(&loaded, &plan, &none));

    let cold_plan = Plan::generate(settings.cold_comments, settings.seed);
    let count = 2 * settings.cold_discussions;
    let mut created = Vec::with_capacity(count);
    for i in 0..count {
        let title = DiscussionTitle::parse(&format!("benchmark cold discussion {i}: {layout}"))?;
        created.push(store.discussions().create(title, layout).await?);
    }
    let loaded = crate::load::load_many(
        store,
        created,
        &cold_plan,
        (settings.load_concurrency, COLD_LOADS_AT_ONCE),
        &format!("{layout}: {count} cold discussions"),
    )
    .await?;
    let cold = loaded
        .chunks_exact(2)
        .map(|pair| (pair[0].discussion.id.clone(), pair[1].discussion.id.clone()))
        .collect();
    Ok(Prepared {
        layout,
        fixtures,
        parents,
        cold,
    })
}

/// The three servers on the database: A and B with the read cache at its default size, U
/// without it.
pub(crate) struct Servers {
    cached: Server,
    writer: Server,
    uncached: Server,
}

impl Servers {
    /// Starts A, B and U.
    pub(crate) async fn start(
        binary: &Path,
        (uri, database): (&str, &str),
        secret: &str,
        log: &str,
        http: &reqwest::Client,
    ) -> anyhow::Result<Servers> {
        let start = |cache: Option<&'static str>| async move {
            let env = [(CACHE_BYTES, cache)];
            Server::start_with(binary, uri, database, secret, log, http.clone(), &env).await
        };
        let servers = Servers {
            cached: start(None).await?,
            writer: start(None).await?,
            uncached: start(Some("0")).await?,
        };
        eprintln!(
            "servers: A (cache on) pid {}, B (cache on, the writer's) pid {}, U (cache off) pid {}",
            servers.cached.pid(),
            servers.writer.pid(),
            servers.uncached.pid()
        );
        Ok(servers)
    }

    /// Stops the three.
    pub(crate) async fn stop(self) {
        tokio::join!(self.cached.stop(), self.writer.stop(), self.uncached.stop());
    }
}

/// The caches' counters on a server's `/metrics` (hits of the read cache and of the response
/// cache together).
#[derive(Debug, Clone, Copy, Default)]
struct Counters {
    hits: u64,
    misses: u64,
    invalidations: u64,
    change_events: u64,
}

impl Counters {
    async fn of(server: &Server) -> anyhow::Result<Counters> {
        let [hits, answers, misses, invalidations, change_events] = server
            .metrics_of([
                "threadql_cache_hits_total",
                "threadql_response_cache_hits_total",
                "threadql_cache_misses_total",
                "threadql_cache_invalidations_total",
                "threadql_change_events_total",
            ])
            .await?;
        // An anonymous read answered whole from the response cache is a hit too.
        Ok(Counters {
            hits: hits + answers,
            misses,
            invalidations,
            change_events,
        })
    }

    /// Adds what changed from `before` to `after`.
    fn add(&mut self, before: Counters, after: Counters) {
        self.hits += after.hits.saturating_sub(before.hits);
        self.misses += after.misses.saturating_sub(before.misses);
        self.invalidations += after.invalidations.saturating_sub(before.invalidations);
        self.change_events += after.change_events.saturating_sub(before.change_events);
    }

    fn used(self) -> CacheUse {
        let looked = self.hits + self.misses;
        CacheUse {
            hits: self.hits,
            misses: self.misses,
            hit_ratio: if looked > 0 {
                self.hits as f64 / looked as f64
            } else {
                f64::NAN
            },
            invalidations: self.invalidations,
            change_events: self.change_events,
        }
    }
}

/// What A's read cache did during a phase (the change of its counters over the timed runs).
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct CacheUse {
    /// Reads answered from the cache (one GraphQL request makes one or more).
    pub hits: u64,
    /// Reads of an admitted discussion that went to the database.
    pub misses: u64,
    /// hits ÷ (hits + misses); NaN (null in JSON) when there were neither.
    pub hit_ratio: f64,
    /// Discussions invalidated.
    pub invalidations: u64,
    /// Change events A read from its change stream.
    pub change_events: u64,
}

/// The posts made during a measured phase.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Posting {
    /// Posts through B.
    pub posts: usize,
    /// Posts per second over the phase.
    pub per_sec: f64,
}

/// One read on U and on A, in turns.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Compared {
    /// Which read.
    pub read: Read,
    /// Its label in tables.
    pub label: String,
    /// Comments the read returned (before any post of the phase).
    pub items: usize,
    /// On U (no cache).
    pub uncached: Throughput,
    /// On A (cache on, the discussion admitted).
    pub cached: Throughput,
    /// A's requests per second ÷ U's.
    pub ratio: f64,
    /// The least `ratio` the issue asks for.
    pub target: f64,
    /// `ratio` ≥ `target`.
    pub met: bool,
    /// A's cache over its timed runs.
    pub cache: CacheUse,
    /// The posts through B while both were measured, when there were any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes: Option<Posting>,
}

/// How long a post through B took to show on one polled server.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Staleness {
    /// The server polled.
    pub server: String,
    /// Posts watched.
    pub posts: usize,
    /// Per post: 0 when the first read sent after B answered the post showed it, else ms from
    /// B's answer to the answer of the first read that showed it; null when no read showed it
    /// within [`SHOW_TIMEOUT`].
    pub staleness_ms: Vec<Option<f64>>,
    /// Median of `staleness_ms` (of the posts shown).
    pub p50_ms: f64,
    /// 99th percentile of `staleness_ms` (nearest rank, of the posts shown).
    pub p99_ms: f64,
    /// Largest of `staleness_ms` (of the posts shown).
    pub max_ms: f64,
    /// The posts no read showed within [`SHOW_TIMEOUT`] of B's answer (the server kept serving
    /// a page from before them).
    pub not_shown: Vec<String>,
    /// Posts the first read sent after B's answer showed.
    pub fresh_on_first_read: usize,
    /// Reads sent after a post was answered that did not show it (over all posts).
    pub stale_reads: usize,
    /// Reads made while polling.
    pub reads: usize,
    /// The polled server's cache over the polling (hits show the reads were not bypassing it).
    pub cache: CacheUse,
}

/// Reads of discussions read once, on A and on U.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Cold {
    /// When they were made: `before` the hot reads (A's cache empty) or `after` them (A's cache
    /// holding what they left).
    pub when: &'static str,
    /// Bytes A's cache held when they started (`threadql_cache_bytes`).
    pub cache_bytes: u64,
    /// Discussions read through each server.
    pub discussions: usize,
    /// Comments of each.
    pub comments: usize,
    /// The read made of each.
    pub read: &'static str,
    /// Latency on U.
    pub uncached: RunStats,
    /// Latency on A.
    pub cached: RunStats,
    /// A's p50 ÷ U's.
    pub ratio_p50: f64,
    /// The most `ratio_p50` the issue allows.
    pub target: f64,
    /// `ratio_p50` ≤ `target`.
    pub met: bool,
    /// A's cache over these reads (no hit expected: nothing is read twice).
    pub cache: CacheUse,
}

/// Everything measured on one layout.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct HotLayout {
    /// The layout (and the binary, when several were measured).
    pub layout: String,
    /// The server binary's file name.
    pub server: String,
    /// Comments of the hot discussion when it was measured.
    pub comments: u64,
    /// Each read of the mix, nothing written meanwhile.
    pub reads: Vec<Compared>,
    /// The tree while one post a second goes through B.
    pub tree_with_writes: Compared,
    /// Posts through B, polled for on A and on B.
    pub staleness: Vec<Staleness>,
    /// Discussions read once, before the hot reads and after them.
    pub cold: Vec<Cold>,
    /// Reads against `GET /healthz` on A.
    pub wire: crate::wire::Wire,
}

/// A post through B and when its answer arrived.
#[derive(Debug, Clone)]
struct Written {
    slug: String,
    at: Instant,
}

/// Posts into the hot discussion through B, one a second.
struct Writer {
    client: GraphqlClient,
    token: String,
    discussion: DiscussionId,
    parents: Arc<Vec<Slug>>,
    seed: u64,
}

impl Writer {
    /// Posts every [`WRITE_EVERY`] (the first at once) until `count` are made or `stop` turns
    /// true, each a new thread or a reply to a loaded comment; each post's slug and the moment
    /// its answer arrived go to `written`. Returns how many it made.
    async fn run(
        self,
        count: usize,
        mut stop: watch::Receiver<bool>,
        written: watch::Sender<Vec<Written>>,
    ) -> anyhow::Result<usize> {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let pool: Vec<&str> = self.parents.iter().map(Slug::as_str).collect();
        let mut ticks = tokio::time::interval(WRITE_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut posted = 0;
        while posted < count {
            tokio::select! {
                biased;
                Ok(_) = stop.wait_for(|stop| *stop) => break,
                _ = ticks.tick() => {}
            }
            let answer =
                measure::post_one(&self.client, &self.token, &self.discussion, &pool, &mut rng)
                    .await
                    .context("posting through B")?;
            let data = answer.data()?;
            let slug = data["postComment"]["slug"]
                .as_str()
                .context("a post without its slug")?
                .to_owned();
            // The moment is taken under the channel's lock: a poller that sees the list without
            // this post started its read before it.
            written.send_modify(|w| {
                w.push(Written {
                    slug,
                    at: Instant::now(),
                });
            });
            posted += 1;
        }
        Ok(posted)
    }
}

/// The servers and their clients, for one layout's measurements.
struct Scenario<'a> {
    store: &'a Store,
    servers: &'a Servers,
    settings: &'a Settings,
    keys: &'a JwtKeys,
    prepared: &'a Prepared,
    cached: GraphqlClient,
    writer: GraphqlClient,
    uncached: GraphqlClient,
}

/// Measures one layout: the mix, the tree under writes, staleness, cold reads.
pub(crate) async fn measure(
    store: &Store,
    servers: &Servers,
    http: &reqwest::Client,
    (keys, settings): (&JwtKeys, &Settings),
    prepared: &Prepared,
) -> anyhow::Result<HotLayout> {
    let client = |server: &Server| GraphqlClient::new(http.clone(), server.graphql_url());
    let scenario = Scenario {
        store,
        servers,
        settings,
        keys,
        prepared,
        cached: client(&servers.cached),
        writer: client(&servers.writer),
        uncached: client(&servers.uncached),
    };
    let layout = prepared.layout;
    let (before, after) = prepared.cold.split_at(prepared.cold.len() / 2);
    eprintln!(
        "{layout}: {} cold discussions read once through A and {0} through U, A's cache empty",
        before.len()
    );
    let mut cold = vec![scenario.cold(before, "before").await?];
    let mut reads = Vec::new();
    for read in MIX {
        eprintln!(
            "{layout}: {}, {} clients, U then A, rounds: {}",
            read.label(),
            settings.clients,
            settings.rounds
        );
        let target = match read {
            Read::Tree => TREE_TARGET,
            _ => OTHER_TARGET,
        };
        reads.push(scenario.compare(read, target, false).await?);
    }
    eprintln!(
        "{layout}: reads against GET /healthz on A, {} clients, rounds: {}",
        settings.clients, settings.rounds
    );
    let wire = scenario.wire(http).await?;
    eprintln!(
        "{layout}: {} while B takes a post a second",
        Read::Tree.label()
    );
    let tree_with_writes = scenario
        .compare(Read::Tree, TREE_WRITES_TARGET, true)
        .await?;
    eprintln!(
        "{layout}: {} posts through B, A and B polled for them",
        settings.staleness_posts
    );
    let staleness = scenario.staleness().await?;
    eprintln!(
        "{layout}: {} cold discussions read once through A and {0} through U, A's cache in use",
        after.len()
    );
    cold.push(scenario.cold(after, "after").await?);
    let grown = store
        .discussions()
        .by_ids(std::slice::from_ref(&prepared.fixtures.discussion))
        .await?
        .into_iter()
        .next()
        .context("the hot discussion disappeared")?;
    Ok(HotLayout {
        layout: layout.to_string(),
        server: String::new(),
        comments: grown.comment_count,
        reads,
        tree_with_writes,
        staleness,
        cold,
        wire,
    })
}

impl Scenario<'_> {
    /// The first page and the tree, anonymous and signed in, and a `304`, against `/healthz`,
    /// on A.
    async fn wire(&self, http: &reqwest::Client) -> anyhow::Result<crate::wire::Wire> {
        let first_page = self.prepared.fixtures.graphql(Read::FirstPage);
        let tree = self.prepared.fixtures.graphql(Read::Tree);
        let setup = crate::wire::Setup {
            http: http.clone(),
            base: self.servers.cached.base.clone(),
            token: self
                .keys
                .mint("bench-hot-reader", "Hot Reader", &[], 24 * 3600),
            first_page: (first_page.0.as_str(), &first_page.1),
            tree: (tree.0.as_str(), &tree.1),
            clients: self.settings.clients,
            run: self.settings.run(),
            warmup: self.settings.warmup(),
            rounds: self.settings.rounds,
        };
        crate::wire::measure(&setup).await
    }

    fn writer(&self, seed: u64) -> Writer {
        Writer {
            client: self.writer.clone(),
            token: self
                .keys
                .mint("bench-hot-writer", "Hot Writer", &[], 24 * 3600),
            discussion: self.prepared.fixtures.discussion.clone(),
            parents: self.prepared.parents.clone(),
            seed,
        }
    }

    /// `read` on U and on A: both must answer what the store holds; A reads until its cache
    /// answers; then rounds of a timed run on U and one on A. With `writing`, a writer posts
    /// through B once a second all the while.
    async fn compare(&self, read: Read, target: f64, writing: bool) -> anyhow::Result<Compared> {
        let (query, variables) = self.prepared.fixtures.graphql(read);
        let query = (query.as_str(), &variables);
        let expected = self.prepared.fixtures.direct(self.store, read).await?;
        self.check(read, query, &expected, "U", &self.uncached)
            .await?;
        self.check(read, query, &expected, "A", &self.cached)
            .await?;
        self.admit(read, query).await?;
        self.check(read, query, &expected, "A from its cache", &self.cached)
            .await?;

        let (stop, stopped) = watch::channel(false);
        let writer = writing.then(|| {
            let (written, _) = watch::channel(Vec::new());
            let writer = self.writer(self.settings.seed ^ 0x7772_6974);
            tokio::spawn(writer.run(usize::MAX, stopped, written))
        });
        let started = Instant::now();
        let measured = self.rounds(query).await;
        let _ = stop.send(true);
        let writes = match writer {
            Some(task) => {
                let posts = task.await.context("the writer panicked")??;
                Some(Posting {
                    posts,
                    per_sec: posts as f64 / started.elapsed().as_secs_f64().max(1e-9),
                })
            }
            None => None,
        };
        let (uncached, cached, used) = measured?;
        let ratio = cached.req_per_sec / uncached.req_per_sec.max(1e-9);
        Ok(Compared {
            read,
            label: read.label().to_owned(),
            items: expected.len(),
            uncached,
            cached,
            ratio,
            target,
            met: ratio >= target,
            cache: used.used(),
            writes,
        })
    }

    /// Fails unless `client` answers `read` with `expected`.
    async fn check(
        &self,
        read: Read,
        (query, variables): (&str, &Value),
        expected: &[String],
        server: &str,
        client: &GraphqlClient,
    ) -> anyhow::Result<()> {
        let answer = client.send(query, variables, None).await?;
        let got = Fixtures::graphql_slugs(read, &answer.data()?)
            .with_context(|| format!("{}: unexpected answer from {server}", read.label()))?;
        if got != expected {
            bail!(
                "{}: {server} returned {} comments and the store {} (or in another order)",
                read.label(),
                got.len(),
                expected.len()
            );
        }
        if got.is_empty() {
            bail!("{}: the read returned nothing", read.label());
        }
        Ok(())
    }

    /// Reads through A until one read is answered from its cache (the discussion is admitted
    /// after a few reads, once A's change feed is open).
    async fn admit(&self, read: Read, (query, variables): (&str, &Value)) -> anyhow::Result<()> {
        let server = &self.servers.cached;
        let before = Counters::of(server).await?.hits;
        let started = Instant::now();
        let mut sent = 0;
        loop {
            self.cached.send(query, variables, None).await?.check()?;
            sent += 1;
            if Counters::of(server).await?.hits > before {
                return Ok(());
            }
            if started.elapsed() > ADMIT_TIMEOUT {
                bail!(
                    "{}: A (pid {}) answered none of {sent} reads in {ADMIT_TIMEOUT:?} from its read cache (is its change feed open? it read {} change events)",
                    read.label(),
                    server.pid(),
                    Counters::of(server).await?.change_events
                );
            }
        }
    }

    /// `rounds` times: a timed closed loop on U, then one on A, each after an untimed one;
    /// returns U's and A's, and A's cache over its timed runs.
    async fn rounds(
        &self,
        query: (&str, &Value),
    ) -> anyhow::Result<(Throughput, Throughput, Counters)> {
        let (clients, run, warmup) = (
            self.settings.clients,
            self.settings.run(),
            self.settings.warmup(),
        );
        let (mut uncached, mut cached) = (Vec::new(), Vec::new());
        let mut used = Counters::default();
        for _ in 0..self.settings.rounds {
            if let Some(warmup) = warmup {
                measure::closed_loop(&self.uncached, query, clients, warmup).await?;
            }
            uncached.push(measure::closed_loop(&self.uncached, query, clients, run).await?);
            if let Some(warmup) = warmup {
                measure::closed_loop(&self.cached, query, clients, warmup).await?;
            }
            let before = Counters::of(&self.servers.cached).await?;
            cached.push(measure::closed_loop(&self.cached, query, clients, run).await?);
            used.add(before, Counters::of(&self.servers.cached).await?);
        }
        Ok((Throughput::of(uncached), Throughput::of(cached), used))
    }

    /// Posts through B once a second while A and B are each polled, one read after the other,
    /// for the newest comments.
    async fn staleness(&self) -> anyhow::Result<Vec<Staleness>> {
        let (_keep, stop) = watch::channel(false);
        let (written, watched) = watch::channel(Vec::new());
        let writer = self.writer(self.settings.seed ^ 0x7374_616c);
        let writer = tokio::spawn(writer.run(self.settings.staleness_posts, stop, written));
        let newest = self.prepared.fixtures.graphql(Read::NewestFirst);
        let (on_a, on_b) = tokio::join!(
            poll(
                ("A", &self.servers.cached),
                &self.cached,
                &newest,
                watched.clone()
            ),
            poll(("B", &self.servers.writer), &self.writer, &newest, watched),
        );
        let posted = writer.await.context("the writer panicked")??;
        let (on_a, on_b) = (on_a?, on_b?);
        if on_a.posts != posted || on_b.posts != posted {
            bail!(
                "{posted} posts made, {} watched on A and {} on B",
                on_a.posts,
                on_b.posts
            );
        }
        Ok(vec![on_a, on_b])
    }

    /// Reads each cold discussion of `pairs` once: a pair's first through A and its second
    /// through U, A first in every other pair.
    async fn cold(
        &self,
        pairs: &[(DiscussionId, DiscussionId)],
        when: &'static str,
    ) -> anyhow::Result<Cold> {
        let server = &self.servers.cached;
        let cache_bytes = server.metric("threadql_cache_bytes").await?;
        let before = Counters::of(server).await?;
        let (mut on_a, mut on_u) = (Vec::new(), Vec::new());
        for (i, (for_a, for_u)) in pairs.iter().enumerate() {
            let a_first = i % 2 == 0;
            for cached in [a_first, !a_first] {
                let (client, discussion, samples) = if cached {
                    (&self.cached, for_a, &mut on_a)
                } else {
                    (&self.uncached, for_u, &mut on_u)
                };
                let (query, variables) = reads::first_page(discussion);
                let answer = client.send(&query, &variables, None).await?;
                let read = Fixtures::graphql_slugs(Read::FirstPage, &answer.data()?)?.len();
                if read != self.settings.cold_comments {
                    bail!(
                        "the cold discussion {discussion} answered {read} comments, not {}",
                        self.settings.cold_comments
                    );
                }
                samples.push(answer.elapsed);
            }
        }
        let mut used = Counters::default();
        used.add(before, Counters::of(server).await?);
        let (cached, uncached) = (RunStats::of(&on_a), RunStats::of(&on_u));
        let ratio_p50 = cached.p50_ms / uncached.p50_ms.max(1e-9);
        Ok(Cold {
            when,
            cache_bytes,
            discussions: pairs.len(),
            comments: self.settings.cold_comments,
            read: Read::FirstPage.label(),
            uncached,
            cached,
            ratio_p50,
            target: COLD_TARGET,
            met: ratio_p50 <= COLD_TARGET,
            cache: used.used(),
        })
    }
}

/// Reads `newest` (the newest comments) through `client`, one read after the other, until the
/// writer behind `written` is done and every post it made has shown, or was given up on
/// [`SHOW_TIMEOUT`] after B answered it.
async fn poll(
    (server, polled): (&str, &Server),
    client: &GraphqlClient,
    (query, variables): &(String, Value),
    written: watch::Receiver<Vec<Written>>,
) -> anyhow::Result<Staleness> {
    /// What the polling saw of one post.
    #[derive(Default)]
    struct Seen {
        stale: usize,
        shown_ms: Option<f64>,
        given_up: bool,
    }
    let mut seen: Vec<Seen> = Vec::new();
    let mut reads = 0;
    let counted = Counters::of(polled).await?;
    loop {
        let sent = Instant::now();
        let answer = client.send(query, variables, None).await?;
        let arrived = Instant::now();
        reads += 1;
        let slugs = Fixtures::graphql_slugs(Read::NewestFirst, &answer.data()?)?;
        // Whether the writer is done, asked first: then the list read next holds every post.
        let done = written.has_changed().is_err();
        let posts = written.borrow().clone();
        seen.resize_with(posts.len(), Seen::default);
        for (post, seen) in posts.iter().zip(&mut seen) {
            if seen.shown_ms.is_some() || seen.given_up || sent < post.at {
                continue;
            }
            let waited = arrived.saturating_duration_since(post.at);
            if slugs.contains(&post.slug) {
                seen.shown_ms = Some(match seen.stale {
                    0 => 0.0,
                    _ => waited.as_secs_f64() * 1e3,
                });
            } else {
                seen.stale += 1;
                if waited > SHOW_TIMEOUT {
                    eprintln!(
                        "{server} did not show the comment {} posted through B {SHOW_TIMEOUT:?} after B answered ({} reads without it)",
                        post.slug,
                        seen.stale
                    );
                    seen.given_up = true;
                }
            }
        }
        if done && seen.iter().all(|s| s.shown_ms.is_some() || s.given_up) {
            break;
        }
    }
    let mut used = Counters::default();
    used.add(counted, Counters::of(polled).await?);
    let posts = written.borrow().clone();
    let not_shown = seen
        .iter()
        .zip(&posts)
        .filter(|(s, _)| s.shown_ms.is_none())
        .map(|(_, post)| post.slug.clone())
        .collect();
    let staleness_ms: Vec<Option<f64>> = seen.iter().map(|s| s.shown_ms).collect();
    let mut sorted: Vec<f64> = staleness_ms.iter().flatten().copied().collect();
    sorted.sort_by(f64::total_cmp);
    Ok(Staleness {
        server: server.to_owned(),
        posts: seen.len(),
        p50_ms: percentile(&sorted, 0.50),
        p99_ms: percentile(&sorted, 0.99),
        max_ms: sorted.last().copied().unwrap_or(0.0),
        not_shown,
        fresh_on_first_read: seen.iter().filter(|s| s.stale == 0).count(),
        stale_reads: seen.iter().map(|s| s.stale).sum(),
        reads,
        staleness_ms,
        cache: used.used(),
    })
}

/// Fails when a polled server never showed a post through B (within [`SHOW_TIMEOUT`]), or when
/// B, which took the posts, did not show one on the first read after answering it.
pub(crate) fn check_staleness(results: &[HotLayout]) -> anyhow::Result<()> {
    let mut failed = Vec::new();
    for r in results {
        for s in &r.staleness {
            if !s.not_shown.is_empty() {
                failed.push(format!(
                    "{}: {} never showed {} of the {} posts through B within {SHOW_TIMEOUT:?} ({})",
                    r.layout,
                    s.server,
                    s.not_shown.len(),
                    s.posts,
                    s.not_shown.join(", ")
                ));
            }
            if s.server == "B" && s.fresh_on_first_read < s.posts {
                failed.push(format!(
                    "{}: B, which took the posts, showed {} of its {} posts only after {} stale reads",
                    r.layout,
                    s.posts - s.fresh_on_first_read,
                    s.posts,
                    s.stale_reads
                ));
            }
        }
    }
    if !failed.is_empty() {
        bail!("stale reads:\n{}", failed.join("\n"));
    }
    Ok(())
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "missed"
    }
}

fn percent(ratio: f64) -> String {
    if ratio.is_nan() {
        "–".to_owned()
    } else {
        format!("{:.1} %", ratio * 100.0)
    }
}

/// The results as markdown tables.
pub(crate) fn markdown(results: &[HotLayout]) -> String {
    let mut out = String::from(
        "| layout | read | U req/s | A req/s | A ÷ U | target | | U p50 / p99 ms | A p50 / p99 ms | A hit ratio |\n|---|---|---:|---:|---:|---:|---|---:|---:|---:|\n",
    );
    for r in results {
        for c in r.reads.iter().chain([&r.tree_with_writes]) {
            let label = match c.writes {
                Some(w) => format!(
                    "{}, {} posts through B ({:.2}/s)",
                    c.label, w.posts, w.per_sec
                ),
                None => c.label.clone(),
            };
            let _ = writeln!(
                out,
                "| {} | {label} | {:.0} | {:.0} | {:.2}× | ≥ {}× | {} | {:.2} / {:.2} | {:.2} / {:.2} | {} |",
                r.layout,
                c.uncached.req_per_sec,
                c.cached.req_per_sec,
                c.ratio,
                c.target,
                met(c.met),
                c.uncached.latency.p50_ms,
                c.uncached.latency.p99_ms,
                c.cached.latency.p50_ms,
                c.cached.latency.p99_ms,
                percent(c.cache.hit_ratio),
            );
        }
    }
    out.push_str(
        "\n| layout | cold reads | A's cache | U p50 / p99 ms | A p50 / p99 ms | A ÷ U (p50) | target | | A hits |\n|---|---|---|---:|---:|---:|---:|---|---:|\n",
    );
    for r in results {
        for c in &r.cold {
            let _ = writeln!(
            out,
            "| {} | {} of {} comments, {} discussions each | {} the hot reads: {:.1} MB | {:.2} / {:.2} | {:.2} / {:.2} | {:.3}× | ≤ {}× | {} | {} |",
            r.layout,
            c.read,
            c.comments,
            c.discussions,
            c.when,
            c.cache_bytes as f64 / 1e6,
            c.uncached.p50_ms,
            c.uncached.p99_ms,
            c.cached.p50_ms,
            c.cached.p99_ms,
            c.ratio_p50,
            c.target,
            met(c.met),
            c.cache.hits,
        );
        }
    }
    out.push_str(
        "\n| layout | polled | posts through B | staleness p50 / p99 / max ms | first read after the post showed it | stale reads | reads | hit ratio |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        for s in &r.staleness {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.2} / {:.2} / {} | {} of {} | {} | {} | {} |",
                r.layout,
                match s.server.as_str() {
                    "A" => "A (cache on, follows the feed)",
                    _ => "B (cache on, took the posts)",
                },
                s.posts,
                s.p50_ms,
                s.p99_ms,
                match s.not_shown.len() {
                    0 => format!("{:.2}", s.max_ms),
                    n => format!("> {} s ({n} never shown)", SHOW_TIMEOUT.as_secs()),
                },
                s.fresh_on_first_read,
                s.posts,
                s.stale_reads,
                s.reads,
                percent(s.cache.hit_ratio),
            );
        }
    }
    let wires: Vec<(String, &crate::wire::Wire)> = results
        .iter()
        .map(|r| (r.layout.clone(), &r.wire))
        .collect();
    out.push('\n');
    out.push_str(&crate::wire::markdown(&wires));
    out
}
