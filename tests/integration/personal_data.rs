//! A person's own data over real HTTP, on every layout: their export (`GET /me/export`) holds
//! exactly what they have, checked against a model of what the test made; their erasure
//! (`deleteMyAccount`, `eraseUser`) leaves nothing of them in any read or any collection,
//! keeps other people's replies and every count, takes their votes back exactly, and a run cut
//! short by a killed process is finished by running it again.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use threadql::domain::Layout;

use crate::support::{
    graphql_data, moderator_token, post_graphql, server_config, stored_strings, token, Running,
};

/// The person erased in these tests, as their token names them.
const ANN: &str = "u-erase-ann";
const ANN_NAME: &str = "Annabelle Erasable";
/// What each of Ann's texts holds, so that a scan finds any copy of them.
const ANN_TEXT: &str = "ann-secret";

const TREE: &str = "query($d: ID!) { discussion(id: $d) { commentCount comments(first: 100) { nodes { slug parentSlug deleted text html upvotes downvotes author { id name } revisions { text } } } } }";
const VOTE: &str = "mutation($d: ID!, $s: String!, $v: VoteValue) { voteComment(discussionId: $d, slug: $s, value: $v) { upvotes } }";
const ERASE_ME: &str = "mutation($c: String!) { deleteMyAccount(confirm: $c) }";

/// What the test made: a discussion where Ann wrote, edited, replied, voted, reported and
/// followed, among Bob's comments.
struct Scene {
    server: Running,
    database: String,
    client: reqwest::Client,
    ann: String,
    bob: String,
    discussion: String,
    /// Ann's comments' slugs.
    anns: BTreeSet<String>,
    /// Bob's comments' slugs: his top-level one first, then his reply to Ann.
    bobs: Vec<String>,
}

impl Scene {
    async fn make(label: &str, layout: Layout) -> Scene {
        let config = server_config(label);
        let database = config.database.clone();
        let server = Running::start(config).await;
        let client = reqwest::Client::new();
        let ann = token(ANN, ANN_NAME);
        let bob = token("u-erase-bob", "Bob Keeps");
        let discussion = server.discussion(&bob, layout).await;
        let d = discussion.as_str();
        let bob_top = server.post(&bob, d, None, "bob's own words").await;
        let ann_top = server.post(&ann, d, None, &format!("{ANN_TEXT} one")).await;
        let bob_reply = server
            .post(&bob, d, Some(&ann_top), "bob answers ann")
            .await;
        let ann_reply = server
            .post(&ann, d, Some(&bob_top), &format!("{ANN_TEXT} two"))
            .await;
        let ann_deep = server
            .post(&ann, d, Some(&bob_reply), &format!("{ANN_TEXT} three"))
            .await;
        server
            .mutate(
                &ann,
                "mutation($d: ID!, $s: String!, $t: String!) { editComment(input: {discussionId: $d, slug: $s, text: $t}) { slug } }",
                json!({ "d": d, "s": ann_top, "t": format!("{ANN_TEXT} one, edited") }),
            )
            .await;
        for (voter, slug, value) in [
            (&ann, &bob_top, "UP"),
            (&ann, &bob_reply, "DOWN"),
            (&bob, &ann_top, "UP"),
        ] {
            server
                .mutate(voter, VOTE, json!({ "d": d, "s": slug, "v": value }))
                .await;
        }
        server
            .mutate(
                &ann,
                "mutation($d: ID!, $s: String!) { reportComment(discussionId: $d, slug: $s, reason: SPAM, note: \"ann-secret note\") }",
                json!({ "d": d, "s": bob_top }),
            )
            .await;
        server
            .mutate(
                &ann,
                "mutation($d: ID!) { followDiscussion(discussionId: $d, follow: true) { id } }",
                json!({ "d": d }),
            )
            .await;
        // Each ignores the other: her list goes with her, and her id leaves his.
        const IGNORE: &str = "mutation($u: ID!) { ignoreUser(userId: $u, ignored: true) }";
        server
            .mutate(&ann, IGNORE, json!({ "u": "u-erase-bob" }))
            .await;
        server.mutate(&bob, IGNORE, json!({ "u": ANN })).await;
        Scene {
            server,
            database,
            client,
            ann,
            bob,
            discussion,
            anns: [ann_top, ann_reply, ann_deep].into_iter().collect(),
            bobs: vec![bob_top, bob_reply],
        }
    }

    /// The discussion as `token` reads it (`None`: anonymously).
    async fn tree(&self, token: Option<&str>) -> Value {
        let data = graphql_data(
            &self.client,
            &self.server,
            token,
            TREE,
            json!({ "d": self.discussion }),
        )
        .await;
        data["discussion"].clone()
    }

