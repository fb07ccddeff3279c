//! Streaming operations: subscriptions and the operations of WebSocket and SSE connections,
//! with their caps, expiry and shutdown.

use std::sync::Arc;

use super::*;
use crate::auth::AuthState;
use crate::domain::DomainError;
use crate::rate::ClientKey;
use crate::service::closing::Stage;

impl Api {
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
        let (auth, until) = self.authenticate_until(authorization);
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
        if self.closing.stage() >= Stage::Draining {
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
            if let Err(limited) = api.count_signed_in(&connection.auth, &checked) {
                return refusal(limited).boxed();
            }
            if !is_subscription(&mut request) {
                return api.run_stream(request, checked, connection.auth, None);
            }
            // Admitted while the process began to shut down: refused like one sent after.
            if api.closing.stage() >= Stage::Draining {
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
            let ends = api.closing.reached(Stage::Draining);
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
