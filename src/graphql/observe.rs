//! What a request ran and which errors it answered with, for its log lines and metrics: read
//! from the parsed document before the engine runs and from the response after it. An engine
//! extension could see the same, but with one installed the engine resolves every field and
//! list item through the extension chain, so nothing here is one.

use async_graphql::parser::types::{DocumentOperations, OperationType as Kind};
use async_graphql::{Name, Request, Response, ServerError, Value};

use crate::telemetry::request::{ErrorSeen, OperationType, RequestMetrics};

/// The code of a document that does not parse.
const PARSE_FAILED: &str = "GRAPHQL_PARSE_FAILED";

/// What a request runs: the operation's type and, when it has one, its name.
#[derive(Debug, Clone)]
pub struct Operation {
    /// Query, mutation or subscription (`Unknown` before the document is read, or when it names
    /// no operation that fits).
    pub of_type: OperationType,
    /// The operation's name, as the document writes it.
    pub name: Option<Name>,
}

impl Default for Operation {
    fn default() -> Self {
        Self {
            of_type: OperationType::Unknown,
            name: None,
        }
    }
}

/// The operation a request runs, from its document, which must have been parsed already (a
/// request whose check failed before parsing, or whose parse failed, is not read again:
/// see [`parsed`]).
pub(super) fn operation(request: &mut Request) -> Operation {
    let wanted = request.operation_name.take();
    let found = match request.parsed_query() {
        Ok(document) => match (&document.operations, wanted.as_deref()) {
            (DocumentOperations::Single(op), _) => Some((op.node.ty, None)),
            (DocumentOperations::Multiple(ops), Some(wanted)) => ops
                .get_key_value(wanted)
                .map(|(name, op)| (op.node.ty, Some(name.clone()))),
            (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => ops
                .iter()
                .next()
                .map(|(name, op)| (op.node.ty, Some(name.clone()))),
            (DocumentOperations::Multiple(_), None) => None,
        },
        Err(_) => None,
    };
    request.operation_name = wanted;
    match found {
        Some((ty, name)) => Operation {
            of_type: match ty {
                Kind::Query => OperationType::Query,
                Kind::Mutation => OperationType::Mutation,
                Kind::Subscription => OperationType::Subscription,
            },
            name,
        },
        None => Operation::default(),
    }
}

/// Whether the document of a request whose check ended with `refused` was parsed (so reading
/// its operation costs no second parse).
pub(super) fn parsed(refused: &ServerError) -> bool {
    code(refused) != PARSE_FAILED
}

/// An error's `extensions.code` (every error the API answers with has one).
pub fn code(error: &ServerError) -> &str {
    match error.extensions.as_ref().and_then(|e| e.get("code")) {
        Some(Value::String(code)) => code,
        Some(Value::Enum(code)) => code.as_str(),
        _ => "BAD_USER_INPUT",
    }
}

/// The errors of responses, with their codes and messages.
pub fn errors<'a>(responses: impl IntoIterator<Item = &'a Response>) -> Vec<ErrorSeen> {
    responses
        .into_iter()
        .flat_map(|r| &r.errors)
        .map(|e| ErrorSeen {
            code: code(e).to_owned(),
            message: e.message.clone(),
        })
        .collect()
}

/// Counts the errors of one response of a streaming operation (a WebSocket's or an SSE
/// stream's). They are logged at debug level only: identical subscriptions share their events,
/// so one failed event can be the answer of thousands of subscribers.
pub(super) fn stream_errors(metrics: &RequestMetrics, response: &Response) {
    for error in &response.errors {
        let code = code(error);
        metrics.count_error(code);
        tracing::debug!(code, error = error.message.as_str(), "operation error");
    }
}
