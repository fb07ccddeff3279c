//! The load generator: timed reads (GraphQL over HTTP and direct store calls) and timed writes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde_json::json;
use threadql::auth::JwtKeys;
use threadql::domain::{DiscussionId, Slug};
use threadql::store::Store;

use crate::client::{GraphqlClient, Timed};
use crate::plan;
use crate::reads::{Fixtures, Read};
use crate::server::{self, Server};
use crate::stats::{median, RunStats, Summary};

/// How many requests each measurement makes.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Effort {
    /// Measured runs; the report gives medians across them.
    pub runs: usize,
    /// Timed requests per run and read.
    pub requests: usize,
    /// Untimed requests before each run.
    pub warmup: usize,
    /// Longest a run of one read may take: a slow read stops early, after at least
    /// [`MIN_REQUESTS`] requests.
    pub run_secs: f64,
    /// Posts per run with one writer.
    pub posts_single: usize,
    /// Posts per run with many writers.
    pub posts_concurrent: usize,
    /// How many writers post at once in the concurrent run.
    pub writers: usize,
}

/// Fewest timed requests a run makes, however slow they are.
pub(crate) const MIN_REQUESTS: usize = 5;

impl Effort {
    /// Whether a run that started at `started` and made `done` requests goes on.
    fn more(&self, started: Instant, done: usize, of: usize) -> bool {
        done < of
            && (done < MIN_REQUESTS.min(of) || started.elapsed().as_secs_f64() < self.run_secs)
    }
}

/// One read, measured both ways.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReadResult {
    /// Which read.
    pub read: Read,
    /// Its label in tables.
    pub label: &'static str,
    /// Comments the read returns.
    pub items: usize,
    /// GraphQL over HTTP, as seen by the client.
    pub graphql: Summary,
    /// The same store calls made in-process.
    pub direct: Summary,
    /// GraphQL p50 / direct p50.
    pub ratio_p50: f64,
    /// Server CPU time per GraphQL request, µs (median over runs).
    pub graphql_server_cpu_us: f64,
    /// CPU time of this process per direct read, µs (median over runs).
    pub direct_cpu_us: f64,
    /// Database commands per GraphQL request (median over runs).
    pub graphql_round_trips: f64,
    /// Database commands per direct read (median over runs).
    pub direct_round_trips: f64,
}

/// Posting, measured with a number of concurrent writers.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WriteResult {
    /// Writers posting at once.
    pub writers: usize,
    /// Whether replies went to comments posted earlier in the same run (a live conversation)
    /// rather than to random loaded comments.
    pub conversation: bool,
    /// Posts per second (median over runs).
    pub posts_per_sec: f64,
    /// Posts per second of each run.
    pub runs_posts_per_sec: Vec<f64>,
    /// Posts made in each run (fewer than asked when a run ran out of time).
    pub runs_posts: Vec<usize>,
    /// Latency of one post.
    pub latency: Summary,
    /// Database commands per post (median over runs).
    pub round_trips: f64,
}

