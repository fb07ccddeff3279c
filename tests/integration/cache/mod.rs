//! The read cache of hot discussions (src/store/cache.rs) over real sockets: servers with the
//! cache answer every public read as a server without it does, for every viewer, after writes
//! through either of them and after a database outage; cold discussions read once stay out of it.
//! The reads and snapshots are in `reads`, the model test's machinery in `model`.

mod model;
mod reads;
mod revalidation;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use threadql::config::Config;
use threadql::domain::{Layout, Vote};
use threadql::store::embedded_db::EmbeddedDb;

use crate::live::{await_subscribers, Protocol, Ws};
use crate::support::{
    layout_name, metric, moderator_token, post_graphql, token, unique_db, Running, Settings,
};
use crate::votes::{vote_value, VOTE};
use model::{model_case, model_seed};
use reads::{
    ask, assert_answer, assert_complete, assert_same, complete, reads_of, revalidated, snapshot,
    viewers, Target, Viewer,
};

/// Longest wait for anything a test waits for.
const WAIT: Duration = Duration::from_secs(20);
/// Random operations of the model test, per layout.
const OPS: usize = 60;
/// Sets the model test's seed (a number), to replay a run.
const SEED_VAR: &str = "THREADQL_CACHE_SEED";
/// How many times a write refused with `CONFLICT` is sent again.
const RESENDS: u32 = 3;

// The read cache's metrics and the change feed's.
const HITS: &str = "threadql_cache_hits_total";
const MISSES: &str = "threadql_cache_misses_total";
const INVALIDATIONS: &str = "threadql_cache_invalidations_total";
const BYTES: &str = "threadql_cache_bytes";
const EVENTS: &str = "threadql_change_events_total";
const STREAMS: &str = "threadql_change_streams_opened_total";
// The response cache's.
const RESPONSE_HITS: &str = "threadql_response_cache_hits_total";

const CREATE: &str = "mutation($k: String!, $l: StorageLayout) { ensureDiscussion(input: {key: $k, title: \"cached\", url: \"https://example.com/cached\", layout: $l}) { id } }";
const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug status } }";
const EDIT: &str = "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: {discussionId: $d, slug: $s, text: $t}) { slug text } }";
const DELETE: &str =
    "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug deleted } }";
const REPORT: &str =
    "mutation($d: ID!, $s: String!) { reportComment(discussionId: $d, slug: $s, reason: SPAM) }";
const APPROVE: &str =
    "mutation($d: ID!, $s: String!) { approveComment(discussionId: $d, slug: $s) { slug status } }";
const REJECT: &str = "mutation($d: ID!, $s: String!, $r: String) { rejectComment(discussionId: $d, slug: $s, reason: $r) { slug status } }";
const LOCK: &str =
    "mutation($d: ID!, $l: Boolean!) { lockDiscussion(id: $d, locked: $l) { locked } }";
const SET_MODE: &str =
    "mutation($d: ID!, $m: ModerationMode!) { setModeration(id: $d, mode: $m) { moderation } }";
const PIN: &str = "mutation($d: ID!, $s: String!, $p: Boolean!) { pinComment(discussionId: $d, slug: $s, pinned: $p) { slug pinned } }";
const CHANGED: &str = "subscription($d: ID!) { commentChanged(discussionId: $d) { slug text } }";

/// The users who write, vote and report (ids and names); `u1` is also the signed-in viewer.
const USERS: [(&str, &str); 4] = [("u1", "Ada"), ("u2", "Lin"), ("u3", "Bo"), ("u4", "Cy")];

/// A server's configuration on `database` with the read cache on (its default size) or off.
fn cache_config(database: &str, layout: Layout, cached: bool) -> Config {
    let mut config = Settings::new(layout).config(database);
    if !cached {
        config.cache_bytes = 0;
    }
    config
}

/// A user's token.
fn user(id: &str) -> String {
    let (_, name) = USERS
        .iter()
        .find(|(u, _)| *u == id)
        .unwrap_or_else(|| panic!("no user {id}"));
    token(id, name)
}

/// The moderator's token.
fn moderator() -> String {
    moderator_token("mod", "Mo")
}

