//! The spans of a GraphQL request, for traces: reading the document (`graphql.parse`), the
//! engine's validation (`graphql.validate`), the operation (`graphql.operation`, named
//! `query Name` as OpenTelemetry's GraphQL conventions say), and, in the resolvers and loaders,
//! one `store.*` span per store call and per dataloader batch, under which the driver's spans
//! of the database commands nest.
//!
//! They are `debug` spans: the logs (at `info` by default) do not show them, and unless traces
//! are exported (or THREADQL_LOG asks for `debug`) they are never built. Fields get none: a
//! field resolver is called for every comment of a tree, and a span each would cost more than
//! resolving them; the store calls are where the time goes.

use std::sync::Arc;

use async_graphql::extensions::{Extension, ExtensionContext, ExtensionFactory, NextValidation};
use async_graphql::parser::types::{DocumentOperations, OperationType};
use async_graphql::{ServerError, ValidationResult};
use tracing::field::Empty;
use tracing::{Instrument as _, Span};

/// The span of reading a request's document: its tokens, its persisted query, its parse (or
/// the document kept from the same text) and the limits it must stay under.
pub(super) fn parse() -> Span {
    tracing::debug_span!("graphql.parse")
}

/// The span of running an admitted request's operation, named by its type and name.
pub(super) fn operation(request: &mut async_graphql::Request) -> Span {
    let span = tracing::debug_span!(
        "graphql.operation",
        otel.name = Empty,
        graphql.operation.type = Empty,
        graphql.operation.name = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    let wanted = request.operation_name.clone();
    let Ok(document) = request.parsed_query() else {
        return span;
    };
    let chosen = match (&document.operations, wanted.as_deref()) {
        (DocumentOperations::Single(op), _) => Some((None, op.node.ty)),
        (DocumentOperations::Multiple(ops), Some(name)) => {
            ops.get(name).map(|op| (Some(name.to_owned()), op.node.ty))
        }
        (DocumentOperations::Multiple(ops), None) => match ops.len() {
            1 => ops
                .iter()
                .next()
                .map(|(name, op)| (Some(name.to_string()), op.node.ty)),
            _ => None,
        },
    };
    if let Some((name, ty)) = chosen {
        let ty = match ty {
            OperationType::Query => "query",
            OperationType::Mutation => "mutation",
            OperationType::Subscription => "subscription",
        };
        span.record("graphql.operation.type", ty);
        match &name {
            Some(name) => {
                span.record("graphql.operation.name", name.as_str());
                span.record("otel.name", format!("{ty} {name}").as_str());
            }
            None => {
                span.record("otel.name", ty);
            }
        }
    }
    span
}

/// The schema extension giving the engine's validation a span (installed only while traces
/// are exported).
pub(super) struct Validation;

impl ExtensionFactory for Validation {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(Validation)
    }
}

#[async_trait::async_trait]
impl Extension for Validation {
    async fn validation(
        &self,
        ctx: &ExtensionContext<'_>,
        next: NextValidation<'_>,
    ) -> Result<ValidationResult, Vec<ServerError>> {
        next.run(ctx)
            .instrument(tracing::debug_span!("graphql.validate"))
            .await
    }
}