/// Measures every read: first checks that GraphQL and the direct calls return the same comments,
/// then alternates timed runs of both.
pub(crate) async fn reads(
    store: &Store,
    server: &Server,
    client: &GraphqlClient,
    fixtures: &Fixtures,
    which: &[Read],
    effort: Effort,
) -> anyhow::Result<Vec<ReadResult>> {
    let mut results = Vec::new();
    for &read in which {
        let (query, variables) = fixtures.graphql(read);
        let answer = client.send(&query, &variables, None).await?;
        let via_graphql = Fixtures::graphql_slugs(read, &answer.data()?)
            .with_context(|| format!("{}: unexpected GraphQL answer", read.label()))?;
        let via_store = fixtures.direct(store, read).await?;
        if via_graphql != via_store {
            bail!(
                "{}: GraphQL returned {} comments and the store {} (or in another order)",
                read.label(),
                via_graphql.len(),
                via_store.len()
            );
        }
        if via_graphql.is_empty() {
            bail!("{}: the read returned nothing", read.label());
        }
        let mut graphql_runs = Vec::new();
        let mut direct_runs = Vec::new();
        let mut graphql_trips = Vec::new();
        let mut direct_trips = Vec::new();
        let mut graphql_cpu = Vec::new();
        let mut direct_cpu = Vec::new();
        let warmup = effort.warmup.min(effort.requests / 4).max(1);
        for _ in 0..effort.runs {
            let started = Instant::now();
            let mut done = 0;
            while effort.more(started, done, warmup) {
                client.send(&query, &variables, None).await?.check()?;
                done += 1;
            }
            let before = server.db_commands().await?;
            let cpu_before = server.cpu_time();
            let started = Instant::now();
            let mut samples = Vec::with_capacity(effort.requests);
            while effort.more(started, samples.len(), effort.requests) {
                let answer = client.send(&query, &variables, None).await?;
                answer.check()?;
                samples.push(answer.elapsed);
            }
            let cpu = server.cpu_time().saturating_sub(cpu_before);
            let after = server.db_commands().await?;
            graphql_cpu.push(cpu.as_secs_f64() * 1e6 / samples.len().max(1) as f64);
            graphql_trips.push(per(after - before, samples.len()));
            graphql_runs.push(RunStats::of(&samples));

            let started = Instant::now();
            let mut done = 0;
            while effort.more(started, done, warmup) {
                fixtures.direct(store, read).await?;
                done += 1;
            }
            let before = store.commands().total();
            let cpu_before = server::cpu_time("/proc/self");
            let started = Instant::now();
            let mut samples = Vec::with_capacity(effort.requests);
            while effort.more(started, samples.len(), effort.requests) {
                let timer = Instant::now();
                fixtures.direct(store, read).await?;
                samples.push(timer.elapsed());
            }
            let cpu = server::cpu_time("/proc/self").saturating_sub(cpu_before);
            direct_cpu.push(cpu.as_secs_f64() * 1e6 / samples.len().max(1) as f64);
            let after = store.commands().total();
            direct_trips.push(per(after - before, samples.len()));
            direct_runs.push(RunStats::of(&samples));
        }
        let graphql = Summary::of(graphql_runs);
        let direct = Summary::of(direct_runs);
        results.push(ReadResult {
            read,
            label: read.label(),
            items: via_graphql.len(),
            ratio_p50: ratio(graphql.p50_ms, direct.p50_ms),
            graphql,
            direct,
            graphql_server_cpu_us: median(graphql_cpu),
            direct_cpu_us: median(direct_cpu),
            graphql_round_trips: median(graphql_trips),
            direct_round_trips: median(direct_trips),
        });
    }
    Ok(results)
}

/// Merges the results of several turns of the same reads (one list per turn, in the same
/// order) into one result per read, as if the turns were the runs of one measurement.
pub(crate) fn merge_turns(turns: &[Vec<ReadResult>]) -> Vec<ReadResult> {
    let Some(first) = turns.first() else {
        return Vec::new();
    };
    (0..first.len())
        .filter_map(|i| {
            let of: Vec<&ReadResult> = turns.iter().filter_map(|t| t.get(i)).collect();
            let head = *of.first()?;
            let runs = |pick: fn(&ReadResult) -> &Summary| {
                Summary::of(of.iter().flat_map(|r| pick(r).runs.clone()).collect())
            };
            let mid = |pick: fn(&ReadResult) -> f64| median(of.iter().map(|r| pick(r)).collect());
            let graphql = runs(|r| &r.graphql);
            let direct = runs(|r| &r.direct);
            Some(ReadResult {
                read: head.read,
                label: head.label,
                items: head.items,
                ratio_p50: ratio(graphql.p50_ms, direct.p50_ms),
                graphql,
                direct,
                graphql_server_cpu_us: mid(|r| r.graphql_server_cpu_us),
                direct_cpu_us: mid(|r| r.direct_cpu_us),
                graphql_round_trips: mid(|r| r.graphql_round_trips),
                direct_round_trips: mid(|r| r.direct_round_trips),
            })
        })
        .collect()
}

