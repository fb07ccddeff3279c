//! When discussions close to new comments: the clock the decision is made by, a discussion's
//! closing time (a moderator's, else `THREADQL_AUTO_CLOSE_AFTER` after its creation), the
//! check that posts, edits and votes pass, and `setDiscussionClosing`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use super::{acted, Caller, Services};
use crate::domain::{Closing, Discussion, DiscussionId, DomainError, Event, Micros};

/// The time closings are decided by: the system's, unless a time was set (tests at a boundary).
/// Clones share it.
#[derive(Debug, Clone)]
pub struct Clock(Arc<AtomicI64>);

/// What the clock holds while no time is set.
const SYSTEM: i64 = i64::MIN;

impl Default for Clock {
    fn default() -> Self {
        Self(Arc::new(AtomicI64::new(SYSTEM)))
    }
}

impl Clock {
    /// The time set, else the system's.
    pub fn now(&self) -> Micros {
        match self.0.load(Ordering::Relaxed) {
            SYSTEM => Micros::now(),
            set => Micros(set),
        }
    }

    /// Decides by `at` from now on (`None`: by the system's time again).
    pub fn set(&self, at: Option<Micros>) {
        self.0
            .store(at.map_or(SYSTEM, |at| at.0), Ordering::Relaxed);
    }
}

impl Services {
    /// The clock closings are decided by (shared by clones of these services).
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// When `discussion` closes to new comments, replies, edits and votes: what a moderator
    /// set, else `THREADQL_AUTO_CLOSE_AFTER` after its creation, else never (`None`).
    pub fn closes_at(&self, discussion: &Discussion) -> Option<Micros> {
        Closing::closes_at(
            discussion.closing,
            discussion.created,
            self.rules.auto_close_after,
        )
    }

    /// `FORBIDDEN` ("this discussion closed on <date>") when `discussion` is closed now and the
    /// caller is no moderator. Decided on the discussion as read: no command of its own.
    pub(super) fn check_open(
        &self,
        caller: &Caller,
        discussion: &Discussion,
    ) -> Result<(), DomainError> {
        if caller.moderator() {
            return Ok(());
        }
        Closing::check_open(self.closes_at(discussion), self.clock.now())
    }

    /// Sets when a discussion closes (`Some(Closing::Never)`: never; `None`: as the server's
    /// default says). Moderators only; logged.
    pub async fn set_closing(
        &self,
        caller: &Caller,
        id: DiscussionId,
        closing: Option<Closing>,
    ) -> Result<Discussion, DomainError> {
        caller.must_moderate()?;
        let storage = self.storage.clone();
        let acted = acted(caller);
        let write = async move {
            let events = vec![Event::ClosingChanged {
                acted,
                discussion: id.clone(),
                closing,
            }];
            let set = storage
                .discussions()
                .set_closing(&id, closing, &events)
                .await;
            storage.posting().forget(&id);
            Ok((set?, events))
        };
        let span = tracing::debug_span!("store.setClosing");
        Ok(self.run(caller, span, write).await?.value)
    }
}