    /// The person's export, as lines of JSON.
    async fn export(&self, token: &str) -> Vec<Value> {
        let response = self
            .client
            .get(self.server.url("/me/export"))
            .bearer_auth(token)
            .send()
            .await
            .expect("export");
        assert_eq!(response.status(), 200);
        assert!(response.headers()["content-type"]
            .to_str()
            .is_ok_and(|t| t.starts_with("application/x-ndjson")));
        let body = response.text().await.expect("body");
        body.lines()
            .map(|line| serde_json::from_str(line).expect("a line of JSON"))
            .collect()
    }
}

/// The comment `slug` of a tree.
fn tree_node<'a>(tree: &'a Value, slug: &str) -> &'a Value {
    tree["comments"]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["slug"] == slug)
        .unwrap_or_else(|| panic!("no comment {slug} in {tree:#}"))
}

async fn export_holds_exactly_the_persons_data(layout: Layout) {
    let scene = Scene::make("export_mine", layout).await;
    let lines = scene.export(&scene.ann).await;
    assert_eq!(lines[0]["format"], "threadql");
    assert_eq!(lines[0]["person"], ANN);
    let of = |kind: &str| -> Vec<&Value> { lines.iter().filter(|l| l["type"] == kind).collect() };
    let comments = of("comment");
    let slugs: BTreeSet<String> = comments
        .iter()
        .map(|c| c["slug"].as_str().expect("slug").to_owned())
        .collect();
    assert_eq!(slugs, scene.anns, "every comment of hers, and no other");
    assert!(comments.iter().all(|c| c["author"]["id"] == ANN));
    let edited = comments
        .iter()
        .find(|c| c["text"] == format!("{ANN_TEXT} one, edited"))
        .expect("the edited comment");
    assert_eq!(edited["revisions"][0]["text"], format!("{ANN_TEXT} one"));
    let votes: BTreeSet<(String, String)> = of("vote")
        .iter()
        .map(|v| {
            assert_eq!(v["voter"], ANN);
            (
                v["slug"].as_str().expect("slug").to_owned(),
                v["value"].as_str().expect("value").to_owned(),
            )
        })
        .collect();
    let expected: BTreeSet<(String, String)> = [
        (scene.bobs[0].clone(), "UP".to_owned()),
        (scene.bobs[1].clone(), "DOWN".to_owned()),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        votes, expected,
        "her votes, not the one cast on her comment"
    );
    let reports = of("report");
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0]["slug"], scene.bobs[0]);
    assert_eq!(reports[0]["reason"], "SPAM");
    let follows = of("follow");
    assert_eq!(follows.len(), 1);
    assert_eq!(follows[0]["discussion"], scene.discussion);
    // Nothing of Bob's: his id, name and texts are in no line.
    let text = lines
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    for his in [
        "u-erase-bob",
        "Bob Keeps",
        "bob's own words",
        "bob answers ann",
    ] {
        assert!(!text.contains(his), "{his} is Bob's: {text}");
    }
    // Bob's export has his comments and his one vote.
    let his = scene.export(&scene.bob).await;
    assert_eq!(his.iter().filter(|l| l["type"] == "comment").count(), 2);
    assert_eq!(his.iter().filter(|l| l["type"] == "vote").count(), 1);
    // Refused without a sign-in, or with a bad one.
    for auth in [None, Some("not-a-token")] {
        let mut request = scene.client.get(scene.server.url("/me/export"));
        if let Some(auth) = auth {
            request = request.bearer_auth(auth);
        }
        let response = request.send().await.expect("send");
        assert_eq!(response.status(), 401);
        let body: Value = response.json().await.expect("json");
        assert_eq!(body["errors"][0]["extensions"]["code"], "UNAUTHENTICATED");
    }
    scene.server.shutdown().await;
}

