//! The accept loop: a cap on open connections, header and idle timeouts per connection, the
//! ambiguous-framing check, and graceful shutdown.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::ConnectInfo;
use axum::http::header::CONNECTION;
use axum::http::{HeaderValue, Request, Response};
use axum::response::IntoResponse;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tower::ServiceExt as _;

use super::response::Refusal;

/// How long a connection may take over each phase.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionTimeouts {
    /// From a connection's start, or the first byte of a request, to the end of its headers.
    pub header: Duration,
    /// Between the end of one response and the first byte of the next request.
    pub idle: Duration,
}

/// The open client connections, counted against their cap (one permit each, held until the
/// socket closes, WebSockets included).
#[derive(Debug, Clone)]
pub struct Connections {
    permits: Arc<Semaphore>,
    max: usize,
}

impl Connections {
    /// A cap of `max` connections (at least one).
    pub fn new(max: usize) -> Self {
        let most = Semaphore::MAX_PERMITS.min(u32::MAX as usize);
        let max = max.clamp(1, most);
        Self {
            permits: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.max.saturating_sub(self.permits.available_permits())
    }

    /// The cap.
    pub fn max(&self) -> usize {
        self.max
    }
}

/// The default connection cap: the process's open-file limit (its soft limit, first raised to
/// the hard limit when allowed; no limit counts as the largest) less `reserve` descriptors for the database pool and the
/// process's own files. `None` when the limit cannot be read.
pub fn default_max_connections(reserve: u64) -> Option<usize> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    let soft = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    Some(cap_for_file_limit(soft, reserve))
}

/// Connections that fit under a file limit with `reserve` descriptors kept, at most a million.
fn cap_for_file_limit(limit: u64, reserve: u64) -> usize {
    const MOST: u64 = 1_000_000;
    usize::try_from(limit.saturating_sub(reserve).clamp(1, MOST)).unwrap_or(1)
}

/// Resolves once `stop` says so (or its sender is gone).
async fn stopped<T>(stop: &mut watch::Receiver<Option<T>>) {
    let _ = stop.wait_for(Option::is_some).await;
}

/// Serves `router` on `listener` until `stop` holds a deadline, then lets the requests in flight
/// finish and the connections close (WebSockets included: they close themselves as the API
/// shuts down). Those still open at the deadline are dropped; gives how many were.
/// A connection is accepted only when one of `connections`' permits is free: past the cap,
/// clients wait in the listen queue and accept never fails for lack of descriptors.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    connections: Connections,
    timeouts: ConnectionTimeouts,
    mut stop: watch::Receiver<Option<Instant>>,
) -> usize {
    let (close_tx, close_rx) = watch::channel(());
    let (drop_now, dropping) = watch::channel(None::<()>);
    loop {
        let permit = tokio::select! {
            permit = connections.permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = stopped(&mut stop) => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    accept_failed(&err).await;
                    continue;
                }
            },
            () = stopped(&mut stop) => break,
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(
            stream,
            peer,
            permit,
            router.clone(),
            timeouts,
            Ending {
                stop: stop.clone(),
                dropping: dropping.clone(),
                _close: close_rx.clone(),
            },
        ));
    }
    drop(listener);
    drop(close_rx);
    let deadline = (*stop.borrow()).unwrap_or_else(Instant::now);
    let closed = async {
        // Every connection's task has ended; an upgraded socket holds its permit until it
        // closes.
        close_tx.closed().await;
        let all = u32::try_from(connections.max).unwrap_or(u32::MAX);
        drop(connections.permits.acquire_many(all).await);
    };
    if tokio::time::timeout_at(deadline, closed).await.is_ok() {
        return 0;
    }
    let dropped = connections.open();
    drop_now.send_replace(Some(()));
    dropped
}

/// An accept that failed: a connection that went away before it was taken is skipped; a lack of
/// resources (descriptors, memory) is logged and retried after a pause, never in a busy loop.
async fn accept_failed(err: &io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset, Interrupted};
    if matches!(
        err.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset | Interrupted
    ) {
        return;
    }
    tracing::error!(%err, "accept failed: is THREADQL_MAX_CONNECTIONS above what the open-file limit allows?");
    tokio::time::sleep(Duration::from_millis(250)).await;
}

/// What tells a connection's task to end.
struct Ending {
    /// The server stops: no more requests on the connection once those in flight are answered.
    stop: watch::Receiver<Option<Instant>>,
    /// The grace period is over: the connection is dropped.
    dropping: watch::Receiver<Option<()>>,
    /// Held while the task runs (the accept loop waits for every one to be gone).
    _close: watch::Receiver<()>,
}

