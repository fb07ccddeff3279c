//! Shutting down: the stages a process goes through, which its subscriptions and streaming
//! connections follow, and the writes it waits for before the database may go.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::domain::DomainError;

/// Where the process is in its shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// Serving.
    Serving,
    /// Shutting down: every subscription ends (its transport sends `complete`), new operations
    /// of streaming connections are refused, and each WebSocket closes (1001) once its
    /// operations have ended.
    Draining,
    /// The grace period is over: streaming connections still open are dropped.
    Dropping,
}

/// Writes running now, and whether new ones may start.
#[derive(Debug, Clone, Copy, Default)]
struct Writes {
    running: usize,
    closed: bool,
}

/// The shutdown state of one API, shared by its handles (cloning shares it).
#[derive(Debug, Clone)]
pub struct Closing {
    stage: Arc<watch::Sender<Stage>>,
    writes: Arc<watch::Sender<Writes>>,
}

impl Default for Closing {
    fn default() -> Self {
        Self {
            stage: Arc::new(watch::Sender::new(Stage::Serving)),
            writes: Arc::new(watch::Sender::new(Writes::default())),
        }
    }
}

/// One write running; it counts until dropped.
#[derive(Debug)]
pub struct WriteGuard(Arc<watch::Sender<Writes>>);

impl Drop for WriteGuard {
    fn drop(&mut self) {
        self.0
            .send_modify(|writes| writes.running = writes.running.saturating_sub(1));
    }
}

impl Closing {
    /// The stage now.
    pub fn stage(&self) -> Stage {
        *self.stage.borrow()
    }

    /// Moves on to `stage` (never back).
    pub fn advance(&self, stage: Stage) {
        self.stage.send_if_modified(|now| {
            let later = *now < stage;
            if later {
                *now = stage;
            }
            later
        });
    }

    /// Resolves once the process has reached `stage` (at once if it has).
    pub fn reached(&self, stage: Stage) -> impl Future<Output = ()> + Send + 'static {
        let mut stages = self.stage.subscribe();
        async move {
            // An error means the sender is gone, and with it the API: nothing to wait for.
            let _ = stages.wait_for(|now| *now >= stage).await;
        }
    }

    /// Counts a write that is about to start: it is waited for before the database stops.
    /// `UNAVAILABLE` once the process no longer starts writes (its grace period is over).
    pub fn start_write(&self) -> Result<WriteGuard, DomainError> {
        let started = self.writes.send_if_modified(|writes| {
            if writes.closed {
                return false;
            }
            writes.running += 1;
            true
        });
        match started {
            true => Ok(WriteGuard(self.writes.clone())),
            false => Err(DomainError::Unavailable(
                "the server is shutting down: send the write to another server".into(),
            )),
        }
    }

    /// Writes running now.
    pub fn writes_running(&self) -> usize {
        self.writes.borrow().running
    }

    /// Starts no more writes and waits up to `within` for those running to finish; gives how
    /// many are still running then.
    pub async fn finish_writes(&self, within: Duration) -> usize {
        self.writes.send_modify(|writes| writes.closed = true);
        let mut writes = self.writes.subscribe();
        let _ = tokio::time::timeout(within, writes.wait_for(|w| w.running == 0)).await;
        self.writes_running()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stages_only_move_on() {
        let closing = Closing::default();
        assert_eq!(closing.stage(), Stage::Serving);
        let draining = tokio::spawn(closing.reached(Stage::Draining));
        closing.advance(Stage::Dropping);
        closing.advance(Stage::Draining);
        assert_eq!(closing.stage(), Stage::Dropping);
        assert!(draining.await.is_ok());
        // Reached already: at once.
        closing.reached(Stage::Draining).await;
    }

    #[tokio::test]
    async fn writes_started_are_waited_for_and_later_ones_refused() {
        let closing = Closing::default();
        let first = closing.start_write().ok();
        let second = closing.start_write().ok();
        assert_eq!(closing.writes_running(), 2);
        drop(first);
        let finishing = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(second);
        });
        let waiting = closing.clone();
        let left = waiting.finish_writes(Duration::from_secs(30)).await;
        assert_eq!(left, 0);
        assert!(finishing.await.is_ok());
        let refused = closing.start_write().err().map(|e| e.code());
        assert_eq!(refused, Some("UNAVAILABLE"));
        // A write that never ends is given up on after the wait, and counted.
        let stuck = Closing::default();
        let _held = stuck.start_write().ok();
        assert_eq!(stuck.finish_writes(Duration::from_millis(20)).await, 1);
    }
}
