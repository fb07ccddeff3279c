//! `MoveStore`: moving a discussion between layouts while it stays online, with what a move
//! takes and reports.

use std::time::Duration;

use async_trait::async_trait;

use crate::domain::{Discussion, DiscussionId, Layout};
use crate::store::shared::error::StoreResult;

/// Where a move is, for progress reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Comments read from the old layout so far (of the discussion's count).
    Reading {
        /// Comments read.
        done: u64,
        /// Comments the discussion counts.
        total: u64,
    },
    /// Comments written to the new layout so far.
    Writing {
        /// Comments written.
        done: u64,
        /// Comments to write.
        total: u64,
    },
    /// The discussion now reads and writes in the new layout.
    Switched,
    /// The old storage is removed; the move is over.
    Done,
}

/// What a move did.
#[derive(Debug, Clone)]
pub struct Moved {
    /// The discussion as it is now.
    pub discussion: Discussion,
    /// The layout it had before (the same when it was already in the target layout, in which
    /// case only leftovers of earlier, interrupted moves were removed).
    pub from: Layout,
    /// Comments copied.
    pub comments: u64,
    /// Comments added by the move (see [`super::ImportStore::import`]).
    pub added: u64,
}

/// How moves hold their fence.
#[derive(Debug, Clone, Copy)]
pub struct MoveTiming {
    /// How long a fence lasts without being renewed: a move that stops for longer (a crash)
    /// loses it, and writers and later moves take over.
    pub lease: Duration,
    /// How long after the switch the old storage stays, so that reads that began before the
    /// switch can finish there.
    pub grace: Duration,
    /// How long a write waits for a move to end before it answers `UNAVAILABLE`.
    pub wait: Duration,
    /// Comments read from the old layout, and written to the new one, per command.
    pub chunk: usize,
}

impl Default for MoveTiming {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(15),
            grace: Duration::from_secs(1),
            wait: Duration::from_secs(60),
            chunk: 1_000,
        }
    }
}

/// Moves between layouts.
#[async_trait]
pub trait MoveStore: Send + Sync {
    /// Moves a discussion to another layout while it stays online (see `store::moves`), reporting
    /// its progress. The events `announce` gives for the layout it moved from are written with
    /// the switch.
    async fn migrate(
        &self,
        id: &DiscussionId,
        to: Layout,
        report: &(dyn Fn(Step) + Send + Sync),
        announce: &(dyn Fn(Layout) -> Vec<crate::domain::Event> + Send + Sync),
    ) -> StoreResult<Moved>;
}
