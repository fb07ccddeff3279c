//! The GraphQL API: schema construction, per-request context and execution.

pub mod batch;
mod bounded;
pub mod closing;
pub mod cost;
mod documents;
pub mod error;
pub mod html;
pub mod limits;
pub mod live;
pub mod loaders;
mod moderation;
mod mutation;
pub mod observe;
mod persisted;
mod query;
pub mod shared;
mod spans;
mod subscription;
pub mod types;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_graphql::{Context, Schema};
use tracing::Instrument as _;

use crate::auth::{AuthState, JwtKeys};
use crate::config::RateLimit;
use crate::domain::{
    CommentText, CursorKind, DomainError, EditRules, Layout, ModerationMode, PageArgs, Paging,
    Screening, WordLists,
};
use crate::rate::{retry_after_secs, ClientKey, Limiter};
use crate::store::{DynStorage, ReadScope, StoreResult};
use crate::telemetry::metrics::Counter;
use crate::telemetry::request::RequestMetrics;

pub use mutation::Mutation;
pub use query::Query;
pub use subscription::Subscription;

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

/// Builds the schema (without a store and limits: enough to print the SDL).
pub fn schema_builder() -> async_graphql::SchemaBuilder<Query, Mutation, Subscription> {
    Schema::build(Query, Mutation, Subscription)
        .enable_federation()
        .enable_subscription_in_federation()
}

/// Mutations per author, counted by token `sub`.
pub struct AuthorRate(pub Limiter<String>);

/// Votes per user, counted by token `sub` apart from other mutations.
pub struct VoterRate(pub Limiter<String>);

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
    /// The word lists, also in the schema data.
    words: Arc<WordLists>,
    live: Arc<live::Live>,
    document: limits::DocumentLimits,
    shape: Arc<cost::Shape>,
    persisted: Option<persisted::PersistedQueries>,
    parsed: documents::ParsedDocuments,
    /// Operations of callers that are not signed in, per client.
    anonymous: Arc<Limiter<ClientKey>>,
    /// The client this handle serves (see [`Api::for_client`]); `None` in process.
    client: Option<ClientKey>,
    subscriptions: Arc<shared::Subscriptions>,
    subscription_cost: Arc<limits::SubscriptionCost>,
    closing: closing::Closing,
    /// Requests, their durations and errors, as `/metrics` shows them.
    metrics: Arc<RequestMetrics>,
    /// Operations refused because their WebSocket ran as many as it may at once.
    socket_refused: Arc<Counter>,
}

/// Operations refused by each rate limit so far.
#[derive(Debug, Clone, Copy)]
pub struct RateLimited {
    /// Operations of callers that are not signed in, past their client's allowance.
    pub anonymous: u64,
    /// Mutations past their author's allowance.
    pub author: u64,
    /// Subscriptions past the process's or the client's cap.
    pub subscriptions: u64,
    /// Operations past the number one WebSocket may run at once.
    pub socket_operations: u64,
}

impl Api {
    /// Builds the schema over a storage, with its limits, the mutation rate per author and the
    /// word lists posts and edits are screened against.
    pub fn new(
        storage: DynStorage,
        keys: JwtKeys,
        limits: Limits,
        author_rate: RateLimit,
        words: Arc<WordLists>,
    ) -> Self {
        let live = Arc::new(live::Live::new(storage.clone(), limits.live));
        let closing = closing::Closing::default();
        let mut builder = schema_builder()
            .limit_depth(limits.max_query_depth)
            .data(storage.clone())
            .data(limits)
            .data(live.clone())
            .data(closing.clone())
            .data(html::HtmlCache::new(html::HTML_CACHE_BYTES))
            .data(words.clone())
            .data(AuthorRate(Limiter::new(author_rate)))
            .data(VoterRate(Limiter::new(limits.vote_rate)));
        if !limits.introspection {
            builder = builder.disable_introspection();
        }
        if limits.traces {
            builder = builder.extension(spans::Validation);
        }
        let schema = builder.finish();
        let shape = Arc::new(cost::Shape::from_sdl(&schema.sdl()));
        let subscription_cost = limits::SubscriptionCost::new(
            &schema.sdl(),
            limits.max_subscription_complexity,
            limits.max_page_size,
        );
        Self {
            schema,
            storage,
            keys,
            words,
            live,
            subscriptions: shared::Subscriptions::new(limits.subscription_caps),
            subscription_cost: Arc::new(subscription_cost),
            document: limits.document,
            shape,
            persisted: (limits.apq_cache > 0).then(|| {
                persisted::PersistedQueries::new(limits.apq_cache, limits.apq_cache_bytes)
            }),
            parsed: documents::ParsedDocuments::default(),
            anonymous: Arc::new(Limiter::new(limits.anonymous_rate)),
            client: None,
            closing,
            metrics: Arc::new(RequestMetrics::new(limits.metric_operations)),
            socket_refused: Arc::default(),
        }
    }

