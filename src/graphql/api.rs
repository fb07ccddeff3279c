//! The schema and what each request needs: building the API over the services, admitting and
//! running operations, alone or in a batch.

use std::collections::BTreeMap;
use std::sync::Arc;

use tracing::Instrument as _;

use super::*;
use crate::auth::{AuthState, JwtKeys};
use crate::domain::{DomainError, WordLists};
use crate::rate::{retry_after_secs, ClientKey, Limiter};
use crate::service::closing::{Closing, Stage};
use crate::service::Services;
use crate::store::{DynStorage, StoreResult};
use crate::telemetry::metrics::Counter;
use crate::telemetry::request::RequestMetrics;

/// The schema and what each request needs: the GraphQL entry point of the program.
#[derive(Clone)]
pub struct Api {
    pub(super) schema: AppSchema,
    pub(super) storage: DynStorage,
    pub(super) keys: JwtKeys,
    /// The word lists, also in the schema data.
    pub(super) words: Arc<WordLists>,
    pub(super) live: Arc<live::Live>,
    pub(super) document: limits::DocumentLimits,
    pub(super) shape: Arc<cost::Shape>,
    pub(super) persisted: Option<persisted::PersistedQueries>,
    pub(super) parsed: documents::ParsedDocuments,
    /// Operations of callers that are not signed in, per client.
    pub(super) anonymous: Arc<Limiter<ClientKey>>,
    /// Operations of signed-in callers, per user, weighted by cost.
    pub(super) signed_in: Arc<Limiter<String>>,
    /// The client this handle serves (see [`Api::for_client`]); `None` in process.
    pub(super) client: Option<ClientKey>,
    pub(super) subscriptions: Arc<shared::Subscriptions>,
    pub(super) subscription_cost: Arc<limits::SubscriptionCost>,
    pub(super) closing: Closing,
    /// The workflows every change goes through.
    pub(super) services: Services,
    /// Requests, their durations and errors, as `/metrics` shows them.
    pub(super) metrics: Arc<RequestMetrics>,
    /// Operations refused because their WebSocket ran as many as it may at once.
    pub(super) socket_refused: Arc<Counter>,
}

/// Operations refused by each rate limit so far.
#[derive(Debug, Clone, Copy)]
pub struct RateLimited {
    /// Operations of callers that are not signed in, past their client's allowance.
    pub anonymous: u64,
    /// Operations of signed-in callers, past their user's allowance.
    pub signed_in: u64,
    /// Mutations past their author's allowance.
    pub author: u64,
    /// Subscriptions past the process's or the client's cap.
    pub subscriptions: u64,
    /// Operations past the number one WebSocket may run at once.
    pub socket_operations: u64,
}

impl Api {
    /// Builds the schema over a storage and its services, with its limits.
    pub fn new(storage: DynStorage, keys: JwtKeys, limits: Limits, services: Services) -> Self {
        let live = Arc::new(live::Live::new(storage.clone(), limits.live));
        let words = services.word_lists().clone();
        let closing = services.closing().clone();
        let mut builder = schema_builder()
            .limit_depth(limits.max_query_depth)
            .data(storage.clone())
            .data(limits)
            .data(live.clone())
            .data(services.clone())
            .data(words.clone());
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
            signed_in: Arc::new(Limiter::new(limits.signed_in_rate)),
            client: None,
            closing,
            services,
            metrics: Arc::new(RequestMetrics::new(limits.metric_operations)),
            socket_refused: Arc::default(),
        }
    }

    /// The workflows every change goes through (for transports other than GraphQL).
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// Every event this process commits from now on.
    pub fn events(&self) -> tokio::sync::broadcast::Receiver<Arc<crate::domain::Event>> {
        self.services.events()
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
            signed_in: self.signed_in.refused(),
            author: self.services.changes_refused(),
            subscriptions: self.subscriptions.refused(),
            socket_operations: self.socket_refused.get(),
        }
    }

    /// The shutdown state: the stage the process is in, and the writes it waits for.
    pub fn closing(&self) -> &Closing {
        &self.closing
    }

    /// Starts the shutdown of the live API: every subscription ends (its transport sends
    /// `complete`), streaming connections refuse new operations and close once theirs have
    /// ended, and the change stream is closed.
    pub fn drain(&self) {
        self.closing.advance(Stage::Draining);
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
        self.authenticate_until(authorization).0
    }

    /// The caller's identity, and until when its token is accepted: the token's checks, then
    /// the names moderators reserved (this process's copy: no database command).
    pub(super) fn authenticate_until(
        &self,
        authorization: Option<&str>,
    ) -> (AuthState, Option<u64>) {
        match self.keys.authenticate_until(authorization) {
            (AuthState::Authenticated(viewer), until) => {
                match self.services.name_refusal(&viewer.author.name) {
                    Some(why) => (AuthState::Rejected(why), None),
                    None => (AuthState::Authenticated(viewer), until),
                }
            }
            other => other,
        }
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

    /// Counts one admitted operation of a signed-in caller against its user's allowance, weighted
    /// by its cost ([`weight`]): `RATE_LIMITED` past it. Callers that are not signed in are
    /// counted per client ([`Api::count_anonymous`]).
    pub(super) fn count_signed_in(
        &self,
        auth: &AuthState,
        checked: &limits::Checked,
    ) -> Result<(), DomainError> {
        let AuthState::Authenticated(viewer) = auth else {
            return Ok(());
        };
        let spends = weight(checked.usage.cost, self.document.max_cost);
        self.signed_in
            .check_n(&viewer.author.id, spends)
            .map_err(|wait| {
                let secs = retry_after_secs(wait);
                DomainError::RateLimited {
                    message: format!(
                        "too many operations for this user: try again in {secs} s (an operation \
                         that costs more counts more)"
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
    pub(super) async fn admit(
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

    /// Checks that the database answers.
    pub async fn ping(&self) -> StoreResult<()> {
        self.storage.health().ping().await
    }

    /// Whether what an execution read is still current (see [`crate::store::recording`]);
    /// `None` without the read cache.
    pub fn freshness(&self) -> Option<&dyn crate::store::Freshness> {
        self.storage.freshness()
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
        if let Err(limited) = self.count_signed_in(&auth, checked) {
            return error::response(limited);
        }
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

/// What an operation of `cost` spends of its user's allowance: 1, and one more for each tenth of
/// the cost limit `max_cost` it costs past the first (so at most 10 under the limit).
fn weight(cost: usize, max_cost: usize) -> u32 {
    let tenth = (max_cost / 10).max(1);
    u32::try_from(cost.div_ceil(tenth).clamp(1, 10)).unwrap_or(10)
}

#[cfg(test)]
mod tests {
    use super::weight;

    #[test]
    fn an_operation_spends_one_more_for_each_further_tenth_of_the_cost_limit() {
        assert_eq!(weight(0, 250_000), 1);
        assert_eq!(weight(25_000, 250_000), 1);
        assert_eq!(weight(25_001, 250_000), 2);
        assert_eq!(weight(50_000, 250_000), 2);
        assert_eq!(weight(249_999, 250_000), 10);
        assert_eq!(weight(250_000, 250_000), 10);
        assert_eq!(weight(7, 5), 7, "a limit under ten counts each unit");
    }
}
