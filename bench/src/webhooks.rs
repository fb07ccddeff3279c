//! Webhook delivery under load: posts/s of writers posting top-level comments into one shared
//! bucketed discussion, without an endpoint and with one subscribed to every kind, and the lag
//! from each post's commit to its delivery reaching a receiver in this process.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::SeedableRng as _;
use serde::Serialize;
use serde_json::{json, Value};
use threadql::auth::JwtKeys;
use tokio::task::JoinHandle;

use crate::client::GraphqlClient;
use crate::plan;
use crate::server::{cpu_time, Server};
use crate::stats::{median, percentile, RunStats};

/// Numbers of concurrent writers measured.
pub(crate) const WRITERS: [usize; 2] = [1, 16];
/// Longest wait, after a phase with an endpoint, for every one of its posts' deliveries.
const WAIT: Duration = Duration::from_secs(60);
/// The layout of the shared discussions.
const LAYOUT: &str = "BUCKETED";
/// The dispatcher's metric of attempts, by result.
const ATTEMPTS_METRIC: &str = "threadql_webhook_deliveries_total";
/// Target: posts/s with an endpoint ÷ without.
pub(crate) const RATIO_TARGET: f64 = 0.85;
/// Target: p99 of the delivery lag, in milliseconds.
pub(crate) const LAG_P99_TARGET_MS: f64 = 2_000.0;

const CREATE: &str = "mutation($t: String!, $l: StorageLayout) { createDiscussion(input: { title: $t, layout: $l }) { id layout } }";
const POST: &str = "mutation($d: ID!, $t: String!) { postComment(input: { discussionId: $d, text: $t }) { slug } }";
const CREATE_ENDPOINT: &str = "mutation($u: String!, $n: String) { createWebhookEndpoint(input: { url: $u, description: $n }) { secret endpoint { id } } }";
const DELETE_ENDPOINT: &str = "mutation($id: ID!) { deleteWebhookEndpoint(id: $id) }";

/// What the scenario runs.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Settings {
    /// Numbers of concurrent writers, one shared discussion each.
    pub writers: Vec<usize>,
    /// Seconds of each phase's closed loop.
    pub run_secs: f64,
    /// Rounds of the two phases (without, then with an endpoint).
    pub rounds: usize,
    /// The shared discussions' layout.
    pub layout: String,
    /// Longest wait for a phase's deliveries, in seconds.
    pub wait_secs: f64,
    /// Seed of the posts' texts.
    pub seed: u64,
}

impl Settings {
    /// The scenario's settings: `run_secs` seconds a phase, `rounds` rounds.
    pub(crate) fn new(run_secs: f64, rounds: usize, seed: u64) -> Settings {
        Settings {
            writers: WRITERS.to_vec(),
            run_secs,
            rounds: rounds.max(1),
            layout: LAYOUT.to_lowercase(),
            wait_secs: WAIT.as_secs_f64(),
            seed,
        }
    }
}

/// One phase's closed loop of posts.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Phase {
    /// Posts made.
    pub posts: usize,
    /// From the first post sent to the last one answered.
    pub secs: f64,
    /// Posts per second.
    pub posts_per_sec: f64,
    /// Latency of the posts.
    pub latency: RunStats,
    /// What the processes did meanwhile.
    pub work: Work,
}

/// What the server, the database and the harness did over a stretch of time.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Work {
    /// Database commands the server sent.
    pub db_commands: u64,
    /// The same, by command.
    pub by_command: BTreeMap<String, u64>,
    /// CPU time of the server, ms.
    pub server_cpu_ms: f64,
    /// CPU time of the database the harness started, ms (none with `--mongodb-uri`).
    pub database_cpu_ms: Option<f64>,
    /// CPU time of the harness (the writers and the receiver), ms.
    pub harness_cpu_ms: f64,
}

/// The counters [`Work`] is the difference of.
struct Counters {
    commands: BTreeMap<String, u64>,
    server: Duration,
    database: Option<Duration>,
    harness: Duration,
}

impl Counters {
    async fn read(server: &Server, database: Option<u32>) -> anyhow::Result<Counters> {
        Ok(Counters {
            commands: server.db_commands_by_name().await?,
            server: server.cpu_time(),
            database: database.map(|pid| cpu_time(&format!("/proc/{pid}"))),
            harness: cpu_time("/proc/self"),
        })
    }