    /// The word lists posts and edits are screened against.
    pub fn word_lists(&self) -> &Arc<WordLists> {
        &self.words
    }

    /// The request metrics of this API (and of the server that serves it).
    pub fn request_metrics(&self) -> &Arc<RequestMetrics> {
        &self.metrics
    }

    /// Operations refused by each rate limit so far.
    pub fn rate_limited(&self) -> RateLimited {
        RateLimited {
            anonymous: self.anonymous.refused(),
            author: self
                .schema
                .data::<AuthorRate>()
                .map_or(0, |rate| rate.0.refused()),
            subscriptions: self.subscriptions.refused(),
            socket_operations: self.socket_refused.get(),
        }
    }

    /// The shutdown state: the stage the process is in, and the writes it waits for.
    pub fn closing(&self) -> &closing::Closing {
        &self.closing
    }

    /// Starts the shutdown of the live API: every subscription ends (its transport sends
    /// `complete`), streaming connections refuse new operations and close once theirs have
    /// ended, and the change stream is closed.
    pub fn drain(&self) {
        self.closing.advance(closing::Stage::Draining);
        self.live.close();
    }

    /// Opens the change feed (see `Live::open_now`).
    pub fn follow_changes(&self) {
        self.live.open_now();
    }

    /// Subscriptions held now (those still starting included).
    pub fn subscriptions_held(&self) -> usize {
        self.subscriptions.held()
    }

    /// This API as a client (by its address) uses it: the operations of the streaming
    /// connections opened through it are counted against that client's allowance while they
    /// are not signed in.
    pub fn for_client(&self, client: Option<ClientKey>) -> Api {
        Api {
            client,
            ..self.clone()
        }
    }

    /// The caller's identity from a bearer `authorization` (an `Authorization` header value).
    pub fn authenticate(&self, authorization: Option<&str>) -> AuthState {
        self.keys.authenticate(authorization)
    }

    /// Counts one operation of a caller against its client's allowance when the caller is not
    /// signed in (no token, or a token that was refused): `RATE_LIMITED` past it. Signed-in
    /// callers are not counted here (their mutations count per author), nor are operations
    /// without a client (the schema run in process).
    pub fn count_anonymous(
        &self,
        auth: &AuthState,
        client: Option<&ClientKey>,
    ) -> Result<(), DomainError> {
        let (false, Some(client)) = (matches!(auth, AuthState::Authenticated(_)), client) else {
            return Ok(());
        };
        self.anonymous.check(client).map_err(|wait| {
            let secs = retry_after_secs(wait);
            DomainError::RateLimited {
                message: format!(
                    "too many requests from this address: try again in {secs} s, or sign in"
                ),
                retry_after_secs: secs,
            }
        })
    }

    /// What the engine does not check, checked before it runs a request: the document's tokens,
    /// its persisted query, its parse (or the document parsed from the same text before) and its
    /// shape, depth and cost (`limits`). Gives the request ready to run (parsed) and what coding
    /// the engine's own errors needs, or the response that refuses it. A document sent with its
    /// persisted-query hash is kept only once it has passed all of that.
    async fn admit(
        &self,
        mut request: async_graphql::Request,
        seen: &mut observe::Operation,
    ) -> Result<(async_graphql::Request, limits::Checked), async_graphql::Response> {
        let refuse = |error: async_graphql::ServerError| {
            let mut response = async_graphql::Response::from_errors(vec![error]);
            error::ensure_codes(&mut response);
            response
        };
        self.document.check_tokens(&request.query).map_err(refuse)?;
        let pending = match &self.persisted {
            Some(persisted) => persisted.resolve(&mut request).map_err(refuse)?,
            None => None,
        };
        let recalled = self.parsed.recall(&mut request).await;
        let read_only = request
            .data
            .contains_key(&std::any::TypeId::of::<limits::ReadOnly>());
        let checked = self.document.check(&mut request, read_only, &self.shape);
        if checked.as_ref().err().is_none_or(observe::parsed) {
            *seen = observe::operation(&mut request);
        }
        let checked = checked.map_err(refuse)?;
        let operation = request.operation_name.clone();
        if let Ok(document) = request.parsed_query() {
            self.subscription_cost
                .check(document, operation.as_deref())
                .map_err(refuse)?;
        }
        if !recalled {
            self.parsed.keep(&mut request).await;
        }
        if let (Some(persisted), Some(pending)) = (&self.persisted, pending) {
            persisted.keep(pending, &request);
        }
        Ok((request, checked))
    }

