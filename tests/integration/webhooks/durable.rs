//! At least once through crashes and replicas: kill -9 while 500 posts are being delivered,
//! then a restart; and two replicas over one database.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::future::join_all;
use nix::sys::signal::Signal;
use serde_json::{json, Value};
use threadql::domain::Layout;

use super::{call_as, hook_config, posts, subscribe};
use crate::support::{
    admin_token_for, server_uri, token, unique_db, Delivery, Process, Receiver, Running,
};

/// The slugs of every comment of `d`, read through `url`'s API.
async fn committed_slugs(url: &str, d: &str) -> BTreeSet<String> {
    let query = "query($d: ID!, $a: String) { discussion(id: $d) { comments(first: 100, after: $a) { pageInfo { hasNextPage endCursor } nodes { slug } } } }";
    let client = reqwest::Client::new();
    let (mut slugs, mut after) = (BTreeSet::new(), Value::Null);
    loop {
        let body: Value = client
            .post(url)
            .json(&json!({ "query": query, "variables": { "d": d, "a": after } }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let page = &body["data"]["discussion"]["comments"];
        for node in page["nodes"].as_array().unwrap() {
            slugs.insert(node["slug"].as_str().unwrap().to_owned());
        }
        if page["pageInfo"]["hasNextPage"] != true {
            return slugs;
        }
        after = page["pageInfo"]["endCursor"].clone();
    }
}

/// Now, in Unix milliseconds (the receiver's clock: the same machine).
fn unix_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| d.as_millis() as u64)
}

/// The comment slug each distinct webhook-id carried, and how often each id came.
fn by_id(deliveries: &[Delivery]) -> (BTreeMap<String, String>, BTreeMap<String, usize>) {
    let (mut slugs, mut times) = (BTreeMap::new(), BTreeMap::new());
    for delivery in deliveries {
        let slug = delivery.body["data"]["comment"]["slug"]
            .as_str()
            .unwrap_or_default();
        slugs.insert(delivery.id.clone(), slug.to_owned());
        *times.entry(delivery.id.clone()).or_insert(0) += 1;
    }
    (slugs, times)
}

