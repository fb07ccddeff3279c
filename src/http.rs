//! The HTTP surface: /graphql (GET, POST), GraphiQL at /, /healthz, /readyz and /metrics.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use async_graphql::http::{WebSocketProtocols, ALL_WEBSOCKET_PROTOCOLS};
use async_graphql::{BatchRequest, BatchResponse};
use async_graphql_axum::GraphQLProtocol;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, SEC_WEBSOCKET_PROTOCOL};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tower_http::trace::TraceLayer;

mod live;
mod request;
mod response;
mod serve;

pub(crate) use serve::serve;
pub use serve::{default_max_connections, ConnectionTimeouts, Connections};

use request::{is_mutation, read_get, read_post};
use response::{respond, Format, Refusal};

use crate::config::{Config, RateLimit};
use crate::graphql::Api;
use crate::rate::{retry_after_secs, Limiter};

/// What the HTTP layer enforces before a request reaches GraphQL.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Largest body, in bytes.
    pub max_body_bytes: usize,
    /// Most operations in a batch (0: batches refused).
    pub max_batch: usize,
    /// Requests per client address without a token.
    pub anonymous_rate: RateLimit,
    /// Header holding the client's address behind a proxy.
    pub client_ip_header: Option<String>,
    /// Longest wait for a request's body once its head is in.
    pub body_timeout: Duration,
    /// Longest silence on a WebSocket (pings unanswered) before it is closed.
    pub idle_timeout: Duration,
    /// Whether `/metrics` is served here (false when it has a listener of its own).
    pub public_metrics: bool,
}

impl From<&Config> for HttpLimits {
    fn from(config: &Config) -> Self {
        Self {
            max_body_bytes: config.max_body_bytes,
            max_batch: config.max_batch,
            anonymous_rate: config.rate_limit_anon,
            client_ip_header: config.client_ip_header.clone(),
            body_timeout: Duration::from_secs(config.body_timeout_secs.max(1)),
            idle_timeout: Duration::from_secs(config.idle_timeout_secs.max(1)),
            public_metrics: config.metrics_listen.is_none(),
        }
    }
}

#[derive(Clone)]
struct HttpState {
    api: Api,
    limits: Arc<HttpLimits>,
    anonymous: Arc<Limiter<IpAddr>>,
    connections: Connections,
}

/// The router over an API, counting `connections` on `/metrics` (unless `/metrics` has a
/// listener of its own: see [`metrics_router`]). The accept loop gives each request its client
/// address, so anonymous requests are counted per address.
pub fn router(api: Api, limits: HttpLimits, connections: Connections) -> Router {
    let public_metrics = limits.public_metrics;
    let state = HttpState {
        api,
        anonymous: Arc::new(Limiter::new(limits.anonymous_rate)),
        limits: Arc::new(limits),
        connections,
    };
    let router = Router::new()
        .merge(crate::graphiql::routes())
        .route("/graphql", get(graphql).post(graphql))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz));
    let router = match public_metrics {
        true => router.route("/metrics", get(metrics)),
        false => router,
    };
    router.layer(TraceLayer::new_for_http()).with_state(state)
}

/// `/metrics` alone, for its own listener (`THREADQL_METRICS_LISTEN`).
pub fn metrics_router(api: Api, limits: HttpLimits, connections: Connections) -> Router {
    let state = HttpState {
        api,
        anonymous: Arc::new(Limiter::new(RateLimit::Off)),
        limits: Arc::new(limits),
        connections,
    };
    Router::new()
        .route("/metrics", get(metrics))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

async fn graphql(State(state): State<HttpState>, request: Request) -> Response {
    if is_websocket(request.headers()) {
        return websocket(state, request)
            .await
            .unwrap_or_else(Refusal::into_response);
    }
    let format = Format::negotiate(request.headers());
    let result = match format {
        Some(format) => handle(&state, request, format).await,
        None => Err(Refusal::new(
            StatusCode::NOT_ACCEPTABLE,
            "BAD_USER_INPUT",
            "the response can be application/graphql-response+json, application/json or text/event-stream: say which in `Accept`",
        )),
    };
    match result {
        Ok(response) => response,
        Err(refusal) => {
            let mut response = refusal.into_response();
            if let Some(format) = format {
                response
                    .headers_mut()
                    .insert(CONTENT_TYPE, format.content_type());
            }
            response
        }
    }
}

async fn handle(state: &HttpState, request: Request, format: Format) -> Result<Response, Refusal> {
    let (parts, body) = request.into_parts();
    let authorization = authorization(&parts.headers);
    if authorization.is_none() {
        check_anonymous(state, &parts)?;
    }
    // HEAD is GET without the answer's body: it reads the query string, never a body, and never
    // runs a mutation.
    let batch = if parts.method == Method::GET || parts.method == Method::HEAD {
        let request = read_get(&parts.uri)?;
        if is_mutation(&request) {
            return Err(Refusal::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "BAD_USER_INPUT",
                "mutations must be sent with POST",
            ));
        }
        BatchRequest::Single(request.data(crate::graphql::limits::ReadOnly))
    } else {
        read_post(&parts.headers, body, &state.limits).await?
    };
    let auth = authorization.as_deref();
    if format == Format::EventStream {
        let BatchRequest::Single(request) = batch else {
            return Err(Refusal::bad(
                "a text/event-stream request carries one operation, not a batch",
            ));
        };
        let connection = state.api.connection(auth);
        return Ok(live::event_stream(&state.api, request, &connection));
    }
    let response = match batch {
        BatchRequest::Single(request) => {
            BatchResponse::Single(state.api.execute(request, auth).await)
        }
        BatchRequest::Batch(requests) => {
            BatchResponse::Batch(state.api.execute_batch(requests, auth).await)
        }
    };
    Ok(respond(format, &response))
}