/// Serves one connection until it closes, its client is too slow or idle, or shutdown ends it.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
    router: Router,
    timeouts: ConnectionTimeouts,
    mut ending: Ending,
) {
    let state = Arc::new(ConnState::new());
    let io = TokioIo::new(Tracked {
        stream,
        state: state.clone(),
        _permit: permit,
    });
    let requests = state.clone();
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let (router, state) = (router.clone(), requests.clone());
        async move { Ok::<_, Infallible>(handle(router, &state, peer, request).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.header_read_timeout(None).keep_alive(true);
    let conn = builder.serve_connection(io, service).with_upgrades();
    tokio::pin!(conn);
    let mut stopping = false;
    loop {
        let deadline = state.deadline(timeouts);
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(err) = served {
                    tracing::debug!(%peer, %err, "connection ended with an error");
                }
                break;
            }
            () = until(deadline) => {
                if state.deadline(timeouts).is_some_and(|d| d <= Instant::now()) {
                    tracing::debug!(%peer, phase = state.phase_name(), "closing a connection that is too slow or idle");
                    break;
                }
            }
            () = state.changed.notified() => {}
            () = stopped(&mut ending.stop), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            () = stopped(&mut ending.dropping) => {
                tracing::debug!(%peer, phase = state.phase_name(), "dropping a connection still open when the shutdown grace period ran out");
                break;
            }
        }
    }
    // The socket lives on only if it was upgraded (a WebSocket): nothing to scan any more.
    state.update(|inner| inner.phase = Phase::Upgraded);
}

/// Sleeps until `deadline`, or forever without one.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// One request: refused when its head carried both `Transfer-Encoding` and `Content-Length`,
/// else routed; the connection counts as busy until its response has been sent.
async fn handle(
    router: Router,
    state: &Arc<ConnState>,
    peer: SocketAddr,
    request: Request<Incoming>,
) -> Response<Body> {
    let (ambiguous, busy) = state.begin();
    let response = if ambiguous {
        let mut response = Refusal::bad(
            "a request may not carry both Transfer-Encoding and Content-Length: its length would be ambiguous",
        )
        .into_response();
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
        response
    } else {
        let mut request = request.map(Body::new);
        request.extensions_mut().insert(ConnectInfo(peer));
        match router.oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    };
    response.map(|body| Body::new(Guarded { body, _busy: busy }))
}

/// Where a connection is in its request cycle.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Reading a request's head, since then.
    Head(Instant),
    /// Requests being answered.
    Busy(usize),
    /// Waiting for the next request, since then.
    Idle(Instant),
    /// Handed over to a WebSocket (or closed).
    Upgraded,
}

/// What a connection's socket, its requests and its watchdog share.
struct ConnState {
    inner: Mutex<Inner>,
    changed: Notify,
}

struct Inner {
    phase: Phase,
    scan: HeadScan,
}

impl ConnState {
    fn new() -> Self {
        Self {
            inner: Mutex::new(Inner {
                phase: Phase::Head(Instant::now()),
                scan: HeadScan::default(),
            }),
            changed: Notify::new(),
        }
    }

    fn update<T>(&self, change: impl FnOnce(&mut Inner) -> T) -> T {
        let result = change(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner));
        self.changed.notify_one();
        result
    }

    fn phase(&self) -> Phase {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .phase
    }

    fn phase_name(&self) -> &'static str {
        match self.phase() {
            Phase::Head(_) => "reading the request head",
            Phase::Busy(_) => "busy",
            Phase::Idle(_) => "idle",
            Phase::Upgraded => "upgraded",
        }
    }

    /// When the connection is to be closed if it is still in the phase it is in.
    fn deadline(&self, timeouts: ConnectionTimeouts) -> Option<Instant> {
        match self.phase() {
            Phase::Head(since) => Some(since + timeouts.header),
            Phase::Idle(since) => Some(since + timeouts.idle),
            Phase::Busy(_) | Phase::Upgraded => None,
        }
    }

    /// Bytes arrived from the client.
    fn received(&self, bytes: &[u8]) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match inner.phase {
            Phase::Idle(_) => {
                inner.phase = Phase::Head(Instant::now());
                inner.scan = HeadScan::default();
                inner.scan.feed(bytes);
                drop(inner);
                self.changed.notify_one();
            }
            Phase::Head(_) => inner.scan.feed(bytes),
            Phase::Busy(_) | Phase::Upgraded => {}
        }
    }

    /// A request's head has been read: whether its framing was ambiguous, and the guard that
    /// keeps the connection busy until its response is sent.
    fn begin(self: &Arc<Self>) -> (bool, Busy) {
        let ambiguous = self.update(|inner| {
            inner.phase = match inner.phase {
                Phase::Busy(n) => Phase::Busy(n + 1),
                _ => Phase::Busy(1),
            };
            std::mem::take(&mut inner.scan).ambiguous()
        });
        (ambiguous, Busy(self.clone()))
    }
}

