//! Where committed events go: one [`EventSink`] per service layer. Today's sinks are the
//! moderation log (the view of what moderators did) and an in-process feed that listeners in
//! this process subscribe to; durable sinks (webhooks, notifications) are more of them.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::broadcast;

use crate::domain::{DomainError, Event};
use crate::store::DynStorage;

/// Takes the events of each committed change, in order, once the change is committed.
#[async_trait]
pub trait EventSink: Send + Sync {
    /// Takes the events of one change. An error means the change stands but this sink could
    /// not take them; the caller is told (sending the same request again is safe).
    async fn deliver(&self, events: &[Event]) -> Result<(), DomainError>;
}

/// Several sinks, each given every event in turn. Every sink is tried; the first error is
/// returned.
pub struct Sinks(pub Vec<Arc<dyn EventSink>>);

#[async_trait]
impl EventSink for Sinks {
    async fn deliver(&self, events: &[Event]) -> Result<(), DomainError> {
        let mut failed = None;
        for sink in &self.0 {
            if let Err(err) = sink.deliver(events).await {
                failed.get_or_insert(err);
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

/// The moderation log: one entry per event a moderator caused (see [`Event::logged`]).
pub struct ModerationLog(pub DynStorage);

#[async_trait]
impl EventSink for ModerationLog {
    async fn deliver(&self, events: &[Event]) -> Result<(), DomainError> {
        for logged in events.iter().filter_map(Event::logged) {
            let action = logged.action;
            let Err(err) = self.0.moderation().record(logged).await else {
                continue;
            };
            tracing::error!(%err, action = action.as_str(), "a moderator action was made, but the moderation log could not record it");
            return Err(match DomainError::from(err) {
                DomainError::Unavailable(_) => DomainError::Unavailable(format!(
                    "the {} was made, but the database became unavailable before the moderation \
                     log recorded it; sending the same request again is safe",
                    action.as_str().replace('_', " ")
                )),
                other => other,
            });
        }
        Ok(())
    }
}

/// Events committed by this process, for listeners in it (a listener that falls more than
/// [`EventFeed::BACKLOG`] events behind is told how many it missed).
#[derive(Clone)]
pub struct EventFeed(broadcast::Sender<Arc<Event>>);

impl EventFeed {
    /// Events a listener may fall behind by.
    pub const BACKLOG: usize = 1024;

    /// A feed nobody listens to yet.
    pub fn new() -> Self {
        Self(broadcast::channel(Self::BACKLOG).0)
    }

    /// Every event committed from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.0.subscribe()
    }
}

impl Default for EventFeed {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl EventSink for EventFeed {
    async fn deliver(&self, events: &[Event]) -> Result<(), DomainError> {
        for event in events {
            // Nobody listening is fine.
            let _ = self.0.send(Arc::new(event.clone()));
        }
        Ok(())
    }
}