    /// Live updates now: subscriptions in place, the runs that serve them (identical
    /// subscriptions share one), and how often this process opened its change stream.
    pub fn live_counts(&self) -> LiveCounts {
        let (subscribers, runs) = self.subscriptions.counts();
        LiveCounts {
            subscribers,
            runs,
            streams_opened: self.live.streams_opened(),
        }
    }

    /// What a streaming connection (WebSocket or Server-Sent Events) runs its operations with:
    /// the caller's identity from a bearer `authorization` (an `Authorization` header, or the
    /// `connection_init` payload of a WebSocket).
    pub fn connection(&self, authorization: Option<&str>, client: Option<ClientKey>) -> Connection {
        let (auth, until) = self.keys.authenticate_until(authorization);
        let max = self
            .schema
            .data::<Limits>()
            .map_or(usize::MAX, |l| l.max_ws_operations);
        Connection {
            auth,
            client,
            until,
            running: Arc::new(tokio::sync::watch::Sender::new(0)),
            max,
        }
    }

    /// Runs an operation of a streaming connection: a subscription gives a response per event;
    /// a query or mutation gives one. Each operation of a connection that is not signed in
    /// counts against its client's allowance ([`Api::count_anonymous`]).
    pub fn execute_stream(
        &self,
        request: async_graphql::Request,
        connection: &Connection,
    ) -> futures::stream::BoxStream<'static, async_graphql::Response> {
        use futures::StreamExt;
        let metrics = self.metrics.clone();
        self.stream_responses(request, connection)
            .inspect(move |response| observe::stream_errors(&metrics, response))
            .boxed()
    }

    /// The responses of an operation of a streaming connection (see [`Api::execute_stream`]).
    fn stream_responses(
        &self,
        request: async_graphql::Request,
        connection: &Connection,
    ) -> futures::stream::BoxStream<'static, async_graphql::Response> {
        use futures::StreamExt;
        if connection.expired() {
            return refusal(expired()).boxed();
        }
        // A connection that is not signed in spends its client's allowance on each operation
        // (an SSE request counted its one operation already: its API has no client).
        if let Err(limited) = self.count_anonymous(&connection.auth, self.client.as_ref()) {
            return refusal(limited).boxed();
        }
        let Some(slot) = connection.take_slot() else {
            self.socket_refused.inc();
            return refusal(DomainError::RateLimited {
                message: format!(
                    "at most {} operations may run at once on one connection",
                    connection.max
                ),
                retry_after_secs: 1,
            })
            .boxed();
        };
        if self.closing.stage() >= closing::Stage::Draining {
            // Counted while it runs, like any operation: a WebSocket closes only once its
            // `complete` is written.
            return refusal(shutting_down())
                .map(move |response| {
                    let _running = &slot;
                    response
                })
                .boxed();
        }
        let (api, connection) = (self.clone(), connection.clone());
        let until = connection.until;
        let document = document_identity(&request);
        let responses = futures::stream::once(async move {
            api.admit(request, &mut observe::Operation::default())
                .await
                .map(|ok| (api, connection, document, ok))
        })
        .flat_map(move |admitted| {
            let (api, connection, document, (mut request, checked)) = match admitted {
                Ok(admitted) => admitted,
                Err(refused) => return futures::stream::once(async { refused }).boxed(),
            };
            if !is_subscription(&mut request) {
                return api.run_stream(request, checked, connection.auth, None);
            }
            // Admitted while the process began to shut down: refused like one sent after.
            if api.closing.stage() >= closing::Stage::Draining {
                return refusal(shutting_down()).boxed();
            }
            let client = shared::ClientKey::of(&connection.auth, connection.client);
            let permit = match api.subscriptions.permit(client) {
                Ok(permit) => permit,
                Err(refused) => return refusal(refused).boxed(),
            };
            let key = api.subscriptions.key(document, &request, &connection.auth);
            let auth = connection.auth;
            let runner = api.clone();
            // A subscription ends when the process shuts down; its transport then sends
            // `complete`, so its client knows to subscribe again elsewhere.
            let ends = api.closing.reached(closing::Stage::Draining);
            api.subscriptions
                .join(key, permit, move |ready| {
                    runner.run_stream(request, checked, auth, Some(ready))
                })
                .take_until(ends)
                .boxed()
        })
        .map(move |response| {
            let _running = &slot;
            response
        });
        match until {
            Some(until) => until_expiry(responses, until).boxed(),
            None => responses.boxed(),
        }
    }

    /// Runs an admitted request as a stream of responses, as `auth` (see the comment on traces
    /// below).
    fn run_stream(
        &self,
        request: async_graphql::Request,
        checked: limits::Checked,
        auth: AuthState,
        ready: Option<shared::Ready>,
    ) -> futures::stream::BoxStream<'static, async_graphql::Response> {
        use futures::StreamExt;
        let batches = batch::Batches::new();
        let mut request = request
            .data(auth)
            .data(RequestReads::new(self.storage.clone(), batches.clone()));
        if let Some(ready) = ready {
            request = request.data(ready);
        }
        let responses = self.schema.execute_stream(request);
        let responses = batch::drive_stream(responses, batches).map(move |mut response| {
            checked.code_engine_errors(&mut response);
            error::ensure_codes(&mut response);
            response
        });
        // A subscription, and any operation of a WebSocket, runs in a task of its own, for as
        // long as its client stays: it is not traced (its spans would be traces of their own,
        // without the request that asked for them). An operation over Server-Sent Events runs
        // in its request, and its spans stay in the request's trace.
        match self.schema.data::<Limits>().is_some_and(|l| l.traces) {
            true => {
                let untraced = opentelemetry::Context::new().with_telemetry_suppressed();
                opentelemetry::context::FutureExt::with_context(responses, untraced).boxed()
            }
            false => responses.boxed(),
        }
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> StoreResult<()> {
        self.storage.health().ping().await
    }

    /// Database commands sent so far, by command name.
    pub fn command_counts(&self) -> BTreeMap<String, u64> {
        self.storage.health().command_counts()
    }

    /// Writes the store's metrics (command durations, the connection pool, the change feed).
    pub fn write_store_metrics(&self, out: &mut crate::telemetry::metrics::Exposition) {
        self.storage.health().write_metrics(out);
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
        self.execute_as(request, self.authenticate(authorization))
            .await
    }

    /// Runs one request as a caller already authenticated ([`Api::authenticate`]).
    pub async fn execute_as(
        &self,
        request: impl Into<async_graphql::Request>,
        auth: AuthState,
    ) -> async_graphql::Response {
        self.execute_observed(request, auth).await.0
    }

    /// [`Api::execute_as`], also saying what the request ran (as far as it was read).
    pub async fn execute_observed(
        &self,
        request: impl Into<async_graphql::Request>,
        auth: AuthState,
    ) -> (async_graphql::Response, observe::Operation) {
        let mut seen = observe::Operation::default();
        let response = match self
            .admit(request.into(), &mut seen)
            .instrument(spans::parse())
            .await
        {
            Ok((request, checked)) => self.run(request, &checked, auth).await,
            Err(refused) => refused,
        };
        (response, seen)
    }

    /// Runs the operations of a batch, in order, as a caller already authenticated: one
    /// response each. Every operation is checked before any runs, and their costs, aliases and
    /// root fields together must stay under the limits one document has; if they do not, none
    /// runs and each gets the refusal. A caller that is not signed in spends one of its
    /// `client`'s allowance on each operation after the first (the first was counted with the
    /// request): `RATE_LIMITED` in its place past it.
    pub async fn execute_batch(
        &self,
        requests: Vec<async_graphql::Request>,
        auth: AuthState,
        client: Option<&ClientKey>,
    ) -> Vec<async_graphql::Response> {
        let mut admitted = Vec::with_capacity(requests.len());
        for request in requests {
            admitted.push(
                self.admit(request, &mut observe::Operation::default())
                    .instrument(spans::parse())
                    .await,
            );
        }
        let usages = admitted
            .iter()
            .filter_map(|a| a.as_ref().ok().map(|(_, checked)| &checked.usage));
        if let Err(refusal) = self.document.check_batch(usages) {
            return admitted
                .into_iter()
                .map(|admitted| match admitted {
                    Ok(_) => {
                        let mut response =
                            async_graphql::Response::from_errors(vec![refusal.clone()]);
                        error::ensure_codes(&mut response);
                        response
                    }
                    Err(refused) => refused,
                })
                .collect();
        }
        let mut responses = Vec::with_capacity(admitted.len());
        for (n, admitted) in admitted.into_iter().enumerate() {
            let counted = match n {
                0 => Ok(()),
                _ => self.count_anonymous(&auth, client),
            };
            responses.push(match (counted, admitted) {
                (Err(limited), _) => error::response(limited),
                (Ok(()), Ok((request, checked))) => self.run(request, &checked, auth.clone()).await,
                (Ok(()), Err(refused)) => refused,
            });
        }
        responses
    }

    /// Runs an admitted request as `auth`, in its operation's span.
    async fn run(
        &self,
        mut request: async_graphql::Request,
        checked: &limits::Checked,
        auth: AuthState,
    ) -> async_graphql::Response {
        let span = spans::operation(&mut request);
        self.run_operation(request, checked, auth)
            .instrument(span)
            .await
    }

    async fn run_operation(
        &self,
        request: async_graphql::Request,
        checked: &limits::Checked,
        auth: AuthState,
    ) -> async_graphql::Response {
        let batches = batch::Batches::new();
        let request = request
            .data(auth)
            .data(RequestReads::new(self.storage.clone(), batches.clone()));
        let timeout = self.schema.data::<Limits>().map(|l| l.request_timeout);
        let run = batch::drive(self.schema.execute(request), batches);
        let mut response = match timeout {
            Some(timeout) => tokio::time::timeout(timeout, run)
                .await
                .unwrap_or_else(|_| {
                    let error = error::gql(DomainError::Unavailable(format!(
                        "the request took longer than {} s; the database may be unavailable",
                        timeout.as_secs()
                    )));
                    async_graphql::Response::from_errors(vec![
                        error.into_server_error(Default::default())
                    ])
                }),
            None => run.await,
        };
        checked.code_engine_errors(&mut response);
        error::ensure_codes(&mut response);
        response
    }
}