/// The `Authorization` header's value, when it is text.
fn authorization(headers: &HeaderMap) -> Option<String> {
    headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Counts a request without a token against its client address's allowance.
fn check_anonymous(state: &HttpState, parts: &axum::http::request::Parts) -> Result<(), Refusal> {
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let client = client_ip(
        &parts.headers,
        state.limits.client_ip_header.as_deref(),
        peer,
    );
    if let Some(client) = client {
        if let Err(wait) = state.anonymous.check(&client) {
            let secs = retry_after_secs(wait);
            return Err(Refusal {
                retry_after: Some(secs),
                ..Refusal::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "RATE_LIMITED",
                    format!(
                        "too many requests from this address: try again in {secs} s, or sign in"
                    ),
                )
            });
        }
    }
    Ok(())
}

/// The client's address: the last address of the configured proxy header, else the peer.
fn client_ip(headers: &HeaderMap, header: Option<&str>, peer: Option<IpAddr>) -> Option<IpAddr> {
    let forwarded = header
        .and_then(|name| headers.get(name))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.rsplit(',').next())
        .and_then(|v| v.trim().parse::<IpAddr>().ok());
    forwarded.or(peer)
}

/// Whether a request asks to become a WebSocket.
fn is_websocket(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// A GraphQL WebSocket (`graphql-transport-ws` or the legacy `graphql-ws`, by subprotocol);
/// anonymous upgrades count against the client address's allowance like any request.
async fn websocket(state: HttpState, request: Request) -> Result<Response, Refusal> {
    let (mut parts, _body) = request.into_parts();
    let authorization = authorization(&parts.headers);
    if authorization.is_none() {
        check_anonymous(&state, &parts)?;
    }
    let protocol = GraphQLProtocol::from_request_parts(&mut parts, &())
        .await
        .map_err(|_| {
            Refusal::bad(
                "a GraphQL WebSocket needs the subprotocol graphql-transport-ws or graphql-ws (Sec-WebSocket-Protocol)",
            )
        })?;
    // The protocol the engine picked (the first one it knows in the client's list), by the
    // engine's own parser.
    let legacy = parts
        .headers
        .get(SEC_WEBSOCKET_PROTOCOL)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.split(',')
                .find_map(|p| p.trim().parse::<WebSocketProtocols>().ok())
        })
        == Some(WebSocketProtocols::SubscriptionsTransportWS);
    let upgrade = WebSocketUpgrade::from_request_parts(&mut parts, &())
        .await
        .map_err(|rejection| Refusal::bad(format!("cannot open a WebSocket: {rejection}")))?;
    let max = state.limits.max_body_bytes;
    let idle = state.limits.idle_timeout;
    Ok(upgrade
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        .max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| {
            live::serve_websocket(state.api, socket, protocol, legacy, authorization, idle)
        }))
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<HttpState>) -> (StatusCode, &'static str) {
    match state.api.ping().await {
        Ok(()) => (StatusCode::OK, "ready"),
        Err(err) => {
            tracing::warn!(%err, "readiness check failed");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable")
        }
    }
}

async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    let mut body = String::from(
        "# HELP threadql_db_commands_total Database commands sent, by command name.\n# TYPE threadql_db_commands_total counter\n",
    );
    for (command, count) in state.api.command_counts() {
        let _ = writeln!(
            body,
            "threadql_db_commands_total{{command=\"{command}\"}} {count}"
        );
    }
    let (subscribers, streams) = state.api.live_counts();
    let _ = writeln!(
        body,
        "# HELP threadql_connections_open Client connections open now (WebSockets included).\n# TYPE threadql_connections_open gauge\nthreadql_connections_open {}\n\
         # HELP threadql_connections_max Most client connections open at once; past it, new ones wait to be accepted.\n# TYPE threadql_connections_max gauge\nthreadql_connections_max {}",
        state.connections.open(),
        state.connections.max()
    );
    let _ = write!(
        body,
        "# HELP threadql_live_subscribers Live subscriptions following a discussion now.\n# TYPE threadql_live_subscribers gauge\nthreadql_live_subscribers {subscribers}\n\
         # HELP threadql_change_streams_opened_total Times this process opened its change stream (once, then after each failure).\n# TYPE threadql_change_streams_opened_total counter\nthreadql_change_streams_opened_total {streams}\n"
    );
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}

#[cfg(test)]
mod tests {
    use super::request::is_json;
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn json_content_types_and_client_addresses() {
        assert!(is_json("application/json"));
        assert!(is_json("Application/JSON; charset=utf-8"));
        assert!(is_json("application/graphql-response+json"));
        for no in [
            "",
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data",
            "application/jsonp",
        ] {
            assert!(!is_json(no), "{no}");
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            HeaderValue::from_static("203.0.113.9, 10.0.0.7"),
        );
        let peer = Some(IpAddr::from([127, 0, 0, 1]));
        assert_eq!(
            client_ip(&headers, Some("x-forwarded-for"), peer),
            Some(IpAddr::from([10, 0, 0, 7]))
        );
        assert_eq!(client_ip(&headers, None, peer), peer);
        assert_eq!(
            client_ip(&HeaderMap::new(), Some("x-forwarded-for"), peer),
            peer
        );
    }
}
