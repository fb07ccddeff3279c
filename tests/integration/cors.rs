//! Cross-origin use over real sockets: preflights answered for the allowed origins only (and
//! for every origin with `*`, never with credentials), the CSRF rule unchanged, WebSocket
//! upgrades and Server-Sent Events refused from other origins than the allowed ones and the
//! server's own, and a start-up stopped by an origin that is not one.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use reqwest::header::{HeaderMap, ORIGIN};
use reqwest::Method;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;

use crate::live::sse_events;
use crate::support::{server_config, token, Running};

/// The page allowed to call the servers here.
const ALLOWED: &str = "https://blog.example";
/// A page that is not.
const OTHER: &str = "https://evil.example";

/// Longest wait for one WebSocket message.
const WAIT: Duration = Duration::from_secs(20);

/// A server allowing `origins` (`THREADQL_CORS_ORIGINS`; `None`: unset).
async fn start(label: &str, origins: Option<&str>) -> Running {
    let mut config = server_config(label);
    config.cors_origins = origins.map(|o| o.parse().expect("origins"));
    Running::start(config).await
}

/// A header's value as text ("" when absent).
fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .map_or("", |v| v.to_str().expect("text header"))
}

/// Sends a browser's preflight for a POST with `request_headers` from `origin`.
async fn preflight(server: &Running, origin: &str, request_headers: &str) -> reqwest::Response {
    reqwest::Client::new()
        .request(Method::OPTIONS, server.url("/graphql"))
        .header(ORIGIN, origin)
        .header("Access-Control-Request-Method", "POST")
        .header("Access-Control-Request-Headers", request_headers)
        .send()
        .await
        .expect("preflight")
}

/// The header list of a preflight answer, lowercase.
fn header_list(headers: &HeaderMap, name: &str) -> Vec<String> {
    header(headers, name)
        .split(',')
        .map(|h| h.trim().to_ascii_lowercase())
        .filter(|h| !h.is_empty())
        .collect()
}

