//! Live subscriptions under load, over real sockets with the limits set low: caps per client and
//! per process, the cost of a subscription's selection, one resolution per event for identical
//! subscribers, and tokens that expire on an open connection.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{json, Value};
use threadql::domain::Layout;
use tokio_tungstenite::tungstenite::Message;

use crate::live::{await_subscribers, sse_events, text_json, Protocol, Ws, POSTED};
use crate::support::{error_code, layout_config, now, sign, token, Claims, Running};

fn bearer(token: &str) -> Value {
    json!({ "Authorization": format!("Bearer {token}") })
}

/// Starts an operation that must be refused at once: its error's code, after checking that the
/// operation then ends.
async fn refused(ws: &mut Ws, id: &str, query: &str, variables: Value) -> String {
    ws.start(id, query, variables).await;
    let (errored, payload) = ws.next().await;
    assert_eq!(errored, id);
    assert!(payload["data"].is_null(), "{payload}");
    let code = error_code(&payload);
    assert_eq!(ws.message().await, json!({ "type": "complete", "id": id }));
    code
}

/// Database commands the server sent so far, by name, without those the driver sends on its
/// own (the change stream's `getMore`s, which run whenever the stream waits).
fn commands(server: &Running) -> BTreeMap<String, u64> {
    let mut counts = server.store.commands().snapshot();
    counts.remove("other");
    counts
}

fn spent(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> u64 {
    after
        .iter()
        .map(|(name, n)| n - before.get(name).copied().unwrap_or(0))
        .sum()
}

/// One client (an address without a token, a token's `sub`) holds at most so many
/// subscriptions over all its connections; one more is RATE_LIMITED on that subscription and
/// the connection stays usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_are_capped_per_client() {
    let mut config = layout_config("subs_client_cap", Layout::PerComment);
    config.max_subscriptions_per_client = 2;
    let server = Running::start(config).await;
    let ada = token("u1", "Ada");
    let d = server.discussion(&ada, Layout::PerComment).await;
    let vars = json!({ "d": d });

    let mut first = Ws::connect(&server, Protocol::TransportWs, json!({})).await;
    first.start("1", POSTED, vars.clone()).await;
    first.start("2", POSTED, vars.clone()).await;
    await_subscribers(&server, 2).await;
    assert_eq!(
        refused(&mut first, "3", POSTED, vars.clone()).await,
        "RATE_LIMITED"
    );
    // The cap is the client's, not the connection's: another socket from the same address,
    // in the other protocol, is refused too.
    let mut second = Ws::connect(&server, Protocol::LegacyGraphqlWs, json!({})).await;
    assert_eq!(
        refused(&mut second, "4", POSTED, vars.clone()).await,
        "RATE_LIMITED"
    );

    // The refused connection still answers, and ending a subscription makes room.
    first.start("q", "{ __typename }", json!({})).await;
    assert_eq!(first.next().await.1["data"]["__typename"], "Query");
    assert_eq!(first.message().await["type"], "complete");
    first.send(json!({ "id": "1", "type": "complete" })).await;
    await_subscribers(&server, 1).await;
    assert_eq!(
        first.message().await,
        json!({ "type": "complete", "id": "1" })
    );
    second.start("5", POSTED, vars.clone()).await;
    await_subscribers(&server, 2).await;

    // A signed-in client is counted by its token's `sub`, apart from its address.
    let mut signed = Ws::connect(&server, Protocol::TransportWs, bearer(&ada)).await;
    signed.start("6", POSTED, vars.clone()).await;
    signed.start("7", POSTED, vars.clone()).await;
    await_subscribers(&server, 4).await;
    assert_eq!(
        refused(&mut signed, "8", POSTED, vars.clone()).await,
        "RATE_LIMITED"
    );

    // The subscriptions in place still hear a post.
    let slug = server.post(&ada, &d, None, "heard").await;
    for ws in [&mut first, &mut second, &mut signed] {
        let (_, payload) = ws.next().await;
        assert_eq!(payload["data"]["commentPosted"]["slug"], slug.as_str());
    }
    // Closing the sockets gives everything back.
    drop((first, second, signed));
    await_subscribers(&server, 0).await;
    server.shutdown().await;
}

