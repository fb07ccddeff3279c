//! Subscriptions held at once (capped per process and per client) and shared runs: subscribers
//! whose request is the same (document, operation, variables and viewer) share one run of it,
//! so each event is resolved once for all of them and the results are fanned out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use async_graphql::Response;
use futures::stream::{BoxStream, StreamExt};
use tokio::sync::broadcast::{self, error::RecvError};

use super::error::gql;
use crate::auth::{AuthState, Viewer};
use crate::domain::DomainError;

/// Results a subscriber may fall behind by before it is told it missed some.
const BACKLOG: usize = 256;

/// How many subscriptions may be held at once.
#[derive(Debug, Clone, Copy)]
pub struct SubscriptionCaps {
    /// Over the whole process.
    pub max_total: usize,
    /// For one client (a token's `sub`, or an address without a token).
    pub max_per_client: usize,
}

/// Who a subscription is counted against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClientKey {
    /// A signed-in caller, by token `sub`.
    Subject(String),
    /// A caller without a token, by client address (an IPv4 address, an IPv6 /64, …).
    Address(crate::rate::ClientKey),
}

impl ClientKey {
    /// The key of a caller: its token's `sub`, else its address (`None`: neither is known).
    pub fn of(auth: &AuthState, address: Option<crate::rate::ClientKey>) -> Option<Self> {
        match auth {
            AuthState::Authenticated(viewer) => Some(Self::Subject(viewer.author.id.clone())),
            _ => address.map(Self::Address),
        }
    }
}

/// What makes two subscription requests the same: their text, operation, variables and viewer.
/// The viewer is part of it because some fields (`revisions`, a deleted comment's author)
/// depend on who asks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunKey {
    /// The document's text, the hash of a persisted query, or a number no other run has.
    document: String,
    operation: Option<String>,
    variables: String,
    /// The viewer's id, name and whether they moderate.
    viewer: Option<(String, String, bool)>,
}

impl RunKey {
    /// The key of a request run for `auth`, its document named by `document`.
    fn new(document: String, request: &async_graphql::Request, auth: &AuthState) -> Self {
        Self {
            document,
            operation: request.operation_name.clone(),
            variables: serde_json::to_string(&request.variables).unwrap_or_default(),
            viewer: match auth {
                AuthState::Authenticated(Viewer {
                    author, moderator, ..
                }) => Some((author.id.clone(), author.name.clone(), *moderator)),
                _ => None,
            },
        }
    }
}

/// Set by the subscription once its run follows the change feed: from then on every change
/// reaches the run's subscribers.
#[derive(Clone, Default)]
pub struct Ready(Arc<AtomicBool>);

impl Ready {
    /// Marks the run as following the feed.
    pub fn mark(&self) {
        self.0.store(true, Ordering::Release);
    }

    fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// What a run hands its subscribers.
#[derive(Clone)]
enum Item {
    Response(Arc<Response>),
    End,
}

/// One run of a subscription request, shared by its subscribers.
struct Run {
    sender: broadcast::Sender<Item>,
    ready: Ready,
    /// Subscribers now.
    members: AtomicUsize,
    /// Whether the run's stream ended (no one joins it then).
    ended: AtomicBool,
    /// The last result sent, for a subscriber that joins just before the end.
    last: Mutex<Option<Arc<Response>>>,
    /// The task that runs the request (stopped with the run).
    task: OnceLock<tokio::task::AbortHandle>,
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(task) = self.task.get() {
            task.abort();
        }
    }
}

/// The subscriptions of one process.
pub struct Subscriptions {
    caps: SubscriptionCaps,
    held: Mutex<Held>,
    runs: Mutex<HashMap<RunKey, Weak<Run>>>,
    /// Numbers the runs that are not shared.
    unshared: AtomicU64,
    /// Subscriptions refused by a cap so far.
    refused: AtomicU64,
}

