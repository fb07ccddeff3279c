//! Connections under attack, over raw sockets: slow and idle clients are timed out, the
//! connection cap holds without failing accept, and the HTTP edges (HEAD, Transfer-Encoding with
//! Content-Length, the metrics listener) refuse what they must.

use std::net::SocketAddr;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use threadql::config::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;

use crate::support::{graphql_data, server_config, token, Running};

/// Longest a test waits for the server to close a connection before it says it never did: far
/// above the 1 s timeouts these tests set, so it only fires when nothing closes the connection.
const NEVER: Duration = Duration::from_secs(20);

/// A server whose settings `change` adjusts, the other timeouts left long so that only the one
/// under test can close a connection.
async fn start_with(label: &str, change: impl FnOnce(&mut Config)) -> Running {
    let mut config = server_config(label);
    config.header_timeout_secs = 3600;
    config.body_timeout_secs = 3600;
    config.idle_timeout_secs = 3600;
    change(&mut config);
    Running::start(config).await
}

/// Reads until the server closes the connection; returns what it sent. Fails the test if the
/// connection is still open after [`NEVER`].
async fn until_closed(socket: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(NEVER, socket.read(&mut buf)).await {
            Err(_) => panic!(
                "the server never closed the connection; it sent: {}",
                String::from_utf8_lossy(&received)
            ),
            Ok(Ok(0) | Err(_)) => return String::from_utf8_lossy(&received).into_owned(),
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
        }
    }
}

/// Opens a connection and writes `bytes` on it.
async fn send_raw(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket.write_all(bytes).await.unwrap();
    socket.flush().await.unwrap();
    socket
}

/// A loopback address nothing listens on (yet).
async fn free_addr() -> SocketAddr {
    let probe = TcpListener::bind("127.0.0.1:0").await.unwrap();
    probe.local_addr().unwrap()
}

