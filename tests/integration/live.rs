//! Live updates over real sockets: subscriptions over both WebSocket protocols and over
//! Server-Sent Events, with changes written through another server on the same database.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use threadql::domain::Layout;
use threadql::store::embedded_db::EmbeddedDb;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::support::{layout_config, metric, metric_from, token, Running};

/// Longest wait for one message.
pub(crate) const WAIT: Duration = Duration::from_secs(20);

pub(crate) const POSTED: &str = "subscription($d: ID!) { commentPosted(discussionId: $d) { slug parentSlug text author { name } discussionId } }";
const CHANGED: &str = "subscription($d: ID!) { commentChanged(discussionId: $d) { slug text deleted editedAt author { name } } }";

/// The two WebSocket subprotocols and their message names: (protocol, subscribe, next).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Protocol {
    TransportWs,
    LegacyGraphqlWs,
}

impl Protocol {
    fn name(self) -> &'static str {
        match self {
            Protocol::TransportWs => "graphql-transport-ws",
            Protocol::LegacyGraphqlWs => "graphql-ws",
        }
    }
}

/// A GraphQL WebSocket client speaking one protocol.
pub(crate) struct Ws {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    protocol: Protocol,
}

impl Ws {
    /// Opens a socket and sends `connection_init` with `payload`; returns the socket and the
    /// server's answer (`connection_ack`, an error, or a close).
    pub(crate) async fn open(
        server: &Running,
        protocol: Protocol,
        payload: Value,
    ) -> (Ws, Message) {
        Ws::open_at(server.addr, protocol, payload).await
    }

    /// [`Ws::open`] on a server at `addr`.
    pub(crate) async fn open_at(
        addr: std::net::SocketAddr,
        protocol: Protocol,
        payload: Value,
    ) -> (Ws, Message) {
        let url = format!("ws://{addr}/graphql");
        let mut request = url.into_client_request().unwrap();
        request.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            HeaderValue::from_static(protocol.name()),
        );
        let (socket, response) = tokio_tungstenite::connect_async(request).await.unwrap();
        assert_eq!(
            response.headers()["sec-websocket-protocol"],
            protocol.name(),
            "the server speaks the protocol asked for"
        );
        let mut ws = Ws { socket, protocol };
        ws.send(json!({ "type": "connection_init", "payload": payload }))
            .await;
        let answer = ws.raw().await;
        (ws, answer)
    }

    /// Opens a socket and expects `connection_ack`.
    pub(crate) async fn connect(server: &Running, protocol: Protocol, payload: Value) -> Ws {
        Ws::connect_at(server.addr, protocol, payload).await
    }

    /// [`Ws::connect`] to a server at `addr`.
    pub(crate) async fn connect_at(
        addr: std::net::SocketAddr,
        protocol: Protocol,
        payload: Value,
    ) -> Ws {
        let (ws, answer) = Ws::open_at(addr, protocol, payload).await;
        let answer = text_json(&answer);
        assert_eq!(answer["type"], "connection_ack", "{answer}");
        ws
    }

    pub(crate) async fn send(&mut self, message: Value) {
        self.socket
            .send(Message::text(message.to_string()))
            .await
            .unwrap();
    }

    /// The next message that is not a keep-alive.
    pub(crate) async fn raw(&mut self) -> Message {
        loop {
            let message = tokio::time::timeout(WAIT, self.socket.next())
                .await
                .expect("a message within the wait")
                .expect("the socket is open")
                .unwrap();
            match &message {
                Message::Ping(_) | Message::Pong(_) => {}
                Message::Text(text) if text.contains(r#""type":"ka""#) => {}
                _ => return message,
            }
        }
    }

    /// The next frame from the server (`None` once the socket is gone).
    pub(crate) async fn socket_next(&mut self) -> Option<Message> {
        self.socket.next().await.and_then(Result::ok)
    }

    /// Starts an operation.
    pub(crate) async fn start(&mut self, id: &str, query: &str, variables: Value) {
        let kind = match self.protocol {
            Protocol::TransportWs => "subscribe",
            Protocol::LegacyGraphqlWs => "start",
        };
        let payload = json!({ "query": query, "variables": variables });
        self.send(json!({ "id": id, "type": kind, "payload": payload }))
            .await;
    }

    /// The next message, as JSON.
    pub(crate) async fn message(&mut self) -> Value {
        text_json(&self.raw().await)
    }

    /// The next result of an operation: `(id, payload)` of a `next` (`data` in the legacy
    /// protocol) message; fails on anything else.
    pub(crate) async fn next(&mut self) -> (String, Value) {
        let message = self.message().await;
        let expected = match self.protocol {
            Protocol::TransportWs => "next",
            Protocol::LegacyGraphqlWs => "data",
        };
        assert_eq!(message["type"], expected, "{message}");
        (
            message["id"].as_str().unwrap().to_owned(),
            message["payload"].clone(),
        )
    }
}