/// Marks a request answered when dropped (its response body sent, or abandoned).
struct Busy(Arc<ConnState>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.update(|inner| {
            inner.phase = match inner.phase {
                Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
                Phase::Busy(_) => Phase::Idle(Instant::now()),
                other => other,
            };
        });
    }
}

/// A response body that holds its request's [`Busy`] guard.
struct Guarded {
    body: Body,
    _busy: Busy,
}

impl HttpBody for Guarded {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The header names of a request head, as far as framing goes: hyper keeps only one of
/// `Transfer-Encoding` and `Content-Length`, so the raw head is read here to refuse both.
#[derive(Debug, Default)]
struct HeadScan {
    /// The start of the current line, lower-cased.
    line: [u8; 20],
    /// Bytes of the current line (carriage returns aside).
    line_len: usize,
    /// Complete lines so far (the request line first).
    lines: usize,
    done: bool,
    content_length: bool,
    transfer_encoding: bool,
}

impl HeadScan {
    fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if self.done {
                return;
            }
            match byte {
                b'\n' => self.end_line(),
                b'\r' => {}
                _ => {
                    if let Some(slot) = self.line.get_mut(self.line_len) {
                        *slot = byte.to_ascii_lowercase();
                    }
                    self.line_len += 1;
                }
            }
        }
    }

    fn end_line(&mut self) {
        if self.line_len == 0 {
            // The empty line that ends the head (empty lines before the request line are allowed).
            self.done = self.lines > 0;
            return;
        }
        if self.lines > 0 {
            let name = &self.line[..self.line_len.min(self.line.len())];
            self.content_length |= name.starts_with(b"content-length:");
            self.transfer_encoding |= name.starts_with(b"transfer-encoding:");
        }
        self.lines += 1;
        self.line_len = 0;
    }

    fn ambiguous(&self) -> bool {
        self.content_length && self.transfer_encoding
    }
}

/// A client socket that reports what it reads to its connection's state, and holds the
/// connection's permit until it is dropped (after a WebSocket ends, for an upgraded one).
struct Tracked {
    stream: TcpStream,
    state: Arc<ConnState>,
    _permit: OwnedSemaphorePermit,
}

impl AsyncRead for Tracked {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.state.received(&buf.filled()[before..]);
        }
        read
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(head: &[u8]) -> HeadScan {
        let mut scan = HeadScan::default();
        // Byte by byte and all at once give the same answer.
        for byte in head {
            scan.feed(std::slice::from_ref(byte));
        }
        let mut whole = HeadScan::default();
        whole.feed(head);
        assert_eq!(scan.ambiguous(), whole.ambiguous());
        assert_eq!(scan.done, whole.done);
        scan
    }

    #[test]
    fn heads_with_both_lengths_are_ambiguous() {
        let both = scan(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nbody");
        assert!(both.done && both.ambiguous());
        let reversed =
            scan(b"\r\nPOST / HTTP/1.1\r\ntransfer-encoding: chunked\r\ncontent-length: 5\r\n\r\n");
        assert!(reversed.ambiguous());
        let one =
            scan(b"POST / HTTP/1.1\r\ncontent-length: 5\r\n\r\ntransfer-encoding: chunked\r\n");
        assert!(one.done && !one.ambiguous(), "the body is not the head");
        let request_line =
            scan(b"POST /content-length:1 HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n");
        assert!(!request_line.ambiguous());
        let values = scan(b"GET / HTTP/1.1\r\nx-note: content-length: 1\r\nx-other: transfer-encoding: chunked\r\n\r\n");
        assert!(!values.ambiguous());
        let half = scan(b"GET / HTTP/1.1\r\nHost: x\r\n");
        assert!(!half.done);
    }

    #[test]
    fn the_default_cap_leaves_a_reserve() {
        assert_eq!(cap_for_file_limit(1024, 96), 928);
        assert_eq!(cap_for_file_limit(50, 96), 1);
        assert_eq!(cap_for_file_limit(u64::MAX, 96), 1_000_000);
        assert_eq!(cap_for_file_limit(1_000_050, 96), 999_954);
        let connections = Connections::new(3);
        assert_eq!((connections.open(), connections.max()), (0, 3));
    }
}