/// Waits until the receiver has a delivery of every slug of `wanted`.
async fn until_every_slug(receiver: &Receiver, wanted: &BTreeSet<String>) -> Vec<Delivery> {
    receiver
        .wait_until(
            |got| {
                let seen: BTreeSet<String> = by_id(got).0.into_values().collect();
                wanted.is_subset(&seen)
            },
            Duration::from_secs(180),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_committed_post_is_delivered_through_a_kill_and_a_restart() {
    let database = unique_db("hooks_kill");
    let env = [
        ("THREADQL_MONGODB_URI", server_uri().to_owned()),
        ("THREADQL_DATABASE", database.clone()),
        ("THREADQL_DEFAULT_LAYOUT", "bucketed".to_owned()),
        ("THREADQL_WEBHOOK_ALLOW_INSECURE", "true".to_owned()),
        (
            "THREADQL_WEBHOOK_RETRY_SCHEDULE",
            "0s,1s,1s,1s,1s,1s".to_owned(),
        ),
        ("THREADQL_WEBHOOK_LEASE_SECS", "3".to_owned()),
    ];
    let receiver = Receiver::start().await;
    // Slow answers, so attempts are in flight when the process dies.
    receiver.delay_ms(20).await;
    let process = Process::serve(&env).await;
    let graphql = process.url("/graphql");
    let admin = admin_token_for("root", "Root");
    let ada = token("ada", "Ada");
    let call = |token: &str, query: &str, vars: Value| {
        let (url, token, query) = (graphql.clone(), token.to_owned(), query.to_owned());
        async move {
            let body: Value = reqwest::Client::new()
                .post(url)
                .bearer_auth(token)
                .json(&json!({ "query": query, "variables": vars }))
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            body["errors"].is_null().then(|| body["data"].clone())
        }
    };
    let create = "mutation($url: String!) { createWebhookEndpoint(input: {url: $url, events: [COMMENT_POSTED]}) { secret } }";
    let secret = call(&admin, create, json!({ "url": receiver.url() }))
        .await
        .expect("an endpoint")["createWebhookEndpoint"]["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    receiver.secrets(&[&secret]).await;
    let d = call(
        &ada,
        "mutation { createDiscussion(input: {title: \"Killed\"}) { id } }",
        json!({}),
    )
    .await
    .unwrap()["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // 8 writers post 500 comments; the process is killed once 200 are acknowledged.
    let post = "mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug } }";
    let acknowledged = std::sync::Mutex::new(BTreeSet::new());
    let writers = (0..8).map(|w| {
        let (call, d, ada, acknowledged) = (&call, &d, &ada, &acknowledged);
        async move {
            for i in (w..500).step_by(8) {
                let Some(done) = call(ada, post, json!({ "d": d, "t": format!("post {i}") })).await
                else {
                    return;
                };
                acknowledged
                    .lock()
                    .unwrap()
                    .insert(done["postComment"]["slug"].as_str().unwrap().to_owned());
            }
        }
    });
    let killer = async {
        while acknowledged.lock().unwrap().len() < 200 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        process.signal(Signal::SIGKILL);
        unix_ms()
    };
    let (_, killed_at) = tokio::join!(join_all(writers), killer);
    drop(process);
    let acknowledged = acknowledged.into_inner().unwrap();
    // After the restart, every committed post's event arrives.
    let restarted = Process::serve(&env).await;
    let stored = committed_slugs(&restarted.url("/graphql"), &d).await;
    assert!(
        acknowledged.is_subset(&stored),
        "an acknowledged post was lost"
    );
    let got = until_every_slug(&receiver, &stored).await;
    assert!(got.iter().all(Delivery::verified_by_all));
    let (slugs, times) = by_id(&got);
    let delivered: Vec<&String> = slugs.values().collect();
    assert_eq!(
        delivered.len(),
        stored.len(),
        "one webhook-id per committed post"
    );
    assert_eq!(
        delivered.into_iter().cloned().collect::<BTreeSet<_>>(),
        stored
    );
    // Repeats only of attempts the kill cut: the round in flight then (at most 256 events and 64
    // retries, the dispatcher's round sizes), each once more, by the restarted process.
    let repeated: Vec<&String> = times
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, _)| id)
        .collect();
    assert!(
        repeated.len() <= 256 + 64,
        "{} webhook-ids came more than once",
        repeated.len()
    );
    assert!(times.values().all(|n| *n <= 2), "an id came three times");
    for id in repeated {
        let first = got
            .iter()
            .filter(|d| &d.id == id)
            .map(|d| d.received_at_ms)
            .min()
            .unwrap();
        // 1 s for a request sent just before the kill to arrive.
        assert!(
            first <= killed_at + 1_000,
            "{id} was repeated, but the killed process never sent it"
        );
    }
    drop(restarted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_deliver_every_event_once() {
    let mut config = hook_config("hooks_replicas", Layout::PerComment, "0s,1s,2s");
    // No replica dies here: a lease as long as in production, so a slow attempt on a loaded
    // machine is never taken over (which would repeat it).
    config.webhooks.lease_secs = 30;
    let one = Running::start(config.clone()).await;
    let two = Running::start(config).await;
    let receiver = Receiver::start().await;
    let admin = admin_token_for("root", "Root");
    subscribe(&one, &admin, &receiver, Some(json!(["COMMENT_POSTED"]))).await;
    let (a, b) = tokio::join!(posts(&one, 100), posts(&two, 100));
    let mut wanted = committed_slugs(&one.url("/graphql"), &a).await;
    wanted.extend(committed_slugs(&two.url("/graphql"), &b).await);
    assert_eq!(wanted.len(), 200);
    let got = until_every_slug(&receiver, &wanted).await;
    // Settle: nothing more should come.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got = receiver.deliveries().len().max(got.len());
    let all = receiver.deliveries();
    let (slugs, times) = by_id(&all);
    assert_eq!(slugs.len(), 200);
    assert!(
        times.values().all(|n| *n == 1),
        "no webhook-id twice ({got} deliveries)"
    );
    assert!(all.iter().all(Delivery::verified_by_all));
    let endpoints = call_as(
        &one,
        &admin,
        "{ webhookEndpoints { deliveries(first: 100, status: PENDING) { nodes { id } } } }",
        json!({}),
    )
    .await;
    assert_eq!(
        endpoints["webhookEndpoints"][0]["deliveries"]["nodes"],
        json!([])
    );
    one.shutdown().await;
    two.shutdown().await;
}