/// The process serves at most so many subscriptions over all clients and transports; one more
/// is RATE_LIMITED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_are_capped_per_process() {
    let mut config = layout_config("subs_process_cap", Layout::PerComment);
    config.max_subscriptions = 3;
    let server = Running::start(config).await;
    let ada = token("u1", "Ada");
    let d = server.discussion(&ada, Layout::PerComment).await;
    let vars = json!({ "d": d });

    let mut anonymous = Ws::connect(&server, Protocol::TransportWs, json!({})).await;
    anonymous.start("1", POSTED, vars.clone()).await;
    let mut signed = Ws::connect(&server, Protocol::LegacyGraphqlWs, bearer(&ada)).await;
    signed.start("2", POSTED, vars.clone()).await;
    let client = reqwest::Client::new();
    let sse = client
        .post(server.url("/graphql"))
        .header("Accept", "text/event-stream")
        .json(&json!({ "query": POSTED, "variables": vars }))
        .send()
        .await
        .unwrap();
    await_subscribers(&server, 3).await;

    let lin = token("u2", "Lin");
    let mut other = Ws::connect(&server, Protocol::TransportWs, bearer(&lin)).await;
    assert_eq!(
        refused(&mut other, "4", POSTED, vars.clone()).await,
        "RATE_LIMITED"
    );
    let mut refused_sse = client
        .post(server.url("/graphql"))
        .header("Accept", "text/event-stream")
        .json(&json!({ "query": POSTED, "variables": vars }))
        .send()
        .await
        .unwrap();
    let events = sse_events(&mut refused_sse, 2).await;
    let result: Value = serde_json::from_str(&events[0].1).unwrap();
    assert_eq!(error_code(&result), "RATE_LIMITED");
    assert_eq!(events[1].0, "complete");

    // An ended subscription (the SSE response dropped) makes room.
    drop(sse);
    await_subscribers(&server, 2).await;
    other.start("5", POSTED, vars.clone()).await;
    await_subscribers(&server, 3).await;
    drop((anonymous, signed, other));
    await_subscribers(&server, 0).await;
    server.shutdown().await;
}

/// A subscription's selection runs again for every event, so its cost is limited on its own:
/// connections and counts below an event are refused at validation, before any database
/// command; a flat selection is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn costly_subscription_selections_are_refused_before_the_database() {
    let mut config = layout_config("subs_cost", Layout::PerComment);
    config.max_subscription_complexity = 20;
    // Refusals are counted in database commands: without the read cache's change feed, which
    // sends commands of its own.
    config.cache_bytes = 0;
    let server = Running::start(config).await;
    let ada = token("u1", "Ada");
    let d = server.discussion(&ada, Layout::PerComment).await;
    let vars = json!({ "d": d });
    let mut ws = Ws::connect(&server, Protocol::TransportWs, json!({})).await;

    let costly = [
        "subscription($d: ID!) { commentPosted(discussionId: $d) { parent { subDiscussion(first: 0) { totalCount } } } }",
        "subscription($d: ID!) { commentPosted(discussionId: $d) { replies(first: 1) { nodes { slug } } } }",
        "subscription($d: ID!) { commentChanged(discussionId: $d) { ...Deep } } fragment Deep on Comment { parent { ... on Comment { subDiscussion { totalCount } } } }",
        "subscription($d: ID!) { commentPosted(discussionId: $d) { a: slug b: slug c: slug d: slug e: slug f: slug g: slug h: slug i: slug j: slug k: slug l: slug m: slug n: slug o: slug p: slug q: slug r: slug s: slug t: slug } }",
    ];
    let before = server.store.commands().total();
    for (i, query) in costly.iter().enumerate() {
        let id = format!("c{i}");
        assert_eq!(
            refused(&mut ws, &id, query, vars.clone()).await,
            "GRAPHQL_VALIDATION_FAILED",
            "{query}"
        );
    }
    assert_eq!(
        server.store.commands().total(),
        before,
        "a refused subscription sends no database command"
    );
    assert_eq!(
        crate::support::metric(&server, "threadql_live_subscribers").await,
        0
    );

    // The same cost is fine for a query, which runs once; and a flat selection subscribes.
    let (_, data) = {
        ws.start(
            "q",
            "query($d: ID!) { discussion(id: $d) { comments(first: 1) { nodes { subDiscussion(first: 0) { totalCount } } } } }",
            vars.clone(),
        )
        .await;
        ws.next().await
    };
    assert!(data.get("errors").is_none(), "{data}");
    assert_eq!(ws.message().await["type"], "complete");
    ws.start("ok", POSTED, vars.clone()).await;
    await_subscribers(&server, 1).await;
    drop(ws);
    server.shutdown().await;
}

