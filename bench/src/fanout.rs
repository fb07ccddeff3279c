//! Live fan-out: the database cost of one post with N identical subscribers
//! (graphql-transport-ws, 100 subscriptions per socket), counted from the server's `/metrics`.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use futures::{SinkExt, StreamExt};
use serde::Serialize;
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::client::GraphqlClient;
use crate::server::Server;

/// Subscriptions opened on one socket (the server's default per-connection limit).
const PER_SOCKET: usize = 100;
/// Longest wait for the subscriptions to be in place, or for every one to hear the post.
const WAIT: Duration = Duration::from_secs(120);

/// Each subscriber reads the new comment's parent: a database read per resolution.
const SUBSCRIPTION: &str = "subscription($d: ID!) { commentPosted(discussionId: $d) { slug text author { name } parent { slug text } } }";

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// One measurement: a post heard by `subscribers` identical subscriptions.
#[derive(Debug, Serialize)]
pub(crate) struct FanoutResult {
    /// Identical subscriptions following the discussion.
    pub subscribers: usize,
    /// Runs the server serves them with (`threadql_live_runs`; `None` from a server that does
    /// not report it).
    pub runs: Option<u64>,
    /// Database commands from the post to the last subscriber hearing it (without the
    /// driver's own `getMore`s of the change stream).
    pub commands_per_post: u64,
    /// From sending the post to the last subscriber hearing it, in milliseconds.
    pub delivered_ms: f64,
}

/// Measures one post with each number of identical subscribers, on a fresh discussion each.
pub(crate) async fn measure(
    server: &Server,
    client: &GraphqlClient,
    token: &str,
    counts: &[usize],
) -> anyhow::Result<Vec<FanoutResult>> {
    let mut results = Vec::new();
    for &count in counts {
        results.push(once(server, client, token, count).await?);
    }
    Ok(results)
}

async fn once(
    server: &Server,
    client: &GraphqlClient,
    token: &str,
    count: usize,
) -> anyhow::Result<FanoutResult> {
    let created = client
        .send(
            "mutation { createDiscussion(input: {title: \"fan-out\", layout: PER_COMMENT}) { id } }",
            &json!({}),
            Some(token),
        )
        .await?
        .data()?;
    let d = created["createDiscussion"]["id"]
        .as_str()
        .context("no discussion id")?
        .to_owned();
    let post = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }";
    let top = client
        .send(post, &json!({ "d": d, "p": null, "t": "top" }), Some(token))
        .await?
        .data()?["postComment"]["slug"]
        .as_str()
        .context("no slug")?
        .to_owned();

    let mut sockets = Vec::new();
    for first in (0..count).step_by(PER_SOCKET) {
        let mut socket = connect(server).await?;
        let here = PER_SOCKET.min(count - first);
        for i in 0..here {
            let start = json!({ "id": format!("s{}", first + i), "type": "subscribe",
                "payload": { "query": SUBSCRIPTION, "variables": { "d": d } } });
            socket.send(Message::text(start.to_string())).await?;
        }
        sockets.push((socket, here));
    }
    let started = Instant::now();
    while server.metric("threadql_live_subscribers").await? < count as u64 {
        if started.elapsed() > WAIT {
            bail!("{count} subscriptions were not in place after {WAIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let runs = server.metric("threadql_live_runs").await.ok();

    let before = server.db_commands_by_name().await?;
    let sent = Instant::now();
    client
        .send(
            post,
            &json!({ "d": d, "p": top, "t": "a reply" }),
            Some(token),
        )
        .await?
        .check()?;
    for (socket, subscriptions) in &mut sockets {
        for _ in 0..*subscriptions {
            let message = next_result(socket).await?;
            if message["payload"]["data"]["commentPosted"]["parent"]["slug"] != top.as_str() {
                bail!("unexpected result: {message}");
            }
        }
    }
    let delivered_ms = sent.elapsed().as_secs_f64() * 1000.0;
    let after = server.db_commands_by_name().await?;
    let commands_per_post = after
        .iter()
        .filter(|(name, _)| name.as_str() != "other")
        .map(|(name, n)| n - before.get(name).copied().unwrap_or(0))
        .sum();
    for (mut socket, _) in sockets {
        let _ = socket.close(None).await;
    }
    Ok(FanoutResult {
        subscribers: count,
        runs,
        commands_per_post,
        delivered_ms,
    })
}

async fn connect(server: &Server) -> anyhow::Result<Socket> {
    let url = format!("{}/graphql", server.base.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request()?;
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        HeaderValue::from_static("graphql-transport-ws"),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await?;
    let init = json!({ "type": "connection_init", "payload": {} });
    socket.send(Message::text(init.to_string())).await?;
    let ack = next_message(&mut socket).await?;
    if ack["type"] != "connection_ack" {
        bail!("the server did not accept the connection: {ack}");
    }
    Ok(socket)
}

/// The next `next` message of a socket.
async fn next_result(socket: &mut Socket) -> anyhow::Result<Value> {
    let message = next_message(socket).await?;
    if message["type"] != "next" || message["payload"].get("errors").is_some() {
        bail!("expected a result, got {message}");
    }
    Ok(message)
}

/// The next text message of a socket, as JSON.
async fn next_message(socket: &mut Socket) -> anyhow::Result<Value> {
    loop {
        let message = tokio::time::timeout(WAIT, socket.next())
            .await
            .context("no message from the server in time")?
            .context("the server closed the socket")??;
        if let Message::Text(text) = message {
            return Ok(serde_json::from_str(text.as_str())?);
        }
    }
}

/// The results as a Markdown table.
pub(crate) fn markdown(results: &[FanoutResult]) -> String {
    let mut out = String::from(
        "| identical subscribers | runs | database commands per post | delivered to all (ms) |\n|---:|---:|---:|---:|\n",
    );
    for r in results {
        out.push_str(&format!(
            "| {} | {} | {} | {:.1} |\n",
            r.subscribers,
            r.runs.map_or_else(|| "-".to_owned(), |n| n.to_string()),
            r.commands_per_post,
            r.delivered_ms
        ));
    }
    out
}