/// What the Apollo clients and the embed send.
const REQUESTED: &str =
    "content-type,authorization,apollo-require-preflight,x-apollo-operation-name";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflights_are_answered_for_the_allowed_origins_only() {
    let server = start(
        "cors_list",
        Some("https://blog.example, http://localhost:3000"),
    )
    .await;

    for origin in [ALLOWED, "http://localhost:3000"] {
        let answer = preflight(&server, origin, REQUESTED).await;
        assert_eq!(answer.status(), 200, "{origin}");
        let headers = answer.headers();
        assert_eq!(header(headers, "access-control-allow-origin"), origin);
        assert!(header_list(headers, "access-control-allow-methods").contains(&"post".to_owned()));
        let allowed = header_list(headers, "access-control-allow-headers");
        for wanted in REQUESTED.split(',') {
            assert!(
                allowed.contains(&wanted.to_owned()),
                "{wanted}: {allowed:?}"
            );
        }
        assert_eq!(header(headers, "access-control-allow-credentials"), "");
        assert!(header_list(headers, "vary").contains(&"origin".to_owned()));
        assert_eq!(header(headers, "access-control-max-age"), "600");
    }
    // Other origins, a sandboxed page (`null`), the allowed host on another scheme or port, and
    // a differently written origin get no allowance.
    for origin in [
        OTHER,
        "null",
        "http://blog.example",
        "https://blog.example:8443",
        "https://blog.example.evil.example",
        "https://BLOG.example",
    ] {
        let answer = preflight(&server, origin, REQUESTED).await;
        let headers = answer.headers();
        assert_eq!(
            header(headers, "access-control-allow-origin"),
            "",
            "{origin}"
        );
        assert_eq!(header(headers, "access-control-allow-credentials"), "");
    }

    // The request itself: the allowed page may read the answer (and `Retry-After`); another
    // page's answer carries no allowance, so its browser keeps it from the page.
    let client = reqwest::Client::new();
    let query = json!({ "query": "{ discussions { totalCount } }" });
    for (origin, allowance) in [(ALLOWED, ALLOWED), (OTHER, "")] {
        let answer = client
            .post(server.url("/graphql"))
            .header(ORIGIN, origin)
            .header("Cookie", "session=1")
            .bearer_auth(token("u1", "Ada"))
            .json(&query)
            .send()
            .await
            .unwrap();
        let headers = answer.headers().clone();
        assert_eq!(header(&headers, "access-control-allow-origin"), allowance);
        assert_eq!(header(&headers, "access-control-allow-credentials"), "");
        if !allowance.is_empty() {
            assert!(header_list(&headers, "access-control-expose-headers")
                .contains(&"retry-after".to_owned()));
        }
        let body: Value = answer.json().await.unwrap();
        assert_eq!(body["data"]["discussions"]["totalCount"], 0, "{body}");
    }

    // The CSRF rule stays: a form-like POST from the allowed page is still refused.
    let answer = client
        .post(server.url("/graphql"))
        .header(ORIGIN, ALLOWED)
        .header("Content-Type", "text/plain")
        .body(r#"{"query":"mutation { createDiscussion(input: {title: \"csrf\"}) { id } }"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");
    assert!(body["errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("cross-site request forgery"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_star_allows_every_origin_without_credentials() {
    let server = start("cors_any", Some("*")).await;
    for origin in [OTHER, ALLOWED, "null"] {
        let answer = preflight(&server, origin, REQUESTED).await;
        assert_eq!(answer.status(), 200);
        let headers = answer.headers();
        assert_eq!(
            header(headers, "access-control-allow-origin"),
            "*",
            "{origin}"
        );
        assert_eq!(header(headers, "access-control-allow-credentials"), "");
    }
    // A page that asks for credentials gets none: `*` and cookies never go together.
    let answer = reqwest::Client::new()
        .request(Method::OPTIONS, server.url("/graphql"))
        .header(ORIGIN, OTHER)
        .header("Access-Control-Request-Method", "POST")
        .header("Cookie", "session=1")
        .send()
        .await
        .unwrap();
    assert_eq!(
        header(answer.headers(), "access-control-allow-credentials"),
        ""
    );
    let mut socket = open_socket(&server, Some(OTHER)).await.expect("any origin");
    socket.close(None).await.unwrap();
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_origins_only_the_servers_own_pages_get_a_socket() {
    let server = start("cors_none", None).await;
    // No CORS at all: a preflight is a method the route does not have.
    let answer = preflight(&server, OTHER, REQUESTED).await;
    assert_eq!(answer.status(), 405);
    assert_eq!(header(answer.headers(), "access-control-allow-origin"), "");

    let own = format!("http://{}", server.addr);
    for origin in [None, Some(own.as_str())] {
        let mut socket = open_socket(&server, origin).await.expect("own origin");
        socket.close(None).await.unwrap();
    }
    let refused = open_socket(&server, Some(OTHER))
        .await
        .expect_err("refused");
    assert_eq!(refused.0, 403);
    assert_eq!(refused.1["errors"][0]["extensions"]["code"], "FORBIDDEN");
    let other_port = format!("http://127.0.0.1:{}", server.addr.port().wrapping_add(1));
    assert_eq!(
        open_socket(&server, Some(&other_port))
            .await
            .expect_err("another port")
            .0,
        403
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_and_event_streams_from_other_origins_are_refused() {
    // Without the read cache, nothing follows the change feed until a subscription: every
    // database command counted below is a request's.
    let mut config = server_config("cors_live");
    config.cors_origins = Some(ALLOWED.parse().expect("origins"));
    config.cache_bytes = 0;
    let server = Running::start(config).await;
    let before = server.store.commands().total();
    // Refused before anything runs: no database command.
    for origin in [OTHER, "null", "http://blog.example", "not an origin"] {
        let (status, body) = open_socket(&server, Some(origin)).await.expect_err(origin);
        assert_eq!(status, 403, "{origin}");
        assert_eq!(
            body["errors"][0]["extensions"]["code"], "FORBIDDEN",
            "{body}"
        );
        assert!(
            body["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains("THREADQL_CORS_ORIGINS"),
            "{body}"
        );
    }
    let client = reqwest::Client::new();
    let subscription = json!({ "query": "subscription { commentPosted(discussionId: \"00112233445566778899aabb\") { slug } }" });
    let sse_post = |origin: &'static str| {
        client
            .post(server.url("/graphql"))
            .header(ORIGIN, origin)
            .header("Accept", "text/event-stream")
            .json(&subscription)
            .send()
    };
    let sse_get = |origin: &'static str| {
        client
            .get(server.url("/graphql"))
            .query(&[("query", "{ discussions { totalCount } }")])
            .header(ORIGIN, origin)
            .header("Accept", "text/event-stream")
            .send()
    };
    for refused in [
        sse_post(OTHER).await.unwrap(),
        sse_get(OTHER).await.unwrap(),
    ] {
        assert_eq!(refused.status(), 403);
        let body: Value = refused.json().await.unwrap();
        assert_eq!(
            body["errors"][0]["extensions"]["code"], "FORBIDDEN",
            "{body}"
        );
    }
    assert_eq!(
        server.store.commands().total(),
        before,
        "refused before any command"
    );

    // The allowed page gets its socket and its streams.
    let mut socket = open_socket(&server, Some(ALLOWED)).await.expect("allowed");
    socket
        .send(Message::text(
            json!({ "id": "1", "type": "subscribe", "payload": { "query": "{ discussions { totalCount } }" } })
                .to_string(),
        ))
        .await
        .unwrap();
    let next = next_message(&mut socket).await;
    assert_eq!(
        next["payload"]["data"]["discussions"]["totalCount"], 0,
        "{next}"
    );
    socket.close(None).await.unwrap();
    let mut stream = sse_get(ALLOWED).await.unwrap();
    assert_eq!(stream.status(), 200);
    assert_eq!(stream.headers()["access-control-allow-origin"], ALLOWED);
    let events = sse_events(&mut stream, 2).await;
    assert_eq!(
        (events[0].0.as_str(), events[1].0.as_str()),
        ("next", "complete")
    );
    server.shutdown().await;
}

/// A `graphql-transport-ws` socket from a page of `origin` (none: not a browser), initialised;
/// the refusal's status and JSON body otherwise.
async fn open_socket(
    server: &Running,
    origin: Option<&str>,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    (u16, Value),
> {
    let mut request = format!("ws://{}/graphql", server.addr)
        .into_client_request()
        .unwrap();
    let headers = request.headers_mut();
    headers.insert(
        "Sec-WebSocket-Protocol",
        HeaderValue::from_static("graphql-transport-ws"),
    );
    if let Some(origin) = origin {
        headers.insert("Origin", HeaderValue::from_str(origin).unwrap());
    }
    let mut ws = match tokio_tungstenite::connect_async(request).await {
        Ok((ws, _)) => ws,
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let body = response
                .body()
                .as_deref()
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or(Value::Null);
            return Err((response.status().as_u16(), body));
        }
        Err(other) => panic!("cannot open a socket: {other}"),
    };
    ws.send(Message::text(
        json!({ "type": "connection_init" }).to_string(),
    ))
    .await
    .unwrap();
    let mut ws = ws;
    let ack = next_message(&mut ws).await;
    assert_eq!(ack["type"], "connection_ack", "{ack}");
    Ok(ws)
}

/// The next message of a socket that is not a keep-alive, as JSON.
async fn next_message(
    ws: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
) -> Value {
    loop {
        let message = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("a message within the wait")
            .expect("the socket is open")
            .unwrap();
        if let Message::Text(text) = message {
            let value: Value = serde_json::from_str(&text).unwrap();
            if value["type"] != "ping" && value["type"] != "ka" {
                return value;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_that_is_not_one_stops_the_start() {
    for value in [
        "https://blog.example/",
        "https://ok.example,blog.example",
        "*,https://ok.example",
        "null",
    ] {
        let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_threadql"))
            .arg("print-schema")
            .env("THREADQL_CORS_ORIGINS", value)
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .expect("threadql exits")
            .expect("threadql runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{value:?} was accepted");
        assert!(output.stdout.is_empty(), "{value:?}: it went on");
        assert!(
            stderr.contains("THREADQL_CORS_ORIGINS"),
            "{value:?}: {stderr}"
        );
    }
}