pub(crate) fn text_json(message: &Message) -> Value {
    match message {
        Message::Text(text) => serde_json::from_str(text).unwrap(),
        other => panic!("expected a text message, got {other:?}"),
    }
}

/// Waits until the server has `count` live subscriptions in place: from then on, every change
/// reaches them.
pub(crate) async fn await_subscribers(server: &Running, count: u64) {
    await_subscribers_at(&server.url("/metrics"), count).await;
}

/// Waits until the server whose /metrics is at `metrics` has `count` live subscriptions in
/// place.
pub(crate) async fn await_subscribers_at(metrics: &str, count: u64) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while metric_from(metrics, "threadql_live_subscribers").await != count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{count} subscriptions never got in place"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Two servers on one database: what is written through one reaches subscribers of the other,
/// for one discussion only, in both protocols and on every layout; one change stream serves
/// every subscriber of a process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_written_through_one_server_reach_subscribers_of_another() {
    for layout in [Layout::PerComment, Layout::Embedded, Layout::Bucketed] {
        let config = layout_config("live_two", layout);
        let a = Running::start(config.clone()).await;
        let b = Running::start(config).await;
        let ada = token("u1", "Ada");
        let followed = b.discussion(&ada, layout).await;
        let other = b.discussion(&ada, layout).await;

        let auth = json!({ "Authorization": format!("Bearer {}", token("u2", "Lin")) });
        let mut modern = Ws::connect(&a, Protocol::TransportWs, auth.clone()).await;
        let mut legacy = Ws::connect(&a, Protocol::LegacyGraphqlWs, auth).await;
        modern.start("p", POSTED, json!({ "d": followed })).await;
        modern.start("c", CHANGED, json!({ "d": followed })).await;
        legacy.start("1", POSTED, json!({ "d": followed })).await;
        // A subscriber of the other discussion, on the same server.
        let mut elsewhere = Ws::connect(&a, Protocol::TransportWs, json!({})).await;
        elsewhere.start("o", POSTED, json!({ "d": other })).await;
        await_subscribers(&a, 4).await;

        // The other discussion's comment is written first: a subscriber of `followed` that
        // heard it would hear it before its own.
        let stranger = b.post(&ada, &other, None, "elsewhere").await;
        let top = b.post(&ada, &followed, None, "first").await;
        let reply = b.post(&ada, &followed, Some(&top), "a reply").await;

        for ws in [&mut modern, &mut legacy] {
            let mut heard = Vec::new();
            for _ in 0..2 {
                let (id, payload) = ws.next().await;
                assert!(id == "p" || id == "1", "{id}");
                heard.push(payload["data"]["commentPosted"].clone());
            }
            assert_eq!(heard[0]["slug"], top.as_str(), "{layout:?}");
            assert_eq!(heard[0]["text"], "first");
            assert_eq!(heard[0]["author"]["name"], "Ada");
            assert_eq!(heard[0]["discussionId"], followed.as_str());
            assert_eq!(heard[1]["slug"], reply.as_str());
            assert_eq!(heard[1]["parentSlug"], top.as_str());
        }
        let (id, payload) = elsewhere.next().await;
        assert_eq!(id, "o");
        assert_eq!(payload["data"]["commentPosted"]["slug"], stranger.as_str());

        b.mutate(
            &ada,
            "mutation($d: ID!, $s: String!) { editComment(input: {discussionId: $d, slug: $s, text: \"edited\"}) { slug } }",
            json!({ "d": followed, "s": top }),
        )
        .await;
        b.mutate(
            &ada,
            "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug } }",
            json!({ "d": followed, "s": reply }),
        )
        .await;
        let (id, edited) = modern.next().await;
        assert_eq!(id, "c");
        let edited = &edited["data"]["commentChanged"];
        assert_eq!(edited["slug"], top.as_str(), "{layout:?}");
        assert_eq!(edited["text"], "edited");
        assert!(edited["editedAt"].is_string());
        let (_, deleted) = modern.next().await;
        let deleted = &deleted["data"]["commentChanged"];
        assert_eq!(deleted["slug"], reply.as_str());
        assert_eq!(deleted["deleted"], true);
        assert_eq!(deleted["text"], Value::Null);
        assert_eq!(deleted["author"]["name"], "[deleted]");

        // Four subscriptions on two discussions, one change stream; the server that only
        // wrote opened one too, at its start, for its read cache.
        assert_eq!(metric(&a, "threadql_change_streams_opened_total").await, 1);
        assert_eq!(metric(&b, "threadql_change_streams_opened_total").await, 1);

        // Completing a subscription ends it on the server.
        modern.send(json!({ "id": "p", "type": "complete" })).await;
        legacy.send(json!({ "id": "1", "type": "stop" })).await;
        await_subscribers(&a, 2).await;
        drop((modern, legacy, elsewhere));
        await_subscribers(&a, 0).await;
        a.shutdown().await;
        b.shutdown().await;
    }
}

