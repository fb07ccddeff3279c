//! What one execution read, for answers kept whole (the response cache): each discussion it read
//! through the read cache with the generation it read it at, and whether it read anything else.
//!
//! A recording is a task-local value: a request's dataloader batches run inside its own task
//! (`graphql::batch`), so every read of the execution lands in it. A read the cache answers, or
//! makes under a generation it took first, records that generation; a database command sent
//! outside such a read (`untracked`, called for every command the store sends) marks the
//! recording untracked: nothing would tell when its result changes.

use std::cell::RefCell;
use std::future::Future;
use std::hash::{Hash, Hasher};

use crate::domain::DiscussionId;

tokio::task_local! {
    static RECORDING: RefCell<Recording>;
    static COVERED: ();
}

/// What has been read so far.
#[derive(Default)]
struct Recording {
    epoch: Option<u64>,
    discussions: Vec<(DiscussionId, u64)>,
    untracked: bool,
}

/// What an execution read: the cache epoch and each discussion with its generation. Its
/// answer stays exact while none of them moved ([`Freshness::current`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reads {
    pub(super) epoch: Option<u64>,
    pub(super) discussions: Box<[(DiscussionId, u64)]>,
}

impl Reads {
    /// How many discussions were read.
    pub fn discussions(&self) -> usize {
        self.discussions.len()
    }

    /// A hash of what was read (with `salt`), for validators such as an `ETag`.
    pub fn tag(&self, salt: &[u8]) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        salt.hash(&mut hasher);
        self.hash(&mut hasher);
        hasher.finish()
    }
}

/// Tells whether what an execution read is still what the database holds.
pub trait Freshness: Send + Sync {
    /// Whether none of `reads`' discussions changed since they were read, and the cache stayed
    /// in step with the change feed. It touches memory only.
    fn current(&self, reads: &Reads) -> bool;
}

/// Runs `execution`, recording what it reads: `None` when it read something no generation
/// tracks (or discussions at two cache epochs).
pub async fn recording<F: Future>(execution: F) -> (F::Output, Option<Reads>) {
    let run = async {
        let output = execution.await;
        let recorded = RECORDING.with(|r| std::mem::take(&mut *r.borrow_mut()));
        (output, recorded)
    };
    let (output, recorded) = RECORDING.scope(RefCell::default(), run).await;
    if recorded.untracked {
        return (output, None);
    }
    let mut discussions = recorded.discussions;
    discussions.sort_unstable();
    discussions.dedup();
    // One discussion read at two generations: it changed during the execution.
    if discussions.windows(2).any(|w| w[0].0 == w[1].0) {
        return (output, None);
    }
    let reads = Reads {
        epoch: recorded.epoch,
        discussions: discussions.into_boxed_slice(),
    };
    (output, Some(reads))
}

/// Records that discussion `id` was read at `generation` of cache epoch `epoch`.
pub(super) fn record(id: &DiscussionId, epoch: u64, generation: u64) {
    let _ = RECORDING.try_with(|r| {
        let mut r = r.borrow_mut();
        if r.epoch.is_some_and(|e| e != epoch) {
            r.untracked = true;
        }
        r.epoch = Some(epoch);
        r.discussions.push((id.clone(), generation));
    });
}

/// Marks the recording (if any) untracked, unless the read in progress is [`covered`].
pub(crate) fn untracked() {
    if COVERED.try_with(|_| ()).is_ok() {
        return;
    }
    let _ = RECORDING.try_with(|r| r.borrow_mut().untracked = true);
}

/// `read`, whose commands are covered by generations recorded before it started.
pub(crate) async fn covered<F: Future>(read: F) -> F::Output {
    COVERED.scope((), read).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_are_recorded_and_an_uncovered_command_spoils_them() {
        let (a, b) = (DiscussionId::generate(), DiscussionId::generate());
        let ((), reads) = recording(async {
            record(&a, 1, 5);
            record(&b, 1, 7);
            record(&a, 1, 5);
            covered(async { untracked() }).await;
        })
        .await;
        let reads = reads.expect("every read was tracked");
        assert_eq!(reads.discussions(), 2);
        assert_eq!(reads.epoch, Some(1));
        let ((), spoiled) = recording(async {
            record(&a, 1, 5);
            untracked();
        })
        .await;
        assert!(spoiled.is_none(), "a command outside a covered read");
        let ((), moved) = recording(async {
            record(&a, 1, 5);
            record(&a, 1, 6);
        })
        .await;
        assert!(moved.is_none(), "one discussion at two generations");
        let ((), epochs) = recording(async {
            record(&a, 1, 5);
            record(&b, 2, 7);
        })
        .await;
        assert!(epochs.is_none(), "two epochs");
        // Outside a recording nothing happens.
        untracked();
        record(&a, 1, 1);
    }
}
