//! Votes and the ranked orders: the rules of one vote per user per comment and every refusal
//! (contract cases, on every layout), ranked lists against a model built from the counters the
//! chronological list shows, cursors that belong to their order, counters that survive moves
//! between layouts, `viewerVote` read in one batch, and votes that emit no change event.

use std::collections::HashMap;

use futures::future::join_all;
use serde_json::{json, Value};
use threadql::domain::{Layout, Rank, Vote};

use crate::contract::{assert_exactly_once, at, collect_by_cursor, collect_by_offset};
use crate::live::{await_subscribers, Protocol, Ws};
use crate::model::{build_tree, Rng};
use crate::paging::{collect_backward, page};
use crate::support::{cost, error_code, layout_name, unique_db, Running, Settings, TestApp};

/// Votes on a comment (`value: null` removes the vote) and reads back what the API shows.
pub(crate) const VOTE: &str = "mutation($d: ID!, $s: String!, $v: VoteValue) { voteComment(discussionId: $d, slug: $s, value: $v) { slug upvotes downvotes score viewerVote } }";
/// One comment's counters and the caller's vote.
pub(crate) const COUNTS: &str = "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { slug upvotes downvotes score viewerVote } }";
/// A discussion's comments, every paging argument a variable.
pub(crate) const COMMENTS: &str = "query($d: ID!, $order: CommentOrder, $first: Int, $after: String, $last: Int, $before: String, $offset: Int) { discussion(id: $d) { comments(order: $order, first: $first, after: $after, last: $last, before: $before, offset: $offset) { ...Conn } } }";
/// A discussion's top-level comments.
pub(crate) const THREADS: &str = "query($d: ID!, $order: CommentOrder, $first: Int, $after: String, $last: Int, $before: String, $offset: Int) { discussion(id: $d) { threads(order: $order, first: $first, after: $after, last: $last, before: $before, offset: $offset) { ...Conn } } }";
/// A comment's direct replies (paged by cursor only).
pub(crate) const REPLIES: &str = "query($d: ID!, $s: String!, $order: CommentOrder, $first: Int, $after: String, $last: Int, $before: String) { comment(discussionId: $d, slug: $s) { replies(order: $order, first: $first, after: $after, last: $last, before: $before) { ...Conn } } }";
pub(crate) const COMMENTS_PATH: [&str; 2] = ["discussion", "comments"];
pub(crate) const THREADS_PATH: [&str; 2] = ["discussion", "threads"];
pub(crate) const REPLIES_PATH: [&str; 2] = ["comment", "replies"];
/// One page of the chronological list with what the model needs of each comment.
const LISTED: &str = "query($d: ID!, $after: String) { discussion(id: $d) { comments(order: CHRONOLOGICAL, first: 100, after: $after) { pageInfo { hasNextPage endCursor } nodes { slug parentSlug status deleted upvotes downvotes score } } } }";
const DELETE: &str =
    "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { deleted } }";
const REJECT: &str =
    "mutation($d: ID!, $s: String!) { rejectComment(discussionId: $d, slug: $s) { status } }";
const LOCK: &str =
    "mutation($d: ID!, $l: Boolean!) { lockDiscussion(id: $d, locked: $l) { locked } }";
const BAN: &str = "mutation($u: ID!) { banUser(userId: $u, reason: \"spam\") { userId } }";
const SET: &str =
    "mutation($d: ID!, $m: ModerationMode!) { setModeration(id: $d, mode: $m) { moderation } }";
const MIGRATE: &str =
    "mutation($d: ID!, $l: StorageLayout!) { migrateDiscussion(id: $d, layout: $l) { layout } }";

/// The API's name of a vote (`null` for none).
pub(crate) fn vote_value(vote: Option<Vote>) -> Value {
    match vote {
        Some(Vote::Up) => json!("UP"),
        Some(Vote::Down) => json!("DOWN"),
        None => Value::Null,
    }
}

/// The API's name of a ranked order.
pub(crate) fn rank_name(rank: Rank) -> &'static str {
    match rank {
        Rank::Top => "TOP",
        Rank::Best => "BEST",
        Rank::Controversial => "CONTROVERSIAL",
    }
}

/// `vars` with the fields of `extra` set.
pub(crate) fn with(vars: &Value, extra: &Value) -> Value {
    let mut v = vars.clone();
    for (k, x) in extra.as_object().expect("arguments") {
        v[k] = x.clone();
    }
    v
}

/// Votes as `user` (a token minted for that id); the whole response.
pub(crate) async fn vote_as(
    app: &TestApp,
    user: &str,
    d: &str,
    slug: &str,
    vote: Option<Vote>,
) -> Value {
    let token = app.token(user, user);
    app.exec_as(
        Some(&token),
        VOTE,
        json!({ "d": d, "s": slug, "v": vote_value(vote) }),
    )
    .await
}

/// Votes as `user`, failing the test on any error; returns what `voteComment` answered.
pub(crate) async fn vote_ok(
    app: &TestApp,
    user: &str,
    d: &str,
    slug: &str,
    vote: Option<Vote>,
) -> Value {
    let response = vote_as(app, user, d, slug, vote).await;
    assert!(
        response.get("errors").is_none(),
        "{user} votes {vote:?} on {slug}: {response:#}"
    );
    response["data"]["voteComment"].clone()
}

