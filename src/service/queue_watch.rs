//! The moderators' queues, live: one stream per process of the committed events that move a
//! comment into or out of a queue (on any replica), each looked up once in the queues and
//! shared by every moderator's subscription.

use std::sync::{Arc, OnceLock};

use futures::stream::{BoxStream, StreamExt};
use tokio::sync::broadcast;

use super::Services;
use crate::domain::{DiscussionId, DomainError, EventRecord, EventType, Queue, Slug};
use crate::store::DynStorage;

/// Changes kept for subscribers that have not taken them yet, at most.
const BACKLOG: usize = 1_024;

/// The events after which a comment may be in another queue than before.
const MOVES: [EventType; 5] = [
    EventType::CommentHeld,
    EventType::CommentReported,
    EventType::CommentRejected,
    EventType::CommentApproved,
    EventType::CommentDeleted,
];

/// A comment that entered a queue, moved between queues or left them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueChange {
    /// Its discussion.
    pub discussion: DiscussionId,
    /// The comment.
    pub slug: Slug,
    /// The queue it waits in now; `None`: in none.
    pub queue: Option<Queue>,
    /// What happened to it.
    pub event: EventType,
}

/// What a subscriber hears: a change, or that some were lost (it fell behind).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueNews {
    /// A change.
    Changed(QueueChange),
    /// Changes this subscriber missed.
    Missed(u64),
}

/// This process's stream of queue changes, opened at the first subscription (or at serve).
#[derive(Clone)]
pub(super) struct QueueWatch {
    sender: broadcast::Sender<Arc<QueueChange>>,
    opened: Arc<OnceLock<()>>,
}

impl QueueWatch {
    pub(super) fn new() -> Self {
        Self {
            sender: broadcast::channel(BACKLOG).0,
            opened: Arc::default(),
        }
    }

    /// Opens the stream of committed events, once.
    fn open(&self, storage: &DynStorage) {
        self.opened.get_or_init(|| {
            let (storage, sender) = (storage.clone(), self.sender.clone());
            tokio::spawn(async move {
                let mut committed = storage.events().committed(&MOVES);
                while let Some(event) = committed.next().await {
                    match change_of(&storage, &event).await {
                        Ok(Some(change)) => {
                            let _ = sender.send(Arc::new(change));
                        }
                        Ok(None) => {}
                        Err(err) => tracing::warn!(%err, event = %event.id, "a queue change was not looked up"),
                    }
                }
            });
        });
    }
}

/// The change `event` made: an approval or a delete takes a comment out of every queue (a
/// deleted comment waits for no moderator; its entry goes after its event); after the others
/// the queue is read (each writes its queue entry before or with its event).
async fn change_of(
    storage: &DynStorage,
    event: &EventRecord,
) -> Result<Option<QueueChange>, DomainError> {
    let (Some(discussion), Some(slug)) = (&event.discussion, &event.slug) else {
        return Ok(None);
    };
    let queue = match event.kind {
        EventType::CommentApproved | EventType::CommentDeleted => None,
        _ => storage.held().queue_of(discussion, slug).await?,
    };
    Ok(Some(QueueChange {
        discussion: discussion.clone(),
        slug: slug.clone(),
        queue,
        event: event.kind,
    }))
}

impl Services {
    /// Opens this process's stream of queue changes now, so that a subscription made later
    /// hears every change committed from its start.
    pub fn watch_queues(&self) {
        self.queues.open(&self.storage);
    }

    /// The changes of the moderators' queues from now on (in one discussion, or all), as they
    /// are committed on any replica. The caller must be a moderator (the transport checks).
    pub fn queue_changes(&self, discussion: Option<DiscussionId>) -> BoxStream<'static, QueueNews> {
        let receiver = self.queues.sender.subscribe();
        self.queues.open(&self.storage);
        futures::stream::unfold(receiver, move |mut receiver| {
            let discussion = discussion.clone();
            async move {
                loop {
                    match receiver.recv().await {
                        Ok(change)
                            if discussion.as_ref().is_none_or(|d| *d == change.discussion) =>
                        {
                            return Some((QueueNews::Changed((*change).clone()), receiver))
                        }
                        Ok(_) => {}
                        Err(broadcast::error::RecvError::Lagged(missed)) => {
                            return Some((QueueNews::Missed(missed), receiver))
                        }
                        Err(broadcast::error::RecvError::Closed) => return None,
                    }
                }
            }
        })
        .boxed()
    }
}