/// Waits until `check` holds, failing with `what` after [`WAIT`].
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {WAIT:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A cache metric of each server.
async fn metrics(servers: &[&Running], name: &str) -> Vec<u64> {
    let mut values = Vec::new();
    for server in servers {
        values.push(metric(server, name).await);
    }
    values
}

/// Two servers with the read cache on and one without, on one database: after each of 60 random
/// writes (posts and replies by several users, edits by authors and moderators, deletes, votes
/// up, down and back, reports, rejections and approvals of public and held comments, locks,
/// moderation modes, pins) through one cached server, that server at once and the other once it
/// has heard the write answer every public read, anonymously and as a signed-in user, exactly
/// as the server without the cache does; and both served reads from their cache meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_servers_answer_as_the_database_does_per_comment() {
    model_case(Layout::PerComment, model_seed(1)).await;
}

/// [`cached_servers_answer_as_the_database_does_per_comment`] on the embedded layout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_servers_answer_as_the_database_does_embedded() {
    model_case(Layout::Embedded, model_seed(2)).await;
}

/// [`cached_servers_answer_as_the_database_does_per_comment`] on the bucketed layout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_servers_answer_as_the_database_does_bucketed() {
    model_case(Layout::Bucketed, model_seed(3)).await;
}

/// What viewers see differently of a discussion's comments: their votes, placeholders' texts,
/// moderators' counts, revisions, deleted comments' authors.
const VIEW: &str = r#"query($d: ID!) { discussion(id: $d) { commentCount pendingCount
  comments(first: 20) { nodes { slug text status moderationReason reportCount viewerVote deleted author { id name } revisions { text } } }
  top: comments(order: TOP, first: 20) { nodes { slug viewerVote } }
  threads(first: 10) { nodes { slug replies(first: 5) { nodes { slug text viewerVote } } } } } }"#;
/// A comment by direct link.
const LINK: &str = "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { slug status text moderationReason author { id name } } }";

/// What one viewer must see.
struct Sees {
    viewer: Viewer,
    /// Their vote on the first comment and on the reply.
    votes: [Value; 2],
    /// Whether they see the rejected comment's text, reason and author (its author, moderators).
    placeholder: bool,
    /// Whether they see the held comment by direct link (its author, moderators).
    held: bool,
    /// Whether they see the edited comment's revisions (its author, moderators).
    revisions: bool,
    /// Whether they are a moderator (report and pending counts, deleted comments' authors).
    moderator: bool,
}

/// The node of `slug` in a list of nodes.
fn node_in<'a>(nodes: &'a Value, slug: &str) -> &'a Value {
    nodes
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["slug"] == slug)
        .unwrap_or_else(|| panic!("no {slug} in {nodes}"))
}