    /// What was done from `self` to `later`.
    fn until(&self, later: &Counters) -> Work {
        let ms = |a: Duration, b: Duration| b.saturating_sub(a).as_secs_f64() * 1e3;
        let by_command: BTreeMap<String, u64> = later
            .commands
            .iter()
            .map(|(name, n)| {
                let was = self.commands.get(name).copied().unwrap_or(0);
                (name.clone(), n.saturating_sub(was))
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        Work {
            db_commands: by_command.values().sum(),
            by_command,
            server_cpu_ms: ms(self.server, later.server),
            database_cpu_ms: self.database.zip(later.database).map(|(a, b)| ms(a, b)),
            harness_cpu_ms: ms(self.harness, later.harness),
        }
    }
}

/// The delivery lag (arrival at the receiver − the event's commit time), in milliseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Lag {
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
    /// Deliveries counted.
    pub count: usize,
}

impl Lag {
    fn of(lags_ms: &[f64]) -> Lag {
        let mut sorted = lags_ms.to_vec();
        sorted.sort_by(f64::total_cmp);
        Lag {
            p50_ms: percentile(&sorted, 0.50),
            p99_ms: percentile(&sorted, 0.99),
            max_ms: sorted.last().copied().unwrap_or(0.0),
            count: sorted.len(),
        }
    }
}

/// One round: a phase without an endpoint, then one with it, and that phase's deliveries.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Round {
    /// Without an endpoint.
    pub without: Phase,
    /// With one endpoint subscribed to every kind.
    pub with: Phase,
    /// The lag of the deliveries of the posts of `with`.
    pub lag: Lag,
    /// Posts of `with` whose delivery arrived.
    pub delivered: usize,
    /// Posts of `with` whose delivery did not arrive within the wait.
    pub missing: usize,
    /// Seconds from the end of `with` until the last delivery arrived (or the wait ran out).
    pub waited_secs: f64,
    /// What the processes did during that wait.
    pub drain: Work,
    /// Deliveries that arrived again with a `webhook-id` already seen.
    pub duplicates: usize,
    /// Deliveries that were not of this phase's posts.
    pub others: usize,
    /// The server's delivery attempts during the phase and the wait, by result.
    pub attempts: BTreeMap<String, u64>,
}

/// The scenario at one number of writers.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WebhookResult {
    /// Concurrent writers.
    pub writers: usize,
    /// The shared discussion's id.
    pub discussion: String,
    /// Median over the rounds of posts/s without an endpoint.
    pub posts_per_sec_without: f64,
    /// Median over the rounds of posts/s with one.
    pub posts_per_sec_with: f64,
    /// `posts_per_sec_with ÷ posts_per_sec_without`.
    pub ratio: f64,
    /// Median over the rounds of the database commands per post without an endpoint.
    pub commands_per_post_without: f64,
    /// Median over the rounds of the database commands per post with one, its delivery's
    /// included (the phase and the wait for its deliveries).
    pub commands_per_post_with: f64,
    /// Median over the rounds of the server's CPU ms per post without an endpoint.
    pub server_cpu_ms_per_post_without: f64,
    /// The same with one, its delivery's included.
    pub server_cpu_ms_per_post_with: f64,
    /// The lag over every delivery of every round's phase with an endpoint.
    pub lag: Lag,
    /// Posts made with an endpoint, over the rounds.
    pub posts_with: usize,
    /// Of those, whose delivery arrived.
    pub delivered: usize,
    /// Of those, whose delivery did not arrive within the wait.
    pub missing: usize,
    /// Each round.
    pub rounds: Vec<Round>,
}

/// Runs the scenario with a receiver of its own: for each number of writers, a new discussion
/// and `settings.rounds` rounds of a phase without an endpoint and one with it.
pub(crate) async fn measure(
    server: &Server,
    client: &GraphqlClient,
    keys: &JwtKeys,
    database: Option<u32>,
    settings: &Settings,
) -> anyhow::Result<Vec<WebhookResult>> {
    let receiver = Receiver::start().await?;
    let admin = keys.mint(
        "bench-admin",
        "Bench Admin",
        &["admin".to_owned()],
        24 * 3600,
    );
    let mut results = Vec::new();
    for &writers in &settings.writers {
        let on = On {
            server,
            client,
            database,
            receiver: &receiver,
            admin: &admin,
        };
        let result = at(&on, keys, settings, writers).await?;
        eprint!("{}", markdown(std::slice::from_ref(&result)));
        results.push(result);
    }
    receiver.stop();
    Ok(results)
}

