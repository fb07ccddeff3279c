//! The HTTP surface: /graphql (GET, POST), GraphiQL at /, /healthz, /readyz and /metrics.

use std::fmt::Write as _;

use async_graphql::http::GraphiQLSource;
use async_graphql_axum::rejection::GraphQLRejection;
use async_graphql_axum::{GraphQLRequest, GraphQLResponse};
use axum::extract::State;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tower_http::trace::TraceLayer;

use crate::graphql::Api;

/// The router over an API.
pub fn router(api: Api) -> Router {
    Router::new()
        .route("/", get(graphiql))
        .route("/graphql", get(graphql).post(graphql))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .layer(TraceLayer::new_for_http())
        .with_state(api)
}

async fn graphql(
    State(api): State<Api>,
    method: Method,
    headers: HeaderMap,
    request: Result<GraphQLRequest, GraphQLRejection>,
) -> Response {
    let request = match request {
        Ok(request) => request.into_inner(),
        Err(rejection) => return bad_request(&rejection.0.to_string()),
    };
    if method == Method::GET && is_mutation(&request) {
        let mut response = error_body(
            StatusCode::METHOD_NOT_ALLOWED,
            "mutations must be sent with POST",
        );
        response.headers_mut().insert(
            axum::http::header::ALLOW,
            axum::http::HeaderValue::from_static("POST"),
        );
        return response;
    }
    let authorization = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
    GraphQLResponse::from(api.execute(request, authorization).await).into_response()
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

/// A GraphQL-shaped error for a request that could not even be read.
fn bad_request(message: &str) -> Response {
    error_body(
        StatusCode::BAD_REQUEST,
        &format!("the request is not a valid GraphQL request: {message}"),
    )
}

fn error_body(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({
        "errors": [{ "message": message, "extensions": { "code": "BAD_USER_INPUT" } }]
    });
    (status, Json(body)).into_response()
}

async fn graphiql() -> Html<String> {
    Html(
        GraphiQLSource::build()
            .endpoint("/graphql")
            .title("threadql")
            .finish(),
    )
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(api): State<Api>) -> (StatusCode, &'static str) {
    match api.ping().await {
        Ok(()) => (StatusCode::OK, "ready"),
        Err(err) => {
            tracing::warn!(%err, "readiness check failed");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable")
        }
    }
}

async fn metrics(State(api): State<Api>) -> impl IntoResponse {
    let mut body = String::from(
        "# HELP threadql_db_commands_total Database commands sent, by command name.\n# TYPE threadql_db_commands_total counter\n",
    );
    for (command, count) in api.command_counts() {
        let _ = writeln!(
            body,
            "threadql_db_commands_total{{command=\"{command}\"}} {count}"
        );
    }
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}
