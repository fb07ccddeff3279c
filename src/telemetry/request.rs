//! Requests as operators see them. Every HTTP request gets an id (the client's `x-request-id`
//! when it is sane, else a new one), sent back in `x-request-id`, and runs inside one `request`
//! span carrying it, so every log line written while serving it names the request. When the
//! response is ready, the request is logged once at debug level and each error it answered
//! with once at warn level, and `/graphql` requests are counted in the request metrics. The
//! handler says how a request went in an [`Outcome`] it leaves in the response's extensions.

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_graphql::Name;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Request, StatusCode};
use axum::response::Response;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use tower::{Layer, Service};
use tracing::Instrument as _;

use super::metrics::{Budget, Capped, Counter, Exposition, Histogram};

/// The header a request id travels in, both ways.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Longest request id taken from a client, in bytes.
pub const MAX_REQUEST_ID: usize = 128;

/// Error codes counted apart: the server's own codes are a few dozen, and past this every new
/// one is counted as `other`.
const ERROR_CODES: usize = 64;

/// The label of a request without an operation name.
pub const ANONYMOUS: &str = "anonymous";

/// What a `/graphql` request ran, as the request metrics and log lines name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationType {
    /// One query.
    Query,
    /// One mutation.
    Mutation,
    /// One subscription (sent over plain HTTP, where it is refused).
    Subscription,
    /// Several operations in one request.
    Batch,
    /// A WebSocket upgrade; its operations are not requests of their own.
    WebSocket,
    /// A request answered as Server-Sent Events; counted when the stream starts.
    EventStream,
    /// Refused before its operation was known (or a document that does not parse).
    Unknown,
}

impl OperationType {
    /// Every type, in the order of the metrics page.
    pub const ALL: [OperationType; 7] = [
        OperationType::Query,
        OperationType::Mutation,
        OperationType::Subscription,
        OperationType::Batch,
        OperationType::WebSocket,
        OperationType::EventStream,
        OperationType::Unknown,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            OperationType::Query => "query",
            OperationType::Mutation => "mutation",
            OperationType::Subscription => "subscription",
            OperationType::Batch => "batch",
            OperationType::WebSocket => "websocket",
            OperationType::EventStream => "sse",
            OperationType::Unknown => "unknown",
        }
    }
}

/// How a request ended, as the `status` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Answered without an error.
    Ok,
    /// GraphQL ran (or refused the document) and the answer holds at least one error.
    Error,
    /// The HTTP layer refused it before GraphQL saw it (rate limit, size, content type, method…).
    Refused,
}

impl Status {
    /// Every status, in the order of the metrics page.
    pub const ALL: [Status; 3] = [Status::Ok, Status::Error, Status::Refused];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Refused => "refused",
        }
    }
}

/// One error of an answer: its `extensions.code` and its message (never an internal cause:
/// those are logged where they happen and answered as "internal error").
#[derive(Debug, Clone)]
pub struct ErrorSeen {
    /// `extensions.code`.
    pub code: String,
    /// The message the client got.
    pub message: String,
}

/// How a `/graphql` request went, left by its handler in the response's extensions.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// What it ran.
    pub operation_type: OperationType,
    /// The operation's name, when it has one.
    pub operation: Option<Name>,
    /// How it ended.
    pub status: Status,
    /// The errors it answered with.
    pub errors: Vec<ErrorSeen>,
}

impl Outcome {
    /// A request GraphQL answered: `ok` without errors, else `error`.
    pub fn answered(
        operation_type: OperationType,
        operation: Option<Name>,
        errors: Vec<ErrorSeen>,
    ) -> Self {
        let status = match errors.is_empty() {
            true => Status::Ok,
            false => Status::Error,
        };
        Self {
            operation_type,
            operation,
            status,
            errors,
        }
    }

    /// A request the HTTP layer refused with `code`.
    pub fn refused(operation_type: OperationType, code: &str, message: &str) -> Self {
        Self {
            operation_type,
            operation: None,
            status: Status::Refused,
            errors: vec![ErrorSeen {
                code: code.to_owned(),
                message: message.to_owned(),
            }],
        }
    }
}

/// Durations of one operation type, by operation name.
#[derive(Debug)]
struct ByName {
    anonymous: Histogram,
    named: Capped<Histogram>,
}

/// The request metrics of one server: requests by type and status, their durations by type and
/// operation name (the first `max_operations` names get a series each, later ones share
/// `other`), and errors by code.
#[derive(Debug)]
pub struct RequestMetrics {
    requests: [[Counter; Status::ALL.len()]; OperationType::ALL.len()],
    durations: [ByName; OperationType::ALL.len()],
    errors: Capped<Counter>,
}

