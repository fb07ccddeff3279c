//! Rate limits: floods per author and per address are refused, and every mutation spends exactly
//! one token of its author's rate.

use serde_json::{json, Value};
use threadql::domain::{DiscussionTitle, Layout};
use threadql::store::Storage;

use super::requests::{gql, send_outgoing};
use super::*;
use crate::support::{one_shot_client, outcome, post_in, Settings, TestApp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_stop_floods_per_author_and_per_address() {
    let mut config = hostile_config("hostile_rate");
    config.rate_limit = "3/60s".parse().expect("rate");
    config.rate_limit_anon = "5/60s".parse().expect("rate");
    let server = Running::start(config).await;
    let client = one_shot_client();
    let alice = hostile_user("alice", "Alice");
    let bob = hostile_user("bob", "Bob");

    let create = |token: &str| {
        let mut request = client
            .post(server.url("/graphql"))
            .json(&json!({ "query": CREATE, "variables": { "t": "flood" } }));
        request = request.bearer_auth(token);
        async move {
            let response = request.send().await.expect("send");
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.expect("json"))
        }
    };
    for n in 1..=3 {
        let (status, body) = create(&alice).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.get("errors").is_none(), "mutation {n}: {body}");
    }
    let (status, body) = create(&alice).await;
    assert_eq!(status, 200, "{body}");
    let error = &body["errors"][0];
    assert_eq!(error["extensions"]["code"], "RATE_LIMITED", "{body}");
    assert!(
        error["extensions"]["retryAfter"]
            .as_u64()
            .is_some_and(|s| s >= 1),
        "{body}"
    );
    assert!(body["data"].is_null(), "{body}");
    assert_healthy(&client, &server, "the 4th mutation").await;

    // Another author is still served.
    let (status, body) = create(&bob).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.get("errors").is_none(), "{body}");

    // Anonymous requests are counted per address: the 6th is refused with 429.
    for n in 1..=5 {
        let answer = send_outgoing(&client, &server, &gql(SIMPLE, json!({}))).await;
        assert_eq!(answer.status, 200, "anonymous request {n}: {}", answer.text);
    }
    let answer = send_outgoing(&client, &server, &gql(SIMPLE, json!({}))).await;
    assert_eq!(answer.status, 429, "{}", answer.text);
    assert_eq!(
        answer.body["errors"][0]["extensions"]["code"],
        "RATE_LIMITED"
    );
    let retry = answer.body["errors"][0]["extensions"]["retryAfter"]
        .as_u64()
        .expect("retryAfter");
    assert!(retry >= 1);
    let header: u64 = answer
        .header("retry-after")
        .expect("a Retry-After header")
        .parse()
        .expect("Retry-After in seconds");
    assert!(header >= 1, "Retry-After: {header}");
    assert_healthy(&client, &server, "the 6th anonymous request").await;

    // A signed-in read is not counted against the address.
    let answer = send_outgoing(&client, &server, &gql(SIMPLE, json!({})).with_auth(&bob)).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    server.shutdown().await;
}

/// Sends `mutations` (document, variables) together as `token` and checks that `allowed` of them
/// succeed and the rest are `RATE_LIMITED`. They are sent at once because the bucket gains a
/// token every `per / count`: sent one by one, a slow database could refill it between them.
async fn spend_together(
    app: &TestApp,
    token: &str,
    what: &str,
    mutations: Vec<(&str, Value)>,
    allowed: usize,
) {
    let sent = mutations.len();
    let responses = futures::future::join_all(
        mutations
            .into_iter()
            .map(|(document, variables)| app.exec_as(Some(token), document, variables)),
    )
    .await;
    let outcomes: Vec<String> = responses.iter().map(outcome).collect();
    let ok = outcomes.iter().filter(|o| *o == "ok").count();
    let limited = outcomes.iter().filter(|o| *o == "RATE_LIMITED").count();
    assert_eq!(
        (ok, limited),
        (allowed, sent - allowed),
        "{what}: {outcomes:?}\n{responses:#?}"
    );
}

/// Each mutation spends exactly one token of its author's rate. Under `10/10s`, of ten edits and
/// an eleventh change by one author, ten succeed and one is `RATE_LIMITED` (with two tokens per
/// edit, only five would); and so for every other mutation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_mutation_spends_one_rate_token() {
    let settings = Settings {
        rate_limit: "10/10s".parse().expect("rate"),
        moderation_rate_limit: "10/10s".parse().expect("rate"),
        ..Settings::new(Layout::PerComment)
    };
    let app = TestApp::with("rate_one_token", settings).await;
    // The data is made through the store: no token is spent on it.
    let new_discussion = |title: String| {
        let store = app.store().clone();
        async move {
            let title = DiscussionTitle::parse(&title).expect("title");
            store
                .discussions()
                .create(title, Layout::PerComment)
                .await
                .expect("create")
        }
    };
    let discussion = new_discussion("rate".to_owned()).await;
    let d = discussion.id.to_string();
    // Comments by Ada (`u1`).
    let mut slugs = Vec::new();
    for n in 0..22 {
        let slug = post_in(
            app.store(),
            Layout::PerComment,
            &discussion,
            None,
            &format!("c{n}"),
        )
        .await;
        slugs.push(slug.to_string());
    }
    let (ada_slugs, moderated_slugs) = slugs.split_at(11);

    // The author edits her comments: ten edits, then an eleventh change.
    let ada = app.token("u1", "Ada");
    let mut changes: Vec<(&str, Value)> = ada_slugs[..10]
        .iter()
        .map(|s| (EDIT, json!({ "d": d, "s": s, "t": "edited" })))
        .collect();
    changes.push((DELETE, json!({ "d": d, "s": ada_slugs[10] })));
    spend_together(&app, &ada, "ten edits and a delete", changes, 10).await;

    // Deletes (a moderator deletes anyone's comment).
    let deleter = app.moderator_token("m-delete", "Deleter");
    let deletes = moderated_slugs
        .iter()
        .map(|s| (DELETE, json!({ "d": d, "s": s })))
        .collect();
    spend_together(&app, &deleter, "eleven deletes", deletes, 10).await;

    // Posts and new discussions.
    let poster = app.token("poster", "Poster");
    let posts = (0..11)
        .map(|n| (POST, json!({ "d": d, "t": format!("p{n}") })))
        .collect();
    spend_together(&app, &poster, "eleven posts", posts, 10).await;
    let creator = app.token("creator", "Creator");
    let creates = (0..11)
        .map(|n| (CREATE, json!({ "t": format!("d{n}") })))
        .collect();
    spend_together(&app, &creator, "eleven new discussions", creates, 10).await;

    // Locks and moves (moderators' actions, their own allowance), each on a discussion of its
    // own.
    let mut own = Vec::new();
    for n in 0..11 {
        own.push(new_discussion(format!("own {n}")).await.id.to_string());
    }
    let locker = app.moderator_token("m-lock", "Locker");
    let locks = own
        .iter()
        .map(|id| (LOCK, json!({ "id": id, "l": true })))
        .collect();
    spend_together(&app, &locker, "eleven locks", locks, 10).await;
    let mover = app.moderator_token("m-move", "Mover");
    let moves = own
        .iter()
        .map(|id| {
            (
                "mutation($id: ID!) { migrateDiscussion(id: $id, layout: PER_COMMENT) { id layout } }",
                json!({ "id": id }),
            )
        })
        .collect();
    spend_together(&app, &mover, "eleven moves", moves, 10).await;
}
