//! Reading a `/graphql` operation: a POST body or a GET query string, and whether it mutates.

use async_graphql::BatchRequest;
use axum::body::Body;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};

use super::response::Refusal;
use super::HttpLimits;

/// Reads a POST body: JSON only (a CSRF guard, as Apollo Server does it), within the size limit,
/// one operation or a batch of at most the configured size.
pub(super) async fn read_post(
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
    let bytes = tokio::time::timeout(
        limits.body_timeout,
        axum::body::to_bytes(body, limits.max_body_bytes),
    )
    .await
    .map_err(|_| {
        Refusal::new(
            StatusCode::REQUEST_TIMEOUT,
            "REQUEST_TIMEOUT",
            format!(
                "the request body did not arrive within {} s",
                limits.body_timeout.as_secs()
            ),
        )
    })?
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
pub(super) fn read_get(uri: &axum::http::Uri) -> Result<async_graphql::Request, Refusal> {
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
pub(super) fn is_json(content_type: &str) -> bool {
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

/// Whether the operation a request selects is a mutation (unparsable documents are left to the
/// engine, which reports the syntax error).
pub(super) fn is_mutation(request: &async_graphql::Request) -> bool {
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