/// A subscription's connection carries its caller: a token in `connection_init` authenticates
/// the operations of the connection; a bad one closes it; an unknown discussion is an error
/// of that operation only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_init_carries_the_caller() {
    let server = Running::start(layout_config("live_auth", Layout::PerComment)).await;
    let ada = token("u1", "Ada");
    let d = server.discussion(&ada, Layout::PerComment).await;

    // A mutation over the socket, as the token of connection_init.
    let mut ws = Ws::connect(
        &server,
        Protocol::TransportWs,
        json!({ "Authorization": format!("Bearer {ada}") }),
    )
    .await;
    ws.start(
        "m",
        "mutation($d: ID!) { postComment(input: {discussionId: $d, text: \"over ws\"}) { author { id name } } }",
        json!({ "d": d }),
    )
    .await;
    let (_, payload) = ws.next().await;
    assert_eq!(
        payload["data"]["postComment"]["author"],
        json!({ "id": "u1", "name": "Ada" })
    );
    assert_eq!(ws.message().await["type"], "complete");

    // Without a token the connection opens, and mutations are refused.
    let mut anonymous = Ws::connect(&server, Protocol::TransportWs, json!({})).await;
    anonymous
        .start(
            "m",
            "mutation($d: ID!) { postComment(input: {discussionId: $d, text: \"x\"}) { slug } }",
            json!({ "d": d }),
        )
        .await;
    let (_, payload) = anonymous.next().await;
    assert_eq!(
        payload["errors"][0]["extensions"]["code"], "UNAUTHENTICATED",
        "{payload}"
    );

    assert_eq!(anonymous.message().await["type"], "complete");

    // Unknown and malformed discussions, unknown fields: an error for that operation, then
    // its end; the connection stays.
    for (id, query, d, code) in [
        ("u", POSTED, "000000000000000000000000", "NOT_FOUND"),
        ("v", POSTED, "nope", "BAD_USER_INPUT"),
        (
            "w",
            "subscription { nope }",
            "",
            "GRAPHQL_VALIDATION_FAILED",
        ),
    ] {
        anonymous.start(id, query, json!({ "d": d })).await;
        let (errored, payload) = anonymous.next().await;
        assert_eq!(errored, id);
        assert_eq!(
            payload["errors"][0]["extensions"]["code"], code,
            "{payload}"
        );
        assert_eq!(
            anonymous.message().await,
            json!({ "type": "complete", "id": id })
        );
    }

    // A bad token closes the connection before any operation: 4403 in graphql-transport-ws,
    // connection_error in the legacy protocol.
    let (_, answer) = Ws::open(
        &server,
        Protocol::TransportWs,
        json!({ "Authorization": "Bearer not-a-token" }),
    )
    .await;
    match answer {
        Message::Close(Some(frame)) => assert_eq!(frame.code, CloseCode::from(4403)),
        other => panic!("expected a 4403 close, got {other:?}"),
    }
    let (_, answer) = Ws::open(
        &server,
        Protocol::LegacyGraphqlWs,
        json!({ "Authorization": "Bearer not-a-token" }),
    )
    .await;
    assert_eq!(text_json(&answer)["type"], "connection_error");

    // No known subprotocol: refused with a code before the upgrade.
    let response = reqwest::Client::new()
        .get(server.url("/graphql"))
        .header("Connection", "Upgrade")
        .header("Upgrade", "websocket")
        .header("Sec-WebSocket-Version", "13")
        .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
        .header("Sec-WebSocket-Protocol", "chat")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");
    server.shutdown().await;
}

/// One connection runs at most the configured number of operations at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_runs_a_bounded_number_of_operations() {
    let mut config = layout_config("live_bound", Layout::PerComment);
    config.max_ws_operations = 2;
    let server = Running::start(config).await;
    let ada = token("u1", "Ada");
    let d = server.discussion(&ada, Layout::PerComment).await;
    let mut ws = Ws::connect(&server, Protocol::TransportWs, json!({})).await;
    ws.start("1", POSTED, json!({ "d": d })).await;
    ws.start("2", POSTED, json!({ "d": d })).await;
    await_subscribers(&server, 2).await;
    ws.start("3", POSTED, json!({ "d": d })).await;
    let (id, refused) = ws.next().await;
    assert_eq!(id, "3");
    assert_eq!(refused["errors"][0]["extensions"]["code"], "RATE_LIMITED");
    // Ending one makes room again.
    ws.send(json!({ "id": "1", "type": "complete" })).await;
    await_subscribers(&server, 1).await;
    assert_eq!(ws.message().await["type"], "complete");
    ws.start("4", POSTED, json!({ "d": d })).await;
    await_subscribers(&server, 2).await;
    server.shutdown().await;
}

