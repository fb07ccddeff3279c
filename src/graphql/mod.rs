//! The GraphQL API: schema construction, per-request context and execution.

pub mod batch;
pub mod error;
pub mod loaders;
mod mutation;
mod query;
pub mod types;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_graphql::{Context, EmptySubscription, Schema};

use crate::auth::{AuthState, JwtKeys};
use crate::domain::{CursorKind, EditRules, Layout, PageArgs, Window};
use crate::store::{DynStorage, ReadScope, StoreResult};

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
    /// How long authors may edit their comments.
    pub edit_rules: EditRules,
}

impl Limits {
    /// Validates paging arguments into a window.
    pub fn window(&self, args: &PageArgs, kind: CursorKind) -> async_graphql::Result<Window> {
        Window::from_args(args, kind, self.default_page_size, self.max_page_size)
            .map_err(error::gql)
    }
}

/// What one request has read: its dataloader (with its cache) and the store's read scope.
pub struct Reads {
    /// The request's dataloader.
    pub loader: loaders::Loaders,
    /// The store's per-request memo, which the loader shares.
    pub scope: Arc<ReadScope>,
}

/// The reads of one request, forgotten all at once after a write.
pub struct RequestReads {
    storage: DynStorage,
    batches: Arc<batch::Batches>,
    current: Mutex<Arc<Reads>>,
}

impl RequestReads {
    fn new(storage: DynStorage, batches: Arc<batch::Batches>) -> Self {
        let current = Mutex::new(Self::fresh(&storage, &batches));
        Self {
            storage,
            batches,
            current,
        }
    }

    fn fresh(storage: &DynStorage, batches: &Arc<batch::Batches>) -> Arc<Reads> {
        let scope = Arc::new(ReadScope::new());
        Arc::new(Reads {
            loader: loaders::request_loaders(storage.clone(), scope.clone(), batches.clone()),
            scope,
        })
    }

    /// The reads in effect now.
    pub fn current(&self) -> Arc<Reads> {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Forgets everything read so far (after a write, so later fields see it): the loader and
    /// the scope are replaced, so no cache can be left behind.
    pub fn invalidate(&self) {
        let fresh = Self::fresh(&self.storage, &self.batches);
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = fresh;
    }
}

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
    storage: DynStorage,
    keys: JwtKeys,
}

impl Api {
    /// Builds the schema over a storage.
    pub fn new(storage: DynStorage, keys: JwtKeys, limits: Limits) -> Self {
        let schema = schema_builder().data(storage.clone()).data(limits).finish();
        Self {
            schema,
            storage,
            keys,
        }
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> StoreResult<()> {
        self.storage.ping().await
    }

    /// Database commands sent so far, by command name.
    pub fn command_counts(&self) -> BTreeMap<String, u64> {
        self.storage.command_counts()
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
        let batches = batch::Batches::new();
        let request = request
            .into()
            .data(auth)
            .data(RequestReads::new(self.storage.clone(), batches.clone()));
        let mut response = batch::drive(self.schema.execute(request), batches).await;
        error::ensure_codes(&mut response);
        response
    }
}

/// The storage, from the schema data.
pub(crate) fn store<'a>(ctx: &Context<'a>) -> &'a DynStorage {
    ctx.data_unchecked::<DynStorage>()
}

/// The request's reads in effect now.
pub(crate) fn reads(ctx: &Context<'_>) -> Arc<Reads> {
    ctx.data_unchecked::<RequestReads>().current()
}

/// The caller's auth state, from the request data.
pub(crate) fn auth<'a>(ctx: &Context<'a>) -> &'a AuthState {
    ctx.data_unchecked::<AuthState>()
}