#[derive(Default)]
struct Held {
    total: usize,
    by_client: HashMap<ClientKey, usize>,
}

/// One subscription held; given back when dropped.
pub struct Permit {
    subscriptions: Arc<Subscriptions>,
    client: Option<ClientKey>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut held = self.subscriptions.lock_held();
        held.total = held.total.saturating_sub(1);
        if let Some(client) = &self.client {
            if let Some(n) = held.by_client.get_mut(client) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    held.by_client.remove(client);
                }
            }
        }
    }
}

/// A subscriber of a run (counted while it lives).
struct Member(Arc<Run>);

impl Drop for Member {
    fn drop(&mut self) {
        self.0.members.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Subscriptions {
    /// No subscriptions yet.
    pub fn new(caps: SubscriptionCaps) -> Arc<Self> {
        Arc::new(Self {
            caps,
            held: Mutex::default(),
            runs: Mutex::default(),
            unshared: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        })
    }

    /// Subscriptions refused by a cap (per process or per client) so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// The key of a subscription request run for `auth`. `document` names its document as
    /// sent (its text, or a persisted query's hash); without it the run is not shared.
    pub fn key(
        &self,
        document: Option<String>,
        request: &async_graphql::Request,
        auth: &AuthState,
    ) -> RunKey {
        let document = document.unwrap_or_else(|| {
            let n = self.unshared.fetch_add(1, Ordering::Relaxed);
            format!("unshared:{n}")
        });
        RunKey::new(document, request, auth)
    }

    fn lock_held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_runs(&self) -> MutexGuard<'_, HashMap<RunKey, Weak<Run>>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a place for one more subscription of `client`: `RATE_LIMITED` past either cap.
    pub fn permit(self: &Arc<Self>, client: Option<ClientKey>) -> Result<Permit, DomainError> {
        let mut held = self.lock_held();
        if held.total >= self.caps.max_total {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(DomainError::RateLimited {
                message: format!(
                    "this server runs at most {} subscriptions at once: try again later",
                    self.caps.max_total
                ),
                retry_after_secs: 10,
            });
        }
        if let Some(client) = &client {
            let mine = held.by_client.get(client).copied().unwrap_or(0);
            if mine >= self.caps.max_per_client {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return Err(DomainError::RateLimited {
                    message: format!(
                        "one client may hold at most {} subscriptions at once: end one first",
                        self.caps.max_per_client
                    ),
                    retry_after_secs: 1,
                });
            }
            held.by_client.insert(client.clone(), mine + 1);
        }
        held.total += 1;
        Ok(Permit {
            subscriptions: self.clone(),
            client,
        })
    }

    /// Subscriptions held now: those in place and those still starting.
    pub fn held(&self) -> usize {
        self.lock_held().total
    }

    /// Subscribers whose run follows the change feed now, and the runs that serve them.
    pub fn counts(&self) -> (usize, usize) {
        let runs: Vec<Arc<Run>> = self
            .lock_runs()
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        let ready = runs.iter().filter(|run| run.ready.is_set());
        let (members, count) = ready.fold((0, 0), |(members, count), run| {
            (members + run.members.load(Ordering::Acquire), count + 1)
        });
        (members, count)
    }

    /// The results of a subscription request: those of the run with the same key when there is
    /// one, else of a new run that `start` begins (given the flag its subscription sets once it
    /// follows the feed). The run stops when its last subscriber leaves.
    pub fn join(
        self: &Arc<Self>,
        key: RunKey,
        permit: Permit,
        start: impl FnOnce(Ready) -> BoxStream<'static, Response>,
    ) -> BoxStream<'static, Response> {
        let (run, receiver) = {
            let mut runs = self.lock_runs();
            runs.retain(|_, run| run.strong_count() > 0);
            let joined = runs
                .get(&key)
                .and_then(Weak::upgrade)
                .filter(|run| !run.ended.load(Ordering::Acquire));
            match joined {
                Some(run) => {
                    let receiver = run.sender.subscribe();
                    (run, receiver)
                }
                None => {
                    let (sender, receiver) = broadcast::channel(BACKLOG);
                    let ready = Ready::default();
                    let results = start(ready.clone());
                    let run = Arc::new(Run {
                        sender: sender.clone(),
                        ready,
                        members: AtomicUsize::new(0),
                        ended: AtomicBool::new(false),
                        last: Mutex::new(None),
                        task: OnceLock::new(),
                    });
                    // Started once the run exists, so that it can always record its end.
                    let task = tokio::spawn(forward(
                        results,
                        sender,
                        Arc::downgrade(&run),
                        Arc::downgrade(self),
                    ));
                    let _ = run.task.set(task.abort_handle());
                    runs.insert(key, Arc::downgrade(&run));
                    (run, receiver)
                }
            }
        };
        run.members.fetch_add(1, Ordering::AcqRel);
        let state = (Member(run), receiver, permit, false);
        futures::stream::unfold(state, |(member, mut receiver, permit, heard)| async move {
            let response = match receiver.recv().await {
                Ok(Item::Response(response)) => copy(&response),
                Ok(Item::End) | Err(RecvError::Closed) => {
                    // Joined just before the end: the run's last result is this one's too.
                    let last = member
                        .0
                        .last
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .clone();
                    match (heard, last) {
                        (false, Some(last)) => copy(&last),
                        _ => return None,
                    }
                }
                Err(RecvError::Lagged(missed)) => {
                    let why = format!("this subscription fell behind and missed {missed} changes");
                    let error = gql(DomainError::EventsMissed(why));
                    Response::from_errors(vec![error.into_server_error(Default::default())])
                }
            };
            Some((response, (member, receiver, permit, true)))
        })
        .boxed()
    }
}

/// Runs a shared request's results to its subscribers, then tells them it ended.
async fn forward(
    mut results: BoxStream<'static, Response>,
    sender: broadcast::Sender<Item>,
    run: Weak<Run>,
    subscriptions: Weak<Subscriptions>,
) {
    while let Some(response) = results.next().await {
        let response = Arc::new(response);
        if let Some(run) = run.upgrade() {
            *run.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(response.clone());
        }
        let _ = sender.send(Item::Response(response));
    }
    if let (Some(run), Some(subscriptions)) = (run.upgrade(), subscriptions.upgrade()) {
        // Under the runs' lock, so a subscriber either joined before (and hears the end) or
        // starts a new run.
        let _runs = subscriptions.lock_runs();
        run.ended.store(true, Ordering::Release);
    }
    let _ = sender.send(Item::End);
}

/// A copy of a response (the engine's type is not `Clone`).
fn copy(response: &Response) -> Response {
    let mut copy = Response::new(response.data.clone());
    copy.extensions = response.extensions.clone();
    copy.errors = response.errors.clone();
    copy.http_headers = response.http_headers.clone();
    copy.cache_control = response.cache_control;
    copy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_are_capped_per_client_and_in_all() {
        let subscriptions = Subscriptions::new(SubscriptionCaps {
            max_total: 3,
            max_per_client: 2,
        });
        let ada = || Some(ClientKey::Subject("ada".into()));
        let address = || {
            Some(ClientKey::Address(crate::rate::ClientKey::of_ip(
                std::net::IpAddr::from([127, 0, 0, 1]),
            )))
        };
        let first = subscriptions.permit(ada()).unwrap();
        let _second = subscriptions.permit(ada()).unwrap();
        let refused = subscriptions.permit(ada()).err().unwrap();
        assert_eq!(refused.code(), "RATE_LIMITED");
        let _third = subscriptions.permit(address()).unwrap();
        assert!(subscriptions.permit(None).is_err(), "the process cap");
        drop(first);
        let _again = subscriptions.permit(ada()).unwrap();
        assert!(subscriptions.permit(address()).is_err());
    }
}
