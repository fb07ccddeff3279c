//! The anonymous rate limit cannot be sidestepped: a refused token is anonymous, every operation
//! counts (each one of a batch, of a WebSocket in either protocol, of Server-Sent Events), and the
//! client is the address the nearest proxy wrote, IPv6 counted per /64 and IPv4-mapped addresses
//! as IPv4. The windows are an hour long, so no allowance comes back while a test runs.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use threadql::config::Config;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::support::{one_shot_client, outcome, outcomes, server_config, token, Running};

/// The proxy header the servers here read the client's address from.
const FORWARDED: &str = "x-forwarded-for";

/// Longest wait for one WebSocket message.
const WAIT: Duration = Duration::from_secs(20);

const CREATE: &str = "mutation($t: String!) { createDiscussion(input: {title: $t}) { id title } }";
const READ: &str = "{ __typename }";

/// A server behind a proxy (`X-Forwarded-For`), allowing `anonymous` per client.
fn proxy_config(label: &str, anonymous: &str) -> Config {
    let mut config = server_config(label);
    config.rate_limit_anon = anonymous.parse().expect("rate");
    config.client_ip_header = Some(FORWARDED.to_owned());
    config
}

/// Posts `body` (one operation or a batch) with an `X-Forwarded-For` line per item of `from`
/// (none: the request comes from the proxy itself) and an optional `Authorization` value;
/// returns the status and the JSON body.
async fn send_from(
    server: &Running,
    from: &[&str],
    authorization: Option<&str>,
    body: &Value,
) -> (u16, Value) {
    let mut request = one_shot_client().post(server.url("/graphql")).json(body);
    for line in from {
        request = request.header(FORWARDED, *line);
    }
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = request.send().await.expect("send");
    let status = response.status().as_u16();
    (status, response.json().await.expect("a JSON body"))
}

/// One anonymous read from `from` (one `X-Forwarded-For` line); its status and body.
async fn read_from(server: &Running, from: &str) -> (u16, Value) {
    send_from(server, &[from], None, &json!({ "query": READ })).await
}

