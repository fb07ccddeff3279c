//! The HTTP surface: /graphql (GET, POST), GraphiQL at /, /healthz, /readyz and /metrics.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

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
}

impl From<&Config> for HttpLimits {
    fn from(config: &Config) -> Self {
        Self {
            max_body_bytes: config.max_body_bytes,
            max_batch: config.max_batch,
            anonymous_rate: config.rate_limit_anon,
            client_ip_header: config.client_ip_header.clone(),
        }
    }
}

#[derive(Clone)]
struct HttpState {
    api: Api,
    limits: Arc<HttpLimits>,
    anonymous: Arc<Limiter<IpAddr>>,
}

/// The router over an API. Serve it with `into_make_service_with_connect_info::<SocketAddr>()`
/// so anonymous requests are counted per client address.
pub fn router(api: Api, limits: HttpLimits) -> Router {
    let state = HttpState {
        api,
        anonymous: Arc::new(Limiter::new(limits.anonymous_rate)),
        limits: Arc::new(limits),
    };
    Router::new()
        .merge(crate::graphiql::routes())
        .route("/graphql", get(graphql).post(graphql))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
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
    let client = client_of(state, &parts);
    if authorization.is_none() {
        check_anonymous(state, client)?;
    }
    let batch = if parts.method == Method::GET {
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
        let connection = state.api.connection(auth, client);
        return Ok(live::event_stream(&state.api, request, &connection));
    }
    let response = match batch {
        BatchRequest::Single(request) => {
            BatchResponse::Single(state.api.execute(request, auth).await)
        }
        BatchRequest::Batch(requests) => {
            let mut responses = Vec::with_capacity(requests.len());
            for request in requests {
                responses.push(state.api.execute(request, auth).await);
            }
            BatchResponse::Batch(responses)
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

/// The address of a request's client: the configured proxy header's, else the peer's.
fn client_of(state: &HttpState, parts: &axum::http::request::Parts) -> Option<IpAddr> {
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    client_ip(
        &parts.headers,
        state.limits.client_ip_header.as_deref(),
        peer,
    )
}

/// Counts a request without a token against its client address's allowance.
fn check_anonymous(state: &HttpState, client: Option<IpAddr>) -> Result<(), Refusal> {
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
    let client = client_of(&state, &parts);
    if authorization.is_none() {
        check_anonymous(&state, client)?;
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
    Ok(upgrade
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        .max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| {
            live::serve_websocket(state.api, socket, protocol, legacy, authorization, client)
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
    let live = state.api.live_counts();
    let _ = write!(
        body,
        "# HELP threadql_live_subscribers Live subscriptions following a discussion now.\n# TYPE threadql_live_subscribers gauge\nthreadql_live_subscribers {}\n\
         # HELP threadql_live_runs Runs serving the live subscriptions (identical subscriptions share one, resolved once per event).\n# TYPE threadql_live_runs gauge\nthreadql_live_runs {}\n\
         # HELP threadql_change_streams_opened_total Times this process opened its change stream (once, then after each failure).\n# TYPE threadql_change_streams_opened_total counter\nthreadql_change_streams_opened_total {}\n",
        live.subscribers, live.runs, live.streams_opened
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
