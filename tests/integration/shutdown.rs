//! Shutting down with live subscribers, as an orchestrator does it: SIGTERM to a real `threadql
//! serve`. Every subscription ends as its transport says (`complete`, then close code 1001 on a
//! WebSocket; `complete` and the end of the body on an event stream), every write it
//! acknowledged is kept, and it exits within its grace period however its clients behave.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use nix::sys::signal::Signal;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;

use crate::live::{await_subscribers_at, Protocol, Ws, POSTED, WAIT};
use crate::orphans::{databases_on, Cleanup};
use crate::support::{error_code, graphql_data_at, server_uri, token, unique_db, Process, TestApp};
use threadql::domain::Layout;

/// What the process may take beyond its grace period to exit: the issue's own bound.
const MARGIN: Duration = Duration::from_secs(5);

const POST: &str =
    "mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug } }";

async fn create_discussion(process: &Process) -> String {
    let data = graphql_data_at(
        &process.url("/graphql"),
        &token("shutdown", "Shutdown"),
        "mutation { createDiscussion(input: {title: \"shutdown\"}) { id } }",
        json!({}),
    )
    .await;
    data["createDiscussion"]["id"].as_str().unwrap().to_owned()
}

/// What a WebSocket subscriber heard, in order, until its socket ended.
#[derive(Debug)]
enum Heard {
    Text(Value),
    Close(Option<u16>),
}

/// Reads a socket to its end (pings aside).
async fn hear_to_the_end(mut ws: Ws) -> Vec<Heard> {
    let mut heard = Vec::new();
    loop {
        let frame = tokio::time::timeout(WAIT, ws.socket_next())
            .await
            .unwrap_or_else(|_| panic!("the socket neither spoke nor ended: {heard:?}"));
        match frame {
            Some(Message::Text(text)) => {
                heard.push(Heard::Text(serde_json::from_str(&text).unwrap()))
            }
            Some(Message::Close(frame)) => {
                heard.push(Heard::Close(frame.map(|f| u16::from(f.code))))
            }
            Some(_) => {}
            None => return heard,
        }
    }
}

/// Reads an event stream to its end: its events, and whether the body ended cleanly.
async fn events_to_the_end(mut response: reqwest::Response) -> (Vec<(String, String)>, bool) {
    let mut body = String::new();
    let ended = loop {
        match tokio::time::timeout(WAIT, response.chunk()).await {
            Ok(Ok(Some(chunk))) => body.push_str(std::str::from_utf8(&chunk).unwrap()),
            Ok(Ok(None)) => break true,
            Ok(Err(_)) => break false,
            Err(_) => panic!("the event stream neither spoke nor ended: {body}"),
        }
    };
    let mut events = Vec::new();
    for block in body.split("\n\n") {
        let (mut event, mut data) = (String::new(), String::new());
        for line in block.lines() {
            if let Some(name) = line.strip_prefix("event:") {
                event = name.trim().to_owned();
            } else if let Some(value) = line.strip_prefix("data:") {
                data.push_str(value.strip_prefix(' ').unwrap_or(value));
            }
        }
        // Comment lines (keep-alives) carry no event.
        if !event.is_empty() {
            events.push((event, data));
        }
    }
    (events, ended)
}

/// Posts until a post fails (the server stops answering); gives the slug of every post it
/// acknowledged.
async fn write_until_refused(
    url: String,
    d: String,
    writer: usize,
    count: Arc<AtomicUsize>,
) -> Vec<String> {
    let client = reqwest::Client::new();
    let token = token(&format!("writer{writer}"), "Writer");
    let mut acknowledged = Vec::new();
    for i in 0.. {
        let sent = client
            .post(&url)
            .bearer_auth(&token)
            .json(&json!({ "query": POST, "variables": { "d": d, "t": format!("writer {writer} post {i}") } }))
            .send()
            .await;
        let Ok(response) = sent else { break };
        let Ok(body) = response.json::<Value>().await else {
            break;
        };
        match body["data"]["postComment"]["slug"].as_str() {
            Some(slug) if body["errors"].is_null() => {
                acknowledged.push(slug.to_owned());
                count.fetch_add(1, Ordering::Relaxed);
            }
            _ => break,
        }
    }
    acknowledged
}