/// Checks a request refused by the anonymous limit: 429, `RATE_LIMITED`, a retry hint.
fn assert_limited(status: u16, body: &Value, what: &str) {
    assert_eq!(status, 429, "{what}: {body}");
    assert_eq!(outcome(body), "RATE_LIMITED", "{what}: {body}");
    assert!(
        body["errors"][0]["extensions"]["retryAfter"]
            .as_u64()
            .is_some_and(|s| s >= 1),
        "{what}: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_is_anonymous_for_the_limits() {
    let server = Running::start(proxy_config("anon_bogus_token", "3/3600s")).await;
    let from = ["198.51.100.1"];
    let bogus = Some("Bearer not-a-token");

    // A mutation with a refused token is still UNAUTHENTICATED; it counts (1).
    let (status, body) = send_from(
        &server,
        &from,
        bogus,
        &json!({ "query": CREATE, "variables": { "t": "x" } }),
    )
    .await;
    assert_eq!((status, outcome(&body).as_str()), (200, "UNAUTHENTICATED"));
    // A read with a refused token runs as anonymous (2).
    let (status, body) = send_from(&server, &from, bogus, &json!({ "query": READ })).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["__typename"], "Query", "{body}");
    // So does one over Server-Sent Events (3).
    let events = one_shot_client()
        .post(server.url("/graphql"))
        .header(FORWARDED, from[0])
        .header("authorization", "Bearer not-a-token")
        .header("accept", "text/event-stream")
        .json(&json!({ "query": READ }))
        .send()
        .await
        .expect("send");
    assert_eq!(events.status(), 200);
    let text = events.text().await.expect("the event stream");
    assert!(
        text.contains("event: next") && text.contains("Query"),
        "{text}"
    );

    // The allowance is spent, whatever the header says.
    for authorization in ["Bearer not-a-token", "Basic YWRhOnB3", "Bearer "] {
        let (status, body) = send_from(
            &server,
            &from,
            Some(authorization),
            &json!({ "query": READ }),
        )
        .await;
        assert_limited(status, &body, authorization);
    }
    let (status, body) = read_from(&server, from[0]).await;
    assert_limited(status, &body, "no header");
    let sse = one_shot_client()
        .post(server.url("/graphql"))
        .header(FORWARDED, from[0])
        .header("authorization", "Bearer not-a-token")
        .header("accept", "text/event-stream")
        .json(&json!({ "query": READ }))
        .send()
        .await
        .expect("send");
    assert_eq!(sse.status(), 429);

    // A valid token is not counted against the address.
    let ada = format!("Bearer {}", token("u1", "Ada"));
    let (status, body) = send_from(&server, &from, Some(&ada), &json!({ "query": READ })).await;
    assert_eq!((status, outcome(&body).as_str()), (200, "ok"), "{body}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_of_a_batch_counts() {
    let server = Running::start(proxy_config("anon_batch", "3/3600s")).await;
    let batch = |n: usize| Value::Array(vec![json!({ "query": READ }); n]);

    // A batch of three spends the allowance: the next request is refused.
    let (status, body) = send_from(&server, &["203.0.113.1"], None, &batch(3)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(outcomes(&body), ["ok", "ok", "ok"]);
    let (status, body) = read_from(&server, "203.0.113.1").await;
    assert_limited(status, &body, "after a batch of three");

    // In a batch of five, the fourth and fifth are refused.
    let (status, body) = send_from(&server, &["203.0.113.2"], None, &batch(5)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        outcomes(&body),
        ["ok", "ok", "ok", "RATE_LIMITED", "RATE_LIMITED"]
    );
    assert!(body[3]["errors"][0]["extensions"]["retryAfter"]
        .as_u64()
        .is_some_and(|s| s >= 1));

    // Across requests: one, then a batch of three.
    let (status, _) = read_from(&server, "203.0.113.3").await;
    assert_eq!(status, 200);
    let (status, body) = send_from(&server, &["203.0.113.3"], None, &batch(3)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(outcomes(&body), ["ok", "ok", "RATE_LIMITED"]);

    // A batch sent with a refused token counts the same.
    let (status, body) =
        send_from(&server, &["203.0.113.4"], Some("Bearer forged"), &batch(4)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(outcomes(&body), ["ok", "ok", "ok", "RATE_LIMITED"]);
    server.shutdown().await;
}

/// A GraphQL WebSocket client of either protocol, coming from one address.
struct Socket {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    legacy: bool,
}

/// Opens a socket from `from` and sends `connection_init` with `payload`; the HTTP status of a
/// refused upgrade otherwise.
async fn open(server: &Running, legacy: bool, from: &str, payload: Value) -> Result<Socket, u16> {
    let mut request = format!("ws://{}/graphql", server.addr)
        .into_client_request()
        .unwrap();
    let protocol = if legacy {
        "graphql-ws"
    } else {
        "graphql-transport-ws"
    };
    let headers = request.headers_mut();
    headers.insert("Sec-WebSocket-Protocol", HeaderValue::from_static(protocol));
    headers.insert(FORWARDED, HeaderValue::from_str(from).unwrap());
    let ws = match tokio_tungstenite::connect_async(request).await {
        Ok((ws, _)) => ws,
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            return Err(response.status().as_u16())
        }
        Err(other) => panic!("cannot open a socket: {other}"),
    };
    let mut socket = Socket { ws, legacy };
    socket
        .send(json!({ "type": "connection_init", "payload": payload }))
        .await;
    let ack = socket.message().await;
    assert_eq!(ack["type"], "connection_ack", "{ack}");
    Ok(socket)
}

impl Socket {
    async fn send(&mut self, message: Value) {
        self.ws
            .send(Message::text(message.to_string()))
            .await
            .unwrap();
    }

    /// The next message that is not a keep-alive, as JSON.
    async fn message(&mut self) -> Value {
        loop {
            let message = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("a message within the wait")
                .expect("the socket is open")
                .unwrap();
            match message {
                Message::Text(text) => {
                    let value: Value = serde_json::from_str(&text).unwrap();
                    if value["type"] != "ka" {
                        return value;
                    }
                }
                Message::Ping(_) | Message::Pong(_) => {}
                other => panic!("expected a text message, got {other:?}"),
            }
        }
    }

    /// Runs a query as operation `id`: its result, after which the operation completes.
    async fn run(&mut self, id: &str, query: &str) -> Value {
        let kind = if self.legacy { "start" } else { "subscribe" };
        self.send(json!({ "id": id, "type": kind, "payload": { "query": query } }))
            .await;
        let result = self.message().await;
        let next = if self.legacy { "data" } else { "next" };
        assert_eq!(
            (&result["type"], &result["id"]),
            (&json!(next), &json!(id)),
            "{result}"
        );
        let complete = self.message().await;
        assert_eq!(complete["type"], "complete", "{complete}");
        result["payload"].clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_on_a_websocket_counts() {
    let server = Running::start(proxy_config("anon_websocket", "3/3600s")).await;
    for (legacy, from) in [(false, "192.0.2.1"), (true, "192.0.2.2")] {
        // Opening the socket is a request (1); then two operations run (2, 3).
        let mut socket = open(&server, legacy, from, json!({}))
            .await
            .expect("the upgrade");
        for id in ["1", "2"] {
            let result = socket.run(id, READ).await;
            assert_eq!(outcome(&result), "ok", "legacy {legacy}: {result}");
        }
        // The third operation on the same socket is refused, and so is a new socket.
        let refused = socket.run("3", READ).await;
        assert_eq!(
            outcome(&refused),
            "RATE_LIMITED",
            "legacy {legacy}: {refused}"
        );
        assert!(refused["errors"][0]["extensions"]["retryAfter"]
            .as_u64()
            .is_some_and(|s| s >= 1));
        let (status, body) = read_from(&server, from).await;
        assert_limited(status, &body, "HTTP after the socket");
        assert_eq!(
            open(&server, legacy, from, json!({})).await.err(),
            Some(429),
            "legacy {legacy}"
        );
    }
    // On a signed-in socket, reads are not counted against the address (its upgrade is).
    let ada = format!("Bearer {}", token("u1", "Ada"));
    let mut socket = open(&server, false, "192.0.2.3", json!({ "Authorization": ada }))
        .await
        .expect("the upgrade");
    for n in 0..6 {
        let result = socket.run(&format!("s{n}"), READ).await;
        assert_eq!(outcome(&result), "ok", "{result}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_forwarded_address_is_the_client() {
    let server = Running::start(proxy_config("anon_forwarded", "1/3600s")).await;
    // The client wrote the first line, the proxy appended the second: the proxy's counts.
    let (status, body) = send_from(
        &server,
        &["6.6.6.6", "10.0.0.1"],
        None,
        &json!({ "query": READ }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = send_from(
        &server,
        &["7.7.7.7, 8.8.8.8", "10.0.0.1"],
        None,
        &json!({ "query": READ }),
    )
    .await;
    assert_limited(status, &body, "another first line, the same last address");
    let (status, body) = read_from(&server, "10.0.0.1").await;
    assert_limited(status, &body, "the same address on one line");
    // A client whose first line the proxy did not follow with its own is counted apart.
    let (status, body) = send_from(
        &server,
        &["10.0.0.1", "10.0.0.2"],
        None,
        &json!({ "query": READ }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_that_is_no_address_is_a_client_of_its_own() {
    let server = Running::start(proxy_config("anon_unparsed", "1/3600s")).await;
    // `address:port`, as some proxies write it, is that address.
    let (status, body) = read_from(&server, "1.2.3.4:5678").await;
    assert_eq!(status, 200, "{body}");
    for same in ["1.2.3.4:5679", "1.2.3.4", "::ffff:1.2.3.4"] {
        let (status, body) = read_from(&server, same).await;
        assert_limited(status, &body, same);
    }
    // A value that is no address is a key of its own, not the proxy's.
    let (status, body) = read_from(&server, "unknown").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = read_from(&server, "unknown").await;
    assert_limited(status, &body, "the same value again");
    let (status, body) = read_from(&server, "_hidden").await;
    assert_eq!(status, 200, "another value: {body}");
    let long = "x".repeat(10_000);
    let (status, body) = read_from(&server, &long).await;
    assert_eq!(status, 200, "a long value: {body}");
    // The proxy itself (no header) still has its own allowance.
    let (status, body) = send_from(&server, &[], None, &json!({ "query": READ })).await;
    assert_eq!(status, 200, "the proxy: {body}");
    let (status, body) = send_from(&server, &[], None, &json!({ "query": READ })).await;
    assert_limited(status, &body, "the proxy again");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv6_is_counted_per_64_and_mapped_ipv4_as_ipv4() {
    let server = Running::start(proxy_config("anon_ipv6", "1/3600s")).await;
    let (status, body) = read_from(&server, "2001:db8:1:2::1").await;
    assert_eq!(status, 200, "{body}");
    for same in ["2001:db8:1:2:ffff:ffff:ffff:ffff", "[2001:db8:1:2::7]:443"] {
        let (status, body) = read_from(&server, same).await;
        assert_limited(status, &body, same);
    }
    let (status, body) = read_from(&server, "2001:db8:1:3::1").await;
    assert_eq!(status, 200, "the next /64: {body}");

    let (status, body) = read_from(&server, "::ffff:203.0.113.7").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = read_from(&server, "203.0.113.7").await;
    assert_limited(status, &body, "the IPv4 address of a mapped one");
    let (status, body) = read_from(&server, "203.0.113.8").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = read_from(&server, "::ffff:203.0.113.8").await;
    assert_limited(status, &body, "the mapped form of an IPv4 address");
    server.shutdown().await;
}