/// A gauge or counter read from `/metrics` at `addr`.
async fn metric_at(addr: SocketAddr, name: &str) -> u64 {
    crate::support::metric_from(&format!("http://{addr}/metrics"), name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_headers_are_closed_after_the_header_timeout() {
    let server = start_with("header_timeout", |c| c.header_timeout_secs = 1).await;
    // Half a request head, then nothing.
    let mut half = send_raw(
        server.addr,
        b"POST /graphql HTTP/1.1\r\nhost: localhost\r\ncontent-type: appl",
    )
    .await;
    let sent = until_closed(&mut half).await;
    assert!(!sent.contains("200 OK"), "{sent}");
    // A connection that never sends a byte is bounded the same way.
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    until_closed(&mut silent).await;
    // The server still answers.
    let data = graphql_data(
        &reqwest::Client::new(),
        &server,
        None,
        "{ discussions(first: 1) { nodes { id } } }",
        json!({}),
    )
    .await;
    assert!(data["discussions"]["nodes"].is_array());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let server = start_with("idle_timeout", |c| c.idle_timeout_secs = 1).await;
    // One whole request on a keep-alive connection, answered; then silence.
    let mut socket = send_raw(
        server.addr,
        b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n",
    )
    .await;
    let sent = until_closed(&mut socket).await;
    assert!(sent.starts_with("HTTP/1.1 200"), "{sent}");
    assert!(sent.ends_with("ok"), "{sent}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_body_gets_408_and_is_closed_after_the_body_timeout() {
    let server = start_with("body_timeout", |c| c.body_timeout_secs = 1).await;
    // The head declares 200 bytes; 20 arrive.
    let mut socket = send_raw(
        server.addr,
        b"POST /graphql HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 200\r\n\r\n{\"query\": \"{ discus",
    )
    .await;
    let sent = until_closed(&mut socket).await;
    assert!(sent.starts_with("HTTP/1.1 408"), "{sent}");
    assert!(sent.contains("\"REQUEST_TIMEOUT\""), "{sent}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_wait_and_the_server_keeps_answering() {
    const CAP: u64 = 4;
    let metrics = free_addr().await;
    let server = start_with("max_connections", |c| {
        c.max_connections = Some(CAP as u32);
        c.metrics_listen = Some(metrics);
    })
    .await;
    // Twice the cap and more, each holding a half-sent request.
    let mut held = Vec::new();
    for _ in 0..CAP * 2 + 3 {
        held.push(send_raw(server.addr, b"GET /healthz HTTP/1.1\r\nhost: x\r\n").await);
    }
    let mut open = 0;
    for _ in 0..200 {
        open = metric_at(metrics, "threadql_connections_open").await;
        if open >= CAP {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(open, CAP, "the server holds exactly its cap of connections");
    assert_eq!(metric_at(metrics, "threadql_connections_max").await, CAP);
    // A normal query waits in the listen queue: it does not fail.
    let url = server.url("/graphql");
    let query = tokio::spawn(async move {
        reqwest::Client::new()
            .post(url)
            .json(&json!({ "query": "{ discussions(first: 1) { nodes { id } } }" }))
            .send()
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !query.is_finished(),
        "a connection past the cap is not served"
    );
    assert_eq!(
        metric_at(metrics, "threadql_connections_open").await,
        CAP,
        "still at the cap"
    );
    // The flood goes away: the waiting query is served, and so is the next one.
    drop(held);
    let answer = query.await.unwrap().expect("the waiting query is answered");
    assert_eq!(answer.status().as_u16(), 200);
    let body: Value = answer.json().await.unwrap();
    assert!(body["data"]["discussions"]["nodes"].is_array(), "{body}");
    let data = graphql_data(
        &reqwest::Client::new(),
        &server,
        None,
        "{ discussions(first: 1) { nodes { id } } }",
        json!({}),
    )
    .await;
    assert!(data["discussions"]["nodes"].is_array());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_never_runs_a_mutation_and_sends_no_body() {
    let server = start_with("head_mutation", |_| {}).await;
    let token = token("u1", "Ada");
    let body =
        json!({ "query": "mutation { createDiscussion(input: {title: \"by HEAD\"}) { id } }" })
            .to_string();
    let request = format!(
        "HEAD /graphql HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\nauthorization: Bearer {token}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut socket = send_raw(server.addr, request.as_bytes()).await;
    let sent = until_closed(&mut socket).await;
    assert!(sent.starts_with("HTTP/1.1 4"), "{sent}");
    let (_, after_head) = sent.split_once("\r\n\r\n").unwrap();
    assert_eq!(after_head, "", "HEAD answers carry no body");
    // Nor through the query string.
    let url = format!(
        "{}?query={}",
        server.url("/graphql"),
        "mutation%20%7B%20createDiscussion(input%3A%20%7Btitle%3A%20%22x%22%7D)%20%7B%20id%20%7D%20%7D"
    );
    let answer = reqwest::Client::new()
        .head(url)
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 405);
    let data = graphql_data(
        &reqwest::Client::new(),
        &server,
        None,
        "{ discussions(first: 10) { nodes { id title } } }",
        json!({}),
    )
    .await;
    assert_eq!(
        data["discussions"]["nodes"],
        json!([]),
        "nothing was created"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfer_encoding_with_content_length_gets_400() {
    let server = start_with("te_cl", |_| {}).await;
    let body = r#"{"query":"{ discussions(first: 1) { nodes { id } } }"}"#;
    let chunked = format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len());
    for headers in [
        format!(
            "transfer-encoding: chunked\r\ncontent-length: {}\r\n",
            body.len()
        ),
        format!(
            "content-length: {}\r\ntransfer-encoding: chunked\r\n",
            chunked.len()
        ),
        "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n".to_owned(),
    ] {
        let request = format!(
            "POST /graphql HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n{headers}\r\n{chunked}"
        );
        let mut socket = send_raw(server.addr, request.as_bytes()).await;
        let sent = until_closed(&mut socket).await;
        assert!(sent.starts_with("HTTP/1.1 400"), "{headers}: {sent}");
        assert!(sent.contains("\"BAD_USER_INPUT\""), "{sent}");
    }
    // Either framing alone is served.
    for (headers, payload) in [
        ("transfer-encoding: chunked\r\n".to_owned(), chunked.clone()),
        (
            format!("content-length: {}\r\n", body.len()),
            body.to_owned(),
        ),
    ] {
        let request = format!(
            "POST /graphql HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\nconnection: close\r\n{headers}\r\n{payload}"
        );
        let mut socket = send_raw(server.addr, request.as_bytes()).await;
        let sent = until_closed(&mut socket).await;
        assert!(sent.starts_with("HTTP/1.1 200"), "{headers}: {sent}");
        assert!(sent.contains("\"discussions\""), "{sent}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_move_to_their_own_listener() {
    let metrics = free_addr().await;
    let server = start_with("metrics_listen", |c| c.metrics_listen = Some(metrics)).await;
    let public = reqwest::get(server.url("/metrics")).await.unwrap();
    assert_eq!(public.status().as_u16(), 404);
    let private = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .unwrap();
    assert_eq!(private.status().as_u16(), 200);
    let text = private.text().await.unwrap();
    assert!(text.contains("threadql_db_commands_total"), "{text}");
    // Without the setting, /metrics stays where it was.
    let server_b = start_with("metrics_public", |_| {}).await;
    let public = reqwest::get(server_b.url("/metrics")).await.unwrap();
    assert_eq!(public.status().as_u16(), 200);
    server_b.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_websocket_is_closed_and_one_that_answers_pings_stays() {
    let server = start_with("ws_idle", |c| c.idle_timeout_secs = 1).await;
    let open = || async {
        let mut request = format!("ws://{}/graphql", server.addr)
            .into_client_request()
            .unwrap();
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
        assert!(ack.to_text().unwrap().contains("connection_ack"), "{ack}");
        socket
    };
    // A client that keeps reading answers the server's pings (the client library pongs).
    let mut alive = open().await;
    let mut pings = 0;
    let listen = async {
        while let Some(message) = alive.next().await {
            match message.unwrap() {
                Message::Ping(_) => pings += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        panic!("a socket that answers pings was closed");
    };
    let _ = tokio::time::timeout(Duration::from_secs(4), listen).await;
    assert!(
        pings >= 2,
        "the server pings an idle socket ({pings} pings)"
    );
    // A client that answers nothing is closed.
    let mut silent = open().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let closed = tokio::time::timeout(NEVER, async {
        loop {
            match silent.next().await {
                Some(Ok(Message::Ping(_))) => {}
                Some(Ok(Message::Close(_)) | Err(_)) | None => return,
                Some(Ok(other)) => panic!("unexpected {other:?}"),
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "a silent socket stays open");
    server.shutdown().await;
}
