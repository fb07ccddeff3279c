//! Transactions as writes use them: commit (asking again while the outcome is unknown) and
//! abort, and the short random wait before a write that collided with another tries again.

use mongodb::error::UNKNOWN_TRANSACTION_COMMIT_RESULT;
use mongodb::ClientSession;

use super::error::StoreResult;
use super::metrics::{Command, CommandCounter};

/// Aborts the session's transaction (an error only means there is nothing left to abort).
pub(crate) async fn abort(session: &mut ClientSession, commands: &CommandCounter) {
    commands.sent("abortTransaction");
    let aborted = session.abort_transaction();
    let _ = commands.timed(Command::AbortTransaction, aborted).await;
}

/// Commits, asking again while the outcome is unknown (committing twice is safe).
pub(crate) async fn commit(
    session: &mut ClientSession,
    commands: &CommandCounter,
) -> StoreResult<()> {
    let mut tries = 0;
    loop {
        commands.sent("commitTransaction");
        let committed = session.commit_transaction();
        match commands.timed(Command::CommitTransaction, committed).await {
            Err(e) if e.contains_label(UNKNOWN_TRANSACTION_COMMIT_RESULT) && tries < 3 => {
                tries += 1;
            }
            other => return Ok(other?),
        }
    }
}

/// A short random wait after the `round`th refused try of a write that collided with another
/// (a few milliseconds, growing with the round): writers that collided do not collide again in
/// lockstep.
pub(crate) async fn pause(round: u32) {
    use rand::Rng as _;
    let most = u64::from(round.min(20)) + 1;
    let wait = rand::thread_rng().gen_range(1..=most);
    tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
}