/// Every comment slug of a discussion, page by page, and its `commentCount`.
async fn stored_slugs(process: &Process, d: &str) -> (Vec<String>, u64) {
    let mut slugs = Vec::new();
    let mut after = Value::Null;
    loop {
        let data = graphql_data_at(
            &process.url("/graphql"),
            &token("shutdown", "Shutdown"),
            "query($d: ID!, $a: String) { discussion(id: $d) { commentCount comments(first: 100, after: $a) { nodes { slug } pageInfo { hasNextPage endCursor } } } }",
            json!({ "d": d, "a": after }),
        )
        .await;
        let discussion = &data["discussion"];
        for node in discussion["comments"]["nodes"].as_array().unwrap() {
            slugs.push(node["slug"].as_str().unwrap().to_owned());
        }
        let page = &discussion["comments"]["pageInfo"];
        if page["hasNextPage"] != true {
            return (slugs, discussion["commentCount"].as_u64().unwrap());
        }
        after = page["endCursor"].clone();
    }
}

/// 50 subscribers on each WebSocket protocol and 10 over Server-Sent Events follow one
/// discussion while three writers post to it; SIGTERM. Every WebSocket gets its subscription's
/// `complete` and then close code 1001, every event stream `complete` and its end; the process
/// exits successfully within its grace period; and after a restart on the same data directory
/// (its embedded database stopped with it) every acknowledged comment is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_completes_every_subscription_and_keeps_every_acknowledged_write() {
    const GRACE_SECS: u64 = 5;
    const PER_PROTOCOL: usize = 50;
    const SSE: usize = 10;
    const WRITERS: usize = 3;
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().canonicalize().unwrap().join("data");
    let _cleanup = Cleanup(&data_dir);
    let env = [
        ("THREADQL_DATA_DIR", data_dir.display().to_string()),
        ("THREADQL_SHUTDOWN_GRACE_SECS", GRACE_SECS.to_string()),
        ("THREADQL_MAX_SUBSCRIPTIONS_PER_CLIENT", "1000".to_owned()),
    ];
    let mut process = Process::serve(&env).await;
    let d = create_discussion(&process).await;
    let variables = json!({ "d": d });

    let mut sockets = Vec::new();
    for n in 0..PER_PROTOCOL * 2 {
        let protocol = match n % 2 {
            0 => Protocol::TransportWs,
            _ => Protocol::LegacyGraphqlWs,
        };
        let mut ws = Ws::connect_at(process.addr, protocol, json!({})).await;
        let id = format!("s{n}");
        ws.start(&id, POSTED, variables.clone()).await;
        sockets.push((id, tokio::spawn(hear_to_the_end(ws))));
    }
    let client = reqwest::Client::new();
    let mut streams = Vec::new();
    for _ in 0..SSE {
        let response = client
            .post(process.url("/graphql"))
            .header("Accept", "text/event-stream")
            .json(&json!({ "query": POSTED, "variables": variables }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        streams.push(tokio::spawn(events_to_the_end(response)));
    }
    let subscriptions = PER_PROTOCOL * 2 + SSE;
    await_subscribers_at(&process.url("/metrics"), subscriptions as u64).await;

    // Writers post all along; the signal comes while they do.
    let acknowledged = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (url, d) = (process.url("/graphql"), d.clone());
            tokio::spawn(write_until_refused(url, d, w, acknowledged.clone()))
        })
        .collect();
    let deadline = Instant::now() + WAIT;
    while acknowledged.load(Ordering::Relaxed) < 20 {
        assert!(Instant::now() < deadline, "the writers never posted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    process.signal(Signal::SIGTERM);
    let signalled = Instant::now();
    let (status, logs) = process
        .exit_within(Duration::from_secs(GRACE_SECS) + MARGIN)
        .await;
    assert!(status.success(), "{status}:\n{logs}");
    assert!(
        signalled.elapsed() < Duration::from_secs(GRACE_SECS) + MARGIN,
        "{logs}"
    );
    assert!(
        logs.contains(&format!("{subscriptions} subscriptions")),
        "the shutdown names its subscriptions:\n{logs}"
    );
    assert!(logs.contains("stopped after"), "{logs}");
    assert!(
        !logs.contains("grace period ran out"),
        "every client read to the end, so none was dropped:\n{logs}"
    );
    assert!(
        databases_on(&data_dir).is_empty(),
        "the embedded database stopped with it"
    );

    for (id, socket) in sockets {
        let heard = socket.await.unwrap();
        let (close, texts) = heard.split_last().expect("something was heard");
        assert!(
            matches!(close, Heard::Close(Some(1001))),
            "{id}: the socket ends with 1001: {heard:?}"
        );
        let (complete, events) = texts.split_last().expect("a complete");
        match complete {
            Heard::Text(message) => {
                assert_eq!(
                    message,
                    &json!({ "type": "complete", "id": id }),
                    "{heard:?}"
                )
            }
            Heard::Close(_) => panic!("{id}: closed twice: {heard:?}"),
        }
        for event in events {
            let Heard::Text(message) = event else {
                panic!("{id}: a close before the end: {heard:?}");
            };
            assert!(
                message["type"] == "next" || message["type"] == "data",
                "{message}"
            );
            assert_eq!(message["id"], id.as_str());
            assert!(
                message["payload"]["data"]["commentPosted"]["slug"].is_string(),
                "{message}"
            );
        }
    }
    for stream in streams {
        let (events, ended) = stream.await.unwrap();
        assert!(ended, "the event stream ends cleanly: {events:?}");
        let (last, before) = events.split_last().expect("a complete event");
        assert_eq!(last.0, "complete", "{events:?}");
        for (event, data) in before {
            assert_eq!(event, "next", "{events:?}");
            let result: Value = serde_json::from_str(data).unwrap();
            assert!(
                result["data"]["commentPosted"]["slug"].is_string(),
                "{result}"
            );
        }
    }

    let mut acknowledged = Vec::new();
    for writer in writers {
        acknowledged.extend(
            tokio::time::timeout(WAIT, writer)
                .await
                .expect("a writer stops once the server is gone")
                .unwrap(),
        );
    }
    assert!(acknowledged.len() >= 20, "{}", acknowledged.len());

    // The same data directory again: nothing acknowledged is missing.
    let mut again = Process::serve(&env).await;
    let (stored, count) = stored_slugs(&again, &d).await;
    assert_eq!(
        count as usize,
        stored.len(),
        "commentCount matches the comments"
    );
    let stored: std::collections::HashSet<String> = stored.into_iter().collect();
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|s| !stored.contains(*s))
        .collect();
    assert!(lost.is_empty(), "acknowledged but not stored: {lost:?}");
    again.signal(Signal::SIGTERM);
    let (status, logs) = again
        .exit_within(Duration::from_secs(GRACE_SECS) + MARGIN)
        .await;
    assert!(status.success(), "{status}:\n{logs}");
}