/// A streaming connection: who is on it, and how many operations it runs.
#[derive(Clone)]
pub struct Connection {
    auth: AuthState,
    /// The client (the peer's address, or the configured proxy header's) its subscriptions
    /// count against when it is not signed in.
    client: Option<ClientKey>,
    /// Until when its token is accepted (seconds since the epoch; `None` without a token).
    until: Option<u64>,
    /// Operations running now.
    running: Arc<tokio::sync::watch::Sender<usize>>,
    max: usize,
}

impl Connection {
    /// Why the connection's credentials were refused, if they were.
    pub fn rejected(&self) -> Option<&str> {
        match &self.auth {
            AuthState::Rejected(why) => Some(why),
            _ => None,
        }
    }

    /// A place for one more operation, given back when the guard drops (`None` when full).
    fn take_slot(&self) -> Option<Slot> {
        let taken = self.running.send_if_modified(|n| {
            let room = *n < self.max;
            if room {
                *n += 1;
            }
            room
        });
        taken.then(|| Slot(self.running.clone()))
    }

    /// Resolves once none of the connection's operations is running (at once if none is). An
    /// operation counts until its stream is dropped, which the WebSocket protocol does just
    /// before it sends the operation's `complete`.
    pub fn operations_ended(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut running = self.running.subscribe();
        async move {
            let _ = running.wait_for(|n| *n == 0).await;
        }
    }
}

