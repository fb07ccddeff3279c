//! The workflows: every change a transport asks for (GraphQL, the CLI's import, later the
//! console and background jobs) goes through one service call here, with a checked caller. A
//! service decides (permission, rate, ban, hold or publish), makes the store calls, and hands
//! what it committed to the event sink as [`Event`]s.

mod auto_close;
pub mod caller;
pub mod closing;
mod comments;
mod discussions;
mod feeds;
mod guests;
mod history;
mod ignoring;
mod inbox;
mod moderation;
mod names;
mod pages;
mod personal;
mod queue_watch;
mod render;
pub mod sink;
mod votes;
mod webhooks;

use std::future::Future;
use std::sync::Arc;

use tracing::Instrument as _;

use crate::config::RateLimit;
use crate::domain::{
    Acted, Comment, Discussion, DomainError, EditRules, Event, GuestIds, Layout, Micros,
    ModerationMode, Slug, WordLists,
};
use crate::rate::Limiter;
use crate::store::{DynStorage, ReadScope};

pub use auto_close::Clock;
pub use caller::{Allowance, Caller};
pub use comments::{NewPost, Posted};
pub use discussions::Creating;
pub use guests::{GuestPost, GuestPosted, GuestRules, HONEYPOT};
pub use history::AuthorStanding;
pub use ignoring::{IGNORING_KEPT_FOR, MAX_IGNORED};
pub use inbox::MailRules;
pub use moderation::Approved;
pub use names::{MAX_RESERVED_NAMES, NAMES_REFRESH};
pub use pages::PageOrigins;
pub use personal::{Erased, ExportAt, PersonalRecord};
pub use queue_watch::{QueueChange, QueueNews};
pub use render::Filled;
pub use sink::{EventFeed, EventSink, ModerationLog, Sinks};
pub use webhooks::{NewEndpoint, MAX_ENDPOINTS};

/// The rules the workflows follow, from config.
#[derive(Debug, Clone)]
pub struct Rules {
    /// Longest comment text, in characters.
    pub max_text_chars: usize,
    /// Deepest nesting of block quotes and lists in a comment text, together.
    pub max_markdown_depth: usize,
    /// Layout of discussions created without one.
    pub default_layout: Layout,
    /// How discussions moderate until a moderator sets it for one.
    pub default_moderation: ModerationMode,
    /// Reports that hold a public comment (0: never).
    pub reports_to_hold: u64,
    /// How long authors may edit their comments.
    pub edit_rules: EditRules,
    /// Changes (posts, edits, every mutation but votes) per author.
    pub change_rate: RateLimit,
    /// Votes per user.
    pub vote_rate: RateLimit,
    /// Moderators' actions per moderator.
    pub moderation_rate: RateLimit,
    /// The ids imported guests get, keyed with the server key.
    pub guest_ids: GuestIds,
    /// Whether webhook endpoints may use `http` and private addresses.
    pub insecure_webhooks: bool,
    /// How long after its creation a discussion closes where no moderator set it (`None`:
    /// never).
    pub auto_close_after: Option<std::time::Duration>,
}

/// What a service call committed: its result and the events handed to the sink.
#[derive(Debug)]
pub struct Committed<T> {
    /// The result, as the store has it now.
    pub value: T,
    /// What happened, in the order it happened.
    pub events: Vec<Event>,
}

/// The workflows over one store, shared by every transport of a process (cloning shares it).
#[derive(Clone)]
pub struct Services {
    storage: DynStorage,
    rules: Rules,
    words: Arc<WordLists>,
    changes: Arc<Limiter<String>>,
    votes: Arc<Limiter<String>>,
    moderations: Arc<Limiter<String>>,
    closing: closing::Closing,
    renderer: render::Renderer,
    sink: Arc<dyn EventSink>,
    feed: EventFeed,
    pages: Arc<PageOrigins>,
    names: names::NameCopy,
    webhook_metrics: Arc<crate::webhooks::metrics::WebhookMetrics>,
    inboxes: inbox::Inboxes,
    queues: queue_watch::QueueWatch,
    mail: MailRules,
    notify_metrics: Arc<crate::notify::metrics::NotifyMetrics>,
    unsubscribe_tokens: crate::mail::UnsubscribeTokens,
    guests: guests::Guests,
    clock: Clock,
    ignoring: ignoring::IgnoreLists,
}

impl Services {
    /// The workflows over `storage`, screening texts against `words`, handing events to each
    /// of `sinks` in turn, then to this process's feed (see [`Services::events`]).
    pub fn new(
        storage: DynStorage,
        rules: Rules,
        words: Arc<WordLists>,
        sinks: Vec<Arc<dyn EventSink>>,
    ) -> Self {
        let feed = EventFeed::new();
        let renderer = render::Renderer::new(rules.max_markdown_depth);
        let mut sinks = sinks;
        sinks.push(Arc::new(feed.clone()));
        Self {
            names: names::NameCopy::new(storage.clone()),
            storage,
            changes: Arc::new(Limiter::new(rules.change_rate)),
            votes: Arc::new(Limiter::new(rules.vote_rate)),
            moderations: Arc::new(Limiter::new(rules.moderation_rate)),
            rules,
            words,
            closing: closing::Closing::default(),
            renderer,
            sink: Arc::new(Sinks(sinks)),
            feed,
            pages: Arc::new(PageOrigins::Any),
            webhook_metrics: Arc::default(),
            inboxes: inbox::Inboxes::new(),
            queues: queue_watch::QueueWatch::new(),
            notify_metrics: Arc::default(),
            // A key of its own until the server's is given (`with_unsubscribe_tokens`).
            unsubscribe_tokens: crate::mail::UnsubscribeTokens::new(
                &crate::domain::ServerKey::generate(),
            ),
            mail: MailRules {
                enabled: false,
                default: crate::domain::EmailFrequency::Never,
            },
            // Off, under a key of its own, until the server's rules are given (`with_guests`).
            guests: guests::Guests::new(
                GuestRules::default(),
                &crate::domain::ServerKey::generate(),
            ),
            clock: Clock::default(),
            ignoring: ignoring::IgnoreLists::new(),
        }
    }

