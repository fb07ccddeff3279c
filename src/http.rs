//! The HTTP surface: /graphql (GET, POST), GraphiQL at /, /healthz, /readyz and /metrics.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use async_graphql::http::{WebSocketProtocols, ALL_WEBSOCKET_PROTOCOLS};
use async_graphql::{BatchRequest, BatchResponse};
use async_graphql_axum::GraphQLProtocol;
use axum::body::Body;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::header::{
    ACCEPT, ALLOW, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER, SEC_WEBSOCKET_PROTOCOL,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tower_http::trace::TraceLayer;

mod live;

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

/// A refused request: its status and a GraphQL-shaped error body with a code.
struct Refusal {
    status: StatusCode,
    code: &'static str,
    message: String,
    retry_after: Option<u64>,
}

impl Refusal {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    fn bad(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BAD_USER_INPUT", message)
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut extensions = serde_json::json!({ "code": self.code });
        if let Some(secs) = self.retry_after {
            extensions["retryAfter"] = secs.into();
        }
        let body = serde_json::json!({
            "errors": [{ "message": self.message, "extensions": extensions }]
        });
        let mut response = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.status == StatusCode::METHOD_NOT_ALLOWED {
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static("POST"));
        }
        response
    }
}

/// The media type of a GraphQL response, chosen from the request's `Accept` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// `application/json`: every GraphQL result is 200.
    Json,
    /// `application/graphql-response+json`: a request that could not run (parse, validation or
    /// variable errors) is 400 and has no `data`.
    GraphqlResponse,
    /// `text/event-stream`: Server-Sent Events in the `graphql-sse` protocol's distinct
    /// connections mode: a `next` event per result, then `complete`.
    EventStream,
}

impl Format {
    const GRAPHQL_RESPONSE: &'static str = "application/graphql-response+json; charset=utf-8";
    const JSON: &'static str = "application/json; charset=utf-8";

    /// The format a client accepts, preferring `application/graphql-response+json` on a tie;
    /// `application/json` when it names neither or has no `Accept` header; `None` when it
    /// accepts neither (406).
    fn negotiate(headers: &HeaderMap) -> Option<Format> {
        let accept: Vec<&str> = headers
            .get_all(ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        if accept.iter().all(|v| v.trim().is_empty()) {
            return Some(Format::Json);
        }
        let (mut graphql, mut json, mut events) = (0.0_f32, 0.0_f32, 0.0_f32);
        for range in accept.iter().flat_map(|v| v.split(',')) {
            let mut params = range.split(';');
            let essence = params
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            let q = params
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            match essence.as_str() {
                "application/graphql-response+json" => graphql = graphql.max(q),
                "application/json" => json = json.max(q),
                "text/event-stream" => events = events.max(q),
                "*/*" | "application/*" => {
                    json = json.max(q);
                }
                _ => {}
            }
        }
        if events > 0.0 && events > graphql.max(json) {
            Some(Format::EventStream)
        } else if graphql > 0.0 && graphql >= json {
            Some(Format::GraphqlResponse)
        } else if json > 0.0 {
            Some(Format::Json)
        } else {
            None
        }
    }

    fn content_type(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Format::Json => Self::JSON,
            Format::GraphqlResponse => Self::GRAPHQL_RESPONSE,
            // Refusals of an event-stream request are plain JSON.
            Format::EventStream => Self::JSON,
        })
    }
}

/// A GraphQL result as HTTP: in `application/graphql-response+json`, a request that did not
/// run (no `data`) is 400 and its body has no `data` key.
fn respond(format: Format, response: BatchResponse) -> Response {
    let not_run = match &response {
        BatchResponse::Single(single) => {
            single.data == async_graphql::Value::Null && !single.errors.is_empty()
        }
        BatchResponse::Batch(_) => false,
    };
    let mut response = if format == Format::GraphqlResponse && not_run {
        // A request that did not run: 400, and no `data` key in the body.
        let mut body = serde_json::to_value(&response).unwrap_or_default();
        if let Some(object) = body.as_object_mut() {
            object.remove("data");
        }
        (StatusCode::BAD_REQUEST, Json(body)).into_response()
    } else {
        // Serialised once, straight to the body (through a `serde_json::Value` first, a page
        // of comments cost twice the serialising).
        match serde_json::to_vec(&response) {
            Ok(body) => (StatusCode::OK, body).into_response(),
            Err(err) => Refusal::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "INTERNAL_SERVER_ERROR",
                format!("the response could not be written: {err}"),
            )
            .into_response(),
        }
    };
    response
        .headers_mut()
        .insert(CONTENT_TYPE, format.content_type());
    response
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
        let connection = state.api.connection(auth);
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
    Ok(respond(format, response))
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

