//! The loop every background worker runs (the webhook dispatcher, the notifications' fan-out,
//! the mail): rounds at once while a round took all it could, else after a short wait, or soon
//! after this process commits an event; a failed round is logged and tried again.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};

use crate::domain::Event;
use crate::store::StoreResult;

/// How a worker waits between rounds.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// The wait after a round that found nothing more to do.
    pub idle: Duration,
    /// After a commit in this process wakes the worker, how long it waits for the commits that
    /// follow it.
    pub gather: Duration,
}

/// Runs `round` until `stop` changes. `round` says whether it took all it could (and should run
/// again at once); `wake`, when given, ends a wait early. `what` names the worker in the log.
pub async fn run_rounds<F, Fut>(
    what: &'static str,
    pace: Pace,
    mut wake: Option<broadcast::Receiver<Arc<Event>>>,
    mut stop: watch::Receiver<Option<tokio::time::Instant>>,
    mut round: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = StoreResult<bool>>,
{
    loop {
        if stop.borrow().is_some() {
            return;
        }
        let full = match round().await {
            Ok(full) => full,
            Err(err) => {
                tracing::warn!(%err, "a {what} round failed: trying again");
                false
            }
        };
        if full {
            continue;
        }
        let woken = tokio::select! {
            _ = tokio::time::sleep(pace.idle) => false,
            _ = commit(&mut wake) => true,
            _ = stop.changed() => return,
        };
        if woken {
            // The commits of the next moments go in the same round.
            tokio::time::sleep(pace.gather).await;
        }
    }
}

/// The next commit `wake` hears of (never, without one).
async fn commit(wake: &mut Option<broadcast::Receiver<Arc<Event>>>) {
    match wake {
        Some(wake) => {
            let _ = wake.recv().await;
        }
        None => std::future::pending().await,
    }
}
