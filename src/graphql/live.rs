//! Live updates: one change feed per process (opened when the first subscriber arrives), fanned
//! out to the subscribers of each discussion. Each change is read from the store once per
//! process, however many subscribers it has.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use tokio::sync::{broadcast, oneshot, watch};

use crate::domain::{Comment, Discussion, DiscussionId, DomainError, Slug};
use crate::store::{ChangeKind, CommentChange, DynStorage, ReadScope, Watched};

/// Changes a subscriber may fall behind by before it is told it missed some.
const BACKLOG: usize = 256;
/// Feed reports handled together (their comments are read in one query per discussion).
const BATCH: usize = 256;

/// What a subscriber of a discussion hears.
#[derive(Debug, Clone)]
pub enum Event {
    /// A comment was posted or changed; `comment` is how it is now.
    Comment {
        /// What happened.
        kind: ChangeKind,
        /// Its discussion, as it is now.
        discussion: Arc<Discussion>,
        /// The comment, as it is now.
        comment: Arc<Comment>,
    },
    /// Changes were missed: read again what they would have changed.
    Missed(String),
}

/// Settings of the live updates.
#[derive(Debug, Clone, Copy)]
pub struct LiveConfig {
    /// Wait before reopening a failed feed (doubling up to 5 s).
    pub retry: Duration,
    /// How long a new subscriber waits for the feed to be open.
    pub open_timeout: Duration,
}

/// The live updates of one process.
pub struct Live {
    shared: Arc<Shared>,
    /// Stops the feed task when the API goes away.
    stop: Mutex<Option<oneshot::Sender<()>>>,
    /// Whether the live updates were closed for good (the process shuts down).
    closed: AtomicBool,
}

struct Shared {
    storage: DynStorage,
    config: LiveConfig,
    /// Whether the feed is open now.
    open: watch::Sender<bool>,
    channels: Mutex<HashMap<DiscussionId, broadcast::Sender<Event>>>,
    /// Times a change stream was opened (the first time and after every failure).
    opened: AtomicU64,
}

impl Live {
    /// Live updates over a storage; nothing runs until the first subscriber.
    pub fn new(storage: DynStorage, config: LiveConfig) -> Self {
        Self {
            shared: Arc::new(Shared {
                storage,
                config,
                open: watch::Sender::new(false),
                channels: Mutex::default(),
                opened: AtomicU64::new(0),
            }),
            stop: Mutex::new(None),
            closed: AtomicBool::new(false),
        }
    }

    /// Follows a discussion: every change stored after this returns reaches the receiver (it
    /// returns once the change feed is open). `UNAVAILABLE` when the feed cannot be opened in
    /// time.
    pub async fn subscribe(
        &self,
        discussion: &DiscussionId,
    ) -> Result<broadcast::Receiver<Event>, DomainError> {
        if !self.start() {
            return Err(DomainError::Unavailable(
                "the server is shutting down: subscribe on another server".into(),
            ));
        }
        let mut open = self.shared.open.subscribe();
        let opened = tokio::time::timeout(self.shared.config.open_timeout, open.wait_for(|o| *o))
            .await
            .is_ok_and(|waited| waited.is_ok());
        if !opened {
            return Err(DomainError::Unavailable(
                "live updates are unavailable: the database's change stream cannot be opened right now".into(),
            ));
        }
        let mut channels = self.shared.lock_channels();
        channels.retain(|_, sender| sender.receiver_count() > 0);
        Ok(channels
            .entry(discussion.clone())
            .or_insert_with(|| broadcast::channel(BACKLOG).0)
            .subscribe())
    }

    /// Times this process opened its change stream.
    pub fn streams_opened(&self) -> u64 {
        self.shared.opened.load(Ordering::Relaxed)
    }

    /// Opens the change feed now rather than at the first subscription: the store's read cache
    /// serves only while the feed is open.
    pub fn open_now(&self) {
        let _ = self.start();
    }

    /// Starts the feed task unless it runs; `false` once closed.
    fn start(&self) -> bool {
        let mut stop = self.stop.lock().unwrap_or_else(|p| p.into_inner());
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        if stop.is_none() {
            let (sender, stopped) = oneshot::channel();
            *stop = Some(sender);
            tokio::spawn(self.shared.clone().run(stopped));
        }
        true
    }

    /// Closes the change stream for good: the process is shutting down, and its subscriptions
    /// end. Subscribing afterwards is `UNAVAILABLE`.
    pub fn close(&self) {
        let mut stop = self.stop.lock().unwrap_or_else(|p| p.into_inner());
        self.closed.store(true, Ordering::Release);
        if let Some(stop) = stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = stop.send(());
        }
    }
}

