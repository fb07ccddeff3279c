//! Vote throughput: `voteComment` through the GraphQL server over HTTP, by one voter and by
//! many concurrent voters, with the database commands each vote costs (from `/metrics`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rand::rngs::StdRng;
use rand::seq::SliceRandom as _;
use rand::{Rng as _, SeedableRng as _};
use serde::Serialize;
use serde_json::json;
use threadql::auth::JwtKeys;
use threadql::domain::{DiscussionId, Slug};

use crate::client::GraphqlClient;
use crate::server::Server;
use crate::stats::RunStats;

const VOTE: &str = "mutation($d: ID!, $s: String!, $v: VoteValue) { voteComment(discussionId: $d, slug: $s, value: $v) { slug upvotes downvotes } }";

/// Untimed votes before each measurement (by a voter of their own).
const WARMUP_VOTES: usize = 20;

/// One configuration: `voters` users voting at once.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct VoteThroughput {
    /// The layout of the discussion voted in.
    pub layout: String,
    /// Comments of that discussion.
    pub comments: usize,
    /// Users voting at once, each with its own token, one vote after the other.
    pub voters: usize,
    /// Votes made (all answered without errors).
    pub votes: usize,
    /// Of them UP.
    pub up: usize,
    /// Wall time from the first vote sent to the last answered, seconds.
    pub secs: f64,
    /// Votes per second.
    pub votes_per_sec: f64,
    /// Latency of one vote, as the client saw it.
    pub latency: RunStats,
    /// Database commands per vote (all `threadql_db_commands_total`).
    pub commands_per_vote: f64,
    /// Database commands per vote by command name.
    pub commands_per_vote_by_name: BTreeMap<String, f64>,
}

/// What the voters vote in.
pub(crate) struct VoteTarget<'a> {
    /// The layout's name, for the report.
    pub layout: String,
    /// The discussion.
    pub discussion: &'a DiscussionId,
    /// Its public comments.
    pub comments: Arc<Vec<Slug>>,
    /// Keys to mint the voters' tokens.
    pub keys: &'a JwtKeys,
    /// Seed of the voters' choices.
    pub seed: u64,
}

/// Measures `votes` votes by `voters` concurrent voters (each `votes / voters`, rounded up),
/// each on a random comment of the discussion that the voter has not voted on (so every vote
/// is a new one), UP or DOWN at random. The voters' names are new to the discussion (`tag`
/// keeps those of different measurements apart).
pub(crate) async fn measure(
    server: &Server,
    client: &GraphqlClient,
    target: &VoteTarget<'_>,
    voters: usize,
    votes: usize,
    tag: &str,
) -> anyhow::Result<VoteThroughput> {
    let voters = voters.max(1);
    let per_voter = votes
        .div_ceil(voters)
        .clamp(1, target.comments.len().max(1));
    let token = |name: &str| {
        target
            .keys
            .mint(&format!("bench-voter-{tag}-{name}"), name, &[], 24 * 3600)
    };
    let warmup = token("warmup");
    vote_many(
        client.clone(),
        target.discussion.clone(),
        target.comments.clone(),
        warmup,
        WARMUP_VOTES.min(target.comments.len()),
        target.seed ^ 0x7761_726d,
    )
    .await?;
    let before = server.db_commands_by_name().await?;
    let started = Instant::now();
    let tasks: Vec<_> = (0..voters)
        .map(|v| {
            tokio::spawn(vote_many(
                client.clone(),
                target.discussion.clone(),
                target.comments.clone(),
                token(&v.to_string()),
                per_voter,
                target.seed ^ ((voters as u64) << 32) ^ v as u64,
            ))
        })
        .collect();
    let mut samples: Vec<Duration> = Vec::with_capacity(per_voter * voters);
    let mut up = 0;
    for task in tasks {
        let (latencies, ups) = task.await.context("a voter panicked")??;
        samples.extend(latencies);
        up += ups;
    }
    let secs = started.elapsed().as_secs_f64();
    let after = server.db_commands_by_name().await?;
    let count = samples.len();
    let per = |n: u64| n as f64 / count.max(1) as f64;
    let by_name: BTreeMap<String, f64> = after
        .iter()
        .map(|(name, n)| {
            let was = before.get(name).copied().unwrap_or(0);
            (name.clone(), per(n.saturating_sub(was)))
        })
        .filter(|(_, n)| *n > 0.0)
        .collect();
    let total: u64 = after
        .iter()
        .map(|(name, n)| n.saturating_sub(before.get(name).copied().unwrap_or(0)))
        .sum();
    Ok(VoteThroughput {
        layout: target.layout.clone(),
        comments: target.comments.len(),
        voters,
        votes: count,
        up,
        secs,
        votes_per_sec: count as f64 / secs.max(1e-9),
        latency: RunStats::of(&samples),
        commands_per_vote: per(total),
        commands_per_vote_by_name: by_name,
    })
}

/// One voter casting `count` votes one after the other, each on another comment drawn at
/// random; returns each vote's latency and how many were UP.
async fn vote_many(
    client: GraphqlClient,
    discussion: DiscussionId,
    comments: Arc<Vec<Slug>>,
    token: String,
    count: usize,
    seed: u64,
) -> anyhow::Result<(Vec<Duration>, usize)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let chosen: Vec<&Slug> = comments.choose_multiple(&mut rng, count).collect();
    let mut samples = Vec::with_capacity(chosen.len());
    let mut up = 0;
    for slug in chosen {
        let value = if rng.gen_bool(0.5) { "UP" } else { "DOWN" };
        let variables = json!({ "d": discussion.as_str(), "s": slug.as_str(), "v": value });
        let answer = client.send(VOTE, &variables, Some(&token)).await?;
        answer
            .check()
            .with_context(|| format!("voting {value} on comment {slug}"))?;
        samples.push(answer.elapsed);
        up += usize::from(value == "UP");
    }
    Ok((samples, up))
}

/// The results as a markdown table.
pub(crate) fn markdown(results: &[VoteThroughput]) -> String {
    let mut out = String::from(
        "| layout | comments | voters | votes | votes/s | p50 (ms) | p99 (ms) | DB commands per vote | by command |\n|---|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for r in results {
        let names: Vec<String> = r
            .commands_per_vote_by_name
            .iter()
            .map(|(name, n)| format!("{name} {n:.2}"))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {} |",
            r.layout,
            r.comments,
            r.voters,
            r.votes,
            r.votes_per_sec,
            r.latency.p50_ms,
            r.latency.p99_ms,
            r.commands_per_vote,
            names.join(", ")
        );
    }
    out
}