const WITH_PARENT: &str =
    "subscription($d: ID!) { commentPosted(discussionId: $d) { slug text parent { slug text } } }";

/// Subscribers with the same selection, variables and viewer are resolved once per event:
/// with K of them a post costs the database what it costs with one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_subscribers_are_resolved_once_per_event() {
    const K: usize = 40;
    // Costs are counted in database commands: without the read cache, whose hits would spare
    // some reads of one run and not of the other.
    let mut config = layout_config("subs_fanout", Layout::PerComment);
    config.cache_bytes = 0;
    let server = Running::start(config).await;
    let ada = token("u1", "Ada");
    let d = server.discussion(&ada, Layout::PerComment).await;
    let top = server.post(&ada, &d, None, "top").await;
    let vars = json!({ "d": d });

    // Commands of one reply (the post, its live delivery and the subscribers' `parent` reads),
    // counted once every subscription of every socket has heard it.
    async fn reply_cost(
        server: &Running,
        ada: &str,
        d: &str,
        top: &str,
        ws: &mut [(Ws, usize)],
    ) -> u64 {
        let before = commands(server);
        let slug = server.post(ada, d, Some(top), "a reply").await;
        for (ws, subscriptions) in ws.iter_mut() {
            for _ in 0..*subscriptions {
                let (_, payload) = ws.next().await;
                let heard = &payload["data"]["commentPosted"];
                assert_eq!(heard["slug"], slug.as_str(), "{payload}");
                assert_eq!(heard["parent"]["slug"], top);
                assert_eq!(heard["parent"]["text"], "top");
            }
        }
        spent(&before, &commands(server))
    }

    let mut one = vec![(
        Ws::connect(&server, Protocol::TransportWs, json!({})).await,
        1,
    )];
    one[0].0.start("s", WITH_PARENT, vars.clone()).await;
    await_subscribers(&server, 1).await;
    // The change stream opens with the first subscription, and may hand over a change made
    // just before it opened ("top"). A reply heard after whatever the opening brought shows
    // the stream settled before anything is counted.
    let warm = server.post(&ada, &d, Some(&top), "warm-up").await;
    loop {
        let (_, payload) = one[0].0.next().await;
        if payload["data"]["commentPosted"]["slug"] == warm.as_str() {
            break;
        }
    }
    let alone = reply_cost(&server, &ada, &d, &top, &mut one).await;
    assert!(alone > 0);

    // K subscribers over several sockets and both protocols.
    let mut many = one;
    for i in 1..K {
        if i % 10 == 0 {
            let protocol = match i % 20 {
                0 => Protocol::LegacyGraphqlWs,
                _ => Protocol::TransportWs,
            };
            many.push((Ws::connect(&server, protocol, json!({})).await, 0));
        }
        let (ws, subscriptions) = many.last_mut().unwrap();
        ws.start(&format!("s{i}"), WITH_PARENT, vars.clone()).await;
        *subscriptions += 1;
    }
    await_subscribers(&server, K as u64).await;
    let together = reply_cost(&server, &ada, &d, &top, &mut many).await;
    assert_eq!(
        together, alone,
        "a post with {K} identical subscribers costs what it costs with one"
    );
    drop(many);
    await_subscribers(&server, 0).await;
    server.shutdown().await;
}

