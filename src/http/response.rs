//! What `/graphql` answers: the negotiated format, GraphQL results as HTTP, and refusals.

use async_graphql::BatchResponse;
use axum::http::header::{ACCEPT, ALLOW, CONNECTION, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

/// A refused request: its status and a GraphQL-shaped error body with a code.
pub(super) struct Refusal {
    pub(super) status: StatusCode,
    pub(super) code: &'static str,
    pub(super) message: String,
    pub(super) retry_after: Option<u64>,
}

impl Refusal {
    pub(super) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    pub(super) fn bad(message: impl Into<String>) -> Self {
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
        if self.status == StatusCode::REQUEST_TIMEOUT {
            // The rest of the body may still come: the connection cannot carry another request.
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
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
pub(super) enum Format {
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
    pub(super) fn negotiate(headers: &HeaderMap) -> Option<Format> {
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

    pub(super) fn content_type(self) -> HeaderValue {
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
pub(super) fn respond(format: Format, response: &BatchResponse) -> Response {
    let not_run = match response {
        BatchResponse::Single(single) => {
            single.data == async_graphql::Value::Null && !single.errors.is_empty()
        }
        BatchResponse::Batch(_) => false,
    };
    let mut response = if format == Format::GraphqlResponse && not_run {
        // A request that did not run: 400, and no `data` key in the body.
        let mut body = serde_json::to_value(response).unwrap_or_default();
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