/// A comment's counters and `viewerVote` as `user` sees them (anonymous without).
async fn counts_as(app: &TestApp, user: Option<&str>, d: &str, slug: &str) -> Value {
    let token = user.map(|u| app.token(u, u));
    let response = app
        .exec_as(token.as_deref(), COUNTS, json!({ "d": d, "s": slug }))
        .await;
    assert!(response.get("errors").is_none(), "{response:#}");
    response["data"]["comment"].clone()
}

/// A comment as the chronological list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listed {
    pub slug: String,
    pub parent: Option<String>,
    pub status: String,
    pub deleted: bool,
    pub up: u64,
    pub down: u64,
}

/// Every comment of a discussion in chronological order (oldest first), with its counters.
pub(crate) async fn listed(app: &TestApp, d: &str) -> Vec<Listed> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let data = app.ok(LISTED, json!({ "d": d, "after": after })).await;
        let conn = &data["discussion"]["comments"];
        for n in conn["nodes"].as_array().expect("nodes") {
            let up = n["upvotes"].as_u64().expect("upvotes");
            let down = n["downvotes"].as_u64().expect("downvotes");
            assert_eq!(
                n["score"].as_i64(),
                Some(up as i64 - down as i64),
                "score = up - down: {n}"
            );
            out.push(Listed {
                slug: n["slug"].as_str().expect("slug").to_owned(),
                parent: n["parentSlug"].as_str().map(str::to_owned),
                status: n["status"].as_str().expect("status").to_owned(),
                deleted: n["deleted"].as_bool().expect("deleted"),
                up,
                down,
            });
        }
        if conn["pageInfo"]["hasNextPage"] != true {
            return out;
        }
        after = conn["pageInfo"]["endCursor"].as_str().map(str::to_owned);
    }
}

/// The comments a ranked list holds, chronological: the public ones (tombstones included,
/// placeholders left out) that `keep` keeps.
pub(crate) fn members(all: &[Listed], keep: impl Fn(&Listed) -> bool) -> Vec<&Listed> {
    all.iter()
        .filter(|c| c.status == "APPROVED" && keep(c))
        .collect()
}

/// The model of a ranked list: the chronological members, stably sorted by value, highest
/// first (so equal values stay oldest first, then by slug).
pub(crate) fn ranked(members: &[&Listed], rank: Rank) -> Vec<String> {
    let mut valued: Vec<(f64, &str)> = members
        .iter()
        .map(|c| (rank.value(c.up, c.down), c.slug.as_str()))
        .collect();
    valued.sort_by(|a, b| b.0.total_cmp(&a.0));
    valued.into_iter().map(|(_, s)| s.to_owned()).collect()
}

/// The counters one user's votes leave, as the voter keeps them: user → vote.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally(pub HashMap<String, Vote>);

impl Tally {
    /// Records `user`'s vote (`None` removes it).
    pub(crate) fn set(&mut self, user: &str, vote: Option<Vote>) {
        match vote {
            Some(v) => {
                self.0.insert(user.to_owned(), v);
            }
            None => {
                self.0.remove(user);
            }
        }
    }

    /// (upvotes, downvotes).
    pub(crate) fn counts(&self) -> (u64, u64) {
        let up = self.0.values().filter(|v| **v == Vote::Up).count() as u64;
        (up, self.0.len() as u64 - up)
    }
}

