//! The GraphQL API: schema construction, per-request context and execution.

mod auto_close;
pub mod batch;
mod bounded;
pub mod cost;
mod documents;
pub mod error;
pub mod events;
mod guest_post;
mod guests;
mod history;
mod ignoring;
pub mod inbox;
pub mod limits;
pub mod live;
pub mod loaders;
mod moderating;
mod mutation;
mod names;
pub mod observe;
mod persisted;
mod personal;
mod query;
pub mod shared;
mod spans;
mod subscription;
pub mod types;
pub mod webhooks;

mod api;
mod reads;
mod stream;

use std::sync::Arc;

use async_graphql::{Context, Schema};

use crate::auth::AuthState;
use crate::config::RateLimit;
use crate::domain::paging::Cursor;
use crate::domain::{
    CursorKind, DomainError, EditRules, Layout, ModerationMode, PageArgs, Paging, Window,
};
use crate::service::Services;
use crate::store::DynStorage;

pub use api::{Api, RateLimited};
pub use reads::{Reads, RequestReads};
pub use stream::{Connection, LiveCounts};
pub use subscription::Subscription;

/// Reads: the core queries, the event log and the webhook endpoints.
#[derive(async_graphql::MergedObject, Default)]
pub struct Query(
    query::CoreQuery,
    moderating::ModerationQuery,
    events::EventQuery,
    webhooks::WebhookQuery,
    inbox::InboxQuery,
    history::HistoryQuery,
    guests::GuestQuery,
);

/// Every field is nullable: a failed mutation is `null` with its error, and the other fields of
/// the same request keep their results (GraphQL's null propagation stops at the field).
#[derive(async_graphql::MergedObject, Default)]
pub struct Mutation(
    mutation::CoreMutation,
    names::NameMutation,
    webhooks::WebhookMutation,
    inbox::InboxMutation,
    guests::GuestMutation,
    auto_close::ClosingMutation,
    ignoring::IgnoreMutation,
    personal::PersonalMutation,
);

/// The threadql schema type.
pub type AppSchema = Schema<Query, Mutation, Subscription>;

/// Page sizes and text limits, from config.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Page size when `first` is not given.
    pub default_page_size: usize,
    /// Largest `first` or `last` accepted.
    pub max_page_size: usize,
    /// Longest comment text, in characters.
    pub max_text_chars: usize,
    /// Layout of discussions created without one.
    pub default_layout: Layout,
    /// How discussions moderate until a moderator sets it for one.
    pub default_moderation: ModerationMode,
    /// Reports that hold a public comment (0: never).
    pub reports_to_hold: u64,
    /// Votes per user.
    pub vote_rate: RateLimit,
    /// How long authors may edit their comments.
    pub edit_rules: EditRules,
    /// Deepest field nesting of a query.
    pub max_query_depth: usize,
    /// Tokens, aliases, root fields, depth and cost of a document.
    pub document: limits::DocumentLimits,
    /// Whether the schema can be introspected.
    pub introspection: bool,
    /// Queries kept for automatic persisted queries (0: off).
    pub apq_cache: usize,
    /// Most bytes of query text kept for automatic persisted queries.
    pub apq_cache_bytes: usize,
    /// Longest a request may take.
    pub request_timeout: std::time::Duration,
    /// Live updates.
    pub live: live::LiveConfig,
    /// Most operations one WebSocket connection may run at once.
    pub max_ws_operations: usize,
    /// Operations per client address of callers that are not signed in.
    pub anonymous_rate: RateLimit,
    /// Operations per signed-in user, weighted by cost.
    pub signed_in_rate: RateLimit,
    /// Subscriptions held at once, per process and per client.
    pub subscription_caps: shared::SubscriptionCaps,
    /// Highest cost of a subscription's selection.
    pub max_subscription_complexity: usize,
    /// Operation names the request metrics give series of their own.
    pub metric_operations: usize,
    /// Whether traces are exported: the engine's validation then gets a span of its own.
    pub traces: bool,
}

impl Limits {
    /// Validates the paging arguments of a list of `kind`.
    pub fn paging(&self, args: &PageArgs, kind: CursorKind) -> async_graphql::Result<Paging> {
        Paging::from_args(args, kind, self.default_page_size, self.max_page_size)
            .map_err(error::gql)
    }

    /// Validates `first`/`after` of a list of `kind` that pages forward only: the cursor to
    /// start after (none for the first page) and the page size.
    pub fn forward(
        &self,
        first: Option<i32>,
        after: Option<String>,
        kind: CursorKind,
    ) -> async_graphql::Result<(Option<Cursor>, usize)> {
        let args = PageArgs {
            first,
            after,
            ..PageArgs::default()
        };
        match self.paging(&args, kind)?.window {
            Window::After { cursor, limit } => Ok((cursor, limit)),
            _ => Err(error::gql(DomainError::bad_input(
                "this list pages forward only: `first` and `after`",
            ))),
        }
    }
}

/// Builds the schema (without a store and limits: enough to print the SDL).
pub fn schema_builder() -> async_graphql::SchemaBuilder<Query, Mutation, Subscription> {
    Schema::build(Query::default(), Mutation::default(), Subscription)
        .enable_federation()
        .enable_subscription_in_federation()
}

/// The SDL of the schema, as committed in `schema.graphql`.
pub fn sdl() -> String {
    schema_builder()
        .finish()
        .sdl_with_options(async_graphql::SDLExportOptions::new().federation())
}

/// The workflows, from the schema data.
pub(crate) fn services<'a>(ctx: &Context<'a>) -> &'a Services {
    ctx.data_unchecked::<Services>()
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