    /// The same services, checking unsubscribe links with `tokens` (the server key's).
    pub fn with_unsubscribe_tokens(self, tokens: crate::mail::UnsubscribeTokens) -> Self {
        Self {
            unsubscribe_tokens: tokens,
            ..self
        }
    }

    /// The same services, with what mail this server can send.
    pub fn with_mail(self, mail: MailRules) -> Self {
        Self { mail, ..self }
    }

    /// The same services, letting users who are not moderators create discussions only for
    /// pages of `pages` (every page until this is called).
    pub fn with_page_origins(self, pages: PageOrigins) -> Self {
        Self {
            pages: Arc::new(pages),
            ..self
        }
    }

    /// Every event committed through these services from now on.
    pub fn events(&self) -> tokio::sync::broadcast::Receiver<Arc<Event>> {
        self.feed.subscribe()
    }

    /// The notifications' figures (fan-out, mail), shared with `/metrics`.
    pub fn notify_metrics(&self) -> &Arc<crate::notify::metrics::NotifyMetrics> {
        &self.notify_metrics
    }

    /// The webhook dispatcher's figures, shared with `/metrics`.
    pub fn webhook_metrics(&self) -> &Arc<crate::webhooks::metrics::WebhookMetrics> {
        &self.webhook_metrics
    }

    /// The rules the workflows follow.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// The word lists posts and edits are screened against.
    pub fn word_lists(&self) -> &Arc<WordLists> {
        &self.words
    }

    /// The shutdown state: the writes the process waits for.
    pub fn closing(&self) -> &closing::Closing {
        &self.closing
    }

    /// The storage, for the bulk steps of an import, which have no workflow of their own
    /// (bringing in comments with their own times, restoring held comments and votes).
    pub(crate) fn store(&self) -> &DynStorage {
        &self.storage
    }

    /// Changes refused by the per-author rate so far.
    pub fn changes_refused(&self) -> u64 {
        self.changes.refused()
    }

    /// Runs a workflow in a task of its own: once started, it completes (or fails) whatever
    /// happens to the transport that asked for it (a client that hangs up drops its request,
    /// and so does a shutdown whose grace period ran out; without this the write would stop
    /// halfway). The write is counted until it ends, and the process waits for it before it
    /// stops the embedded database; once that wait has begun, a write is refused with
    /// `UNAVAILABLE` instead. The task stays in the caller's span (its trace). Its events go to
    /// the sink in the same task, after the write.
    async fn run<T, F>(
        &self,
        _checked: &Caller,
        span: tracing::Span,
        write: F,
    ) -> Result<Committed<T>, DomainError>
    where
        T: Send + 'static,
        F: Future<Output = Result<(T, Vec<Event>), DomainError>> + Send + 'static,
    {
        let counted = self.closing.start_write()?;
        let sink = self.sink.clone();
        let work = async move {
            let result = match write.await {
                Ok((value, events)) => match sink.deliver(&events).await {
                    Ok(()) => Ok(Committed { value, events }),
                    Err(err) => Err(err),
                },
                Err(err) => Err(err),
            };
            drop(counted);
            result
        };
        match tokio::spawn(work.instrument(span).in_current_span()).await {
            Ok(result) => result,
            Err(err) => Err(DomainError::Internal(format!("a write task failed: {err}"))),
        }
    }
}

/// The events a change announced to the store, kept for this process's sinks: the store may
/// ask again after a lost race, and the last answer is the one written with the change.
#[derive(Default)]
struct Told(std::sync::Mutex<Vec<Event>>);

impl Told {
    /// Keeps `events` as the latest announced, and returns them.
    fn tell(&self, events: Vec<Event>) -> Vec<Event> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = events.clone();
        events
    }

    /// The events last announced (none when no change was made).
    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Who made a change, now.
fn acted(caller: &Caller) -> Acted {
    Acted {
        by: caller.author().clone(),
        moderator: caller.moderator(),
        at: Micros::now(),
    }
}

/// The comment `slug` of a discussion's layout, if there is one (public comments and
/// placeholders; held comments are in the held store).
#[tracing::instrument(level = "debug", name = "store.comments", skip_all)]
async fn public_comment(
    storage: &DynStorage,
    discussion: &Discussion,
    slug: &Slug,
) -> Result<Option<Comment>, DomainError> {
    let layout = storage.layout(discussion.layout)?;
    Ok(layout
        .by_slugs(&ReadScope::new(), discussion, std::slice::from_ref(slug))
        .await?
        .into_iter()
        .next()
        .map(Arc::unwrap_or_clone))
}