/// The contract case: one vote per user per comment; repeating is a no-op, switching moves the
/// vote, `null` removes it; and every refusal has its code and changes nothing.
pub(crate) async fn votes_follow_the_rules_case(mut settings: Settings) {
    settings.vote_rate_limit = "30/60s".parse().expect("rate");
    let app = TestApp::with("vote_rules", settings).await;
    let moderator = app.moderator_token("m", "Mo");
    let author = app.token("author", "Lin");
    let d = app.discussion("votes").await;
    let a = app.post_as(&author, &d, None, "vote on me").await;
    let b = app.post_as(&author, &d, Some(&a), "and on me").await;

    let expect = |v: &Value, up: u64, down: u64, mine: Option<Vote>| {
        assert_eq!(v["upvotes"], json!(up), "{v}");
        assert_eq!(v["downvotes"], json!(down), "{v}");
        assert_eq!(v["score"], json!(up as i64 - down as i64), "{v}");
        assert_eq!(v["viewerVote"], vote_value(mine), "{v}");
    };
    // A new comment has no votes.
    expect(&counts_as(&app, Some("v1"), &d, &a).await, 0, 0, None);
    expect(&counts_as(&app, None, &d, &a).await, 0, 0, None);

    // Up; the same again changes nothing; a second user down.
    expect(
        &vote_ok(&app, "v1", &d, &a, Some(Vote::Up)).await,
        1,
        0,
        Some(Vote::Up),
    );
    expect(
        &vote_ok(&app, "v1", &d, &a, Some(Vote::Up)).await,
        1,
        0,
        Some(Vote::Up),
    );
    expect(
        &vote_ok(&app, "v2", &d, &a, Some(Vote::Down)).await,
        1,
        1,
        Some(Vote::Down),
    );
    expect(
        &vote_ok(&app, "v3", &d, &a, Some(Vote::Up)).await,
        2,
        1,
        Some(Vote::Up),
    );
    // Switching moves one count to the other side, both ways.
    expect(
        &vote_ok(&app, "v1", &d, &a, Some(Vote::Down)).await,
        1,
        2,
        Some(Vote::Down),
    );
    expect(
        &vote_ok(&app, "v2", &d, &a, Some(Vote::Up)).await,
        2,
        1,
        Some(Vote::Up),
    );
    // Removing, and removing what is not there.
    expect(&vote_ok(&app, "v3", &d, &a, None).await, 1, 1, None);
    expect(&vote_ok(&app, "v3", &d, &a, None).await, 1, 1, None);
    expect(&vote_ok(&app, "v4", &d, &a, None).await, 1, 1, None);
    // Votes on one comment leave its reply alone.
    expect(
        &vote_ok(&app, "v1", &d, &b, Some(Vote::Up)).await,
        1,
        0,
        Some(Vote::Up),
    );
    // Each reader sees their own vote; the counters are everyone's.
    for (user, mine) in [
        (Some("v1"), Some(Vote::Down)),
        (Some("v2"), Some(Vote::Up)),
        (Some("v3"), None),
        (Some("author"), None),
        (None, None),
    ] {
        expect(&counts_as(&app, user, &d, &a).await, 1, 1, mine);
    }
    let v1 = app.token("v1", "v1");
    let list = app
        .exec_as(
            Some(v1.as_str()),
            "query($d: ID!) { discussion(id: $d) { comments(first: 10) { nodes { slug upvotes downvotes score viewerVote } } threads(first: 10) { nodes { slug upvotes viewerVote replies(first: 10) { nodes { slug upvotes viewerVote } } } } } }",
            json!({ "d": d }),
        )
        .await;
    let discussion = &list["data"]["discussion"];
    expect(&discussion["comments"]["nodes"][0], 1, 1, Some(Vote::Down));
    expect(&discussion["comments"]["nodes"][1], 1, 0, Some(Vote::Up));
    assert_eq!(discussion["threads"]["nodes"][0]["viewerVote"], "DOWN");
    assert_eq!(
        discussion["threads"]["nodes"][0]["replies"]["nodes"][0]["viewerVote"],
        "UP"
    );

    // Every refusal. The targets: a deleted comment, a rejected placeholder, a held comment, a
    // locked discussion's comment.
    let deleted = app.post_as(&author, &d, None, "deleted").await;
    vote_ok(&app, "v1", &d, &deleted, Some(Vote::Up)).await;
    app.exec_as(Some(&author), DELETE, json!({ "d": d, "s": deleted }))
        .await;
    let rejected = app.post_as(&author, &d, None, "rejected").await;
    vote_ok(&app, "v1", &d, &rejected, Some(Vote::Up)).await;
    let answer = app
        .exec_as(Some(&moderator), REJECT, json!({ "d": d, "s": rejected }))
        .await;
    assert_eq!(
        answer["data"]["rejectComment"]["status"], "REJECTED",
        "{answer:#}"
    );
    let held_in = app.discussion("pre-moderated").await;
    let answer = app
        .exec_as(Some(&moderator), SET, json!({ "d": held_in, "m": "PRE" }))
        .await;
    assert!(answer.get("errors").is_none(), "{answer:#}");
    let held = app.post_as(&author, &held_in, None, "held").await;
    let locked_d = app.discussion("locked").await;
    let in_locked = app.post_as(&author, &locked_d, None, "locked in").await;
    vote_ok(&app, "v1", &locked_d, &in_locked, Some(Vote::Up)).await;
    let answer = app
        .exec_as(Some(&moderator), LOCK, json!({ "d": locked_d, "l": true }))
        .await;
    assert!(answer.get("errors").is_none(), "{answer:#}");
    let answer = app
        .exec_as(Some(&moderator), BAN, json!({ "u": "troll" }))
        .await;
    assert!(answer.get("errors").is_none(), "{answer:#}");

    let v5 = app.token("v5", "v5");
    let troll = app.token("troll", "troll");
    let vars = |d: &str, s: &str, v: &str| json!({ "d": d, "s": s, "v": v });
    let cases: Vec<(&str, Option<&str>, Value, &str)> = vec![
        ("anonymous", None, vars(&d, &a, "UP"), "UNAUTHENTICATED"),
        (
            "own comment",
            Some(author.as_str()),
            vars(&d, &a, "UP"),
            "FORBIDDEN",
        ),
        (
            "deleted comment",
            Some(v5.as_str()),
            vars(&d, &deleted, "UP"),
            "COMMENT_DELETED",
        ),
        (
            "rejected placeholder",
            Some(v5.as_str()),
            vars(&d, &rejected, "UP"),
            "NOT_FOUND",
        ),
        (
            "held comment",
            Some(v5.as_str()),
            vars(&held_in, &held, "UP"),
            "NOT_FOUND",
        ),
        (
            "locked discussion",
            Some(v5.as_str()),
            vars(&locked_d, &in_locked, "DOWN"),
            "FORBIDDEN",
        ),
        (
            "locked discussion, removing",
            Some(v1.as_str()),
            json!({ "d": locked_d, "s": in_locked, "v": null }),
            "FORBIDDEN",
        ),
        (
            "banned user",
            Some(troll.as_str()),
            vars(&d, &a, "UP"),
            "FORBIDDEN",
        ),
        (
            "unknown slug",
            Some(v5.as_str()),
            vars(&d, "zzzzzzzz", "UP"),
            "NOT_FOUND",
        ),
        (
            "unknown reply slug",
            Some(v5.as_str()),
            vars(&d, &format!("{a}/zzzzzzzz"), "UP"),
            "NOT_FOUND",
        ),
        (
            "unknown discussion",
            Some(v5.as_str()),
            vars("0123456789abcdef01234567", &a, "UP"),
            "NOT_FOUND",
        ),
        (
            "malformed slug",
            Some(v5.as_str()),
            vars(&d, ".*", "UP"),
            "BAD_USER_INPUT",
        ),
        (
            "operator as slug",
            Some(v5.as_str()),
            vars(&d, "{\"$ne\": 1}", "UP"),
            "BAD_USER_INPUT",
        ),
        (
            "empty slug",
            Some(v5.as_str()),
            vars(&d, "", "UP"),
            "BAD_USER_INPUT",
        ),
        (
            "malformed discussion id",
            Some(v5.as_str()),
            vars("not-an-id", &a, "UP"),
            "BAD_USER_INPUT",
        ),
        (
            "operator as discussion id",
            Some(v5.as_str()),
            vars("{\"$gt\": \"\"}", &a, "UP"),
            "BAD_USER_INPUT",
        ),
    ];
    for (what, token, variables, code) in cases {
        let response = app.exec_as(token, VOTE, variables).await;
        assert_eq!(error_code(&response), code, "{what}: {response:#}");
        let message = response["errors"][0]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            !message.is_empty() && !message.contains("internal"),
            "{what}: unclear message {message:?}"
        );
        assert!(
            response["data"].is_null() || response["data"]["voteComment"].is_null(),
            "{what}: {response:#}"
        );
    }
    // An unknown value is refused before anything runs.
    let response = app
        .exec_as(Some(v5.as_str()), VOTE, vars(&d, &a, "SIDEWAYS"))
        .await;
    assert!(response["errors"].is_array(), "{response:#}");
    let response = app
        .exec_as(
            Some(v5.as_str()),
            "mutation($d: ID!, $s: String!) { voteComment(discussionId: $d, slug: $s, value: SIDEWAYS) { slug } }",
            json!({ "d": d, "s": a }),
        )
        .await;
    assert_eq!(
        error_code(&response),
        "GRAPHQL_VALIDATION_FAILED",
        "{response:#}"
    );

    // Nothing refused changed a counter; the tombstone keeps its votes.
    expect(
        &counts_as(&app, Some("v1"), &d, &a).await,
        1,
        1,
        Some(Vote::Down),
    );
    expect(
        &counts_as(&app, Some("v1"), &d, &deleted).await,
        1,
        0,
        Some(Vote::Up),
    );
    expect(
        &counts_as(&app, Some("v1"), &locked_d, &in_locked).await,
        1,
        0,
        Some(Vote::Up),
    );
    let seen = counts_as(&app, Some("v5"), &d, &a).await;
    assert_eq!(seen["viewerVote"], Value::Null);
    // Unlocked, the discussion takes votes again.
    app.exec_as(Some(&moderator), LOCK, json!({ "d": locked_d, "l": false }))
        .await;
    expect(
        &vote_ok(&app, "v5", &locked_d, &in_locked, Some(Vote::Down)).await,
        1,
        1,
        Some(Vote::Down),
    );

    // Over the rate limit (30 votes a minute per user): refused, and nothing changes.
    let other = app.post_as(&author, &d, None, "flooded").await;
    for i in 0..30 {
        let vote = if i % 2 == 0 { Vote::Up } else { Vote::Down };
        vote_ok(&app, "flood", &d, &other, Some(vote)).await;
    }
    let response = vote_as(&app, "flood", &d, &other, Some(Vote::Up)).await;
    assert_eq!(error_code(&response), "RATE_LIMITED", "{response:#}");
    expect(
        &counts_as(&app, Some("flood"), &d, &other).await,
        0,
        1,
        Some(Vote::Down),
    );
    // Another user's votes are not limited by the flood.
    expect(
        &vote_ok(&app, "v6", &d, &other, Some(Vote::Down)).await,
        0,
        2,
        Some(Vote::Down),
    );
}

