//! Votes and the ranked orders: the rules of one vote per user per comment and every refusal
//! (contract cases, on every layout), ranked lists against a model built from the counters the
//! chronological list shows, cursors that belong to their order, counters that survive moves
//! between layouts, `viewerVote` read in one batch, and votes that emit no change event. The
//! rules' case is in `rules`, the ranked orders' cases in `ranked`; here what they share.

mod ranked;
mod rules;

use std::collections::HashMap;

use futures::future::join_all;
use serde_json::{json, Value};
use threadql::domain::{Layout, Rank, Vote};

use crate::contract::{assert_exactly_once, at, collect_by_cursor, collect_by_offset};
use crate::live::{await_subscribers, Protocol, Ws};
use crate::model::{build_tree, Rng};
use crate::paging::{collect_backward, page};
use crate::support::{cost, error_code, layout_name, unique_db, Running, Settings, TestApp};
pub(crate) use ranked::{
    cast_patterns, ranked_cursors_belong_to_their_order_case, ranked_orders_match_the_model_case,
};
pub(crate) use rules::votes_follow_the_rules_case;

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