/// Reads Server-Sent Events from a response until `count` events have arrived.
pub(crate) async fn sse_events(
    response: &mut reqwest::Response,
    count: usize,
) -> Vec<(String, String)> {
    let mut buffer = String::new();
    let mut events = Vec::new();
    while events.len() < count {
        let chunk = tokio::time::timeout(WAIT, response.chunk())
            .await
            .expect("an event within the wait")
            .unwrap()
            .expect("the stream is open");
        buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
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
    }
    events
}

/// Server-Sent Events (graphql-sse, distinct connections mode): a subscription streams `next`
/// events; a query gives one `next` and `complete`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_sent_events_stream_results() {
    let server = Running::start(layout_config("live_sse", Layout::Bucketed)).await;
    let ada = token("u1", "Ada");
    let d = server.discussion(&ada, Layout::Bucketed).await;
    let client = reqwest::Client::new();
    let sse = |body: Value| {
        client
            .post(server.url("/graphql"))
            .header("Accept", "text/event-stream")
            .json(&body)
            .send()
    };

    let mut query = sse(json!({ "query": "query($d: ID!) { discussion(id: $d) { id commentCount } }", "variables": { "d": d } }))
        .await
        .unwrap();
    assert_eq!(query.status(), 200);
    assert!(query.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let events = sse_events(&mut query, 2).await;
    assert_eq!(events[0].0, "next");
    let result: Value = serde_json::from_str(&events[0].1).unwrap();
    assert_eq!(result["data"]["discussion"]["commentCount"], 0);
    assert_eq!(events[1].0, "complete");

    let mut live = sse(json!({ "query": POSTED, "variables": { "d": d } }))
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
    await_subscribers(&server, 1).await;
    let slug = server.post(&ada, &d, None, "over sse").await;
    let events = sse_events(&mut live, 1).await;
    assert_eq!(events[0].0, "next");
    let result: Value = serde_json::from_str(&events[0].1).unwrap();
    assert_eq!(result["data"]["commentPosted"]["slug"], slug.as_str());
    assert_eq!(result["data"]["commentPosted"]["text"], "over sse");
    drop(live);
    await_subscribers(&server, 0).await;

    // A batch cannot be streamed.
    let batch = sse(json!([{ "query": "{ __typename }" }])).await.unwrap();
    assert_eq!(batch.status(), 400);
    let body: Value = batch.json().await.unwrap();
    assert_eq!(body["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");
    server.shutdown().await;
}

/// The change stream is resumed from its resume token after the database goes away and comes
/// back: a comment posted while this server's stream was down still reaches its subscriber.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_change_stream_resumes_after_a_database_outage() {
    let binary = EmbeddedDb::locate(None).expect("secantusd-rs is needed: run ./scripts/test.sh");
    let dir = tempfile::tempdir().unwrap();
    let db = EmbeddedDb::start(&binary, dir.path()).await.unwrap();
    let port = db.port();
    let mut config = layout_config("live_resume", Layout::PerComment);
    config.mongodb_uri = Some(db.uri());
    let writer = Running::start(config.clone()).await;
    // The subscriber's server gives up on the database quickly and waits long before reopening
    // its stream, so the post below lands while its stream is down.
    config.db_timeout_ms = 300;
    config.live_retry_ms = 4_000;
    let reader = Running::start(config).await;
    let ada = token("u1", "Ada");
    let d = writer.discussion(&ada, Layout::PerComment).await;
    let mut ws = Ws::connect(&reader, Protocol::TransportWs, json!({})).await;
    ws.start("p", POSTED, json!({ "d": d })).await;
    await_subscribers(&reader, 1).await;
    let before = writer.post(&ada, &d, None, "before").await;
    assert_eq!(
        ws.next().await.1["data"]["commentPosted"]["slug"],
        before.as_str()
    );

    db.stop().await;
    let db = EmbeddedDb::start_on(&binary, dir.path(), port)
        .await
        .unwrap();
    let during = writer
        .post(&ada, &d, None, "while the stream was down")
        .await;
    let (_, payload) = ws.next().await;
    assert_eq!(
        payload["data"]["commentPosted"]["slug"],
        during.as_str(),
        "{payload}"
    );
    // The stream was reopened once, from its token: nothing was reported missing.
    assert_eq!(
        metric(&reader, "threadql_change_streams_opened_total").await,
        2
    );
    drop(ws);
    reader.shutdown().await;
    writer.shutdown().await;
    db.stop().await;
}