impl RequestMetrics {
    /// Metrics with series for at most `max_operations` operation names.
    pub fn new(max_operations: usize) -> Self {
        let names = Budget::new(max_operations);
        Self {
            requests: Default::default(),
            durations: std::array::from_fn(|_| ByName {
                anonymous: Histogram::default(),
                named: Capped::new(names.clone()),
            }),
            errors: Capped::new(Budget::new(ERROR_CODES)),
        }
    }

    /// Counts a finished request.
    pub fn record(&self, outcome: &Outcome, elapsed: Duration) {
        let of_type = outcome.operation_type as usize;
        if let Some(counter) = self
            .requests
            .get(of_type)
            .and_then(|by_status| by_status.get(outcome.status as usize))
        {
            counter.inc();
        }
        if let Some(durations) = self.durations.get(of_type) {
            // An operation named `anonymous` is counted with the unnamed ones: a series of its
            // own would repeat their labels.
            match outcome.operation.as_deref() {
                Some(name) if name != ANONYMOUS => {
                    durations.named.with(name, |h| h.observe(elapsed));
                }
                _ => durations.anonymous.observe(elapsed),
            }
        }
        for error in &outcome.errors {
            self.count_error(&error.code);
        }
    }

    /// Counts one error answered with `code`.
    pub fn count_error(&self, code: &str) {
        self.errors.with(code, Counter::inc);
    }

    /// Adds the request metrics to the page.
    pub fn write(self: &Arc<Self>, out: &mut Exposition) {
        out.collect(self.clone());
    }
}

