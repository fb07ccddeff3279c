//! Standard Webhooks over real sockets, verified by the reference implementation (the
//! `standardwebhooks` npm package, in `tests/node/webhooks.mjs`): every event type on every
//! layout, retries, 410, rotation, the address rules, who may manage endpoints; and delivery
//! through kill -9 and across replicas (`durable.rs`).

mod durable;

use std::time::Duration;

use serde_json::{json, Value};
use threadql::config::{Config, LayoutArg};
use threadql::domain::Layout;

use crate::support::{
    admin_token_for, graphql_data, layout_name, moderator_token, post_graphql, server_config,
    token, Delivery, Receiver, Running, Scrape,
};

const CREATE_ENDPOINT: &str = "mutation($url: String!, $events: [EventType!]) { createWebhookEndpoint(input: {url: $url, events: $events}) { secret endpoint { id url events enabled } } }";
const ENDPOINTS: &str = "{ webhookEndpoints { id enabled disabledReason deliveries(first: 100) { nodes { id eventId eventType status attempts lastResponseStatus lastError } } } }";

/// How long a delivery may take to arrive in these tests (retries included).
const WITHIN: Duration = Duration::from_secs(60);

/// A server for webhook tests: `http` and loopback receivers allowed, the retry schedule
/// `schedule`.
pub(crate) fn hook_config(label: &str, layout: Layout, schedule: &str) -> Config {
    let mut config = server_config(label);
    config.default_layout = match layout {
        Layout::PerComment => LayoutArg::PerComment,
        Layout::Embedded => LayoutArg::Embedded,
        Layout::Bucketed => LayoutArg::Bucketed,
    };
    config.webhooks.allow_insecure = true;
    config.webhooks.retry_schedule = schedule.parse().expect("a schedule");
    config.webhooks.lease_secs = 5;
    config
}

/// Runs `query` as `token`; its data (failing the test on errors).
pub(crate) async fn call_as(server: &Running, token: &str, query: &str, vars: Value) -> Value {
    graphql_data(&reqwest::Client::new(), server, Some(token), query, vars).await
}

/// Creates an endpoint for `receiver` (every kind, or `events`), tells the receiver its
/// secret; returns the endpoint's id and secret.
pub(crate) async fn subscribe(
    server: &Running,
    admin: &str,
    receiver: &Receiver,
    events: Option<Value>,
) -> (String, String) {
    let vars = json!({ "url": receiver.url(), "events": events });
    let created =
        call_as(server, admin, CREATE_ENDPOINT, vars).await["createWebhookEndpoint"].clone();
    let secret = created["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{created:#}");
    receiver.secrets(&[&secret]).await;
    (
        created["endpoint"]["id"].as_str().unwrap().to_owned(),
        secret,
    )
}

/// The deliveries of type `kind`.
fn of_kind<'a>(deliveries: &'a [Delivery], kind: &str) -> Vec<&'a Delivery> {
    deliveries.iter().filter(|d| d.kind == kind).collect()
}