/// Sharing never crosses viewers: a moderator's subscription sees a comment's revisions, an
/// anonymous one with the same selection does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_resolution_keeps_each_viewers_fields() {
    let server = Running::start(layout_config("subs_viewers", Layout::PerComment)).await;
    let ada = token("u1", "Ada");
    let d = server.discussion(&ada, Layout::PerComment).await;
    let slug = server.post(&ada, &d, None, "first").await;
    let changed = "subscription($d: ID!) { commentChanged(discussionId: $d) { slug text revisions { text } } }";
    let vars = json!({ "d": d });
    let moderator = threadql::auth::JwtKeys::new(crate::support::SECRET).mint(
        "m1",
        "Mo",
        &["moderator".to_owned()],
        3600,
    );
    let mut anonymous = Ws::connect(&server, Protocol::TransportWs, json!({})).await;
    let mut moderating = Ws::connect(&server, Protocol::TransportWs, bearer(&moderator)).await;
    let mut author = Ws::connect(&server, Protocol::TransportWs, bearer(&ada)).await;
    for ws in [&mut anonymous, &mut moderating, &mut author] {
        ws.start("c", changed, vars.clone()).await;
    }
    await_subscribers(&server, 3).await;
    server
        .mutate(
            &ada,
            "mutation($d: ID!, $s: String!) { editComment(input: {discussionId: $d, slug: $s, text: \"second\"}) { slug } }",
            json!({ "d": d, "s": slug }),
        )
        .await;
    let heard = |payload: Value| payload["data"]["commentChanged"].clone();
    let seen = heard(anonymous.next().await.1);
    assert_eq!(seen["text"], "second");
    assert_eq!(seen["revisions"], Value::Null, "{seen}");
    for ws in [&mut moderating, &mut author] {
        let seen = heard(ws.next().await.1);
        assert_eq!(seen["revisions"], json!([{ "text": "first" }]), "{seen}");
    }
    drop((anonymous, moderating, author));
    server.shutdown().await;
}

/// Reads messages until the server closes the socket, checking that nothing it sent ran the
/// operation `id` as its caller; returns how it closed: the close code, or `None` after a
/// legacy `connection_error`.
async fn until_closed_refusing(ws: &mut Ws, id: &str) -> Option<u16> {
    let mut refused = false;
    loop {
        let message = match tokio::time::timeout(crate::live::WAIT, ws.socket_next()).await {
            Ok(Some(message)) => message,
            Ok(None) => panic!("the socket ended without a close frame or connection_error"),
            Err(_) => panic!("the socket with an expired token stayed open"),
        };
        match message {
            Message::Close(frame) => return frame.map(|f| u16::from(f.code)),
            Message::Text(_) => {
                let message = text_json(&message);
                match message["type"].as_str() {
                    Some("connection_error") => {
                        assert_eq!(
                            message["payload"]["extensions"]["code"], "UNAUTHENTICATED",
                            "{message}"
                        );
                        return None;
                    }
                    Some("next" | "data") if message["id"] == id => {
                        assert!(message["payload"]["data"].is_null(), "{message}");
                        assert_eq!(error_code(&message["payload"]), "UNAUTHENTICATED");
                        refused = true;
                    }
                    Some("complete") if message["id"] == id => assert!(refused, "{message}"),
                    Some("ka") => {}
                    _ => panic!("unexpected message on an expired connection: {message}"),
                }
            }
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("unexpected message: {other:?}"),
        }
    }
}