async fn erasure_leaves_nothing_of_the_person(layout: Layout) {
    let scene = Scene::make("erase_me", layout).await;
    let d = scene.discussion.clone();
    // Read before, anonymously and as Bob, so the cache holds the discussion.
    let before = scene.tree(None).await;
    scene.tree(Some(&scene.bob)).await;
    let count = before["commentCount"].clone();
    // Subscribed before the erasure: what it sends afterwards names nobody.
    let mut live = crate::support::one_shot_client()
        .post(scene.server.url("/graphql"))
        .header("Accept", "text/event-stream")
        .json(&json!({ "query": "subscription($d: ID!) { commentChanged(discussionId: $d) { slug deleted text author { id name } } }", "variables": { "d": d } }))
        .send()
        .await
        .expect("subscribe");
    crate::live::await_subscribers(&scene.server, 1).await;
    // The confirmation must be her own id.
    let (_, refused) = post_graphql(
        &scene.client,
        &scene.server,
        Some(&scene.ann),
        ERASE_ME,
        json!({ "c": "someone-else" }),
    )
    .await;
    assert_eq!(refused["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");
    assert_eq!(scene.tree(None).await, before, "nothing was erased");
    let erased = scene
        .server
        .mutate(&scene.ann, ERASE_ME, json!({ "c": ANN }))
        .await;
    assert_eq!(erased["deleteMyAccount"], true);

    for reader in [None, Some(scene.bob.as_str()), Some(scene.ann.as_str())] {
        let after = scene.tree(reader).await;
        assert_eq!(after["commentCount"], count, "every count is kept");
        for slug in &scene.anns {
            let gone = tree_node(&after, slug);
            assert_eq!(gone["deleted"], true);
            assert!(gone["text"].is_null() && gone["html"].is_null());
            assert_eq!(gone["author"]["name"], "[deleted]");
        }
        // Bob's words and his reply to her stay, with exact counts: her votes are taken back,
        // his vote on her comment is kept.
        let top = tree_node(&after, &scene.bobs[0]);
        assert_eq!(top["text"], "bob's own words");
        assert_eq!(
            (top["upvotes"].clone(), top["downvotes"].clone()),
            (json!(0), json!(0))
        );
        let reply = tree_node(&after, &scene.bobs[1]);
        assert_eq!(reply["text"], "bob answers ann");
        assert_eq!(reply["downvotes"], 0);
        assert!(!after.to_string().contains(ANN_TEXT));
        assert!(!after.to_string().contains(ANN_NAME));
        assert!(!after.to_string().contains(ANN));
    }
    // Ranked orders follow the votes taken back: TOP is by score, and Bob's comments score 0.
    let ranked = graphql_data(
        &scene.client,
        &scene.server,
        None,
        "query($d: ID!) { discussion(id: $d) { comments(order: TOP, first: 100) { nodes { slug score } } } }",
        json!({ "d": d }),
    )
    .await;
    let scores: Vec<(String, i64)> = ranked["discussion"]["comments"]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| {
            (
                n["slug"].as_str().unwrap_or_default().to_owned(),
                n["score"].as_i64().unwrap_or(i64::MIN),
            )
        })
        .collect();
    assert!(scores.windows(2).all(|w| w[0].1 >= w[1].1), "{scores:?}");
    assert_eq!(
        scores.iter().filter(|(_, score)| *score != 0).count(),
        1,
        "{scores:?}"
    );
    assert!(
        scene.anns.contains(&scores[0].0),
        "her comment Bob voted for leads: {scores:?}"
    );
    // Moderators see erased comments under opaque ids: one per comment, none of them hers.
    let moderator = moderator_token("u-erase-mod", "Mo");
    let seen = scene.tree(Some(&moderator)).await;
    let ids: BTreeSet<String> = scene
        .anns
        .iter()
        .map(|slug| {
            tree_node(&seen, slug)["author"]["id"]
                .as_str()
                .expect("id")
                .to_owned()
        })
        .collect();
    assert_eq!(ids.len(), scene.anns.len(), "the comments cannot be linked");
    assert!(ids.iter().all(|id| id.starts_with("erased:")));
    let upvoted = scene
        .anns
        .iter()
        .map(|slug| tree_node(&seen, slug)["upvotes"].as_i64().expect("votes"))
        .sum::<i64>();
    assert_eq!(upvoted, 1, "Bob's vote on her comment is kept");
    // `_entities` (a federated read by key).
    let entities = graphql_data(
        &scene.client,
        &scene.server,
        None,
        "query($r: [_Any!]!) { _entities(representations: $r) { ... on Comment { slug deleted text author { id name } } } }",
        json!({ "r": scene.anns.iter().map(|s| json!({ "__typename": "Comment", "discussionId": d, "slug": s })).collect::<Vec<_>>() }),
    )
    .await;
    assert!(!entities.to_string().contains(ANN_TEXT), "{entities:#}");
    // The subscriber heard each comment erased, naming nobody.
    let heard = crate::live::sse_events(&mut live, scene.anns.len()).await;
    for (_, data) in &heard {
        assert!(data.contains("\"deleted\":true"), "{heard:?}");
        assert!(!data.contains(ANN) && !data.contains(ANN_NAME) && !data.contains(ANN_TEXT));
    }
    drop(live);
    // Her export is empty now, and every collection is scanned.
    let lines = scene.export(&scene.ann).await;
    assert_eq!(lines.len(), 1, "only the header: {lines:#?}");
    let stored = stored_strings(&scene.database).await;
    for s in &stored {
        assert!(
            !s.contains(ANN) && !s.contains(ANN_NAME) && !s.contains(ANN_TEXT),
            "{s:?} is stored after her erasure"
        );
    }
    // Recorded as `user.erased` in the moderation log, naming nobody.
    let log = graphql_data(
        &scene.client,
        &scene.server,
        Some(&moderator),
        "{ moderationLog(first: 10, action: ERASE_USER) { nodes { action moderator { id name } detail } } }",
        json!({}),
    )
    .await;
    let entry = &log["moderationLog"]["nodes"][0];
    assert_eq!(entry["detail"], "3 comments", "{log:#}");
    assert_eq!(entry["moderator"]["id"], "erased");
    scene.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_comment_export_holds_exactly_the_persons_data() {
    export_holds_exactly_the_persons_data(Layout::PerComment).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_export_holds_exactly_the_persons_data() {
    export_holds_exactly_the_persons_data(Layout::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucketed_export_holds_exactly_the_persons_data() {
    export_holds_exactly_the_persons_data(Layout::Bucketed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_comment_erasure_leaves_nothing_of_the_person() {
    erasure_leaves_nothing_of_the_person(Layout::PerComment).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_erasure_leaves_nothing_of_the_person() {
    erasure_leaves_nothing_of_the_person(Layout::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucketed_erasure_leaves_nothing_of_the_person() {
    erasure_leaves_nothing_of_the_person(Layout::Bucketed).await;
}

/// `eraseUser` is for moderators, and its bad inputs are refused with nothing erased.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erase_user_is_for_moderators_only() {
    let scene = Scene::make("erase_user", Layout::PerComment).await;
    let before = scene.tree(Some(&scene.bob)).await;
    const ERASE_USER: &str = "mutation($u: ID!, $r: String) { eraseUser(userId: $u, reason: $r) }";
    let moderator = moderator_token("u-erase-mod", "Mo");
    for (token, user, reason, code) in [
        (Some(scene.bob.as_str()), ANN, None, "FORBIDDEN"),
        (None, ANN, None, "UNAUTHENTICATED"),
        (Some(moderator.as_str()), "", None, "BAD_USER_INPUT"),
        (Some(moderator.as_str()), ANN, Some("   "), "BAD_USER_INPUT"),
    ] {
        let (_, body) = post_graphql(
            &scene.client,
            &scene.server,
            token,
            ERASE_USER,
            json!({ "u": user, "r": reason }),
        )
        .await;
        assert_eq!(body["errors"][0]["extensions"]["code"], code, "{body:#}");
    }
    // Anonymous, with a confirmation: no account to erase.
    let (_, body) = post_graphql(
        &scene.client,
        &scene.server,
        None,
        ERASE_ME,
        json!({ "c": ANN }),
    )
    .await;
    assert_eq!(body["errors"][0]["extensions"]["code"], "UNAUTHENTICATED");
    assert_eq!(
        scene.tree(Some(&scene.bob)).await,
        before,
        "nothing was erased"
    );
    // A moderator erases her; someone who never wrote anything is erased as well (nothing).
    let done = scene
        .server
        .mutate(
            &moderator,
            ERASE_USER,
            json!({ "u": ANN, "r": "request by mail" }),
        )
        .await;
    assert_eq!(done["eraseUser"], true);
    let done = scene
        .server
        .mutate(&moderator, ERASE_USER, json!({ "u": "u-never-here" }))
        .await;
    assert_eq!(done["eraseUser"], true);
    let after = scene.tree(None).await;
    for slug in &scene.anns {
        assert_eq!(tree_node(&after, slug)["author"]["name"], "[deleted]");
    }
    let log = graphql_data(
        &scene.client,
        &scene.server,
        Some(&moderator),
        "{ moderationLog(first: 10, action: ERASE_USER) { nodes { moderator { id } reason detail } } }",
        json!({}),
    )
    .await;
    let entries = log["moderationLog"]["nodes"].as_array().expect("entries");
    assert_eq!(entries.len(), 2, "{log:#}");
    assert!(entries
        .iter()
        .any(|e| e["reason"] == "request by mail" && e["detail"] == "3 comments"));
    assert!(entries
        .iter()
        .all(|e| e["moderator"]["id"] == "u-erase-mod"));
    scene.server.shutdown().await;
}