/// Where writers post and who they are.
pub(crate) struct WriteTarget<'a> {
    /// The discussion.
    pub discussion: &'a DiscussionId,
    /// Comments a reply may go to (not at the deepest generated level).
    pub parents: Arc<Vec<Slug>>,
    /// Keys to mint the writers' tokens.
    pub keys: &'a JwtKeys,
    /// Seed of the writers' choices.
    pub seed: u64,
}

const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }";

/// Measures posting through GraphQL with `writers` concurrent writers, `posts` per run in all:
/// 30% top-level comments, 70% replies, to random loaded comments or, in a `conversation`, to
/// random comments the writer posted earlier in the run.
pub(crate) async fn writes(
    server: &Server,
    client: &GraphqlClient,
    target: &WriteTarget<'_>,
    (writers, conversation): (usize, bool),
    posts: usize,
    effort: Effort,
) -> anyhow::Result<WriteResult> {
    let writers = writers.max(1);
    let per_writer = posts.div_ceil(writers).max(1);
    let tokens: Vec<String> = (0..writers)
        .map(|w| {
            let (id, name) = plan::author_name(10_000 + w);
            target.keys.mint(&id, &name, &[], 24 * 3600)
        })
        .collect();
    // Warm-up: a few posts by one writer.
    post_many(
        client.clone(),
        target.discussion.clone(),
        target.parents.clone(),
        tokens[0].clone(),
        effort.warmup.min(per_writer),
        Some(Instant::now() + Duration::from_secs_f64(effort.run_secs)),
        (target.seed ^ 0xdead_beef, conversation),
    )
    .await?;
    let mut runs_posts_per_sec = Vec::new();
    let mut runs_posts = Vec::new();
    let mut latency_runs = Vec::new();
    let mut trips = Vec::new();
    for run in 0..effort.runs {
        let before = server.db_commands().await?;
        let started = Instant::now();
        let tasks: Vec<_> = tokens
            .iter()
            .enumerate()
            .map(|(w, token)| {
                let seed = target.seed ^ ((run as u64) << 32) ^ ((writers as u64) << 48) ^ w as u64;
                tokio::spawn(post_many(
                    client.clone(),
                    target.discussion.clone(),
                    target.parents.clone(),
                    token.clone(),
                    per_writer,
                    Some(started + Duration::from_secs_f64(effort.run_secs)),
                    (seed, conversation),
                ))
            })
            .collect();
        let mut samples = Vec::with_capacity(per_writer * writers);
        for task in tasks {
            samples.extend(task.await.context("a writer panicked")??);
        }
        let elapsed = started.elapsed();
        let after = server.db_commands().await?;
        runs_posts_per_sec.push(samples.len() as f64 / elapsed.as_secs_f64());
        runs_posts.push(samples.len());
        trips.push(per(after - before, samples.len()));
        latency_runs.push(RunStats::of(&samples));
    }
    Ok(WriteResult {
        writers,
        conversation,
        posts_per_sec: median(runs_posts_per_sec.clone()),
        runs_posts_per_sec,
        runs_posts,
        latency: Summary::of(latency_runs),
        round_trips: median(trips),
    })
}

/// One writer posting `count` comments one after the other, or fewer when `deadline` passes (at
/// least one); returns each post's latency.
async fn post_many(
    client: GraphqlClient,
    discussion: DiscussionId,
    parents: Arc<Vec<Slug>>,
    token: String,
    count: usize,
    deadline: Option<Instant>,
    (seed, conversation): (u64, bool),
) -> anyhow::Result<Vec<Duration>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut samples = Vec::with_capacity(count);
    let mut own: Vec<String> = Vec::new();
    for done in 0..count {
        if done > 0 && deadline.is_some_and(|d| Instant::now() > d) {
            break;
        }
        let pool: Vec<&str> = match conversation {
            true => own.iter().map(String::as_str).collect(),
            false => parents.iter().map(Slug::as_str).collect(),
        };
        let answer = post_one(&client, &token, &discussion, &pool, &mut rng).await?;
        samples.push(answer.elapsed);
        if conversation {
            let data = answer.data()?;
            let slug = data["postComment"]["slug"]
                .as_str()
                .context("a post without its slug")?;
            own.push(slug.to_owned());
        }
    }
    Ok(samples)
}

