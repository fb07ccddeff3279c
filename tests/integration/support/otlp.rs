//! An OpenTelemetry collector for the tests: it takes OTLP exports over HTTP (`POST
//! /v1/traces`, protobuf bodies) or over gRPC (`TraceService/Export` on HTTP/2), decodes them
//! with the protocol's own message types, and keeps every span it was sent.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header::CONTENT_TYPE, HeaderMap, HeaderValue, Request, Response, StatusCode};
use axum::routing::post;
use axum::Router;
use http_body_util::{BodyExt as _, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message as _;
use tokio::net::TcpListener;

/// One span as the collector received it.
#[derive(Debug, Clone)]
pub(crate) struct ReceivedSpan {
    /// Lowercase hex, 32 characters.
    pub trace_id: String,
    /// Lowercase hex, 16 characters.
    pub span_id: String,
    /// Lowercase hex; empty for a span without a parent.
    pub parent_id: String,
    /// Its name.
    pub name: String,
    /// Its kind (`SpanKind` of the protocol: 2 is a server span).
    pub kind: i32,
    /// The instrumentation scope that made it (`threadql`, `mongodb`).
    pub scope: String,
    /// Its attributes, each written as text.
    pub attributes: BTreeMap<String, String>,
    /// The `service.name` of the resource it came with.
    pub service: String,
    /// Whether its status is an error.
    pub error: bool,
}

impl ReceivedSpan {
    /// An attribute's value, as text.
    pub(crate) fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

#[derive(Default)]
struct Received {
    spans: Vec<ReceivedSpan>,
    exports: usize,
}

/// A collector listening on a loopback port until dropped.
pub(crate) struct Collector {
    /// Where it listens.
    pub addr: SocketAddr,
    received: Arc<Mutex<Received>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Collector {
    /// A collector taking OTLP over HTTP (`http/protobuf`).
    pub(crate) async fn http() -> Collector {
        let received = Arc::new(Mutex::new(Received::default()));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let keep = received.clone();
        let router = Router::new().route(
            "/v1/traces",
            post(move |headers: HeaderMap, body: Bytes| {
                let keep = keep.clone();
                async move { http_export(&keep, &headers, &body) }
            }),
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Collector {
            addr,
            received,
            task,
        }
    }

    /// A collector taking OTLP over gRPC (`grpc`, HTTP/2 without TLS).
    pub(crate) async fn grpc() -> Collector {
        let received = Arc::new(Mutex::new(Received::default()));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let keep = received.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let keep = keep.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let keep = keep.clone();
                        async move { Ok::<_, Infallible>(grpc_export(&keep, request).await) }
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Collector {
            addr,
            received,
            task,
        }
    }

    /// Its base URL (what OTEL_EXPORTER_OTLP_ENDPOINT is set to).
    pub(crate) fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub(crate) fn spans(&self) -> Vec<ReceivedSpan> {
        self.received.lock().expect("lock").spans.clone()
    }

    /// How many exports it has taken.
    pub(crate) fn exports(&self) -> usize {
        self.received.lock().expect("lock").exports
    }

    /// Waits until the spans received satisfy `done` (at most a minute, a generous bound for a
    /// batch that is sent every fraction of a second), and returns them.
    pub(crate) async fn wait_for(
        &self,
        what: &str,
        done: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Vec<ReceivedSpan> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the collector never received {what}; it has:\n{}",
                dump(&spans)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The spans, one line each, for failure messages.
pub(crate) fn dump(spans: &[ReceivedSpan]) -> String {
    spans
        .iter()
        .map(|s| {
            format!(
                "{} {} parent={} [{}] {} {:?}",
                s.trace_id, s.span_id, s.parent_id, s.scope, s.name, s.attributes
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn http_export(received: &Mutex<Received>, headers: &HeaderMap, body: &[u8]) -> Response<Body> {
    let protobuf =
        headers.get(CONTENT_TYPE) == Some(&HeaderValue::from_static("application/x-protobuf"));
    if !protobuf {
        return plain(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "expected application/x-protobuf",
        );
    }
    match ExportTraceServiceRequest::decode(body) {
        Ok(request) => {
            keep(received, request);
            let mut response = Response::new(Body::from(
                ExportTraceServiceResponse::default().encode_to_vec(),
            ));
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("application/x-protobuf"),
            );
            response
        }
        Err(err) => plain(StatusCode::BAD_REQUEST, &format!("not an export: {err}")),
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(Body::from(text.to_owned()));
    *response.status_mut() = status;
    response
}

type GrpcBody =
    StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

/// A gRPC call: one length-prefixed message in, one out, the status in the trailers.
async fn grpc_export(
    received: &Mutex<Received>,
    request: Request<hyper::body::Incoming>,
) -> Response<GrpcBody> {
    let path_ok =
        request.uri().path() == "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    // A message is a flag byte (0: not compressed), its length (4 bytes, big-endian), itself.
    let message = match body.as_ref() {
        [0, a, b, c, d, rest @ ..]
            if rest.len() == u32::from_be_bytes([*a, *b, *c, *d]) as usize =>
        {
            Some(rest)
        }
        _ => None,
    };
    let decoded = message.and_then(|m| ExportTraceServiceRequest::decode(m).ok());
    let (status, reply) = match (path_ok, decoded) {
        (true, Some(request)) => {
            keep(received, request);
            let reply = ExportTraceServiceResponse::default().encode_to_vec();
            let mut framed = vec![0];
            framed.extend_from_slice(&u32::try_from(reply.len()).expect("len").to_be_bytes());
            framed.extend_from_slice(&reply);
            ("0", Some(framed))
        }
        (false, _) => ("12", None),  // UNIMPLEMENTED
        (true, None) => ("3", None), // INVALID_ARGUMENT
    };
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static(status));
    let mut frames = Vec::new();
    if let Some(reply) = reply {
        frames.push(Ok(Frame::data(Bytes::from(reply))));
    }
    frames.push(Ok(Frame::trailers(trailers)));
    let mut response = Response::new(StreamBody::new(futures::stream::iter(frames)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    response
}

/// Keeps the spans of an export.
fn keep(received: &Mutex<Received>, request: ExportTraceServiceRequest) {
    let mut received = received.lock().expect("lock");
    received.exports += 1;
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .as_ref()
            .and_then(|r| attributes(&r.attributes).remove("service.name"))
            .unwrap_or_default();
        for scope_spans in resource_spans.scope_spans {
            let scope = scope_spans.scope.map(|s| s.name).unwrap_or_default();
            for span in scope_spans.spans {
                received.spans.push(ReceivedSpan {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_id: hex(&span.parent_span_id),
                    name: span.name,
                    kind: span.kind,
                    scope: scope.clone(),
                    attributes: attributes(&span.attributes),
                    service: service.clone(),
                    // STATUS_CODE_ERROR is 2.
                    error: span.status.is_some_and(|s| s.code == 2),
                });
            }
        }
    }
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, String> {
    list.iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(AnyValue::StringValue(s)) => s.clone(),
                Some(AnyValue::BoolValue(b)) => b.to_string(),
                Some(AnyValue::IntValue(i)) => i.to_string(),
                Some(AnyValue::DoubleValue(d)) => d.to_string(),
                Some(other) => format!("{other:?}"),
                None => String::new(),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
