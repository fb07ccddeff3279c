//! The GraphQL API: schema construction, per-request context and execution.

pub mod batch;
pub mod error;
pub mod loaders;
mod mutation;
mod query;
pub mod types;

use std::sync::Arc;

use async_graphql::{Context, EmptySubscription, Schema};

use crate::auth::{AuthState, JwtKeys};
use crate::domain::{CursorKind, Layout, PageArgs, Window};
use crate::store::{ReadScope, Store};

pub use mutation::Mutation;
pub use query::Query;

/// The threadql schema type.
pub type AppSchema = Schema<Query, Mutation, EmptySubscription>;

/// Page sizes and text limits, from config.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Page size when `first` is not given.
    pub default_page_size: usize,
    /// Largest `first` accepted.
    pub max_page_size: usize,
    /// Longest comment text, in characters.
    pub max_text_chars: usize,
    /// Layout of discussions created without one.
    pub default_layout: Layout,
}

impl Limits {
    /// Validates paging arguments into a window.
    pub fn window(&self, args: &PageArgs, kind: CursorKind) -> async_graphql::Result<Window> {
        Window::from_args(args, kind, self.default_page_size, self.max_page_size)
            .map_err(error::gql)
    }
}

/// The per-request read cache, shared by the loaders and the resolvers of one request.
pub struct RequestScope(pub Arc<ReadScope>);

/// Most fields a query may nest (a tree costs two per level: `replies { nodes { … } }`).
const MAX_QUERY_DEPTH: usize = 48;
/// Most fields a query may select in all.
const MAX_QUERY_COMPLEXITY: usize = 5_000;

/// Builds the schema (without a store: enough to print the SDL).
pub fn schema_builder() -> async_graphql::SchemaBuilder<Query, Mutation, EmptySubscription> {
    Schema::build(Query, Mutation, EmptySubscription)
        .enable_federation()
        .limit_depth(MAX_QUERY_DEPTH)
        .limit_complexity(MAX_QUERY_COMPLEXITY)
}

/// The SDL of the schema, as committed in `schema.graphql`.
pub fn sdl() -> String {
    schema_builder()
        .finish()
        .sdl_with_options(async_graphql::SDLExportOptions::new().federation())
}

/// The schema and what each request needs: the GraphQL entry point of the program.
#[derive(Clone)]
pub struct Api {
    schema: AppSchema,
    store: Arc<Store>,
    keys: JwtKeys,
}

impl Api {
    /// Builds the schema over a store.
    pub fn new(store: Arc<Store>, keys: JwtKeys, limits: Limits) -> Self {
        let schema = schema_builder().data(store.clone()).data(limits).finish();
        Self {
            schema,
            store,
            keys,
        }
    }

    /// The store behind the API.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The schema.
    pub fn schema(&self) -> &AppSchema {
        &self.schema
    }

    /// Runs one request with the caller's `Authorization` header value.
    pub async fn execute(
        &self,
        request: impl Into<async_graphql::Request>,
        authorization: Option<&str>,
    ) -> async_graphql::Response {
        let auth = self.keys.authenticate(authorization);
        let scope = Arc::new(ReadScope::new());
        let batches = batch::Batches::new();
        let request = request
            .into()
            .data(auth)
            .data(loaders::request_loaders(
                self.store.clone(),
                scope.clone(),
                batches.clone(),
            ))
            .data(RequestScope(scope));
        let mut response = batch::drive(self.schema.execute(request), batches).await;
        error::ensure_codes(&mut response);
        response
    }
}

/// The store, from the schema data.
pub(crate) fn store<'a>(ctx: &Context<'a>) -> &'a Arc<Store> {
    ctx.data_unchecked::<Arc<Store>>()
}

/// The caller's auth state, from the request data.
pub(crate) fn auth<'a>(ctx: &Context<'a>) -> &'a AuthState {
    ctx.data_unchecked::<AuthState>()
}