/// Clients that never let go cannot hold the server past its grace period: a WebSocket that
/// asked for many large results and reads none of them, and a request whose body never
/// finishes. The process still exits successfully within the grace period (and a margin),
/// saying it dropped them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_never_let_go_are_dropped_when_the_grace_period_runs_out() {
    const GRACE_SECS: u64 = 2;
    const COMMENTS: usize = 50;
    const QUERIES: usize = 40;
    let env = [
        ("THREADQL_MONGODB_URI", server_uri().to_owned()),
        ("THREADQL_DATABASE", unique_db("shutdown_hold")),
        ("THREADQL_SHUTDOWN_GRACE_SECS", GRACE_SECS.to_string()),
    ];
    let mut process = Process::serve(&env).await;
    let d = create_discussion(&process).await;
    // 50 comments of 10 000 characters: a page of them is half a megabyte.
    let text = "x".repeat(10_000);
    let posts: Vec<_> = (0..4)
        .map(|w| {
            let (url, d, text) = (process.url("/graphql"), d.clone(), text.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                for _ in (w..COMMENTS).step_by(4) {
                    let body: Value = client
                        .post(&url)
                        .bearer_auth(token("shutdown", "Shutdown"))
                        .json(&json!({ "query": POST, "variables": { "d": d, "t": text } }))
                        .send()
                        .await
                        .unwrap()
                        .json()
                        .await
                        .unwrap();
                    assert!(body["errors"].is_null(), "{body}");
                }
            })
        })
        .collect();
    for post in posts {
        post.await.unwrap();
    }

    // A WebSocket asks for 40 pages of them (20 MB, more than any socket buffers hold) and
    // reads only the first answer, then nothing.
    let url = format!("ws://{}/graphql", process.addr);
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        HeaderValue::from_static("graphql-transport-ws"),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    socket
        .send(Message::text(
            json!({ "type": "connection_init" }).to_string(),
        ))
        .await
        .unwrap();
    let ack = socket.next().await.unwrap().unwrap();
    assert!(ack.to_text().unwrap().contains("connection_ack"), "{ack:?}");
    let page =
        "query($d: ID!) { discussion(id: $d) { comments(first: 50) { nodes { slug text } } } }";
    for n in 0..QUERIES {
        let subscribe = json!({ "id": format!("q{n}"), "type": "subscribe", "payload": { "query": page, "variables": { "d": d } } });
        socket
            .feed(Message::text(subscribe.to_string()))
            .await
            .unwrap();
    }
    socket.flush().await.unwrap();
    // The operations run: the first answer arrives (the rest arrived in the same write).
    let first = tokio::time::timeout(WAIT, socket.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.to_text().unwrap().contains(r#""type":"next""#));

    // A request whose body never finishes: the server asked for it (100 Continue), half came.
    let mut held = TcpStream::connect(process.addr).await.unwrap();
    let head = format!(
        "POST /graphql HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: 100\r\nexpect: 100-continue\r\n\r\n",
        process.addr
    );
    held.write_all(head.as_bytes()).await.unwrap();
    let mut continued = [0_u8; 25];
    tokio::time::timeout(WAIT, held.read_exact(&mut continued))
        .await
        .unwrap()
        .unwrap();
    assert!(
        continued.starts_with(b"HTTP/1.1 100 Continue"),
        "{}",
        String::from_utf8_lossy(&continued)
    );
    held.write_all(b"{\"query\": \"{ __typ").await.unwrap();

    process.signal(Signal::SIGTERM);
    let signalled = Instant::now();
    let (status, logs) = process
        .exit_within(Duration::from_secs(GRACE_SECS) + MARGIN)
        .await;
    assert!(status.success(), "{status}:\n{logs}");
    assert!(
        signalled.elapsed() < Duration::from_secs(GRACE_SECS) + MARGIN,
        "{logs}"
    );
    let warned = logs
        .lines()
        .find(|line| line.contains("WARN") && line.contains("grace period ran out"))
        .unwrap_or_else(|| panic!("a warning names the dropped connections:\n{logs}"));
    assert!(warned.contains("2 connections dropped"), "{warned}");
    assert!(logs.contains("stopped after"), "{logs}");
    drop((socket, held));
}

/// What the API does as the process shuts down, through the real schema: a subscription that
/// runs ends (its transport then sends `complete`), a new one gets UNAVAILABLE and ends, and
/// once the process waits for the writes it started, a mutation gets UNAVAILABLE and stores
/// nothing, while reads still answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_api_ends_subscriptions_and_refuses_late_work() {
    let app = TestApp::new("shutdown_api", Layout::PerComment).await;
    let d = app.discussion("draining").await;
    let connection = app.api.connection(None, None);
    let subscribe = || {
        async_graphql::Request::new(POSTED)
            .variables(async_graphql::Variables::from_json(json!({ "d": d })))
    };
    let running = tokio::spawn(
        app.api
            .execute_stream(subscribe(), &connection)
            .collect::<Vec<_>>(),
    );
    let deadline = Instant::now() + WAIT;
    while app.api.live_counts().subscribers != 1 {
        assert!(
            Instant::now() < deadline,
            "the subscription never got in place"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(app.api.subscriptions_held(), 1);

    app.api.drain();
    let heard = tokio::time::timeout(WAIT, running)
        .await
        .expect("the subscription ends")
        .unwrap();
    assert!(heard.is_empty(), "it ends without an event: {heard:?}");
    assert_eq!(app.api.subscriptions_held(), 0);

    let refused: Vec<_> = app
        .api
        .execute_stream(subscribe(), &connection)
        .collect()
        .await;
    assert_eq!(refused.len(), 1);
    let refused = serde_json::to_value(&refused[0]).unwrap();
    assert_eq!(error_code(&refused), "UNAVAILABLE", "{refused}");

    // Mutations still run while connections drain; not once the writes are waited for.
    app.post(&d, None, "while draining").await;
    assert_eq!(
        app.api
            .closing()
            .finish_writes(Duration::from_secs(5))
            .await,
        0
    );
    let late = app
        .exec(
            POST,
            json!({ "d": d, "t": "after the writes were waited for" }),
        )
        .await;
    assert_eq!(error_code(&late), "UNAVAILABLE", "{late}");
    let count = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { commentCount } }",
            json!({ "d": d }),
        )
        .await;
    assert_eq!(count["discussion"]["commentCount"], 1);
}