/// A vote pattern of the ranked case: upvotes and downvotes a comment ends with. Equal patterns
/// tie in every order; equal scores tie in TOP; one-sided ones tie at 0 in CONTROVERSIAL.
const PATTERNS: [(usize, usize); 14] = [
    (0, 0),
    (1, 0),
    (0, 1),
    (1, 1),
    (2, 0),
    (2, 1),
    (1, 2),
    (3, 1),
    (2, 2),
    (3, 3),
    (4, 1),
    (5, 2),
    (0, 2),
    (6, 3),
];
/// The users who vote in the ranked cases.
const VOTERS: usize = 12;

/// One vote of a plan: who votes what.
type Step = (String, Option<Vote>);

/// Casts votes on `slugs` so that each ends on a pattern, with some switches and removals on
/// the way; returns what each comment should end with.
pub(crate) async fn cast_patterns(
    app: &TestApp,
    d: &str,
    slugs: &[String],
    seed: u64,
) -> HashMap<String, (u64, u64)> {
    let mut rng = Rng::new(seed);
    let mut plans: Vec<(String, Vec<Step>)> = Vec::new();
    for (i, slug) in slugs.iter().enumerate() {
        let (up, down) = PATTERNS[rng.below(PATTERNS.len())];
        let voter = |k: usize| format!("v{}", (i + k) % VOTERS);
        let mut steps = Vec::new();
        // Noise first: one user who switches sides, one who votes and takes it back.
        if rng.below(3) == 0 {
            steps.push((voter(up + down), Some(Vote::Down)));
            steps.push((voter(up + down + 1), Some(Vote::Up)));
            steps.push((voter(up + down), Some(Vote::Up)));
            steps.push((voter(up + down + 1), None));
            steps.push((voter(up + down), None));
        }
        for k in 0..up + down {
            let vote = if k < up { Vote::Up } else { Vote::Down };
            if rng.below(4) == 0 {
                // Switched into place.
                let other = if vote == Vote::Up {
                    Vote::Down
                } else {
                    Vote::Up
                };
                steps.push((voter(k), Some(other)));
            }
            steps.push((voter(k), Some(vote)));
        }
        plans.push((slug.clone(), steps));
    }
    let mut expected = HashMap::new();
    for chunk in plans.chunks(10) {
        let runs = chunk.iter().map(|(slug, steps)| async move {
            let mut tally = Tally::default();
            for (user, vote) in steps {
                let answer = vote_ok(app, user, d, slug, *vote).await;
                tally.set(user, *vote);
                let (up, down) = tally.counts();
                assert_eq!(
                    answer["upvotes"],
                    json!(up),
                    "{slug} after {user}: {answer}"
                );
                assert_eq!(
                    answer["downvotes"],
                    json!(down),
                    "{slug} after {user}: {answer}"
                );
            }
            (slug.clone(), tally.counts())
        });
        expected.extend(join_all(runs).await);
    }
    expected
}