/// A token that expires while its WebSocket is open stops working there: an operation after
/// `exp` is UNAUTHENTICATED, and the socket is closed with 4403 (graphql-transport-ws) or
/// `connection_error` (graphql-ws); an SSE subscription with a token ends with UNAUTHENTICATED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_stops_working_on_an_open_connection() {
    let mut config = layout_config("subs_expiry", Layout::PerComment);
    config.jwt_leeway_secs = 0;
    let server = Running::start(config).await;
    let ada = token("u1", "Ada");
    let d = server.discussion(&ada, Layout::PerComment).await;
    let short = |sub: &str, roles: &[&str]| {
        let mut claims = Claims::new(sub, "Short");
        claims.roles = roles.iter().map(|r| (*r).to_owned()).collect();
        claims.exp = now() + 3;
        (sign(&claims), claims.exp)
    };
    let (author, exp) = short("u9", &[]);
    let (moderator, _) = short("m9", &["moderator"]);
    let post =
        "mutation($d: ID!) { postComment(input: {discussionId: $d, text: \"late\"}) { slug } }";
    let lock = "mutation($d: ID!) { lockDiscussion(id: $d, locked: true) { locked } }";

    let mut sockets = Vec::new();
    for protocol in [Protocol::TransportWs, Protocol::LegacyGraphqlWs] {
        for (token, mutation) in [(&author, post), (&moderator, lock)] {
            let ws = Ws::connect(&server, protocol, bearer(token)).await;
            sockets.push((protocol, ws, mutation));
        }
    }
    let mut sse = reqwest::Client::new()
        .post(server.url("/graphql"))
        .header("Accept", "text/event-stream")
        .bearer_auth(&author)
        .json(&json!({ "query": POSTED, "variables": { "d": d } }))
        .send()
        .await
        .unwrap();
    assert_eq!(sse.status(), 200);

    while now() <= exp {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (protocol, ws, mutation) in &mut sockets {
        ws.start("late", mutation, json!({ "d": d })).await;
        let closed = until_closed_refusing(ws, "late").await;
        match protocol {
            Protocol::TransportWs => assert_eq!(closed, Some(4403)),
            Protocol::LegacyGraphqlWs => assert_eq!(closed, None),
        }
    }
    let events = sse_events(&mut sse, 2).await;
    assert_eq!(events[0].0, "next");
    let result: Value = serde_json::from_str(&events[0].1).unwrap();
    assert_eq!(error_code(&result), "UNAUTHENTICATED", "{result}");
    assert_eq!(events[1].0, "complete");

    // Nothing the expired tokens asked for happened.
    let data = server
        .mutate(
            &ada,
            "query($d: ID!) { discussion(id: $d) { commentCount locked } }",
            json!({ "d": d }),
        )
        .await;
    assert_eq!(
        data["discussion"],
        json!({ "commentCount": 0, "locked": false })
    );
    server.shutdown().await;
}

/// The connection keeps the token's expiry: an operation started on it after `exp` is
/// UNAUTHENTICATED, whatever the transport does with the socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_of_a_connection_after_its_token_expired_are_unauthenticated() {
    let mut config = layout_config("subs_expiry_ops", Layout::PerComment);
    config.jwt_leeway_secs = 0;
    let server = Running::start(config).await;
    let ada = token("u1", "Ada");
    let d = server.discussion(&ada, Layout::PerComment).await;
    let mut claims = Claims::new("u9", "Short");
    claims.exp = now() + 2;
    let header = format!("Bearer {}", sign(&claims));
    let connection = server.api.connection(Some(&header), None);
    assert!(connection.rejected().is_none());
    while now() <= claims.exp {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let request = async_graphql::Request::new(
        "mutation($d: ID!) { postComment(input: {discussionId: $d, text: \"late\"}) { slug } }",
    )
    .variables(async_graphql::Variables::from_json(json!({ "d": d })));
    let responses: Vec<_> = server
        .api
        .execute_stream(request, &connection)
        .collect()
        .await;
    assert_eq!(responses.len(), 1);
    let response = serde_json::to_value(&responses[0]).unwrap();
    assert_eq!(error_code(&response), "UNAUTHENTICATED", "{response}");
    server.shutdown().await;
}