/// What the rounds run against.
struct On<'a> {
    server: &'a Server,
    client: &'a GraphqlClient,
    /// The database's process id, when the harness started it.
    database: Option<u32>,
    receiver: &'a Receiver,
    /// An admin's token.
    admin: &'a str,
}

/// The rounds at one number of writers.
async fn at(
    on: &On<'_>,
    keys: &JwtKeys,
    settings: &Settings,
    writers: usize,
) -> anyhow::Result<WebhookResult> {
    let On {
        server,
        client,
        receiver,
        admin,
        ..
    } = *on;
    let vars = json!({ "t": format!("benchmark webhooks: {writers} writers"), "l": LAYOUT });
    let created = client.send(CREATE, &vars, Some(admin)).await?.data()?;
    let discussion = created["createDiscussion"]["id"]
        .as_str()
        .context("no discussion id")?
        .to_owned();
    let tokens: Vec<String> = (0..writers)
        .map(|w| {
            let (id, name) = plan::author_name(30_000 + w);
            keys.mint(&id, &name, &[], 24 * 3600)
        })
        .collect();
    // One untimed post by each writer first: a writer's first post costs more than the next.
    for (w, token) in tokens.iter().enumerate() {
        let mut rng = StdRng::seed_from_u64(settings.seed ^ w as u64);
        let vars = json!({ "d": discussion, "t": plan::text(&mut rng) });
        client.send(POST, &vars, Some(token)).await?.check()?;
    }
    let run = Duration::from_secs_f64(settings.run_secs.max(0.1));
    let mut rounds = Vec::new();
    // Every delivery's lag, over the rounds (the JSON keeps only their percentiles).
    let mut all_lags = Vec::new();
    for round in 1..=settings.rounds {
        let seed = settings.seed ^ ((writers as u64) << 48) ^ ((round as u64) << 32);
        eprintln!(
            "webhooks, {writers} writer(s), round {round} of {}: without an endpoint",
            settings.rounds
        );
        let (without, _) = closed_loop(on, &discussion, &tokens, run, seed).await?;
        eprintln!(
            "webhooks, {writers} writer(s), round {round} of {}: with an endpoint",
            settings.rounds
        );
        let phase = format!("w{writers}-r{round}");
        let vars = json!({ "u": receiver.url(&phase), "n": format!("benchmark {phase}") });
        let created = client.send(CREATE_ENDPOINT, &vars, Some(admin)).await?;
        let endpoint = created.data()?["createWebhookEndpoint"]["endpoint"]["id"]
            .as_str()
            .context("no endpoint id")?
            .to_owned();
        let before = server.counters_by_label(ATTEMPTS_METRIC).await?;
        let (with, slugs) = closed_loop(on, &discussion, &tokens, run, seed ^ 1).await?;
        let ended = Instant::now();
        let drain_from = Counters::read(server, on.database).await?;
        let arrived = receiver.collect(&phase, &slugs, WAIT).await;
        let waited_secs = ended.elapsed().as_secs_f64();
        let drain = drain_from.until(&Counters::read(server, on.database).await?);
        let after = server.counters_by_label(ATTEMPTS_METRIC).await?;
        client
            .send(DELETE_ENDPOINT, &json!({ "id": endpoint }), Some(admin))
            .await?
            .check()?;
        let attempts = after
            .iter()
            .map(|(result, n)| {
                let was = before.get(result).copied().unwrap_or(0);
                (result.clone(), n.saturating_sub(was))
            })
            .collect();
        let lags: Vec<f64> = arrived.lags_ms.values().copied().collect();
        all_lags.extend_from_slice(&lags);
        if arrived.missing > 0 {
            eprintln!(
                "webhooks, {writers} writer(s), round {round}: {} of {} posts had no delivery after {:.0} s",
                arrived.missing,
                slugs.len(),
                WAIT.as_secs_f64()
            );
        }
        rounds.push(Round {
            without,
            with,
            lag: Lag::of(&lags),
            delivered: arrived.lags_ms.len(),
            missing: arrived.missing,
            waited_secs,
            drain,
            duplicates: arrived.duplicates,
            others: arrived.others,
            attempts,
        });
    }
    let without = median(rounds.iter().map(|r| r.without.posts_per_sec).collect());
    let with = median(rounds.iter().map(|r| r.with.posts_per_sec).collect());
    let per_post = |f: &dyn Fn(&Round) -> (f64, usize)| {
        median(
            rounds
                .iter()
                .map(|r| {
                    let (total, posts) = f(r);
                    total / posts.max(1) as f64
                })
                .collect(),
        )
    };
    Ok(WebhookResult {
        writers,
        discussion,
        posts_per_sec_without: without,
        posts_per_sec_with: with,
        ratio: with / without,
        commands_per_post_without: per_post(&|r| {
            (r.without.work.db_commands as f64, r.without.posts)
        }),
        commands_per_post_with: per_post(&|r| {
            (
                (r.with.work.db_commands + r.drain.db_commands) as f64,
                r.with.posts,
            )
        }),
        server_cpu_ms_per_post_without: per_post(&|r| {
            (r.without.work.server_cpu_ms, r.without.posts)
        }),
        server_cpu_ms_per_post_with: per_post(&|r| {
            (
                r.with.work.server_cpu_ms + r.drain.server_cpu_ms,
                r.with.posts,
            )
        }),
        lag: Lag::of(&all_lags),
        posts_with: rounds.iter().map(|r| r.with.posts).sum(),
        delivered: rounds.iter().map(|r| r.delivered).sum(),
        missing: rounds.iter().map(|r| r.missing).sum(),
        rounds,
    })
}

