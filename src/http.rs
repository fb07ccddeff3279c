//! The HTTP surface: /graphql (GET, POST), GraphiQL at /, the embed at /embed, the console at
//! /admin, Atom feeds at /feeds, /healthz, /readyz and /metrics. Every request goes through the request layer
//! (`telemetry::request`): its id, its span, its log lines and, for `/graphql`, the request
//! metrics, from the [`Outcome`] the handler leaves.

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

mod answers;
mod cors;
mod feeds;
mod live;
mod personal;
mod request;
mod response;
mod serve;
mod unsubscribe;

pub use answers::ResponseCache;
pub(crate) use serve::serve;
pub use serve::{default_max_connections, ConnectionTimeouts, Connections};

use request::{is_mutation, read_get, read_post};
use response::{respond, Format, Refusal};

use crate::auth::AuthState;
use crate::config::{Config, CorsOrigins, Origin};
use crate::domain::{ClientAddress, DomainError};
use crate::graphql::{observe, Api};
use crate::rate::ClientKey;
use crate::telemetry::metrics::{Exposition, Kind};
use crate::telemetry::request::{OperationType, Outcome, RequestLayer};

/// What the HTTP layer enforces before a request reaches GraphQL.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Largest body, in bytes.
    pub max_body_bytes: usize,
    /// Most operations in a batch (0: batches refused).
    pub max_batch: usize,
    /// Header holding the client's address behind a proxy.
    pub client_ip_header: Option<String>,
    /// Longest wait for a request's body once its head is in.
    pub body_timeout: Duration,
    /// Longest silence on a WebSocket (pings unanswered) before it is closed.
    pub idle_timeout: Duration,
    /// Whether `/metrics` is served here (false when it has a listener of its own).
    pub public_metrics: bool,
    /// Origins whose pages may call `/graphql` besides the server's own.
    pub cors_origins: Option<CorsOrigins>,
    /// The server's own origins (`THREADQL_PUBLIC_URL`, else the listener's): their pages
    /// may open WebSockets and event streams. Known once the listener is bound.
    pub own_origins: Vec<Origin>,
    /// The server's public address (`THREADQL_PUBLIC_URL`), which feeds' `self` links start
    /// with (without it, they are paths).
    pub public_url: Option<Origin>,
}

impl From<&Config> for HttpLimits {
    fn from(config: &Config) -> Self {
        Self {
            max_body_bytes: config.max_body_bytes,
            max_batch: config.max_batch,
            client_ip_header: config.client_ip_header.clone(),
            body_timeout: Duration::from_secs(config.body_timeout_secs.max(1)),
            idle_timeout: Duration::from_secs(config.idle_timeout_secs.max(1)),
            public_metrics: config.metrics_listen.is_none(),
            cors_origins: config.cors_origins.clone(),
            own_origins: config.public_url.iter().cloned().collect(),
            public_url: config.public_url.clone(),
        }
    }
}

#[derive(Clone)]
struct HttpState {
    api: Api,
    limits: Arc<HttpLimits>,
    connections: Connections,
    responses: Arc<ResponseCache>,
}

/// The router over an API, counting `connections` on `/metrics` (unless `/metrics` has a
/// listener of its own: see [`metrics_router`]). The accept loop gives each request its client
/// address, so the operations of callers that are not signed in are counted per client.
pub fn router(
    api: Api,
    limits: HttpLimits,
    connections: Connections,
    responses: Arc<ResponseCache>,
) -> Router {
    let public_metrics = limits.public_metrics;
    let graphql_route = get(graphql).post(graphql);
    let challenge_route = get(guest_challenge);
    let export_route = get(personal::export);
    let embed = crate::embed::routes();
    let feeds = Router::new()
        .route("/feeds/recent.atom", get(feeds::recent))
        .route("/feeds/discussion/", get(feeds::discussion))
        .route("/feeds/discussion/{*key}", get(feeds::discussion));
    let (graphql_route, challenge_route, export_route, embed, feeds) =
        match cors::layer(limits.cors_origins.as_ref()) {
            Some(cors) => (
                graphql_route.layer(cors.clone()),
                challenge_route.layer(cors.clone()),
                export_route.layer(cors.clone()),
                embed.layer(cors.clone()),
                feeds.layer(cors),
            ),
            None => (graphql_route, challenge_route, export_route, embed, feeds),
        };
    let state = HttpState {
        api,
        limits: Arc::new(limits),
        connections,
        responses,
    };
    let router = Router::new()
        .merge(crate::graphiql::routes())
        .merge(crate::admin::routes())
        .merge(embed)
        .merge(feeds)
        .route("/graphql", graphql_route)
        .route("/guest/challenge", challenge_route)
        .route("/me/export", export_route)
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route(
            "/notifications/unsubscribe",
            get(unsubscribe::show).post(unsubscribe::confirm),
        );
    let router = match public_metrics {
        true => router.route("/metrics", get(metrics)),
        false => router,
    };
    let requests = RequestLayer::new(state.api.request_metrics().clone());
    router.layer(requests).with_state(state)
}

