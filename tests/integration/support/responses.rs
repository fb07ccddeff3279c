//! Reading GraphQL responses: the first error's message, the outcome of one response or a batch,
//! and the slugs of a connection.

use serde_json::Value;

use super::app::error_code;

/// The first error's message (empty without one).
pub(crate) fn error_message(response: &Value) -> &str {
    response["errors"][0]["message"]
        .as_str()
        .unwrap_or_default()
}

/// `"ok"` for a response without errors, else its first error's code.
pub(crate) fn outcome(response: &Value) -> String {
    match response.get("errors") {
        None => "ok".to_owned(),
        Some(_) => error_code(response),
    }
}

/// The outcomes of a batch answer's responses.
pub(crate) fn outcomes(batch: &Value) -> Vec<String> {
    batch
        .as_array()
        .unwrap_or_else(|| panic!("a batch answer: {batch}"))
        .iter()
        .map(outcome)
        .collect()
}

/// The slugs of a connection's nodes, in order.
pub(crate) fn node_slugs(connection: &Value) -> Vec<String> {
    connection["nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("not a connection: {connection}"))
        .iter()
        .map(|n| n["slug"].as_str().expect("slug").to_owned())
        .collect()
}