/// `tokens.len()` writers posting top-level comments into `discussion` one after the other
/// until `run` has passed (each at least once); the phase and the slugs posted.
async fn closed_loop(
    on: &On<'_>,
    discussion: &str,
    tokens: &[String],
    run: Duration,
    seed: u64,
) -> anyhow::Result<(Phase, HashSet<String>)> {
    let client = on.client;
    let before = Counters::read(on.server, on.database).await?;
    let started = Instant::now();
    let deadline = started + run;
    let tasks: Vec<_> = tokens
        .iter()
        .enumerate()
        .map(|(w, token)| {
            let client = client.clone();
            let discussion = discussion.to_owned();
            let token = token.clone();
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(seed ^ ((w as u64) << 16));
                let mut posted = Vec::new();
                loop {
                    let vars = json!({ "d": discussion, "t": plan::text(&mut rng) });
                    let answer = client.send(POST, &vars, Some(&token)).await?;
                    let slug = answer.data()?["postComment"]["slug"]
                        .as_str()
                        .context("a post without its slug")?
                        .to_owned();
                    posted.push((slug, answer.elapsed));
                    if Instant::now() >= deadline {
                        return anyhow::Ok(posted);
                    }
                }
            })
        })
        .collect();
    let mut slugs = HashSet::new();
    let mut samples = Vec::new();
    for task in tasks {
        for (slug, elapsed) in task.await.context("a writer panicked")?? {
            slugs.insert(slug);
            samples.push(elapsed);
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let work = before.until(&Counters::read(on.server, on.database).await?);
    if slugs.len() != samples.len() {
        bail!(
            "{} posts answered with {} distinct slugs",
            samples.len(),
            slugs.len()
        );
    }
    let phase = Phase {
        posts: samples.len(),
        secs,
        posts_per_sec: samples.len() as f64 / secs.max(1e-9),
        latency: RunStats::of(&samples),
        work,
    };
    Ok((phase, slugs))
}

/// A delivery as it arrived: when, its `webhook-id`, its body (read once the phase is over,
/// so the receiver answers at once).
struct Arrival {
    at: DateTime<Utc>,
    id: Option<String>,
    body: Bytes,
}

/// The deliveries that arrived, by the phase their endpoint's URL names.
#[derive(Default)]
struct Inbox {
    by_phase: Mutex<HashMap<String, Vec<Arrival>>>,
}

impl Inbox {
    fn push(&self, phase: String, arrival: Arrival) {
        self.by_phase
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(phase)
            .or_default()
            .push(arrival);
    }

    fn take(&self, phase: &str) -> Vec<Arrival> {
        self.by_phase
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(phase)
            .map(std::mem::take)
            .unwrap_or_default()
    }
}

/// What arrived for one phase's posts.
#[derive(Debug, Default)]
struct Arrived {
    /// The first delivery's lag of each post that had one, by slug.
    lags_ms: HashMap<String, f64>,
    /// Posts without a delivery.
    missing: usize,
    /// Deliveries with a `webhook-id` seen before.
    duplicates: usize,
    /// Deliveries of anything else.
    others: usize,
}

impl Arrived {
    /// Counts one delivery.
    fn add(&mut self, arrival: &Arrival, expected: &HashSet<String>, ids: &mut HashSet<String>) {
        let Some(id) = arrival.id.clone() else {
            self.others += 1;
            return;
        };
        if !ids.insert(id) {
            self.duplicates += 1;
            return;
        }
        match read_delivery(&arrival.body, arrival.at) {
            Some((kind, Some(slug), lag))
                if kind == "comment.posted" && expected.contains(&slug) =>
            {
                self.lags_ms.entry(slug).or_insert(lag);
            }
            _ => self.others += 1,
        }
    }
}

/// A delivery's type, the slug of its comment and its lag (arrival − `timestamp`) in ms.
fn read_delivery(body: &[u8], at: DateTime<Utc>) -> Option<(String, Option<String>, f64)> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let kind = value["type"].as_str()?.to_owned();
    let committed = DateTime::parse_from_rfc3339(value["timestamp"].as_str()?).ok()?;
    let lag = (at - committed.with_timezone(&Utc)).num_microseconds()? as f64 / 1e3;
    let slug = value["data"]["comment"]["slug"].as_str().map(str::to_owned);
    Some((kind, slug, lag))
}

