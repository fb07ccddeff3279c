//! `Writer`, what every write needs (the client, whether the deployment has transactions, this
//! process's turns per discussion), and the compare-and-set replace of a comment stored outside
//! its discussion document.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mongodb::bson::Document;
use mongodb::error::TRANSIENT_TRANSACTION_ERROR;
use mongodb::Client;

use super::error::{StoreError, StoreResult};
use super::metrics::{CommandCounter, Counted};
use super::transactions::{abort, commit};
use crate::domain::slug::MonotonicClock;
use crate::domain::{DiscussionId, Event, Slug};
use crate::store::discussions::Discussions;
use crate::store::events::EventLog;

/// Where posts write: a client to open sessions on, and whether writes that span documents run
/// in a transaction (a replica set or a sharded cluster; a standalone server cannot).
#[derive(Clone)]
pub(crate) struct Writer {
    /// The database client.
    pub client: Client,
    /// Whether to wrap a post's writes in a transaction.
    pub transactions: bool,
    /// One lock per discussion with a post in flight in this process: transactions that write
    /// the same documents abort each other instead of waiting, so this process queues its own
    /// posts to a discussion rather than letting them collide.
    pub queues: Arc<Mutex<HashMap<DiscussionId, Arc<tokio::sync::Mutex<()>>>>>,
    /// The clock new comments take their time from.
    pub clock: Arc<MonotonicClock>,
    /// Deepest comment depth allowed.
    pub max_depth: usize,
    /// Counts the commands the layouts send.
    pub commands: CommandCounter,
    /// The event log, which posts join in their transaction.
    pub log: EventLog,
}

impl Writer {
    /// A writer over `client`.
    pub(crate) fn new(
        client: Client,
        transactions: bool,
        clock: Arc<MonotonicClock>,
        max_depth: usize,
        commands: CommandCounter,
        log: EventLog,
    ) -> Self {
        Self {
            log,
            client,
            transactions,
            queues: Arc::default(),
            clock,
            max_depth,
            commands,
        }
    }

    /// Waits for this process's turn to post to `discussion`.
    pub(crate) async fn turn(&self, discussion: &DiscussionId) -> tokio::sync::OwnedMutexGuard<()> {
        let queue = {
            let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            queues.retain(|_, q| Arc::strong_count(q) > 1);
            queues.entry(discussion.clone()).or_default().clone()
        };
        queue.lock_owned().await
    }
}

/// A write that keeps another document in step with a comment a replace changes (a layout's
/// copy of it): with transactions it runs in the replace's transaction once the comment
/// matched; without, before the comment changes (so it must leave nothing a crash before the
/// change would make wrong).
#[async_trait::async_trait]
pub(crate) trait Follow: Send + Sync {
    /// Writes it in `session`.
    async fn follow(&self, session: &mut mongodb::ClientSession) -> StoreResult<()>;
}

/// Replaces a comment stored outside its discussion document: one update of `coll` (`filter`
/// matches the comment only while it is as read), and `follower`'s write where there is one.
/// With transactions, the discussion's change mark goes in the same transaction, which a move
/// of the discussion to another layout cannot overlap (`Moving` once one has begun); without,
/// the mark follows the change. `Ok(false)` when the comment changed meanwhile.
pub(crate) async fn replace_outside<T: Send + Sync>(
    writer: &Writer,
    discussions: &Discussions,
    (id, slug): (&DiscussionId, &Slug),
    (coll, follower): (&Counted<T>, Option<&dyn Follow>),
    (filter, update): (Document, Document),
    (mark, events): (Document, &[Event]),
) -> StoreResult<bool> {
    let mut session = writer.client.start_session().await?;
    if !writer.transactions {
        if let Some(follower) = follower {
            follower.follow(&mut session).await?;
        }
        let result = coll.update_one(filter, update).await?;
        let replaced = discussions
            .after_replace((id, slug), mark, result.matched_count == 1)
            .await;
        if replaced {
            writer.log.append(&mut session, events).await?;
        }
        return Ok(replaced);
    }
    session.start_transaction().await?;
    let result = async {
        discussions.mark_change(id, mark, &mut session).await?;
        let result = coll
            .update_one(filter, update)
            .session(&mut session)
            .await?;
        if result.matched_count == 1 {
            if let Some(follower) = follower {
                follower.follow(&mut session).await?;
            }
            writer.log.append(&mut session, events).await?;
        }
        Ok::<_, StoreError>(result.matched_count == 1)
    }
    .await;
    match result {
        Ok(true) => {
            commit(&mut session, &writer.commands).await?;
            Ok(true)
        }
        Ok(false) => {
            abort(&mut session, &writer.commands).await;
            Ok(false)
        }
        Err(StoreError::Db(e)) if e.contains_label(TRANSIENT_TRANSACTION_ERROR) => {
            abort(&mut session, &writer.commands).await;
            Ok(false)
        }
        Err(err) => {
            abort(&mut session, &writer.commands).await;
            Err(err)
        }
    }
}

/// Replaces a comment stored outside its discussion document in the caller's `session`: the
/// discussion's change mark (which a move cannot overlap: `Moving` once one has begun), then one
/// update of `coll`. `Ok(false)` when the comment changed meanwhile.
pub(crate) async fn replace_within<T: Send + Sync>(
    session: &mut mongodb::ClientSession,
    discussions: &Discussions,
    id: &DiscussionId,
    coll: &Counted<T>,
    (filter, update): (Document, Document),
    mark: Document,
) -> StoreResult<bool> {
    discussions.mark_change(id, mark, session).await?;
    let result = coll.update_one(filter, update).session(session).await?;
    Ok(result.matched_count == 1)
}
