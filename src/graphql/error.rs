//! Maps domain and store errors to GraphQL errors with `extensions.code`; logs internal causes.

use async_graphql::{ErrorExtensions, Response, Value};

use crate::domain::DomainError;
use crate::store::StoreError;

/// Turns a domain error into a GraphQL error; internal causes are logged and replaced by a generic
/// message.
pub fn gql(err: DomainError) -> async_graphql::Error {
    let code = err.code();
    let (message, retry_after) = match err {
        DomainError::Internal(cause) => {
            tracing::error!(%cause, "internal error while serving a request");
            ("internal error".to_owned(), None)
        }
        limited @ DomainError::RateLimited {
            retry_after_secs, ..
        } => (limited.to_string(), Some(retry_after_secs)),
        other => (other.to_string(), None),
    };
    async_graphql::Error::new(message).extend_with(|_, e| {
        e.set("code", code);
        if let Some(secs) = retry_after {
            e.set("retryAfter", secs);
        }
    })
}

/// A response that refuses a whole operation with a domain error.
pub fn response(err: DomainError) -> Response {
    Response::from_errors(vec![gql(err).into_server_error(Default::default())])
}

/// `?`-friendly conversion of results into GraphQL results with codes.
pub trait OrGql<T> {
    /// Converts the error side.
    fn gql(self) -> async_graphql::Result<T>;
}

impl<T> OrGql<T> for Result<T, DomainError> {
    fn gql(self) -> async_graphql::Result<T> {
        self.map_err(gql)
    }
}

impl<T> OrGql<T> for Result<T, StoreError> {
    fn gql(self) -> async_graphql::Result<T> {
        self.map_err(|e| gql(e.into()))
    }
}

/// Gives every error that has no code one: errors raised by the GraphQL engine itself (syntax,
/// validation, unknown fields, wrong argument types, depth limits) are the client's input.
pub fn ensure_codes(response: &mut Response) {
    for error in &mut response.errors {
        let has_code = error
            .extensions
            .as_ref()
            .is_some_and(|ext| ext.get("code").is_some());
        if !has_code {
            error
                .extensions
                .get_or_insert_with(Default::default)
                .set("code", Value::from("BAD_USER_INPUT"));
        }
    }
}