/// With the read cache on and the discussion cached, each viewer reading the same queries
/// through the same server gets their own view, as the server without the cache gives it: their
/// own `viewerVote`, a rejected comment's text and reason only as its author or a moderator, a
/// held comment (pre-moderation) by direct link only as its author or a moderator and in no
/// list, revisions only as the author or a moderator, report and pending counts and a deleted
/// comment's author only as a moderator. Every read of the viewers is a cache hit (no miss).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_viewer_sees_their_own_view_of_cached_reads() {
    for layout in Layout::ALL {
        let database = unique_db("cache_viewers");
        let server = Running::start(cache_config(&database, layout, true)).await;
        let oracle = Running::start(cache_config(&database, layout, false)).await;
        let client = reqwest::Client::new();
        let d = server
            .mutate(
                &user("u1"),
                CREATE,
                json!({ "k": "viewers", "l": layout_name(layout) }),
            )
            .await["ensureDiscussion"]["id"]
            .as_str()
            .expect("id")
            .to_owned();
        let a = server.post(&user("u1"), &d, None, "first").await;
        let b = server.post(&user("u2"), &d, None, "second").await;
        let c = server.post(&user("u3"), &d, Some(&a), "reply").await;
        let e = server.post(&user("u1"), &d, None, "gone").await;
        let edit = json!({ "d": d, "s": a, "t": "first, edited" });
        server.mutate(&user("u1"), EDIT, edit).await;
        for (voter, slug, vote) in [("u2", &a, "UP"), ("u3", &a, "DOWN"), ("u1", &c, "UP")] {
            let vars = json!({ "d": d, "s": slug, "v": vote });
            server.mutate(&user(voter), VOTE, vars).await;
        }
        server
            .mutate(&user("u2"), VOTE, json!({ "d": d, "s": c, "v": "DOWN" }))
            .await;
        server
            .mutate(&user("u3"), REPORT, json!({ "d": d, "s": a }))
            .await;
        let reject = json!({ "d": d, "s": b, "r": "off topic" });
        server.mutate(&moderator(), REJECT, reject).await;
        server
            .mutate(&user("u1"), DELETE, json!({ "d": d, "s": e }))
            .await;
        server
            .mutate(&moderator(), SET_MODE, json!({ "d": d, "m": "PRE" }))
            .await;
        let posted = server
            .mutate(&user("u3"), POST, json!({ "d": d, "t": "held" }))
            .await;
        assert_eq!(posted["postComment"]["status"], "PENDING");
        let h = posted["postComment"]["slug"]
            .as_str()
            .expect("slug")
            .to_owned();

        // The same reads, anonymously, until they are all served from the cache.
        let reads = [(VIEW, json!({ "d": d })), (LINK, json!({ "d": d, "s": h }))];
        for _ in 0..4 {
            for (query, vars) in &reads {
                ask(&client, &server, None, query, vars.clone()).await;
            }
        }
        let hits = metric(&server, HITS).await;
        let misses = metric(&server, MISSES).await;
        assert!(hits > 0, "{layout:?}: the discussion is cached");

        let sees = [
            Sees {
                viewer: Viewer::new("anonymous", None),
                votes: [Value::Null, Value::Null],
                placeholder: false,
                held: false,
                revisions: false,
                moderator: false,
            },
            Sees {
                viewer: Viewer::new("u1, the first comment's author", Some(user("u1"))),
                votes: [Value::Null, json!("UP")],
                placeholder: false,
                held: false,
                revisions: true,
                moderator: false,
            },
            Sees {
                viewer: Viewer::new("u2, the rejected comment's author", Some(user("u2"))),
                votes: [json!("UP"), json!("DOWN")],
                placeholder: true,
                held: false,
                revisions: false,
                moderator: false,
            },
            Sees {
                viewer: Viewer::new("u3, the held comment's author", Some(user("u3"))),
                votes: [json!("DOWN"), Value::Null],
                placeholder: false,
                held: true,
                revisions: false,
                moderator: false,
            },
            Sees {
                viewer: Viewer::new("a moderator", Some(moderator())),
                votes: [Value::Null, Value::Null],
                placeholder: true,
                held: true,
                revisions: true,
                moderator: true,
            },
        ];
        for expected in &sees {
            let context = format!("{layout:?}, as {}", expected.viewer.name);
            let token = expected.viewer.token.as_deref();
            let mut answers = Vec::new();
            for (read, (query, vars)) in ["the comments", "the held comment"].iter().zip(&reads) {
                let got = ask(&client, &server, token, query, vars.clone()).await;
                let want = ask(&client, &oracle, token, query, vars.clone()).await;
                assert_answer(&context, read, &got, &want);
                answers.push(got);
            }
            let discussion = &answers[0]["data"]["discussion"];
            let nodes = &discussion["comments"]["nodes"];
            let reply = &node_in(&discussion["threads"]["nodes"], &a)["replies"]["nodes"];
            for (slug, vote) in [(&a, &expected.votes[0]), (&c, &expected.votes[1])] {
                assert_eq!(
                    &node_in(nodes, slug)["viewerVote"],
                    vote,
                    "{context}: {slug}"
                );
                assert_eq!(
                    &node_in(&discussion["top"]["nodes"], slug)["viewerVote"],
                    vote
                );
            }
            assert_eq!(&node_in(reply, &c)["viewerVote"], &expected.votes[1]);
            let rejected = node_in(nodes, &b);
            assert_eq!(rejected["status"], "REJECTED");
            let (text, reason, name) = match expected.placeholder {
                true => (json!("second"), json!("off topic"), "Lin"),
                false => (Value::Null, Value::Null, "[hidden]"),
            };
            assert_eq!(
                (&rejected["text"], &rejected["moderationReason"]),
                (&text, &reason),
                "{context}"
            );
            assert_eq!(rejected["author"]["name"], name, "{context}");
            let first = node_in(nodes, &a);
            assert_eq!(first["text"], "first, edited");
            assert_eq!(
                first["revisions"].is_array(),
                expected.revisions,
                "{context}"
            );
            let (reports, pending, deleter) = match expected.moderator {
                true => (json!(1), json!(1), "u1"),
                false => (Value::Null, Value::Null, ""),
            };
            assert_eq!(first["reportCount"], reports, "{context}");
            assert_eq!(discussion["pendingCount"], pending, "{context}");
            assert_eq!(node_in(nodes, &e)["author"]["id"], deleter, "{context}");
            assert!(
                nodes
                    .as_array()
                    .expect("nodes")
                    .iter()
                    .all(|n| n["slug"] != h.as_str()),
                "{context}: a held comment is in no list"
            );
            let link = &answers[1];
            if expected.held {
                assert_eq!(link["data"]["comment"]["status"], "PENDING", "{context}");
                assert_eq!(link["data"]["comment"]["text"], "held", "{context}");
            } else {
                assert_eq!(
                    link["errors"][0]["extensions"]["code"], "NOT_FOUND",
                    "{context}: {link}"
                );
            }
        }
        let served = metric(&server, HITS).await;
        assert!(
            served > hits,
            "{layout:?}: the viewers' reads are served from the cache"
        );
        assert_eq!(
            metric(&server, MISSES).await,
            misses,
            "{layout:?}: no viewer's read went past the cache"
        );
        server.shutdown().await;
        oracle.shutdown().await;
    }
}