/// Checks one ranked list against its model: forward by cursor, backward, by offset and single
/// pages at offsets (where the list takes `offset`), the final items by `last`, totalCount.
pub(crate) async fn check_ranked_list(
    app: &TestApp,
    query: &str,
    path: &[&str],
    vars: &Value,
    expected: &[String],
    what: &str,
) {
    let n = expected.len();
    for size in [1, 7, 50] {
        let got = collect_by_cursor(app, query, vars.clone(), path, size).await;
        assert_exactly_once(
            &got,
            expected,
            &format!("{what} by cursor, pages of {size}"),
        );
    }
    for size in [7, 50] {
        let got = collect_backward(app, query, vars.clone(), path, size).await;
        assert_exactly_once(&got, expected, &format!("{what} backward, pages of {size}"));
    }
    // `replies` pages by cursor only.
    let offsets: &[usize] = if query.contains("$offset") {
        &[0, 3, n.saturating_sub(2), n, n + 10]
    } else {
        &[]
    };
    if !offsets.is_empty() {
        let got = collect_by_offset(app, query, vars.clone(), path, 7).await;
        assert_exactly_once(&got, expected, &format!("{what} by offset"));
    }
    for &offset in offsets {
        let got = page(
            app,
            query,
            with(vars, &json!({ "first": 5, "offset": offset })),
            path,
        )
        .await;
        let slice = expected[offset.min(n)..(offset + 5).min(n)].to_vec();
        assert_eq!(
            got,
            (slice, offset > 0 && n > 0, offset + 5 < n),
            "{what} first 5 at offset {offset}"
        );
    }
    for last in [1, 5, 100] {
        let got = page(app, query, with(vars, &json!({ "last": last })), path).await;
        assert_eq!(
            got,
            (expected[n.saturating_sub(last)..].to_vec(), n > last, false),
            "{what} last {last}"
        );
    }
    let data = app
        .ok(
            &format!("{query} {}", crate::contract::CONN),
            with(vars, &json!({ "first": 0 })),
        )
        .await;
    assert_eq!(at(&data, path)["totalCount"], json!(n), "{what} totalCount");
}

/// The contract case: each ranked order of `comments`, `threads` and `replies`, walked every
/// way, equals the model built from the counters of the chronological list.
pub(crate) async fn ranked_orders_match_the_model_case(settings: Settings) {
    let app = TestApp::with("ranked_model", settings).await;
    let moderator = app.moderator_token("m", "Mo");
    let d = app.discussion("ranked").await;
    let model = build_tree(&app, &d, 60, 3, 29).await;
    let expected = cast_patterns(&app, &d, &model.slugs, 31).await;
    // Tombstones keep their votes; a rejected placeholder leaves every ranked list.
    for i in [4, 21, 50] {
        app.ok(DELETE, json!({ "d": d, "s": model.slugs[i] })).await;
    }
    let rejected = &model.slugs[9];
    let answer = app
        .exec_as(Some(&moderator), REJECT, json!({ "d": d, "s": rejected }))
        .await;
    assert_eq!(
        answer["data"]["rejectComment"]["status"], "REJECTED",
        "{answer:#}"
    );

    let all = listed(&app, &d).await;
    assert_eq!(all.len(), model.slugs.len());
    for c in &all {
        assert_eq!(
            (c.up, c.down),
            expected[&c.slug],
            "the counters of {} are the votes cast",
            c.slug
        );
    }
    let comments = members(&all, |_| true);
    assert_eq!(comments.len(), model.slugs.len() - 1);
    assert_eq!(
        comments.iter().filter(|c| c.deleted).count(),
        3,
        "tombstones stay in"
    );
    assert!(comments.iter().all(|c| &c.slug != rejected));
    let threads = members(&all, |c| c.parent.is_none());
    let busiest = (0..model.slugs.len())
        .filter(|&i| i != 9)
        .max_by_key(|&i| model.replies(i).len())
        .expect("comments");
    let busy = model.slugs[busiest].clone();
    let replies = members(&all, |c| c.parent.as_deref() == Some(busy.as_str()));
    assert!(replies.len() >= 4, "a busy comment: {}", replies.len());
    assert!(threads.len() >= 5, "several threads: {}", threads.len());
    let mut distinct: Vec<(u64, u64)> = comments.iter().map(|c| (c.up, c.down)).collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(
        distinct.len() >= 8 && distinct.len() < comments.len() / 2,
        "values both differ and tie: {distinct:?}"
    );

    for rank in Rank::ALL {
        let order = rank_name(rank);
        let lists = [
            (
                COMMENTS,
                &COMMENTS_PATH,
                json!({ "d": d, "order": order }),
                &comments,
                "comments",
            ),
            (
                THREADS,
                &THREADS_PATH,
                json!({ "d": d, "order": order }),
                &threads,
                "threads",
            ),
            (
                REPLIES,
                &REPLIES_PATH,
                json!({ "d": d, "s": busy, "order": order }),
                &replies,
                "replies",
            ),
        ];
        for (query, path, vars, members, name) in lists {
            let model = ranked(members, rank);
            check_ranked_list(&app, query, path, &vars, &model, &format!("{order} {name}")).await;
        }
    }
}