/// Reads a POST body: JSON only (a CSRF guard, as Apollo Server does it), within the size limit,
/// one operation or a batch of at most the configured size.
async fn read_post(
    headers: &HeaderMap,
    body: Body,
    limits: &HttpLimits,
) -> Result<BatchRequest, Refusal> {
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !is_json(content_type) && !forces_preflight(headers) {
        return Err(Refusal::bad(
            "this request has been refused as a possible cross-site request forgery: send the body as `Content-Type: application/json`, or add a non-empty `Apollo-Require-Preflight` or `X-Apollo-Operation-Name` header",
        ));
    }
    let too_large = || {
        Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "REQUEST_TOO_LARGE",
            format!(
                "the request body is larger than {} bytes",
                limits.max_body_bytes
            ),
        )
    };
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_body_bytes as u64) {
        return Err(too_large());
    }
    let bytes = axum::body::to_bytes(body, limits.max_body_bytes)
        .await
        .map_err(|_| too_large())?;
    let bad = |e: serde_json::Error| {
        Refusal::bad(format!("the request is not a valid GraphQL request: {e}"))
    };
    let batch = match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => BatchRequest::Batch(
            serde_json::from_slice::<Vec<Operation>>(&bytes)
                .map_err(bad)?
                .into_iter()
                .map(|op| op.0)
                .collect(),
        ),
        _ => BatchRequest::Single(serde_json::from_slice::<Operation>(&bytes).map_err(bad)?.0),
    };
    let operations: &[async_graphql::Request] = match &batch {
        BatchRequest::Single(request) => std::slice::from_ref(request),
        BatchRequest::Batch(requests) => requests,
    };
    // Only a persisted query (APQ) may come without its text.
    if operations
        .iter()
        .any(|r| r.query.is_empty() && !r.extensions.contains_key("persistedQuery"))
    {
        return Err(Refusal::bad(
            "the request is not a valid GraphQL request: `query` is missing",
        ));
    }
    if let BatchRequest::Batch(requests) = &batch {
        if limits.max_batch == 0 {
            return Err(Refusal::bad(
                "batched requests are not accepted: send one operation per request",
            ));
        }
        if requests.is_empty() || requests.len() > limits.max_batch {
            return Err(Refusal::bad(format!(
                "a batch must hold 1 to {} operations (got {})",
                limits.max_batch,
                requests.len()
            )));
        }
    }
    Ok(batch)
}

/// One operation of a POST body: a JSON object only (serde would also fill a request from a
/// JSON array, field by field), with duplicate keys refused.
struct Operation(async_graphql::Request);

impl<'de> serde::Deserialize<'de> for Operation {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Object;
        impl<'de> serde::de::Visitor<'de> for Object {
            type Value = Operation;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a GraphQL request as a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Operation, A::Error> {
                let fields = serde::de::value::MapAccessDeserializer::new(map);
                serde::Deserialize::deserialize(fields).map(Operation)
            }
        }
        deserializer.deserialize_map(Object)
    }
}

/// The parameters of a GET request, as the GraphQL-over-HTTP spec names them.
#[derive(serde::Deserialize)]
struct GetParams {
    query: Option<String>,
    #[serde(rename = "operationName", alias = "operation_name")]
    operation_name: Option<String>,
    variables: Option<String>,
    extensions: Option<String>,
}

/// Reads a GET request's query string: `query`, `operationName`, `variables` (JSON).
fn read_get(uri: &axum::http::Uri) -> Result<async_graphql::Request, Refusal> {
    let bad = |e: &dyn std::fmt::Display| {
        Refusal::bad(format!("the request is not a valid GraphQL request: {e}"))
    };
    let params = axum::extract::Query::<GetParams>::try_from_uri(uri)
        .map_err(|e| bad(&e))?
        .0;
    // A persisted query (APQ) is sent by hash alone, without `query`.
    let query = match (params.query, &params.extensions) {
        (Some(query), _) => query,
        (None, Some(_)) => String::new(),
        (None, None) => return Err(bad(&"the `query` parameter is missing")),
    };
    let mut request = async_graphql::Request::new(query);
    if let Some(name) = params.operation_name.filter(|n| !n.is_empty()) {
        request = request.operation_name(name);
    }
    if let Some(variables) = params.variables.filter(|v| !v.is_empty()) {
        let value: serde_json::Value = serde_json::from_str(&variables)
            .map_err(|e| bad(&format!("`variables` is not JSON: {e}")))?;
        request = request.variables(async_graphql::Variables::from_json(value));
    }
    if let Some(extensions) = params.extensions.filter(|v| !v.is_empty()) {
        request.extensions = serde_json::from_str(&extensions)
            .map_err(|e| bad(&format!("`extensions` is not a JSON object: {e}")))?;
    }
    Ok(request)
}

/// Whether a content type is JSON (`application/json`, `application/graphql-response+json`,
/// any `+json`), parameters such as `charset` aside.
fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Whether the request carries a header that a browser would only send after a CORS preflight.
fn forces_preflight(headers: &HeaderMap) -> bool {
    ["apollo-require-preflight", "x-apollo-operation-name"]
        .iter()
        .any(|name| headers.get(*name).is_some_and(|v| !v.is_empty()))
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

/// Whether the operation a request selects is a mutation (unparsable documents are left to the
/// engine, which reports the syntax error).
fn is_mutation(request: &async_graphql::Request) -> bool {
    use async_graphql::parser::types::{DocumentOperations, OperationType};
    let Ok(document) = async_graphql::parser::parse_query(&request.query) else {
        return false;
    };
    let selected = match (&document.operations, request.operation_name.as_deref()) {
        (DocumentOperations::Single(op), _) => Some(op),
        (DocumentOperations::Multiple(ops), Some(name)) => ops
            .iter()
            .find(|(n, _)| n.as_str() == name)
            .map(|(_, op)| op),
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => ops.values().next(),
        _ => None,
    };
    selected.is_some_and(|op| op.node.ty == OperationType::Mutation)
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
    Ok(upgrade
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        .max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| {
            live::serve_websocket(state.api, socket, protocol, legacy, authorization)
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
    let _ = write!(
        body,
        "# HELP threadql_live_subscribers Live subscriptions following a discussion now.\n# TYPE threadql_live_subscribers gauge\nthreadql_live_subscribers {subscribers}\n\
         # HELP threadql_change_streams_opened_total Times this process opened its change stream (once, then after each failure).\n# TYPE threadql_change_streams_opened_total counter\nthreadql_change_streams_opened_total {streams}\n"
    );
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}

#[cfg(test)]
mod tests {
    use super::*;

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