/// Every workflow on a discussion of `layout`, and what each type's delivery must carry.
async fn every_event_type_arrives_verified_case(layout: Layout) {
    let label = format!("hooks_all_{}", layout_name(layout));
    let server = Running::start(hook_config(&label, layout, "0s,1s,2s")).await;
    let receiver = Receiver::start().await;
    let admin = admin_token_for("root", "Root");
    subscribe(&server, &admin, &receiver, None).await;
    let (ada, bob, m) = (
        token("ada", "Ada"),
        token("bob", "Bob"),
        moderator_token("mod", "Mo"),
    );
    let d = call_as(
        &server,
        &ada,
        "mutation { createDiscussion(input: {title: \"Hooks\", key: \"hooks-page\"}) { id } }",
        json!({}),
    )
    .await["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let post = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug status } }";
    let c1 = call_as(&server, &ada, post, json!({ "d": d, "t": "first *post*" })).await
        ["postComment"]["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    let r1 = call_as(
        &server,
        &bob,
        post,
        json!({ "d": d, "p": c1, "t": "a reply" }),
    )
    .await["postComment"]["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    let run = |token: String, query: &'static str, vars: Value| {
        let server = &server;
        async move { call_as(server, &token, query, vars).await }
    };
    run(ada.clone(), "mutation($d: ID!, $s: String!) { editComment(input: {discussionId: $d, slug: $s, text: \"edited\"}) { slug } }", json!({ "d": d, "s": c1 })).await;
    run(
        bob.clone(),
        "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug } }",
        json!({ "d": d, "s": r1 }),
    )
    .await;
    run(m.clone(), "mutation($d: ID!, $s: String!) { pinComment(discussionId: $d, slug: $s, pinned: true) { slug } }", json!({ "d": d, "s": c1 })).await;
    run(
        m.clone(),
        "mutation($d: ID!) { setModeration(id: $d, mode: PRE) { moderation } }",
        json!({ "d": d }),
    )
    .await;
    let held = call_as(&server, &bob, post, json!({ "d": d, "t": "held" })).await["postComment"]
        ["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    run(
        m.clone(),
        "mutation($d: ID!, $s: String!) { approveComment(discussionId: $d, slug: $s) { slug } }",
        json!({ "d": d, "s": held }),
    )
    .await;
    let refused = call_as(&server, &bob, post, json!({ "d": d, "t": "refused" })).await
        ["postComment"]["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    run(m.clone(), "mutation($d: ID!, $s: String!) { rejectComment(discussionId: $d, slug: $s, reason: \"off topic\") { slug } }", json!({ "d": d, "s": refused })).await;
    run(
        m.clone(),
        "mutation($d: ID!) { setModeration(id: $d, mode: POST) { moderation } }",
        json!({ "d": d }),
    )
    .await;
    run(bob.clone(), "mutation($d: ID!, $s: String!) { reportComment(discussionId: $d, slug: $s, reason: SPAM) }", json!({ "d": d, "s": c1 })).await;
    run(
        m.clone(),
        "mutation($d: ID!) { updateDiscussion(id: $d, title: \"Hooks, renamed\") { title } }",
        json!({ "d": d }),
    )
    .await;
    run(
        m.clone(),
        "mutation($d: ID!) { lockDiscussion(id: $d, locked: true) { locked } }",
        json!({ "d": d }),
    )
    .await;
    run(
        m.clone(),
        "mutation { banUser(userId: \"bob\", reason: \"spam\") { userId } }",
        json!({}),
    )
    .await;
    run(
        m.clone(),
        "mutation { unbanUser(userId: \"bob\") }",
        json!({}),
    )
    .await;
    run(
        m.clone(),
        "mutation { reserveName(name: \"Editor\") { name } }",
        json!({}),
    )
    .await;
    run(
        m.clone(),
        "mutation { releaseName(name: \"Editor\") }",
        json!({}),
    )
    .await;
    run(
        m.clone(),
        "mutation($d: ID!) { setDiscussionClosing(id: $d, closesAt: \"2030-01-01T00:00:00Z\") { id } }",
        json!({ "d": d }),
    )
    .await;
    let to = match layout {
        Layout::Embedded => "BUCKETED",
        _ => "EMBEDDED",
    };
    run(m.clone(), "mutation($d: ID!, $l: StorageLayout!) { migrateDiscussion(id: $d, layout: $l) { layout } }", json!({ "d": d, "l": to })).await;

    let got = receiver.wait_for(21, WITHIN).await;
    assert!(got.iter().all(Delivery::verified_by_all), "{got:#?}");
    let kinds: Vec<&str> = got.iter().map(|d| d.kind.as_str()).collect();
    for kind in [
        "discussion.created",
        "comment.posted",
        "comment.edited",
        "comment.deleted",
        "comment.pinned",
        "discussion.moderation_changed",
        "comment.held",
        "comment.approved",
        "comment.rejected",
        "comment.reported",
        "discussion.updated",
        "discussion.locked",
        "user.banned",
        "user.unbanned",
        "name.reserved",
        "name.released",
        "discussion.moved",
        "discussion.closing_changed",
    ] {
        assert!(kinds.contains(&kind), "{kind} never arrived: {kinds:?}");
    }
    // No event twice (one delivery per event: distinct ids), none for what changed nothing.
    let mut ids: Vec<&str> = got.iter().map(|d| d.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), got.len(), "{kinds:?}");
    assert_eq!(got.len(), 21, "{kinds:?}");
    // The data of each: the discussion, the comment as it is at the attempt, the actor.
    let posted = of_kind(&got, "comment.posted");
    let first = posted
        .iter()
        .find(|p| p.body["data"]["comment"]["slug"] == c1.as_str())
        .expect("c1 posted");
    let data = &first.body["data"];
    assert_eq!(data["discussion"]["id"], d.as_str());
    assert_eq!(data["discussion"]["key"], "hooks-page");
    assert_eq!(data["actor"]["id"], "ada");
    assert_eq!(
        data["comment"]["author"],
        json!({ "id": "ada", "name": "Ada" })
    );
    assert_eq!(data["comment"]["depth"], 0);
    assert!(data["comment"]["fullSlug"].as_str().unwrap().contains(&c1));
    assert!(first.body["timestamp"].as_str().unwrap().ends_with('Z'));
    let reply = posted
        .iter()
        .find(|p| p.body["data"]["comment"]["slug"] == r1.as_str())
        .expect("r1 posted");
    assert_eq!(reply.body["data"]["comment"]["parentSlug"], c1.as_str());
    let deleted = &of_kind(&got, "comment.deleted")[0].body["data"]["comment"];
    assert_eq!(
        (deleted["text"].clone(), deleted["html"].clone()),
        (Value::Null, Value::Null)
    );
    let rejected = &of_kind(&got, "comment.rejected")[0].body["data"];
    assert_eq!(rejected["reason"], "off topic");
    assert_eq!(rejected["comment"]["status"], "REJECTED");
    assert_eq!(
        of_kind(&got, "comment.reported")[0].body["data"]["reason"],
        "spam"
    );
    assert_eq!(
        of_kind(&got, "user.banned")[0].body["data"]["user"]["id"],
        "bob"
    );
    // Both posts made under pre-moderation were held (they arrive in either order).
    let mut held_slugs: Vec<&str> = of_kind(&got, "comment.held")
        .iter()
        .filter_map(|d| d.body["data"]["comment"]["slug"].as_str())
        .collect();
    held_slugs.sort();
    let mut expected = vec![held.as_str(), refused.as_str()];
    expected.sort();
    assert_eq!(held_slugs, expected);
    assert_eq!(
        of_kind(&got, "comment.approved")[0].body["data"]["actor"]["id"],
        "mod"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_type_arrives_verified_per_comment() {
    every_event_type_arrives_verified_case(Layout::PerComment).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_type_arrives_verified_embedded() {
    every_event_type_arrives_verified_case(Layout::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_type_arrives_verified_bucketed() {
    every_event_type_arrives_verified_case(Layout::Bucketed).await;
}

/// Creates a discussion and posts `n` comments to it as ada; returns the discussion.
pub(crate) async fn posts(server: &Running, n: usize) -> String {
    let ada = token("ada", "Ada");
    let d = call_as(
        server,
        &ada,
        "mutation { createDiscussion(input: {title: \"Posts\"}) { id } }",
        json!({}),
    )
    .await["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let post = "mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug } }";
    for i in 0..n {
        call_as(
            server,
            &ada,
            post,
            json!({ "d": d, "t": format!("post {i}") }),
        )
        .await;
    }
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_retried_on_the_schedule_and_a_gone_endpoint_is_disabled() {
    let server = Running::start(hook_config("hooks_retry", Layout::PerComment, "0s,1s,3s")).await;
    let receiver = Receiver::start().await;
    let admin = admin_token_for("root", "Root");
    let (endpoint, secret) =
        subscribe(&server, &admin, &receiver, Some(json!(["COMMENT_POSTED"]))).await;
    receiver.respond(&[500, 500]).await;
    posts(&server, 1).await;
    let got = receiver.wait_for(3, WITHIN).await;
    assert!(
        got.iter().all(|d| d.id == got[0].id),
        "one webhook-id on every attempt"
    );
    assert_eq!(
        got.iter().map(|d| d.status).collect::<Vec<_>>(),
        [500, 500, 200]
    );
    let gaps = [
        got[1].received_at_ms - got[0].received_at_ms,
        got[2].received_at_ms - got[1].received_at_ms,
    ];
    assert!(gaps[1] > gaps[0], "the waits grow: {gaps:?}");
    assert!(
        got[2].timestamp >= got[0].timestamp,
        "each attempt has its own timestamp"
    );
    let listed = call_as(&server, &admin, ENDPOINTS, json!({})).await;
    let delivery = &listed["webhookEndpoints"][0]["deliveries"]["nodes"][0];
    assert_eq!(delivery["status"], "SUCCEEDED", "{listed:#}");
    assert_eq!(delivery["attempts"], 3);
    assert_eq!(delivery["eventId"], got[0].id.as_str());
    assert_eq!(delivery["lastResponseStatus"], 200);
    // The metrics count the attempts and the lag, and never show a secret.
    let scrape = Scrape::of(&server).await;
    let attempts =
        |result| scrape.value("threadql_webhook_deliveries_total", &[("result", result)]);
    assert_eq!(
        (attempts("retried"), attempts("succeeded")),
        (2.0, 1.0),
        "{}",
        scrape.text
    );
    assert_eq!(scrape.value("threadql_webhook_lag_seconds_count", &[]), 1.0);
    assert!(!scrape.text.contains(&secret) && !scrape.text.contains("whsec_"));

    // A 410 disables the endpoint: nothing more is sent to it.
    receiver.respond(&[410]).await;
    posts(&server, 1).await;
    receiver.wait_for(4, WITHIN).await;
    let mut disabled = Value::Null;
    for _ in 0..100 {
        disabled =
            call_as(&server, &admin, ENDPOINTS, json!({})).await["webhookEndpoints"][0].clone();
        if disabled["enabled"] == false {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(disabled["id"], endpoint.as_str());
    assert_eq!(disabled["enabled"], false, "{disabled:#}");
    assert!(disabled["disabledReason"].as_str().unwrap().contains("410"));
    posts(&server, 2).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        receiver.deliveries().len(),
        4,
        "a disabled endpoint gets nothing more"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_secret_signs_beside_the_new_one_until_its_overlap_ends() {
    let server = Running::start(hook_config("hooks_rotation", Layout::Bucketed, "0s,1s")).await;
    let receiver = Receiver::start().await;
    let admin = admin_token_for("root", "Root");
    let (endpoint, old) =
        subscribe(&server, &admin, &receiver, Some(json!(["COMMENT_POSTED"]))).await;
    let rotate = "mutation($id: ID!, $o: Int) { rotateWebhookSecret(id: $id, overlapSeconds: $o) }";
    let new = call_as(&server, &admin, rotate, json!({ "id": endpoint, "o": 8 })).await
        ["rotateWebhookSecret"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(new.starts_with("whsec_") && new != old);
    receiver.secrets(&[&new, &old]).await;
    posts(&server, 1).await;
    let during = receiver.wait_for(1, WITHIN).await;
    assert_eq!(during[0].signatures.len(), 2, "{during:#?}");
    assert_eq!(during[0].verified, [true, true]);
    // Past the overlap (a loaded machine may take seconds to deliver the first one).
    tokio::time::sleep(Duration::from_secs(9)).await;
    posts(&server, 1).await;
    let after = receiver.wait_for(2, WITHIN).await;
    assert_eq!(after[1].signatures.len(), 1, "{after:#?}");
    assert_eq!(
        after[1].verified,
        [true, false],
        "only the new secret signs"
    );
    // The secrets are never shown again.
    let listed = post_graphql(
        &reqwest::Client::new(),
        &server,
        Some(&admin),
        "{ webhookEndpoints { id url } }",
        json!({}),
    )
    .await
    .1;
    assert!(!listed.to_string().contains("whsec_"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_addresses_are_refused_and_only_admins_manage_endpoints() {
    // Without the insecure flag.
    let server = Running::start(server_config("hooks_refusals")).await;
    let client = reqwest::Client::new();
    let admin = admin_token_for("root", "Root");
    let code = |body: &Value| {
        body["errors"][0]["extensions"]["code"]
            .as_str()
            .unwrap_or("none")
            .to_owned()
    };
    for url in [
        "http://127.0.0.1:9/hook",
        "https://127.0.0.1/hook",
        "https://10.0.0.1/hook",
        "https://[::1]/hook",
        "https://[::ffff:10.0.0.1]/hook",
        "https://169.254.169.254/latest",
        "https://localhost/hook",
        "https://user:pw@example.com/hook",
        "ftp://example.com/hook",
        "not a url",
    ] {
        let (_, body) = post_graphql(
            &client,
            &server,
            Some(&admin),
            CREATE_ENDPOINT,
            json!({ "url": url }),
        )
        .await;
        assert_eq!(code(&body), "BAD_USER_INPUT", "{url}: {body:#}");
    }
    let (_, body) = post_graphql(
        &client,
        &server,
        Some(&admin),
        CREATE_ENDPOINT,
        json!({ "url": "https://example.com/", "events": [] }),
    )
    .await;
    assert_eq!(
        code(&body),
        "BAD_USER_INPUT",
        "an empty list of kinds: {body:#}"
    );
    // Everyone but an admin is refused, on every operation.
    let operations = [
        (CREATE_ENDPOINT, json!({ "url": "https://example.com/" })),
        (
            "mutation { updateWebhookEndpoint(id: \"ep_1\", input: {enabled: false}) { id } }",
            json!({}),
        ),
        (
            "mutation { deleteWebhookEndpoint(id: \"ep_1\") }",
            json!({}),
        ),
        ("mutation { rotateWebhookSecret(id: \"ep_1\") }", json!({})),
        (
            "mutation { redeliverWebhook(deliveryId: \"x\") { id } }",
            json!({}),
        ),
        ("{ webhookEndpoints { id } }", json!({})),
        ("{ events { nodes { id } } }", json!({})),
    ];
    for (query, vars) in &operations {
        for (who, expected) in [
            (Some(moderator_token("mod", "Mo")), "FORBIDDEN"),
            (Some(token("ada", "Ada")), "FORBIDDEN"),
            (None, "UNAUTHENTICATED"),
        ] {
            let (_, body) =
                post_graphql(&client, &server, who.as_deref(), query, vars.clone()).await;
            assert_eq!(code(&body), expected, "{query}: {body:#}");
        }
    }
    // An admin's unknown ids are NOT_FOUND; a bad overlap is BAD_USER_INPUT.
    for (query, expected) in [
        (
            "mutation { updateWebhookEndpoint(id: \"ep_1\", input: {enabled: false}) { id } }",
            "NOT_FOUND",
        ),
        (
            "mutation { rotateWebhookSecret(id: \"ep_1\") }",
            "NOT_FOUND",
        ),
        (
            "mutation { redeliverWebhook(deliveryId: \"x\") { id } }",
            "NOT_FOUND",
        ),
        (
            "mutation { rotateWebhookSecret(id: \"ep_1\", overlapSeconds: -1) }",
            "BAD_USER_INPUT",
        ),
        (
            "mutation { rotateWebhookSecret(id: \"ep_1\", overlapSeconds: 9999999) }",
            "BAD_USER_INPUT",
        ),
    ] {
        let (_, body) = post_graphql(&client, &server, Some(&admin), query, json!({})).await;
        assert_eq!(code(&body), expected, "{query}: {body:#}");
    }
    let (_, body) = post_graphql(
        &client,
        &server,
        Some(&admin),
        "mutation { deleteWebhookEndpoint(id: \"ep_1\") }",
        json!({}),
    )
    .await;
    assert_eq!(body["data"]["deleteWebhookEndpoint"], false);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_failing_for_too_long_is_disabled_and_enabled_again_by_an_admin() {
    let mut config = hook_config("hooks_failing", Layout::PerComment, "0s,1s,1s,1s,1s");
    config.webhooks.disable_after_secs = 1;
    let server = Running::start(config).await;
    let receiver = Receiver::start().await;
    receiver.otherwise(503).await;
    let admin = admin_token_for("root", "Root");
    let (endpoint, _) =
        subscribe(&server, &admin, &receiver, Some(json!(["COMMENT_POSTED"]))).await;
    posts(&server, 1).await;
    let mut listed = Value::Null;
    for _ in 0..100 {
        listed =
            call_as(&server, &admin, ENDPOINTS, json!({})).await["webhookEndpoints"][0].clone();
        if listed["enabled"] == false {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(listed["enabled"], false, "{listed:#}");
    let reason = listed["disabledReason"].as_str().unwrap();
    assert!(reason.contains("failed"), "{reason}");
    let delivery = &listed["deliveries"]["nodes"][0];
    assert_eq!(
        delivery["status"], "FAILED",
        "its pending delivery fails with it"
    );
    assert_eq!(delivery["lastResponseStatus"], 503);
    // Enabled again by an admin, with its reason cleared; a redelivery sends it again.
    receiver.otherwise(200).await;
    let enable = "mutation($id: ID!) { updateWebhookEndpoint(id: $id, input: {enabled: true}) { enabled disabledReason } }";
    let enabled = call_as(&server, &admin, enable, json!({ "id": endpoint })).await;
    assert_eq!(
        enabled["updateWebhookEndpoint"],
        json!({ "enabled": true, "disabledReason": null })
    );
    let before = receiver.deliveries().len();
    let again = "mutation($id: ID!) { redeliverWebhook(deliveryId: $id) { status } }";
    let redelivered = call_as(&server, &admin, again, json!({ "id": delivery["id"] })).await;
    assert_eq!(redelivered["redeliverWebhook"]["status"], "PENDING");
    let got = receiver.wait_for(before + 1, WITHIN).await;
    let last = got.last().unwrap();
    assert_eq!(last.status, 200);
    assert_eq!(
        last.id,
        delivery["eventId"].as_str().unwrap(),
        "the same webhook-id"
    );
    server.shutdown().await;
}