/// A cursor of the first item of a list.
async fn first_cursor(app: &TestApp, query: &str, path: &[&str], vars: Value) -> String {
    let data = app
        .ok(
            &format!("{query} {}", crate::contract::CONN),
            with(&vars, &json!({ "first": 2 })),
        )
        .await;
    at(&data, path)["edges"][0]["cursor"]
        .as_str()
        .unwrap_or_else(|| panic!("a cursor: {data:#}"))
        .to_owned()
}

/// The contract case: a cursor works only in a list of its own order, and ranked lists refuse
/// the paging arguments every list refuses.
pub(crate) async fn ranked_cursors_belong_to_their_order_case(settings: Settings) {
    let app = TestApp::with("ranked_cursors", settings).await;
    let d = app.discussion("cursors").await;
    let author = app.token("author", "Lin");
    let top = app.post_as(&author, &d, None, "one").await;
    let second = app.post_as(&author, &d, None, "two").await;
    app.post_as(&author, &d, Some(&top), "reply one").await;
    app.post_as(&author, &d, Some(&top), "reply two").await;
    vote_ok(&app, "v1", &d, &second, Some(Vote::Up)).await;
    vote_ok(&app, "v2", &d, &top, Some(Vote::Down)).await;
    let at_d = json!({ "d": d });
    let mut cursors: HashMap<&str, String> = HashMap::new();
    for order in [
        "CHRONOLOGICAL",
        "NEWEST",
        "THREADED",
        "TOP",
        "BEST",
        "CONTROVERSIAL",
    ] {
        let cursor = first_cursor(
            &app,
            COMMENTS,
            &COMMENTS_PATH,
            with(&at_d, &json!({ "order": order })),
        )
        .await;
        cursors.insert(order, cursor);
    }
    // Each cursor works in its own order.
    for order in ["TOP", "BEST", "CONTROVERSIAL"] {
        let vars = with(
            &at_d,
            &json!({ "order": order, "first": 5, "after": cursors[order] }),
        );
        let (got, previous, _) = page(&app, COMMENTS, vars, &COMMENTS_PATH).await;
        assert_eq!(got.len(), 3, "{order}: after the first of four");
        assert!(previous);
    }
    let threads_top = first_cursor(
        &app,
        THREADS,
        &THREADS_PATH,
        with(&at_d, &json!({ "order": "TOP" })),
    )
    .await;
    let replies_best = first_cursor(
        &app,
        REPLIES,
        &REPLIES_PATH,
        json!({ "d": d, "s": top, "order": "BEST" }),
    )
    .await;

    let list = |order: &str, extra: Value| with(&with(&at_d, &json!({ "order": order })), &extra);
    let cases: Vec<(String, &str, Value)> = {
        let mut cases = Vec::new();
        for (mine, theirs) in [
            ("TOP", "BEST"),
            ("TOP", "CONTROVERSIAL"),
            ("BEST", "TOP"),
            ("BEST", "CONTROVERSIAL"),
            ("CONTROVERSIAL", "TOP"),
            ("CONTROVERSIAL", "BEST"),
            ("CHRONOLOGICAL", "TOP"),
            ("NEWEST", "BEST"),
            ("THREADED", "CONTROVERSIAL"),
            ("TOP", "CHRONOLOGICAL"),
            ("BEST", "NEWEST"),
            ("CONTROVERSIAL", "THREADED"),
        ] {
            cases.push((
                format!("a {mine} cursor after in a {theirs} list"),
                COMMENTS,
                list(theirs, json!({ "first": 2, "after": cursors[mine] })),
            ));
            cases.push((
                format!("a {mine} cursor before in a {theirs} list"),
                COMMENTS,
                list(theirs, json!({ "last": 2, "before": cursors[mine] })),
            ));
        }
        cases.push((
            "a TOP threads cursor in a BEST threads list".to_owned(),
            THREADS,
            list("BEST", json!({ "first": 2, "after": threads_top })),
        ));
        cases.push((
            "a BEST replies cursor in a TOP replies list".to_owned(),
            REPLIES,
            json!({ "d": d, "s": top, "order": "TOP", "first": 2, "after": replies_best }),
        ));
        for (what, extra) in [
            (
                "a garbage cursor",
                json!({ "first": 2, "after": "%%%not-base64" }),
            ),
            (
                "a garbage cursor before",
                json!({ "last": 2, "before": "YWJj" }),
            ),
            ("first and last", json!({ "first": 2, "last": 2 })),
            (
                "offset and before",
                json!({ "before": cursors["TOP"], "offset": 1 }),
            ),
            (
                "offset and after",
                json!({ "after": cursors["TOP"], "offset": 1 }),
            ),
            ("last and offset", json!({ "last": 2, "offset": 1 })),
            (
                "after and before",
                json!({ "after": cursors["TOP"], "before": cursors["TOP"] }),
            ),
            (
                "first and before",
                json!({ "first": 2, "before": cursors["TOP"] }),
            ),
            (
                "last and after",
                json!({ "last": 2, "after": cursors["TOP"] }),
            ),
            ("negative first", json!({ "first": -1 })),
            ("negative last", json!({ "last": -1 })),
            ("first over the cap", json!({ "first": 101 })),
            ("last over the cap", json!({ "last": 101 })),
            ("negative offset", json!({ "first": 2, "offset": -3 })),
        ] {
            cases.push((format!("TOP: {what}"), COMMENTS, list("TOP", extra)));
        }
        cases.push((
            "THREADED threads".to_owned(),
            THREADS,
            list("THREADED", json!({ "first": 2 })),
        ));
        cases.push((
            "THREADED replies".to_owned(),
            REPLIES,
            json!({ "d": d, "s": top, "order": "THREADED", "first": 2 }),
        ));
        cases
    };
    for (what, query, vars) in cases {
        let response = app
            .exec(&format!("{query} {}", crate::contract::CONN), vars)
            .await;
        assert_eq!(
            error_code(&response),
            "BAD_USER_INPUT",
            "{what}: {response:#}"
        );
        let message = response["errors"][0]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            !message.is_empty() && !message.contains("internal"),
            "{what}: unclear message {message:?}"
        );
    }
    // A sub-discussion has no order.
    let response = app
        .exec(
            "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { subDiscussion(order: TOP) { totalCount } } }",
            json!({ "d": d, "s": top }),
        )
        .await;
    assert_eq!(
        error_code(&response),
        "GRAPHQL_VALIDATION_FAILED",
        "{response:#}"
    );
    // An unknown order is refused before anything runs.
    let response = app
        .exec(
            "query($d: ID!) { discussion(id: $d) { comments(order: HOTTEST) { totalCount } } }",
            at_d.clone(),
        )
        .await;
    assert_eq!(
        error_code(&response),
        "GRAPHQL_VALIDATION_FAILED",
        "{response:#}"
    );
}