/// Sends a write until the database answers it: `UNAVAILABLE` (the database is not back yet,
/// for this server) is sent again until [`WAIT`] has passed; any other error fails the test.
async fn write_when_back(server: &Running, token: &str, query: &str, vars: Value) -> Value {
    let client = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let body = ask(&client, server, Some(token), query, vars.clone()).await;
        let Some(error) = body["errors"].as_array().and_then(|e| e.first()) else {
            return body["data"].clone();
        };
        assert_eq!(error["extensions"]["code"], "UNAVAILABLE", "{body:#}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "the database did not come back within {WAIT:?}: {body:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A database outage: a server whose discussion is cached (hits, bytes held) drops the whole
/// cache when its change feed breaks (an invalidation of everything, 0 bytes held); a write made
/// through another server once the database is back is then read by it as a server without the
/// cache reads it, and it serves from its cache again afterwards, still the same answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_empties_the_cache_and_fresh_reads_follow() {
    let binary = EmbeddedDb::locate(None).expect("secantusd-rs is needed: run ./scripts/test.sh");
    let dir = tempfile::tempdir().unwrap();
    let db = EmbeddedDb::start(&binary, dir.path()).await.unwrap();
    let port = db.port();
    let layout = Layout::Embedded;
    let database = unique_db("cache_outage");
    let on_db = |cached: bool| {
        let mut config = cache_config(&database, layout, cached);
        config.mongodb_uri = Some(db.uri());
        config
    };
    let writer = Running::start(on_db(true)).await;
    let oracle = Running::start(on_db(false)).await;
    // The reader gives up on the database quickly, so its feed notices the outage at once, and
    // tries to reopen it often.
    let mut config = on_db(true);
    config.db_timeout_ms = 300;
    config.live_retry_ms = 500;
    let reader = Running::start(config).await;
    let (client, viewers) = (reqwest::Client::new(), viewers());

    let d = writer
        .mutate(
            &user("u1"),
            CREATE,
            json!({ "k": "outage", "l": layout_name(layout) }),
        )
        .await["ensureDiscussion"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let first = writer
        .post(&user("u1"), &d, None, "before the outage")
        .await;
    let reply = writer.post(&user("u2"), &d, Some(&first), "a reply").await;
    writer.post(&user("u3"), &d, None, "another thread").await;
    writer
        .mutate(&user("u2"), VOTE, json!({ "d": d, "s": first, "v": "UP" }))
        .await;
    let target = Target {
        d,
        key: "outage".into(),
        s: first.clone(),
        t: reply,
    };
    let same_as_uncached = {
        let (client, reader, oracle, target, viewers) =
            (&client, &reader, &oracle, &target, &viewers);
        move || async move {
            // Both may fail for a moment while they reconnect after the outage.
            let truth = snapshot(client, oracle, target, viewers).await;
            complete(&truth).is_ok() && snapshot(client, reader, target, viewers).await == truth
        }
    };
    until(
        "the reader caches the discussion and answers as the uncached server",
        || async {
            same_as_uncached().await
                && metric(&reader, HITS).await > 0
                && metric(&reader, BYTES).await > 0
        },
    )
    .await;
    let invalidations = metric(&reader, INVALIDATIONS).await;

    db.stop().await;
    let db = EmbeddedDb::start_on(&binary, dir.path(), port)
        .await
        .unwrap();
    until(
        "the reader's feed breaks and its cache drops everything",
        || async { metric(&reader, INVALIDATIONS).await > invalidations },
    )
    .await;
    until(
        "the reader's cache holds nothing after the outage",
        || async { metric(&reader, BYTES).await == 0 },
    )
    .await;

    let edit = json!({ "d": target.d, "s": first, "t": "after the outage" });
    write_when_back(&writer, &user("u1"), EDIT, edit).await;
    let post = json!({ "d": target.d, "p": first, "t": "posted after the outage" });
    write_when_back(&writer, &user("u3"), POST, post).await;
    let vote = json!({ "d": target.d, "s": first, "v": "DOWN" });
    write_when_back(&writer, &user("u3"), VOTE, vote).await;
    until(
        "the reader answers with the writes made after the outage",
        &same_as_uncached,
    )
    .await;
    let truth = snapshot(&client, &oracle, &target, &viewers).await;
    assert_complete(&truth, "after the outage");
    let link = &truth[1].1["data"]["link"];
    assert_eq!(
        link["text"], "after the outage",
        "the truth is fresh: {link}"
    );
    assert_eq!(link["replyCount"], 2, "{link}");

    let hits = metric(&reader, HITS).await;
    until(
        "the reader serves the fresh answers from its cache again",
        || async { same_as_uncached().await && metric(&reader, HITS).await > hits },
    )
    .await;
    assert!(
        metric(&reader, STREAMS).await >= 2,
        "the reader's feed was reopened after the outage"
    );
    // The reopened feed keeps the cache exact: a later write is read past the cached answers.
    let edit = json!({ "d": target.d, "s": first, "t": "long after the outage" });
    writer.mutate(&user("u1"), EDIT, edit).await;
    until(
        "the reader answers with a write made once its feed was back",
        &same_as_uncached,
    )
    .await;
    for server in [reader, oracle, writer] {
        server.shutdown().await;
    }
    db.stop().await;
}

/// A discussion read the way a crawler reads it: once, with one list.
const CRAWL: &str =
    "query($d: ID!) { discussion(id: $d) { title comments(first: 20) { nodes { slug text } } } }";

/// Admission: a crawler reading many cold discussions once each leaves the cache as it was
/// (nothing stored, no hit or miss counted), while a discussion read again and again enters it,
/// stays through a second crawl and is then still served from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_discussions_read_once_stay_out_of_the_cache() {
    let database = unique_db("cache_crawler");
    let writer = Running::start(cache_config(&database, Layout::PerComment, false)).await;
    // The read cache alone: the response cache would answer the hot reads before it.
    let mut config = cache_config(&database, Layout::PerComment, true);
    config.response_cache_bytes = 0;
    let server = Running::start(config).await;
    // Its feed is open, so the cache counts reads (it is bypassed until then).
    until("the cached server opens its change feed", || async {
        metric(&server, STREAMS).await >= 1
    })
    .await;
    let author = user("u1");
    let mut discussions = Vec::new();
    for (i, layout) in Layout::ALL.iter().cycle().take(41).enumerate() {
        let d = writer.discussion(&author, *layout).await;
        writer
            .post(&author, &d, None, &format!("comment {i}"))
            .await;
        discussions.push(d);
    }
    let hot = discussions.pop().expect("a discussion");
    let client = reqwest::Client::new();
    let read = |d: String| {
        let (client, server) = (&client, &server);
        async move {
            let body = ask(client, server, None, CRAWL, json!({ "d": d })).await;
            let nodes = &body["data"]["discussion"]["comments"]["nodes"];
            assert_eq!(nodes.as_array().map(Vec::len), Some(1), "{body:#}");
        }
    };
    let counters = || async {
        let server = &server;
        [
            metric(server, HITS).await,
            metric(server, MISSES).await,
            metric(server, BYTES).await,
        ]
    };

    let (first_crawl, second_crawl) = discussions.split_at(20);
    for d in first_crawl {
        read(d.clone()).await;
    }
    assert_eq!(
        counters().await,
        [0, 0, 0],
        "hits, misses and bytes after a crawl of {} cold discussions",
        first_crawl.len()
    );
    for _ in 0..5 {
        read(hot.clone()).await;
    }
    let warm = counters().await;
    assert!(
        warm.iter().all(|v| *v > 0),
        "a discussion read 5 times is cached (hits, misses, bytes): {warm:?}"
    );
    for d in second_crawl {
        read(d.clone()).await;
    }
    assert_eq!(
        counters().await,
        warm,
        "a second crawl of {} cold discussions changes nothing in the cache",
        second_crawl.len()
    );
    read(hot).await;
    let after = counters().await;
    assert!(
        after[0] > warm[0],
        "the hot discussion is still served from the cache"
    );
    assert_eq!(after[1..], warm[1..], "without a miss");
    server.shutdown().await;
    writer.shutdown().await;
}

/// The reads (`find` and `aggregate` commands) a server has sent to the database; its change
/// stream's `getMore`s, which come when they will, are left out.
async fn reads_sent(server: &Running) -> f64 {
    let scrape = crate::support::Scrape::of(server).await;
    ["find", "aggregate"]
        .iter()
        .map(|c| scrape.value("threadql_db_commands_total", &[("command", c)]))
        .sum()
}

/// Single flight: after a post makes a hot discussion's entries stale, 16 readers that miss
/// together cost the database what one reader does (one leader reads each entry; the others
/// take what it read), and all of them see the post.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_that_miss_together_after_a_post_read_the_database_once() {
    let database = unique_db("cache_single_flight");
    let writer = Running::start(cache_config(&database, Layout::Bucketed, false)).await;
    let server = Running::start(cache_config(&database, Layout::Bucketed, true)).await;
    until("the cached server opens its change feed", || async {
        metric(&server, STREAMS).await >= 1
    })
    .await;
    let author = user("u1");
    let d = writer.discussion(&author, Layout::Bucketed).await;
    for i in 0..30 {
        writer
            .post(&author, &d, None, &format!("comment {i}"))
            .await;
    }
    let client = reqwest::Client::new();
    let read = |expected: usize| {
        let (client, server, d) = (&client, &server, d.clone());
        async move {
            let body = ask(client, server, None, CRAWL, json!({ "d": d })).await;
            let nodes = &body["data"]["discussion"]["comments"]["nodes"];
            assert_eq!(nodes.as_array().map(Vec::len), Some(expected), "{body:#}");
        }
    };
    // A post heard through the change feed (the invalidations settle), then `readers` at once:
    // the commands they cost.
    let mut total = 30;
    let mut burst = |readers: usize| {
        total += 1;
        let (writer, server, author, d, read) = (&writer, &server, &author, &d, &read);
        let shown = total.min(20);
        async move {
            let heard = metric(server, INVALIDATIONS).await;
            writer.post(author, d, None, "one more").await;
            until("the cached server hears the post", || async {
                metric(server, INVALIDATIONS).await > heard
            })
            .await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            let before = reads_sent(server).await;
            futures::future::join_all((0..readers).map(|_| read(shown))).await;
            reads_sent(server).await - before
        }
    };
    for _ in 0..5 {
        read(20).await;
    }
    let one = burst(1).await;
    assert!(
        one >= 1.0,
        "a reader after a post reads the database: {one}"
    );
    // On a busy machine the first reader can finish before the others ask (they then hit the
    // stored entry, and nobody waits): a few bursts, each costing what one reader does, until
    // one has readers that waited for another's read.
    let mut waited = false;
    for _ in 0..5 {
        let shared = metric(&server, "threadql_cache_shared_misses_total").await;
        let sixteen = burst(16).await;
        assert_eq!(sixteen, one, "16 readers at once cost what one does");
        if metric(&server, "threadql_cache_shared_misses_total").await > shared {
            waited = true;
            break;
        }
    }
    assert!(waited, "some readers took what another read");
    server.shutdown().await;
    writer.shutdown().await;
}

/// The comparison catches a stale answer. A comment's text and HTML are changed behind the
/// servers' back (a write no change feed hears), so the cached server goes on serving what it
/// kept: to anonymous readers by POST from the response cache, and to readers by GET as `304`.
/// The comparison with the server without the cache must report both, as it would a stale
/// entry the response cache kept by mistake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_stale_answer_fails_the_comparison() {
    use crate::support::{rewrite_stored_comment, Home};
    // On embedded the rewrite is a write of the discussion document, which the feed hears.
    for layout in [Layout::PerComment, Layout::Bucketed] {
        let database = unique_db("cache_planted");
        let server = Running::start(cache_config(&database, layout, true)).await;
        let oracle = Running::start(cache_config(&database, layout, false)).await;
        let client = reqwest::Client::new();
        let vars = json!({ "k": "planted", "l": layout_name(layout) });
        let d = server.mutate(&user("u1"), CREATE, vars).await["ensureDiscussion"]["id"]
            .as_str()
            .expect("id")
            .to_owned();
        let a = server.post(&user("u1"), &d, None, "first").await;
        let b = server.post(&user("u2"), &d, Some(&a), "reply").await;
        let (key, s, t) = ("planted".to_owned(), a.clone(), b);
        let target = Target { d, key, s, t };
        let viewers = viewers();
        let anonymous = &viewers[..2];
        until(
            "anonymous reads are answered from the response cache",
            || async {
                let got = snapshot(&client, &server, &target, anonymous).await;
                let truth = snapshot(&client, &oracle, &target, anonymous).await;
                assert_same(&got, &truth, &format!("{layout:?}: before the plant"));
                metric(&server, RESPONSE_HITS).await > 0 && revalidated(&viewers) > 0
            },
        )
        .await;
        let (hits, shown) = (metric(&server, RESPONSE_HITS).await, revalidated(&viewers));
        let set = mongodb::bson::doc! { "text": "planted", "html": "<p>planted</p>\n" };
        rewrite_stored_comment(&database, Home::Layout(layout), (&target.d, &a), set, &[]).await;

        let truth = snapshot(&client, &oracle, &target, anonymous).await;
        let got = snapshot(&client, &server, &target, anonymous).await;
        let stale: Vec<&str> = got
            .iter()
            .zip(&truth)
            .filter(|((_, g), (_, w))| g != w)
            .map(|((read, _), _)| read.as_str())
            .collect();
        for read in ["lists as anonymous", "lists as anonymous by GET"] {
            assert!(
                stale.contains(&read),
                "{layout:?}: {read} is stale: {stale:?}"
            );
        }
        assert!(
            metric(&server, RESPONSE_HITS).await > hits,
            "{layout:?}: kept bytes served"
        );
        assert!(
            revalidated(&viewers) > shown,
            "{layout:?}: a 304 was served"
        );
        let compared = std::panic::catch_unwind(|| assert_same(&got, &truth, "planted"));
        assert!(compared.is_err(), "{layout:?}: the comparison fails");
        server.shutdown().await;
        oracle.shutdown().await;
    }
}
