//! Notifications off the write path: the post latency into a discussion nobody follows (the
//! server otherwise idle) and into one with many followers, posts a gap apart so that each lands
//! while earlier fan-outs are still being stored, and how long a fan-out takes to notify every
//! follower.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use futures::stream::{self, StreamExt as _, TryStreamExt as _};
use rand::rngs::StdRng;
use rand::SeedableRng as _;
use serde::Serialize;
use serde_json::json;
use threadql::auth::JwtKeys;

use crate::client::GraphqlClient;
use crate::plan;
use crate::server::Server;
use crate::stats::{median, RunStats};

/// The layout of both discussions.
const LAYOUT: &str = "BUCKETED";
/// The fan-out's counter of notifications stored.
const STORED: &str = "threadql_notifications_total";
/// Longest wait for a fan-out to end.
const WAIT: Duration = Duration::from_secs(300);
/// The gap between two timed posts: shorter than a fan-out, so the followed posts overlap them.
const GAP: Duration = Duration::from_millis(100);
/// Target: p50 of a post into the followed discussion ÷ into the quiet one.
pub(crate) const RATIO_TARGET: f64 = 1.10;

const CREATE: &str = "mutation($t: String!, $l: StorageLayout) { createDiscussion(input: { title: $t, layout: $l }) { id } }";
const FOLLOW: &str =
    "mutation($d: ID!) { followDiscussion(discussionId: $d, follow: true) { id } }";
const POST: &str = "mutation($d: ID!, $t: String!) { postComment(input: { discussionId: $d, text: $t }) { slug } }";

/// What the scenario runs.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Settings {
    /// Followers of the followed discussion.
    pub followers: usize,
    /// Posts of each timed phase.
    pub posts: usize,
    /// Rounds of the two phases.
    pub rounds: usize,
    /// Single posts whose whole fan-out is timed alone.
    pub alone: usize,
    /// Seed of the texts.
    pub seed: u64,
}

/// One round: the posts into each discussion, one after the other.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Round {
    /// Into the discussion nobody follows.
    pub quiet: RunStats,
    /// Into the followed one (its fan-outs running behind).
    pub followed: RunStats,
    /// From the first followed post to the last of their notifications stored, in seconds.
    pub fan_out_secs: f64,
    /// Notifications stored a second over that time.
    pub notifications_per_sec: f64,
}

/// The scenario's results.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct NotifyResult {
    /// Followers.
    pub followers: usize,
    /// Seconds the follows took to make (`followers` mutations, 32 at once).
    pub follow_secs: f64,
    /// The rounds.
    pub rounds: Vec<Round>,
    /// Median over the rounds of the quiet posts' p50, in ms.
    pub quiet_p50_ms: f64,
    /// Median over the rounds of the followed posts' p50, in ms.
    pub followed_p50_ms: f64,
    /// `followed_p50_ms / quiet_p50_ms`.
    pub ratio: f64,
    /// Seconds from a lone post's answer until every follower was notified, each lone post.
    pub alone_secs: Vec<f64>,
}