impl Collector for RequestMetrics {
    fn encode(&self, mut out: DescriptorEncoder<'_>) -> fmt::Result {
        let mut family = out.encode_descriptor(
            "threadql_requests",
            "Requests to /graphql by operation type (query, mutation, subscription, batch, websocket, sse, unknown) and status (ok, error: the answer holds an error, refused: the HTTP layer refused it).",
            None,
            MetricType::Counter,
        )?;
        for (of_type, by_status) in OperationType::ALL.iter().zip(&self.requests) {
            for (status, counter) in Status::ALL.iter().zip(by_status) {
                let labels = [
                    ("operation_type", of_type.as_str()),
                    ("status", status.as_str()),
                ];
                counter.encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = out.encode_descriptor(
            "threadql_request_duration_seconds",
            "Time from a /graphql request's arrival to its answer (to the start of the stream for WebSockets and SSE), by operation type and operation name (anonymous without one, other past the cap).",
            None,
            MetricType::Histogram,
        )?;
        for (of_type, durations) in OperationType::ALL.iter().zip(&self.durations) {
            let mut write = |name: &str, histogram: &Histogram| {
                if histogram.count() == 0 {
                    return Ok(());
                }
                let labels = [("operation_type", of_type.as_str()), ("operation", name)];
                histogram.encode(family.encode_family(&labels)?)
            };
            write(ANONYMOUS, &durations.anonymous)?;
            durations.named.each(&mut write)?;
        }
        let mut family = out.encode_descriptor(
            "threadql_errors",
            "Errors answered, by extensions.code: GraphQL errors (each one of an answer, and of every subscription event) and HTTP-level refusals.",
            None,
            MetricType::Counter,
        )?;
        self.errors.each(|code, counter| match counter.get() {
            0 => Ok(()),
            _ => counter.encode(family.encode_family(&[("code", code)])?),
        })
    }
}

/// The request id of a request: the client's `x-request-id` when it sent exactly one that is
/// printable ASCII of at most [`MAX_REQUEST_ID`] bytes, else a new one (32 random hex digits).
pub fn request_id(headers: &HeaderMap) -> HeaderValue {
    let mut sent = headers.get_all(REQUEST_ID).iter();
    if let (Some(id), None) = (sent.next(), sent.next()) {
        let bytes = id.as_bytes();
        let sane = !bytes.is_empty()
            && bytes.len() <= MAX_REQUEST_ID
            && bytes.iter().all(|b| (0x20..=0x7e).contains(b));
        if sane {
            return id.clone();
        }
    }
    new_request_id()
}

/// A new request id: 128 random bits as 32 lowercase hex digits.
fn new_request_id() -> HeaderValue {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bits: u128 = rand::random();
    let mut id = [0_u8; 32];
    for (n, digit) in id.iter_mut().enumerate() {
        let nibble = (bits >> (124 - 4 * n)) & 0xf;
        *digit = HEX[nibble as usize];
    }
    HeaderValue::from_bytes(&id).unwrap_or(HeaderValue::from_static("0"))
}

/// The layer that gives every request its id, span, log lines and metrics.
#[derive(Debug, Clone)]
pub struct RequestLayer {
    metrics: Arc<RequestMetrics>,
}

impl RequestLayer {
    /// Counts `/graphql` requests in `metrics`.
    pub fn new(metrics: Arc<RequestMetrics>) -> Self {
        Self { metrics }
    }
}

impl<S> Layer<S> for RequestLayer {
    type Service = RequestService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestService {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// A service wrapped by [`RequestLayer`].
#[derive(Debug, Clone)]
pub struct RequestService<S> {
    inner: S,
    metrics: Arc<RequestMetrics>,
}

impl<S> Service<Request<Body>> for RequestService<S>
where
    S: Service<Request<Body>, Response = Response, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let started = Instant::now();
        let id = request_id(request.headers());
        // The one place the request span is made (with its trace fields: see `trace`).
        let span = super::trace::request_span(&request, id.to_str().unwrap_or_default());
        let served = self.inner.call(request).instrument(span.clone());
        let metrics = self.metrics.clone();
        Box::pin(async move {
            let mut response = served.await?;
            let elapsed = started.elapsed();
            let outcome = response.extensions_mut().remove::<Outcome>();
            if let Some(outcome) = &outcome {
                metrics.record(outcome, elapsed);
            }
            super::trace::record_status(&span, response.status());
            span.in_scope(|| log(response.status(), elapsed, outcome.as_ref()));
            response.headers_mut().insert(REQUEST_ID, id);
            Ok(response)
        })
    }
}

/// The request's line (debug) and one line per error it answered with (warn); its method and
/// path are the request span's.
fn log(status: StatusCode, elapsed: Duration, outcome: Option<&Outcome>) {
    // Whole microseconds, so the number reads as written (1.217, not 1.2170000000000001).
    let duration_ms = elapsed.as_micros() as f64 / 1e3;
    let status = status.as_u16();
    let Some(outcome) = outcome else {
        tracing::debug!(status, duration_ms, "request");
        return;
    };
    let operation_type = outcome.operation_type.as_str();
    let operation_name = outcome.operation.as_deref();
    let result = outcome.status.as_str();
    tracing::debug!(
        status,
        result,
        operation_type,
        operation_name,
        duration_ms,
        "request"
    );
    for error in &outcome.errors {
        tracing::warn!(
            code = error.code.as_str(),
            error = error.message.as_str(),
            status,
            result,
            operation_type,
            operation_name,
            duration_ms,
            "request error"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::metrics::OTHER;

    #[test]
    fn operations_named_like_the_shared_series_join_them() {
        let metrics = Arc::new(RequestMetrics::new(1));
        let query = |name: Option<&str>| {
            let outcome = Outcome::answered(OperationType::Query, name.map(Name::new), vec![]);
            metrics.record(&outcome, Duration::from_millis(1));
        };
        for name in [
            None,
            Some(ANONYMOUS),
            Some("Read"),
            Some("Later"),
            Some(OTHER),
        ] {
            query(name);
        }
        let mut page = Exposition::new();
        metrics.write(&mut page);
        let text = page.into_text();
        let count = |operation: &str| {
            let series = format!(
                "threadql_request_duration_seconds_count{{operation_type=\"query\",operation=\"{operation}\"}} "
            );
            text.lines()
                .filter_map(|l| l.strip_prefix(&series))
                .collect::<Vec<_>>()
        };
        assert_eq!(count(ANONYMOUS), ["2"], "{text}");
        assert_eq!(count("Read"), ["1"], "{text}");
        assert_eq!(count(OTHER), ["2"], "{text}");
    }

    #[test]
    fn sane_request_ids_are_kept_and_others_replaced() {
        let id_of = |values: &[&[u8]]| {
            let mut headers = HeaderMap::new();
            for value in values {
                if let Ok(value) = HeaderValue::from_bytes(value) {
                    headers.append(REQUEST_ID, value);
                }
            }
            request_id(&headers)
        };
        assert_eq!(id_of(&[b"abc-123"]), "abc-123");
        let longest = "x".repeat(MAX_REQUEST_ID);
        assert_eq!(id_of(&[longest.as_bytes()]), longest.as_str());
        let printable: String = (0x20_u8..=0x7e).map(char::from).collect();
        assert_eq!(id_of(&[printable.trim().as_bytes()]), printable.trim());
        let fresh =
            |id: HeaderValue| id.len() == 32 && id.as_bytes().iter().all(|b| b.is_ascii_hexdigit());
        let too_long = "x".repeat(MAX_REQUEST_ID + 1);
        let bad: [&[&[u8]]; 5] = [
            &[],
            &[too_long.as_bytes()],
            &[b"tab\there"],
            &[b"caf\xc3\xa9"],
            &[b"a", b"b"],
        ];
        for bad in bad {
            assert!(fresh(id_of(bad)), "{bad:?}");
        }
        assert_ne!(id_of(&[]), id_of(&[]));
    }
}