/// Identical subscriptions that fail at their start (an unknown discussion) share the run and
/// its error: every one of them hears NOT_FOUND and ends, and none stays held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_failing_subscriptions_each_get_the_error() {
    let server = Running::start(layout_config("subs_failing", Layout::PerComment)).await;
    let mut ws = Ws::connect(&server, Protocol::TransportWs, json!({})).await;
    let vars = json!({ "d": "000000000000000000000000" });
    for i in 0..8 {
        ws.start(&format!("f{i}"), POSTED, vars.clone()).await;
    }
    let (mut errored, mut ended) = (HashSet::new(), HashSet::new());
    while ended.len() < 8 {
        let message = ws.message().await;
        let id = message["id"].as_str().unwrap().to_owned();
        match message["type"].as_str() {
            Some("next") => {
                assert_eq!(error_code(&message["payload"]), "NOT_FOUND", "{message}");
                assert!(errored.insert(id));
            }
            Some("complete") => {
                assert!(errored.contains(&id), "{id} ended without its error");
                assert!(ended.insert(id));
            }
            _ => panic!("{message}"),
        }
    }
    // Nothing is held: the per-connection limit and the caps have their places back.
    assert_eq!(
        crate::support::metric(&server, "threadql_live_runs").await,
        0
    );
    drop(ws);
    server.shutdown().await;
}

/// Persisted subscriptions sent by hash alone (no text) are shared only with the same hash:
/// two different documents never share a run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persisted_subscriptions_share_only_the_same_document() {
    use sha2::{Digest, Sha256};
    let server = Running::start(layout_config("subs_persisted", Layout::PerComment)).await;
    let ada = token("u1", "Ada");
    let d = server.discussion(&ada, Layout::PerComment).await;
    let slugs = "subscription($d: ID!) { commentPosted(discussionId: $d) { slug } }";
    let texts = "subscription($d: ID!) { commentPosted(discussionId: $d) { text } }";
    let mut ws = Ws::connect(&server, Protocol::TransportWs, json!({})).await;
    let persisted = |query: &str| {
        let hash = format!("{:x}", Sha256::digest(query.as_bytes()));
        json!({ "persistedQuery": { "version": 1, "sha256Hash": hash } })
    };
    // Each document is sent once with its text (which keeps it), then by hash alone.
    for (id, query) in [("a", slugs), ("b", texts)] {
        let payload =
            json!({ "query": query, "variables": { "d": d }, "extensions": persisted(query) });
        ws.send(json!({ "id": id, "type": "subscribe", "payload": payload }))
            .await;
    }
    // The operations of one socket are admitted concurrently: the texts must be kept before
    // the same documents come by hash alone.
    await_subscribers(&server, 2).await;
    for (id, query) in [("a2", slugs), ("b2", texts)] {
        let payload = json!({ "variables": { "d": d }, "extensions": persisted(query) });
        ws.send(json!({ "id": id, "type": "subscribe", "payload": payload }))
            .await;
    }
    await_subscribers(&server, 4).await;
    assert_eq!(
        crate::support::metric(&server, "threadql_live_runs").await,
        2
    );
    let slug = server.post(&ada, &d, None, "persisted").await;
    let mut heard = BTreeMap::new();
    for _ in 0..4 {
        let (id, payload) = ws.next().await;
        heard.insert(id, payload["data"]["commentPosted"].clone());
    }
    for id in ["a", "a2"] {
        assert_eq!(heard[id], json!({ "slug": slug }), "{id}");
    }
    for id in ["b", "b2"] {
        assert_eq!(heard[id], json!({ "text": "persisted" }), "{id}");
    }
    drop(ws);
    server.shutdown().await;
}