/// `GET /guest/challenge`: a proof-of-work challenge for a guest's post, as ALTCHA's widget
/// fetches it from its `challengeurl` (the same as `Query.guestChallenge`). Never cached: each
/// challenge is accepted once.
async fn guest_challenge(State(state): State<HttpState>) -> Response {
    let challenge = state.api.services().guest_challenge();
    let body = serde_json::json!({
        "algorithm": challenge.algorithm,
        "challenge": challenge.challenge,
        "salt": challenge.salt,
        "signature": challenge.signature,
        "maxnumber": challenge.max_number,
    });
    (
        [(axum::http::header::CACHE_CONTROL, "no-store")],
        axum::Json(body),
    )
        .into_response()
}

/// `/metrics` alone, for its own listener (`THREADQL_METRICS_LISTEN`).
pub fn metrics_router(
    api: Api,
    limits: HttpLimits,
    connections: Connections,
    responses: Arc<ResponseCache>,
) -> Router {
    let requests = RequestLayer::new(api.request_metrics().clone());
    let state = HttpState {
        api,
        limits: Arc::new(limits),
        connections,
        responses,
    };
    Router::new()
        .route("/metrics", get(metrics))
        .layer(requests)
        .with_state(state)
}

/// Serves `/graphql`, leaving in the response how the request went ([`Outcome`]).
async fn graphql(State(state): State<HttpState>, request: Request) -> Response {
    if is_websocket(request.headers()) {
        let upgraded = websocket(state, request).await;
        let (mut response, outcome) = match upgraded {
            Ok(response) => (
                response,
                Outcome::answered(OperationType::WebSocket, None, Vec::new()),
            ),
            Err(refusal) => {
                let outcome =
                    Outcome::refused(OperationType::WebSocket, refusal.code, &refusal.message);
                (refusal.into_response(), outcome)
            }
        };
        response.extensions_mut().insert(outcome);
        return response;
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
    let (mut response, outcome) = match result {
        Ok(answered) => answered,
        Err(refusal) => {
            let outcome = Outcome::refused(OperationType::Unknown, refusal.code, &refusal.message);
            let mut response = refusal.into_response();
            if let Some(format) = format {
                response
                    .headers_mut()
                    .insert(CONTENT_TYPE, format.content_type());
            }
            (response, outcome)
        }
    };
    response.extensions_mut().insert(outcome);
    response
}

/// Runs a GraphQL request. A caller that is not signed in (no token, or a refused one) spends
/// one of its client's allowance per operation: the first before the body is read (429 past
/// it), each further one of a batch before it runs (`RATE_LIMITED` in its place).
async fn handle(
    state: &HttpState,
    request: Request,
    format: Format,
) -> Result<(Response, Outcome), Refusal> {
    if format == Format::EventStream {
        let origins = state.limits.cors_origins.as_ref();
        let own = &state.limits.own_origins;
        cors::check_origin(origins, own, request.headers(), "an event stream")?;
    }
    let (parts, body) = request.into_parts();
    let authorization = authorization(&parts.headers);
    let auth = state.api.authenticate(authorization.as_deref());
    let client = client_of(state, &parts);
    count_request(state, &auth, client.as_ref())?;
    // HEAD is GET without the answer's body: it reads the query string, never a body, and never
    // runs a mutation.
    let get = parts.method == Method::GET || parts.method == Method::HEAD;
    let batch = if get {
        let request = read_get(&parts.uri)?;
        if authorization.is_none() && format != Format::EventStream {
            if let Some(answered) = answers::kept(state, &request, format, get, &parts.headers) {
                return Ok(answered);
            }
        }
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
    // Where the request came from, for what guests post (their limits and bans are by network).
    let address = client
        .as_ref()
        .map_or(ClientAddress::Other("unknown".into()), ClientKey::address);
    let batch = match batch {
        BatchRequest::Single(request) => BatchRequest::Single(request.data(address)),
        BatchRequest::Batch(requests) => BatchRequest::Batch(
            requests
                .into_iter()
                .map(|request| request.data(address.clone()))
                .collect(),
        ),
    };
    if format == Format::EventStream {
        let BatchRequest::Single(request) = batch else {
            return Err(Refusal::bad(
                "a text/event-stream request carries one operation, not a batch",
            ));
        };
        // Its one operation was counted above: the API it runs on has no client, so the
        // connection spends no allowance; its client still counts for the subscription caps.
        let connection = state.api.connection(authorization.as_deref(), client);
        let outcome = Outcome::answered(OperationType::EventStream, None, Vec::new());
        return Ok((
            live::event_stream(&state.api, request, &connection),
            outcome,
        ));
    }
    let (response, outcome) = match batch {
        BatchRequest::Single(request) if authorization.is_none() => {
            let headers = &parts.headers;
            return Ok(answers::anonymous(state, request, auth, format, get, headers).await);
        }
        BatchRequest::Single(request) => {
            let (response, operation) = state.api.execute_observed(request, auth).await;
            let errors = observe::errors([&response]);
            let outcome = Outcome::answered(operation.of_type, operation.name, errors);
            (BatchResponse::Single(response), outcome)
        }
        BatchRequest::Batch(requests) => {
            let responses = state
                .api
                .execute_batch(requests, auth, client.as_ref())
                .await;
            let errors = observe::errors(&responses);
            let outcome = Outcome::answered(OperationType::Batch, None, errors);
            (BatchResponse::Batch(responses), outcome)
        }
    };
    Ok((respond(format, &response), outcome))
}

/// The `Authorization` header's value, when it is text.
fn authorization(headers: &HeaderMap) -> Option<String> {
    headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Counts a request (its first operation) of a caller that is not signed in against its
/// client's allowance: 429 with `Retry-After` past it.
fn count_request(
    state: &HttpState,
    auth: &AuthState,
    client: Option<&ClientKey>,
) -> Result<(), Refusal> {
    match state.api.count_anonymous(auth, client) {
        Ok(()) => Ok(()),
        Err(DomainError::RateLimited {
            message,
            retry_after_secs,
        }) => Err(Refusal {
            retry_after: Some(retry_after_secs),
            ..Refusal::new(StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED", message)
        }),
        Err(other) => Err(Refusal::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL",
            other.to_string(),
        )),
    }
}

/// The client a request comes from (see [`client_key`]).
fn client_of(state: &HttpState, parts: &axum::http::request::Parts) -> Option<ClientKey> {
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    client_key(
        &parts.headers,
        state.limits.client_ip_header.as_deref(),
        peer,
    )
}

/// The client a request is counted as. With a proxy header configured and present, its lines
/// read in order as one comma-separated list, the last entry: the one the nearest proxy wrote
/// (the entries before it are the client's to choose). Otherwise the peer address. IPv6 is
/// counted per /64 and IPv4-mapped addresses as IPv4; an entry that is no address is a key of
/// its own ([`ClientKey::parse`]), never the proxy's.
fn client_key(
    headers: &HeaderMap,
    header: Option<&str>,
    peer: Option<IpAddr>,
) -> Option<ClientKey> {
    let last_line = header.and_then(|name| headers.get_all(name).iter().next_back());
    match last_line {
        Some(line) => {
            let line = String::from_utf8_lossy(line.as_bytes());
            Some(ClientKey::parse(
                line.rsplit(',').next().unwrap_or_default(),
            ))
        }
        None => peer.map(ClientKey::of_ip),
    }
}

/// Whether a request asks to become a WebSocket.
fn is_websocket(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// A GraphQL WebSocket (`graphql-transport-ws` or the legacy `graphql-ws`, by subprotocol).
/// An upgrade not signed in by its `Authorization` header counts against its client's
/// allowance like any request, and so does each operation on the socket while the connection
/// is not signed in.
async fn websocket(state: HttpState, request: Request) -> Result<Response, Refusal> {
    let origins = state.limits.cors_origins.as_ref();
    let own = &state.limits.own_origins;
    cors::check_origin(origins, own, request.headers(), "a WebSocket")?;
    let (mut parts, _body) = request.into_parts();
    let authorization = authorization(&parts.headers);
    let client = client_of(&state, &parts);
    count_request(
        &state,
        &state.api.authenticate(authorization.as_deref()),
        client.as_ref(),
    )?;
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
            live::serve_websocket(
                state.api.for_client(client.clone()),
                socket,
                protocol,
                legacy,
                authorization,
                client,
                idle,
            )
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

/// The metrics page: the server's own gauges, the request metrics, the store's (commands,
/// their durations, the pool, the change feed) and the process's.
async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    let api = &state.api;
    let mut page = Exposition::new();
    page.family(
        "threadql_db_commands_total",
        Kind::Counter,
        "Database commands sent, by command name.",
    );
    for (command, count) in api.command_counts() {
        page.sample(
            "threadql_db_commands_total",
            &[("command", &command)],
            count,
        );
    }
    api.write_store_metrics(&mut page);
    state.responses.write_metrics(&mut page);
    api.services().webhook_metrics().write(&mut page);
    api.services().notify_metrics().write(&mut page);
    let gauges = [
        (
            "threadql_connections_open",
            "Client connections open now (WebSockets included).",
            state.connections.open() as u64,
        ),
        (
            "threadql_connections_max",
            "Most client connections open at once; past it, new ones wait to be accepted.",
            state.connections.max() as u64,
        ),
    ];
    let live = api.live_counts();
    let live_gauges = [
        (
            "threadql_live_subscribers",
            "Live subscriptions following a discussion now.",
            live.subscribers as u64,
        ),
        (
            "threadql_live_runs",
            "Runs serving the live subscriptions (identical subscriptions share one, resolved once per event).",
            live.runs as u64,
        ),
    ];
    for (name, help, value) in gauges.into_iter().chain(live_gauges) {
        page.family(name, Kind::Gauge, help);
        page.sample(name, &[], value);
    }
    page.family(
        "threadql_change_streams_opened_total",
        Kind::Counter,
        "Times this process opened its change stream (once, then after each failure).",
    );
    page.sample(
        "threadql_change_streams_opened_total",
        &[],
        live.streams_opened,
    );
    api.request_metrics().write(&mut page);
    let limited = api.rate_limited();
    page.family(
        "threadql_rate_limited_total",
        Kind::Counter,
        "Operations refused by a rate limit, by limit: anonymous (per client), signed_in (operations per user), author (mutations per token sub), subscriptions (per process or client), socket_operations (at once on one WebSocket).",
    );
    for (limit, count) in [
        ("anonymous", limited.anonymous),
        ("signed_in", limited.signed_in),
        ("author", limited.author),
        ("subscriptions", limited.subscriptions),
        ("socket_operations", limited.socket_operations),
    ] {
        page.sample("threadql_rate_limited_total", &[("limit", limit)], count);
    }
    crate::telemetry::process::write(&mut page);
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4")],
        page.into_text(),
    )
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
        let key = |text: &str| Some(ClientKey::parse(text));
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            HeaderValue::from_static("203.0.113.9, 10.0.0.7"),
        );
        let peer = Some(IpAddr::from([127, 0, 0, 1]));
        assert_eq!(
            client_key(&headers, Some("x-forwarded-for"), peer),
            key("10.0.0.7")
        );
        assert_eq!(client_key(&headers, None, peer), key("127.0.0.1"));
        assert_eq!(
            client_key(&HeaderMap::new(), Some("x-forwarded-for"), peer),
            key("127.0.0.1")
        );
        assert_eq!(client_key(&HeaderMap::new(), None, None), None);
        // Repeated lines are one list: the last entry of the last line counts.
        headers.append("x-forwarded-for", HeaderValue::from_static("10.0.0.8"));
        assert_eq!(
            client_key(&headers, Some("x-forwarded-for"), peer),
            key("10.0.0.8")
        );
        headers.append(
            "x-forwarded-for",
            HeaderValue::from_static("1.1.1.1, 10.0.0.9:443"),
        );
        assert_eq!(
            client_key(&headers, Some("x-forwarded-for"), peer),
            key("10.0.0.9")
        );
        // An entry that is no address is its own key, not the peer's.
        headers.append(
            "x-forwarded-for",
            HeaderValue::from_bytes(b"10.0.0.1, \xffbad")
                .unwrap_or(HeaderValue::from_static("bad")),
        );
        assert!(matches!(
            client_key(&headers, Some("x-forwarded-for"), peer),
            Some(ClientKey::Unparsed(_))
        ));
        let peer6 = Some(
            "::ffff:192.0.2.1"
                .parse()
                .unwrap_or(IpAddr::from([0, 0, 0, 0])),
        );
        assert_eq!(client_key(&HeaderMap::new(), None, peer6), key("192.0.2.1"));
    }
}
