//! The HTTP surface: /graphql (GET, POST), GraphiQL at /, /healthz, /readyz and /metrics.

use std::fmt::Write as _;

use async_graphql::http::GraphiQLSource;
use async_graphql_axum::rejection::GraphQLRejection;
use async_graphql_axum::{GraphQLRequest, GraphQLResponse};
use axum::extract::State;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
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
    headers: HeaderMap,
    request: Result<GraphQLRequest, GraphQLRejection>,
) -> Response {
    let request = match request {
        Ok(request) => request.into_inner(),
        Err(rejection) => return bad_request(&rejection.0.to_string()),
    };
    let authorization = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
    GraphQLResponse::from(api.execute(request, authorization).await).into_response()
}

/// A GraphQL-shaped error for a request that could not even be read.
fn bad_request(message: &str) -> Response {
    let body = serde_json::json!({
        "errors": [{
            "message": format!("the request is not a valid GraphQL request: {message}"),
            "extensions": { "code": "BAD_USER_INPUT" },
        }]
    });
    (StatusCode::BAD_REQUEST, Json(body)).into_response()
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
    match api.store().ping().await {
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
    for (command, count) in api.store().commands().snapshot() {
        let _ = writeln!(
            body,
            "threadql_db_commands_total{{command=\"{command}\"}} {count}"
        );
    }
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}