/// A Standard Webhooks receiver on a loopback port, answering 204 at once and keeping what
/// arrived at `/hooks/<phase>`.
struct Receiver {
    base: String,
    inbox: Arc<Inbox>,
    task: JoinHandle<()>,
}

impl Receiver {
    async fn start() -> anyhow::Result<Receiver> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("cannot listen for the webhook deliveries")?;
        let addr = listener.local_addr()?;
        let inbox = Arc::new(Inbox::default());
        let app = Router::new()
            .route("/hooks/{phase}", post(receive))
            .with_state(inbox.clone());
        let task = tokio::spawn(async move {
            if let Err(err) = axum::serve(listener, app).await {
                eprintln!("the webhook receiver stopped: {err}");
            }
        });
        Ok(Receiver {
            base: format!("http://{addr}"),
            inbox,
            task,
        })
    }

    /// The URL of the endpoint of `phase`.
    fn url(&self, phase: &str) -> String {
        format!("{}/hooks/{phase}", self.base)
    }

    /// Waits until every post of `expected` has had its delivery at `phase`'s URL, or `wait`
    /// has passed.
    async fn collect(&self, phase: &str, expected: &HashSet<String>, wait: Duration) -> Arrived {
        let started = Instant::now();
        let mut arrived = Arrived::default();
        let mut ids = HashSet::new();
        loop {
            for arrival in self.inbox.take(phase) {
                arrived.add(&arrival, expected, &mut ids);
            }
            if arrived.lags_ms.len() >= expected.len() || started.elapsed() >= wait {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        arrived.missing = expected.len().saturating_sub(arrived.lags_ms.len());
        arrived
    }

    fn stop(self) {
        self.task.abort();
    }
}

/// Records a delivery and answers 204 before reading it.
async fn receive(
    State(inbox): State<Arc<Inbox>>,
    Path(phase): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let at = Utc::now();
    let id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    inbox.push(phase, Arrival { at, id, body });
    StatusCode::NO_CONTENT
}

/// Fails when a post had no delivery.
pub(crate) fn check(results: &[WebhookResult]) -> anyhow::Result<()> {
    let failed: Vec<String> = results
        .iter()
        .filter(|r| r.missing > 0)
        .map(|r| {
            format!(
                "{} writer(s): {} of {} posts made with an endpoint had no delivery within {} s",
                r.writers,
                r.missing,
                r.posts_with,
                WAIT.as_secs()
            )
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        bail!("webhook deliveries missing: {}", failed.join("; "))
    }
}

/// The results as a Markdown table, against the targets.
pub(crate) fn markdown(results: &[WebhookResult]) -> String {
    let mark = |ok: bool| if ok { "✅" } else { "❌" };
    let mut out = format!(
        "| writers | posts/s without | posts/s with an endpoint | with ÷ without (≥ {RATIO_TARGET}) | lag p50 ms | lag p99 ms (≤ {LAG_P99_TARGET_MS:.0}) | lag max ms | delivered | commands per post, without → with | server CPU ms per post, without → with |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for r in results {
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.0} | {:.2} {} | {:.1} | {:.1} {} | {:.1} | {} of {} | {:.1} → {:.1} | {:.2} → {:.2} |",
            r.writers,
            r.posts_per_sec_without,
            r.posts_per_sec_with,
            r.ratio,
            mark(r.ratio >= RATIO_TARGET),
            r.lag.p50_ms,
            r.lag.p99_ms,
            mark(r.lag.p99_ms <= LAG_P99_TARGET_MS),
            r.lag.max_ms,
            r.delivered,
            r.posts_with,
            r.commands_per_post_without,
            r.commands_per_post_with,
            r.server_cpu_ms_per_post_without,
            r.server_cpu_ms_per_post_with,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrival(id: &str, body: &str, at: &str) -> Arrival {
        Arrival {
            at: DateTime::parse_from_rfc3339(at)
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or_default(),
            id: Some(id.to_owned()),
            body: Bytes::from(body.to_owned()),
        }
    }

    #[test]
    fn counts_each_post_once_with_its_lag() {
        let posted = |slug: &str| {
            format!(
                r#"{{"type":"comment.posted","timestamp":"2025-01-01T00:00:00.000000Z","data":{{"comment":{{"slug":"{slug}"}}}}}}"#
            )
        };
        let expected: HashSet<String> = ["a1", "b2"].map(str::to_owned).into();
        let mut arrived = Arrived::default();
        let mut ids = HashSet::new();
        for a in [
            arrival("evt_1", &posted("a1"), "2025-01-01T00:00:00.250000Z"),
            arrival("evt_1", &posted("a1"), "2025-01-01T00:00:01Z"),
            arrival("evt_2", &posted("zz"), "2025-01-01T00:00:01Z"),
            arrival("evt_3", "not json", "2025-01-01T00:00:01Z"),
        ] {
            arrived.add(&a, &expected, &mut ids);
        }
        assert_eq!(arrived.lags_ms.get("a1").copied(), Some(250.0));
        assert_eq!(arrived.lags_ms.len(), 1);
        assert_eq!((arrived.duplicates, arrived.others), (1, 2));
    }

    #[test]
    fn lag_percentiles_and_the_check() {
        let lag = Lag::of(&[30.0, 10.0, 20.0]);
        assert_eq!(
            (lag.p50_ms, lag.p99_ms, lag.max_ms, lag.count),
            (20.0, 30.0, 30.0, 3)
        );
        let phase = Phase {
            posts: 10,
            secs: 1.0,
            posts_per_sec: 10.0,
            latency: RunStats::of(&[]),
            work: Work::default(),
        };
        let result = |missing| WebhookResult {
            writers: 1,
            discussion: "d".into(),
            posts_per_sec_without: 10.0,
            posts_per_sec_with: 9.0,
            ratio: 0.9,
            commands_per_post_without: 5.0,
            commands_per_post_with: 9.0,
            server_cpu_ms_per_post_without: 1.0,
            server_cpu_ms_per_post_with: 1.5,
            lag,
            posts_with: 10,
            delivered: 10 - missing,
            missing,
            rounds: vec![Round {
                without: phase.clone(),
                with: phase.clone(),
                lag,
                delivered: 10 - missing,
                missing,
                waited_secs: 0.1,
                drain: Work::default(),
                duplicates: 0,
                others: 0,
                attempts: BTreeMap::new(),
            }],
        };
        assert!(check(&[result(0)]).is_ok());
        assert!(check(&[result(0), result(2)]).is_err());
        let table = markdown(&[result(2)]);
        assert!(table.contains("| 1 | 10 | 9 | 0.90 ✅ |"), "{table}");
        assert!(
            table.contains("| 8 of 10 | 5.0 → 9.0 | 1.00 → 1.50 |"),
            "{table}"
        );
    }
}
