//! Votes under concurrency: 50 users vote, switch and remove their votes on one comment at
//! once, through two servers over one database, each alternating servers. Afterwards, on every
//! layout, the counters equal the tally of each user's last vote on both servers, and each
//! user's `viewerVote` is their last vote.

use futures::future::join_all;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use threadql::domain::{Layout, Vote};

use crate::support::{post_graphql, token, unique_db, Running, Settings};
use crate::votes::{vote_value, Tally, COUNTS, VOTE};

/// Users voting at once.
const USERS: usize = 50;
/// How many times a vote refused with `CONFLICT` is sent.
const RESENDS: usize = 10;

/// Sends `query` through `server` as `token` (anonymous without). A vote refused with
/// `CONFLICT` (it kept meeting concurrent writes and wrote nothing) is sent again, as its
/// message tells clients to; any other error fails the test.
async fn send_resending(
    client: &reqwest::Client,
    server: &Running,
    token: Option<&str>,
    query: &str,
    vars: Value,
    seed: u64,
) -> Value {
    for _ in 0..RESENDS {
        let (status, body) = post_graphql(client, server, token, query, vars.clone()).await;
        assert_eq!(status, 200, "seed {seed}: {body:#}");
        let Some(error) = body["errors"].as_array().and_then(|e| e.first()) else {
            return body["data"].clone();
        };
        assert_eq!(
            error["extensions"]["code"], "CONFLICT",
            "seed {seed}: only CONFLICT may be sent again: {body:#}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("seed {seed}: {query} met CONFLICT {RESENDS} times");
}

/// The case on one layout.
async fn last_votes_count_case(layout: Layout, seed: u64) {
    eprintln!("votes concurrency: seed {seed}");
    let config = Settings::new(layout).config(&unique_db("votes_concurrency"));
    let servers = [
        Running::start(config.clone()).await,
        Running::start(config).await,
    ];
    let author = token("author", "Lin");
    let d = servers[0].discussion(&author, layout).await;
    let before = servers[0].post(&author, &d, None, "before").await;
    let target = servers[1].post(&author, &d, None, "contested").await;
    let reply = servers[0].post(&author, &d, Some(&target), "a reply").await;
    let client = reqwest::Client::new();

    let runs = (0..USERS).map(|u| {
        let (servers, client, d, target) = (&servers, &client, &d, &target);
        async move {
            let mut rng = StdRng::seed_from_u64(seed.wrapping_add(u as u64));
            let user = format!("voter{u}");
            let token = token(&user, &user);
            let mut last = None;
            for step in 0..rng.gen_range(3..=6) {
                let vote = match rng.gen_range(0..3) {
                    0 => Some(Vote::Up),
                    1 => Some(Vote::Down),
                    _ => None,
                };
                let server = &servers[(u + step) % 2];
                let vars = json!({ "d": d, "s": target, "v": vote_value(vote) });
                let data = send_resending(client, server, Some(&token), VOTE, vars, seed).await;
                assert_eq!(
                    data["voteComment"]["viewerVote"],
                    vote_value(vote),
                    "seed {seed}: {user} step {step}: {data}"
                );
                last = vote;
            }
            (user, last)
        }
    });
    let lasts: Vec<(String, Option<Vote>)> = join_all(runs).await;
    let mut tally = Tally::default();
    for (user, vote) in &lasts {
        tally.set(user, *vote);
    }
    let (up, down) = tally.counts();

    for server in &servers {
        let data = send_resending(
            &client,
            server,
            None,
            COUNTS,
            json!({ "d": d, "s": target }),
            seed,
        )
        .await;
        let c = &data["comment"];
        assert_eq!(
            (c["upvotes"].as_u64(), c["downvotes"].as_u64()),
            (Some(up), Some(down)),
            "seed {seed}: counters on {layout:?}"
        );
        assert_eq!(c["score"], json!(up as i64 - down as i64));
        let list = send_resending(
            &client,
            server,
            None,
            "query($d: ID!) { discussion(id: $d) { comments(order: TOP, first: 10) { nodes { slug upvotes downvotes } } } }",
            json!({ "d": d }),
            seed,
        )
        .await;
        let nodes = list["discussion"]["comments"]["nodes"]
            .as_array()
            .expect("nodes");
        assert_eq!(nodes.len(), 3);
        for node in nodes {
            let expected = if node["slug"] == target.as_str() {
                (up, down)
            } else {
                (0, 0)
            };
            assert_eq!(
                (node["upvotes"].as_u64(), node["downvotes"].as_u64()),
                (Some(expected.0), Some(expected.1)),
                "seed {seed}: {node}"
            );
        }
        let others = [&before, &reply];
        assert!(
            others
                .iter()
                .all(|s| nodes.iter().any(|n| n["slug"] == s.as_str())),
            "{nodes:?}"
        );
    }
    let checks = lasts.iter().enumerate().map(|(u, (user, vote))| {
        let (servers, client, d, target) = (&servers, &client, &d, &target);
        async move {
            let token = token(user, user);
            for server in [&servers[u % 2], &servers[(u + 1) % 2]] {
                let data = send_resending(
                    client,
                    server,
                    Some(&token),
                    COUNTS,
                    json!({ "d": d, "s": target }),
                    seed,
                )
                .await;
                assert_eq!(
                    data["comment"]["viewerVote"],
                    vote_value(*vote),
                    "seed {seed}: {user}'s last vote"
                );
            }
        }
    });
    join_all(checks).await;
    for server in servers {
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_votes_count_per_comment() {
    last_votes_count_case(Layout::PerComment, 101).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_votes_count_embedded() {
    last_votes_count_case(Layout::Embedded, 103).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_votes_count_bucketed() {
    last_votes_count_case(Layout::Bucketed, 107).await;
}