impl Connection {
    /// Whether its token has expired (a connection without a token never does).
    pub fn expired(&self) -> bool {
        self.until.is_some_and(|until| now_secs() > until)
    }

    /// How long until its token expires (`None` without a token).
    pub fn expires_in(&self) -> Option<std::time::Duration> {
        self.until.map(time_left)
    }
}

/// Live updates now, as `/metrics` shows them.
#[derive(Debug, Clone, Copy)]
pub struct LiveCounts {
    /// Subscriptions in place (following the change feed).
    pub subscribers: usize,
    /// Runs that serve them: identical subscriptions share one.
    pub runs: usize,
    /// Times this process opened its change stream.
    pub streams_opened: u64,
}

/// The time left until a token accepted until `until` (seconds since the epoch) is refused.
fn time_left(until: u64) -> std::time::Duration {
    let refused = std::time::Duration::from_secs(until.saturating_add(1));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    refused.saturating_sub(now)
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The error of an operation sent while the process shuts down.
fn shutting_down() -> DomainError {
    DomainError::Unavailable(
        "the server is shutting down: connect again (to another server) and send it there".into(),
    )
}

/// The error of an operation on a connection whose token expired.
fn expired() -> DomainError {
    DomainError::Unauthenticated(
        "the connection's token has expired: connect again with a new one".into(),
    )
}

/// One response refusing an operation.
fn refusal(why: DomainError) -> impl futures::Stream<Item = async_graphql::Response> {
    let response = async_graphql::Response::from_errors(vec![
        error::gql(why).into_server_error(Default::default())
    ]);
    futures::stream::once(futures::future::ready(response))
}

/// What names a request's document before it is admitted: the SHA-256 of its text, as a
/// persisted query is named, or that hash alone for a persisted query sent without its text
/// (`None` when it has neither).
fn document_identity(request: &async_graphql::Request) -> Option<String> {
    use sha2::{Digest, Sha256};
    if !request.query.is_empty() {
        return Some(format!("{:x}", Sha256::digest(request.query.as_bytes())));
    }
    let async_graphql::Value::Object(persisted) = request.extensions.get("persistedQuery")? else {
        return None;
    };
    match persisted.get("sha256Hash")? {
        async_graphql::Value::String(hash) => Some(hash.to_ascii_lowercase()),
        _ => None,
    }
}

/// Whether a request (admitted, so parsed) runs a subscription.
fn is_subscription(request: &mut async_graphql::Request) -> bool {
    use async_graphql::parser::types::OperationType;
    let operation = request.operation_name.clone();
    let Ok(document) = request.parsed_query() else {
        return false;
    };
    limits::chosen_operation(document, operation.as_deref())
        .is_some_and(|op| op.ty == OperationType::Subscription)
}

/// The responses until the token accepted until `until` (seconds since the epoch) expires;
/// then one UNAUTHENTICATED error, and the end.
fn until_expiry(
    responses: impl futures::Stream<Item = async_graphql::Response> + Send + 'static,
    until: u64,
) -> impl futures::Stream<Item = async_graphql::Response> + Send + 'static {
    use futures::StreamExt;
    let deadline = tokio::time::Instant::now() + time_left(until);
    let state = Some((
        responses.boxed(),
        Box::pin(tokio::time::sleep_until(deadline)),
    ));
    futures::stream::unfold(state, |state| async move {
        let (mut responses, mut sleep) = state?;
        tokio::select! {
            biased;
            next = responses.next() => next.map(|r| (r, Some((responses, sleep)))),
            () = &mut sleep => {
                let response = async_graphql::Response::from_errors(vec![
                    error::gql(expired()).into_server_error(Default::default())
                ]);
                Some((response, None))
            }
        }
    })
}

/// One running operation of a connection.
struct Slot(Arc<tokio::sync::watch::Sender<usize>>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
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

/// Screens a comment's text against the word lists, from the schema data: `Banned` when it holds
/// a banned word or phrase, else `Suspect` when it holds a suspect one, else `Clean`. The one
/// call for the post and edit paths, with their parsed text.
pub fn screen(ctx: &Context<'_>, text: &CommentText) -> Screening {
    ctx.data_unchecked::<Arc<WordLists>>().screen(text.as_str())
}

/// The caller's auth state, from the request data.
pub(crate) fn auth<'a>(ctx: &Context<'a>) -> &'a AuthState {
    ctx.data_unchecked::<AuthState>()
}