/// Reads what a move must keep: every comment's counters, two users' votes, and the TOP order.
async fn what_a_move_keeps(app: &TestApp, d: &str) -> (Vec<Listed>, Vec<Value>, Vec<String>) {
    let all = listed(app, d).await;
    let mut votes = Vec::new();
    for user in ["v1", "v2"] {
        let token = app.token(user, user);
        let response = app
            .exec_as(
                Some(&token),
                "query($d: ID!) { discussion(id: $d) { comments(first: 100) { nodes { slug viewerVote } } } }",
                json!({ "d": d }),
            )
            .await;
        votes.push(response["data"]["discussion"]["comments"]["nodes"].clone());
    }
    let top = collect_by_cursor(
        app,
        COMMENTS,
        json!({ "d": d, "order": "TOP" }),
        &COMMENTS_PATH,
        9,
    )
    .await;
    (all, votes, top)
}

/// Moving a discussion through every layout keeps its counters, its voters' votes and its
/// ranked order, and votes keep working after each move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn votes_survive_a_move() {
    let app = TestApp::new("votes_move", Layout::PerComment).await;
    let moderator = app.moderator_token("m", "Mo");
    let d = app.discussion("moving").await;
    let model = build_tree(&app, &d, 25, 3, 7).await;
    cast_patterns(&app, &d, &model.slugs, 5).await;
    app.ok(DELETE, json!({ "d": d, "s": model.slugs[3] })).await;
    let mut before = what_a_move_keeps(&app, &d).await;
    let target = model.slugs[1].clone();
    let counts = |all: &[Listed]| {
        let c = all.iter().find(|c| c.slug == target).expect("the target");
        (c.up, c.down)
    };
    for (step, layout) in [Layout::Embedded, Layout::Bucketed, Layout::PerComment]
        .into_iter()
        .enumerate()
    {
        let moved = app
            .exec_as(
                Some(&moderator),
                MIGRATE,
                json!({ "d": d, "l": layout_name(layout) }),
            )
            .await;
        assert_eq!(
            moved["data"]["migrateDiscussion"]["layout"],
            layout_name(layout),
            "{moved:#}"
        );
        let after = what_a_move_keeps(&app, &d).await;
        assert_eq!(after.0, before.0, "counters after the move to {layout:?}");
        assert_eq!(after.1, before.1, "viewerVote after the move to {layout:?}");
        assert_eq!(after.2, before.2, "TOP after the move to {layout:?}");
        assert_eq!(after.2, ranked(&members(&after.0, |_| true), Rank::Top));
        // Votes keep counting after the move: a new voter adds one; the voter of the move
        // before switches, moving one count.
        let (up, down) = counts(&after.0);
        let answer = vote_ok(&app, &format!("mover{step}"), &d, &target, Some(Vote::Up)).await;
        assert_eq!(
            (answer["upvotes"].as_u64(), answer["downvotes"].as_u64()),
            (Some(up + 1), Some(down)),
            "{layout:?}"
        );
        if step > 0 {
            let answer = vote_ok(
                &app,
                &format!("mover{}", step - 1),
                &d,
                &target,
                Some(Vote::Down),
            )
            .await;
            assert_eq!(
                (answer["upvotes"].as_u64(), answer["downvotes"].as_u64()),
                (Some(up), Some(down + 1)),
                "{layout:?}"
            );
            assert_eq!(answer["viewerVote"], "DOWN");
        }
        before = what_a_move_keeps(&app, &d).await;
    }
}

