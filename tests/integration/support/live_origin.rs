//! Opening live connections with hand-written headers: a WebSocket upgrade or an event stream
//! sent over a raw socket with the `Host` and `Origin` a test chooses (a client library writes
//! `Host` from the URL), answered by its status.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest wait for a status line.
const STATUS_WAIT: Duration = Duration::from_secs(20);

/// A live connection to ask `/graphql` for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LiveKind {
    /// A `graphql-transport-ws` WebSocket upgrade.
    WebSocket,
    /// A Server-Sent Events subscription (POST, `Accept: text/event-stream`).
    EventStream,
}

/// The status the server at `addr` answers a live connection of `kind` sent with these `Host`
/// and `Origin` headers (101 for an upgrade, 200 for a stream, 403 for a refusal).
pub(crate) async fn live_status(addr: SocketAddr, kind: LiveKind, host: &str, origin: &str) -> u16 {
    let request = match kind {
        LiveKind::WebSocket => format!(
            "GET /graphql HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n"
        ),
        LiveKind::EventStream => {
            let body = r#"{"query":"subscription { commentPosted(discussionId: \"00112233445566778899aabb\") { slug } }"}"#;
            format!(
                "POST /graphql HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\n\
                 Accept: text/event-stream\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
        }
    };
    let mut socket = TcpStream::connect(addr).await.expect("connect");
    socket.write_all(request.as_bytes()).await.expect("send");
    let mut head = Vec::new();
    let mut byte = [0_u8; 1];
    tokio::time::timeout(STATUS_WAIT, async {
        while !head.ends_with(b"\r\n") {
            let read = socket.read(&mut byte).await.expect("read");
            assert!(read == 1, "the connection closed before a status line");
            head.push(byte[0]);
        }
    })
    .await
    .expect("a status line in time");
    let line = String::from_utf8_lossy(&head).into_owned();
    line.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {line:?}"))
}