/// Runs the scenario.
pub(crate) async fn measure(
    server: &Server,
    client: &GraphqlClient,
    keys: &JwtKeys,
    settings: &Settings,
) -> anyhow::Result<NotifyResult> {
    let writer = keys.mint("bench-writer", "Bench Writer", &[], 24 * 3600);
    let create = |title: &str| json!({ "t": title, "l": LAYOUT });
    let quiet = id_of(
        &client
            .send(CREATE, &create("nobody follows"), Some(&writer))
            .await?
            .data()?,
    )?;
    let followed = id_of(
        &client
            .send(CREATE, &create("followed"), Some(&writer))
            .await?
            .data()?,
    )?;
    let started = Instant::now();
    stream::iter(0..settings.followers)
        .map(|i| {
            let (id, name) = plan::author_name(40_000 + i);
            let token = keys.mint(&id, &name, &[], 24 * 3600);
            let vars = json!({ "d": followed });
            async move { client.send(FOLLOW, &vars, Some(&token)).await?.check() }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<_>>()
        .await?;
    let follow_secs = started.elapsed().as_secs_f64();
    eprintln!(
        "notifications: {} followers in {follow_secs:.1} s",
        settings.followers
    );
    let mut rng = StdRng::seed_from_u64(settings.seed);
    // Untimed first posts: a writer's first post into a discussion costs more.
    for d in [&quiet, &followed] {
        let vars = json!({ "d": d, "t": plan::text(&mut rng) });
        client.send(POST, &vars, Some(&writer)).await?.check()?;
    }
    settled(server, Instant::now()).await?;
    let mut rounds = Vec::new();
    for round in 1..=settings.rounds {
        eprintln!("notifications, round {round} of {}", settings.rounds);
        let quiet_stats = posts(client, &writer, &quiet, settings.posts, &mut rng).await?;
        let before = server.metric(STORED).await?;
        let first = Instant::now();
        let followed_stats = posts(client, &writer, &followed, settings.posts, &mut rng).await?;
        let wanted = before + (settings.posts * settings.followers) as u64;
        let fan_out_secs = until_stored(server, wanted, first).await?;
        rounds.push(Round {
            quiet: quiet_stats,
            followed: followed_stats,
            fan_out_secs,
            notifications_per_sec: (settings.posts * settings.followers) as f64
                / fan_out_secs.max(1e-9),
        });
    }
    let mut alone_secs = Vec::new();
    for _ in 0..settings.alone {
        let before = server.metric(STORED).await?;
        let vars = json!({ "d": followed, "t": plan::text(&mut rng) });
        client.send(POST, &vars, Some(&writer)).await?.check()?;
        let answered = Instant::now();
        alone_secs.push(until_stored(server, before + settings.followers as u64, answered).await?);
    }
    let quiet_p50_ms = median(rounds.iter().map(|r| r.quiet.p50_ms).collect());
    let followed_p50_ms = median(rounds.iter().map(|r| r.followed.p50_ms).collect());
    Ok(NotifyResult {
        followers: settings.followers,
        follow_secs,
        rounds,
        quiet_p50_ms,
        followed_p50_ms,
        ratio: followed_p50_ms / quiet_p50_ms.max(1e-9),
        alone_secs,
    })
}

/// The id a `createDiscussion` answered with.
fn id_of(data: &serde_json::Value) -> anyhow::Result<String> {
    Ok(data["createDiscussion"]["id"]
        .as_str()
        .context("no discussion id")?
        .to_owned())
}

/// `n` posts into `discussion`, one after the other, [`GAP`] apart; their latencies.
async fn posts(
    client: &GraphqlClient,
    writer: &str,
    discussion: &str,
    n: usize,
    rng: &mut StdRng,
) -> anyhow::Result<RunStats> {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let vars = json!({ "d": discussion, "t": plan::text(rng) });
        let answer = client.send(POST, &vars, Some(writer)).await?;
        answer.check()?;
        samples.push(answer.elapsed);
        tokio::time::sleep(GAP).await;
    }
    Ok(RunStats::of(&samples))
}

/// Seconds from `from` until the server has stored `wanted` notifications in all.
async fn until_stored(server: &Server, wanted: u64, from: Instant) -> anyhow::Result<f64> {
    loop {
        let stored = server.metric(STORED).await?;
        if stored >= wanted {
            return Ok(from.elapsed().as_secs_f64());
        }
        if from.elapsed() > WAIT {
            bail!(
                "only {stored} of {wanted} notifications after {} s",
                WAIT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the count of notifications stored stops moving (the warm-up's fan-outs ended).
async fn settled(server: &Server, from: Instant) -> anyhow::Result<()> {
    let mut last = server.metric(STORED).await?;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = server.metric(STORED).await?;
        if now == last || from.elapsed() > WAIT {
            return Ok(());
        }
        last = now;
    }
}

/// The results as a Markdown table.
pub(crate) fn markdown(result: &NotifyResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| round | quiet p50 ms | followed p50 ms | fan-out s | notifications/s |\n|---|---:|---:|---:|---:|"
    );
    for (i, r) in result.rounds.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {} | {:.2} | {:.2} | {:.2} | {:.0} |",
            i + 1,
            r.quiet.p50_ms,
            r.followed.p50_ms,
            r.fan_out_secs,
            r.notifications_per_sec
        );
    }
    let alone: Vec<String> = result
        .alone_secs
        .iter()
        .map(|s| format!("{s:.2}"))
        .collect();
    let _ = writeln!(
        out,
        "\n{} followers; p50 followed ÷ quiet: **{:.2}** (target ≤ {RATIO_TARGET}); a lone post's fan-out: {} s",
        result.followers,
        result.ratio,
        alone.join(", ")
    );
    out
}