/// `viewerVote` on a page of 50 comments is one command on the votes, beyond the same page
/// without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewer_votes_are_read_in_one_batch() {
    for layout in [Layout::PerComment, Layout::Embedded, Layout::Bucketed] {
        let app = TestApp::new("viewer_batch", layout).await;
        let author = app.token("author", "Lin");
        let d = app.discussion("batched").await;
        let mut slugs = Vec::new();
        for chunk in 0..6 {
            let posts = (0..10).map(|i| {
                let parent = slugs.first().filter(|_| i % 3 == 1).cloned();
                let (app, author, d) = (&app, &author, &d);
                async move {
                    app.post_as(author, d, parent.as_deref(), &format!("c {chunk} {i}"))
                        .await
                }
            });
            slugs.extend(join_all(posts).await);
        }
        // The default user (u1, the one `cost` reads as) votes on some, others on more.
        for (i, slug) in slugs.iter().enumerate() {
            if i % 3 == 0 {
                vote_ok(&app, "u1", &d, slug, Some(Vote::Up)).await;
            } else if i % 3 == 1 {
                vote_ok(&app, "u1", &d, slug, Some(Vote::Down)).await;
            }
            if i % 2 == 0 {
                vote_ok(&app, "v2", &d, slug, Some(Vote::Up)).await;
            }
        }
        for order in ["CHRONOLOGICAL", "TOP"] {
            let without = format!("query($d: ID!) {{ discussion(id: $d) {{ comments(order: {order}, first: 50) {{ nodes {{ slug upvotes downvotes }} }} }} }}");
            let with_votes = format!("query($d: ID!) {{ discussion(id: $d) {{ comments(order: {order}, first: 50) {{ nodes {{ slug upvotes downvotes viewerVote }} }} }} }}");
            // Once each to warm what the first read of a discussion caches.
            app.ok(&without, json!({ "d": d })).await;
            app.ok(&with_votes, json!({ "d": d })).await;
            let (plain, plain_cost) = cost(&app, &without, json!({ "d": d })).await;
            let (voted, voted_cost) = cost(&app, &with_votes, json!({ "d": d })).await;
            let nodes = voted["discussion"]["comments"]["nodes"]
                .as_array()
                .expect("nodes");
            assert_eq!(nodes.len(), 50);
            assert_eq!(
                plain["discussion"]["comments"]["nodes"]
                    .as_array()
                    .map(Vec::len),
                Some(50)
            );
            for node in nodes {
                let i = slugs
                    .iter()
                    .position(|s| *s == node["slug"])
                    .expect("known");
                let mine = match i % 3 {
                    0 => Some(Vote::Up),
                    1 => Some(Vote::Down),
                    _ => None,
                };
                assert_eq!(node["viewerVote"], vote_value(mine), "{node}");
            }
            let extra: i64 =
                voted_cost.values().sum::<u64>() as i64 - plain_cost.values().sum::<u64>() as i64;
            assert_eq!(
                extra, 1,
                "{layout:?} {order}: viewerVote cost {voted_cost:?}, without {plain_cost:?}"
            );
            for (command, n) in &plain_cost {
                assert!(
                    voted_cost.get(command).copied().unwrap_or(0) >= *n,
                    "{layout:?} {order}: {voted_cost:?} vs {plain_cost:?}"
                );
            }
            // Anonymous readers have no vote.
            let anonymous = app.exec_as(None, &with_votes, json!({ "d": d })).await;
            let nodes = anonymous["data"]["discussion"]["comments"]["nodes"]
                .as_array()
                .unwrap_or_else(|| panic!("{anonymous:#}"));
            assert!(
                nodes.iter().all(|n| n["viewerVote"].is_null()),
                "{anonymous:#}"
            );
        }
    }
}

/// Votes change no comment as subscribers see it: after votes and then an edit, the first
/// `commentChanged` event is the edit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn votes_emit_no_change_event() {
    let server =
        Running::start(Settings::new(Layout::PerComment).config(&unique_db("vote_events"))).await;
    let author = crate::support::token("author", "Lin");
    let d = server.discussion(&author, Layout::PerComment).await;
    let slug = server.post(&author, &d, None, "first").await;
    let mut ws = Ws::connect(&server, Protocol::TransportWs, json!({})).await;
    ws.start(
        "c",
        "subscription($d: ID!) { commentChanged(discussionId: $d) { slug text upvotes } }",
        json!({ "d": d }),
    )
    .await;
    await_subscribers(&server, 1).await;
    for (user, vote) in [
        ("v1", Some("UP")),
        ("v2", Some("DOWN")),
        ("v1", Some("DOWN")),
        ("v2", None),
        ("v3", Some("UP")),
    ] {
        let token = crate::support::token(user, user);
        server
            .mutate(&token, VOTE, json!({ "d": d, "s": slug, "v": vote }))
            .await;
    }
    server
        .mutate(
            &author,
            "mutation($d: ID!, $s: String!) { editComment(input: {discussionId: $d, slug: $s, text: \"edited\"}) { slug } }",
            json!({ "d": d, "s": slug }),
        )
        .await;
    let (id, payload) = ws.next().await;
    assert_eq!(id, "c");
    let changed = &payload["data"]["commentChanged"];
    assert_eq!(changed["slug"], slug.as_str(), "{payload}");
    assert_eq!(
        changed["text"], "edited",
        "the first event is the edit: {payload}"
    );
    assert_eq!(changed["upvotes"], 1, "{payload}");
    drop(ws);
    await_subscribers(&server, 0).await;
    server.shutdown().await;
}