impl Shared {
    fn lock_channels(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<DiscussionId, broadcast::Sender<Event>>> {
        self.channels.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the feed until stopped, handing each batch of reports on.
    async fn run(self: Arc<Self>, mut stopped: oneshot::Receiver<()>) {
        let mut feed = self.storage.changes().feed(self.config.retry);
        loop {
            let first = tokio::select! {
                _ = &mut stopped => break,
                item = feed.next() => item,
            };
            let Some(first) = first else { break };
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match feed.next().now_or_never() {
                    Some(Some(item)) => batch.push(item),
                    _ => break,
                }
            }
            self.dispatch(batch).await;
        }
        self.open.send_replace(false);
    }

    /// Hands a batch of feed reports to the subscribers, in order.
    async fn dispatch(&self, batch: Vec<Watched>) {
        let mut changes = Vec::new();
        for item in batch {
            match item {
                // Live subscribers hear of what the public sees change, not of quiet changes.
                // Live subscribers hear of comments, not of a discussion's own changes.
                Watched::Change(change) if change.kind == ChangeKind::Quiet => {}
                Watched::Discussion(_) => {}
                Watched::Change(change) => changes.push(change),
                other => {
                    self.deliver(std::mem::take(&mut changes)).await;
                    match other {
                        Watched::Open => {
                            self.opened.fetch_add(1, Ordering::Relaxed);
                            self.open.send_replace(true);
                        }
                        Watched::Interrupted => {
                            self.open.send_replace(false);
                        }
                        Watched::Gap => {
                            let missed = Event::Missed(
                                "the change feed restarted after an outage: changes made meanwhile were not delivered".into(),
                            );
                            for sender in self.lock_channels().values() {
                                let _ = sender.send(missed.clone());
                            }
                        }
                        Watched::Change(_) | Watched::Discussion(_) => {}
                    }
                }
            }
        }
        self.deliver(changes).await;
    }

    /// Reads the changed comments that someone follows (one query per discussion) and sends them.
    async fn deliver(&self, changes: Vec<CommentChange>) {
        let followed: Vec<CommentChange> = {
            let channels = self.lock_channels();
            changes
                .into_iter()
                .filter(|c| {
                    channels
                        .get(&c.discussion)
                        .is_some_and(|s| s.receiver_count() > 0)
                })
                .collect()
        };
        if followed.is_empty() {
            return;
        }
        self.send(followed).await;
    }

    /// Reads the changed comments someone follows and sends them (a trace of its own, with
    /// the database commands under it, when traces are exported).
    #[tracing::instrument(level = "debug", name = "live.deliver", skip_all, fields(changes = followed.len()))]
    async fn send(&self, followed: Vec<CommentChange>) {
        let mut slugs: HashMap<DiscussionId, Vec<Slug>> = HashMap::new();
        for change in &followed {
            slugs
                .entry(change.discussion.clone())
                .or_default()
                .push(change.slug.clone());
        }
        let ids: Vec<DiscussionId> = slugs.keys().cloned().collect();
        let discussions = match self.storage.discussions().by_ids(&ids).await {
            Ok(found) => found,
            Err(err) => {
                tracing::warn!(%err, "cannot read the discussions of live changes");
                Vec::new()
            }
        };
        let mut comments: HashMap<(DiscussionId, Slug), (Arc<Discussion>, Arc<Comment>)> =
            HashMap::new();
        for discussion in discussions {
            let discussion = Arc::new(discussion);
            let wanted = slugs.get(&discussion.id).map(Vec::as_slice).unwrap_or(&[]);
            let read = match self.storage.layout(discussion.layout) {
                Ok(layout) => {
                    layout
                        .by_slugs(&ReadScope::new(), &discussion, wanted)
                        .await
                }
                Err(err) => Err(err),
            };
            match read {
                Ok(found) => {
                    for comment in found {
                        let key = (discussion.id.clone(), comment.slug.clone());
                        comments.insert(key, (discussion.clone(), comment));
                    }
                }
                Err(err) => {
                    tracing::warn!(%err, discussion = %discussion.id, "cannot read live changes")
                }
            }
        }
        let channels = self.lock_channels();
        for change in followed {
            let Some(sender) = channels.get(&change.discussion) else {
                continue;
            };
            let event = match comments.get(&(change.discussion.clone(), change.slug.clone())) {
                Some((discussion, comment)) => Event::Comment {
                    kind: change.kind,
                    discussion: discussion.clone(),
                    comment: comment.clone(),
                },
                None => Event::Missed(format!(
                    "comment {} changed, but could not be read; read it again",
                    change.slug
                )),
            };
            let _ = sender.send(event);
        }
    }
}