/// One post of a generated text into `discussion` through GraphQL: a new thread 30 % of the
/// time (and whenever `pool` is empty), else a reply to a comment of `pool` drawn at random.
pub(crate) async fn post_one(
    client: &GraphqlClient,
    token: &str,
    discussion: &DiscussionId,
    pool: &[&str],
    rng: &mut StdRng,
) -> anyhow::Result<Timed> {
    let parent = if pool.is_empty() || rng.gen_bool(0.3) {
        None
    } else {
        Some(pool[rng.gen_range(0..pool.len())])
    };
    let variables = json!({
        "d": discussion.as_str(),
        "p": parent,
        "t": plan::text(rng),
    });
    let answer = client.send(POST, &variables, Some(token)).await?;
    answer.check()?;
    Ok(answer)
}

/// One closed-loop run: concurrent clients, each sending its next request as soon as the
/// answer to the last one has arrived.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct LoopRun {
    /// Requests answered.
    pub requests: usize,
    /// From the first request sent to the last answer, seconds.
    pub secs: f64,
    /// Requests answered per second.
    pub req_per_sec: f64,
    /// Latency of one request, as its client saw it.
    pub latency: RunStats,
}

/// Several closed-loop runs of the same read: medians across the runs, with every run kept.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Throughput {
    /// Median of the runs' requests per second.
    pub req_per_sec: f64,
    /// Medians of the runs' p50 and p99.
    pub latency: Summary,
    /// Each run.
    pub runs: Vec<LoopRun>,
}

impl Throughput {
    /// Medians of several runs.
    pub(crate) fn of(runs: Vec<LoopRun>) -> Throughput {
        Throughput {
            req_per_sec: median(runs.iter().map(|r| r.req_per_sec).collect()),
            latency: Summary::of(runs.iter().map(|r| r.latency).collect()),
            runs,
        }
    }
}

/// A closed loop of `clients` concurrent clients sending `query` for `duration` (no new request
/// starts after it; those in flight are answered and counted). Every answer must be free of
/// GraphQL errors.
pub(crate) async fn closed_loop(
    client: &GraphqlClient,
    (query, variables): (&str, &serde_json::Value),
    clients: usize,
    duration: Duration,
) -> anyhow::Result<LoopRun> {
    let (query, variables) = (Arc::<str>::from(query), Arc::new(variables.clone()));
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = (0..clients.max(1))
        .map(|_| {
            let (client, query, variables) = (client.clone(), query.clone(), variables.clone());
            tokio::spawn(async move {
                let mut samples = Vec::new();
                while Instant::now() < deadline {
                    let answer = client.send(&query, &variables, None).await?;
                    answer.check()?;
                    samples.push(answer.elapsed);
                }
                anyhow::Ok(samples)
            })
        })
        .collect();
    LoopRun::gather(tasks, started).await
}

impl LoopRun {
    /// The run of closed-loop `tasks` started at `started`, each giving its requests' latencies.
    pub(crate) async fn gather(
        tasks: Vec<tokio::task::JoinHandle<anyhow::Result<Vec<Duration>>>>,
        started: Instant,
    ) -> anyhow::Result<LoopRun> {
        let mut samples = Vec::new();
        for task in tasks {
            samples.extend(task.await.context("a client panicked")??);
        }
        let secs = started.elapsed().as_secs_f64();
        Ok(LoopRun {
            requests: samples.len(),
            secs,
            req_per_sec: samples.len() as f64 / secs.max(1e-9),
            latency: RunStats::of(&samples),
        })
    }
}

fn per(commands: u64, requests: usize) -> f64 {
    commands as f64 / requests.max(1) as f64
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}
