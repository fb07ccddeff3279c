//! `HeldStore`: held comments, the moderator queues, reports, and what moderation knows of
//! each person, with what they return.

use async_trait::async_trait;

use crate::domain::paging::Cursor;
use crate::domain::{
    Comment, DiscussionId, Event, FullSlug, Held, Micros, NewComment, Queue, ReportReason, Slug,
    Standing,
};
use crate::store::shared::error::StoreResult;

/// One comment waiting in a moderator queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waiting {
    /// A comment held before it was public, as stored outside the layouts.
    Held(Box<Held>),
    /// A public comment (or a placeholder) of its layout.
    Public {
        /// Its discussion.
        discussion: DiscussionId,
        /// Its slug.
        slug: Slug,
    },
}

/// A queue entry and its position in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    /// When it entered the queue.
    pub since: Micros,
    /// `<discussion>:<slug>`, the tie-break of equal times.
    pub key: String,
    /// The comment.
    pub waiting: Waiting,
}

/// A report of a comment by a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The comment's discussion.
    pub discussion: DiscussionId,
    /// The comment.
    pub slug: Slug,
    /// Who reported it.
    pub reporter: String,
    /// Why.
    pub reason: ReportReason,
    /// What they added.
    pub note: Option<String>,
    /// When.
    pub at: Micros,
}

/// Held comments, the moderator queues, reports, and what moderation knows of each person.
#[async_trait]
pub trait HeldStore: Send + Sync {
    /// Holds `new` as a comment of the discussion with `standing` (pending or rejected; a fresh
    /// slug part, kept when it is published), under `parent` (its slug and full slug, public or
    /// held), placed under the depth cap as a post would be.
    async fn hold(
        &self,
        discussion: &DiscussionId,
        parent: Option<(&Slug, &FullSlug)>,
        new: &NewComment,
        standing: Standing,
    ) -> StoreResult<Held>;

    /// Stores a held comment as it is (an import restoring one): replaces the entry of its slug
    /// or adds it, so storing it twice stores it once.
    async fn restore(&self, held: &Held) -> StoreResult<()>;

    /// Up to `limit` held (never public) comments of the discussion, by slug, after `after`:
    /// what an export reads, page by page.
    async fn held_in(
        &self,
        discussion: &DiscussionId,
        after: Option<&Slug>,
        limit: usize,
    ) -> StoreResult<Vec<Held>>;

    /// Stores `html` with the held comment `slug` while its text is `text` and it has no HTML
    /// (held before HTML was stored with comments); whether it did.
    async fn store_html(
        &self,
        discussion: &DiscussionId,
        slug: &Slug,
        text: &str,
        html: &str,
    ) -> StoreResult<bool>;

    /// The held (never public) comment `slug` of the discussion, if there is one.
    async fn find(&self, discussion: &DiscussionId, slug: &Slug) -> StoreResult<Option<Held>>;

    /// Marks a held comment REJECTED with `reason`; `None` when there is no such held comment,
    /// else the comment and whether it became REJECTED now (it was pending). The events
    /// `announce` gives for it are written with the change.
    async fn reject(
        &self,
        discussion: &DiscussionId,
        slug: &Slug,
        reason: Option<String>,
        announce: &(dyn for<'c> Fn(&'c Comment) -> Vec<Event> + Send + Sync),
    ) -> StoreResult<Option<(Held, bool)>>;

    /// Removes the comment's entry (held comment or queue entry); whether there was one.
    async fn remove(&self, discussion: &DiscussionId, slug: &Slug) -> StoreResult<bool>;

    /// Claims a held comment for publishing, so that two approvals of it at once publish it
    /// once: the claim lasts `lease` (a process that stopped while publishing holds it no
    /// longer) or until [`HeldStore::release`]; removing the comment ends it too.
    async fn claim(
        &self,
        discussion: &DiscussionId,
        slug: &Slug,
        lease: std::time::Duration,
    ) -> StoreResult<Claim>;

    /// Gives up a claim made by [`HeldStore::claim`] (publishing failed).
    async fn release(&self, discussion: &DiscussionId, slug: &Slug) -> StoreResult<()>;

    /// Takes the public comment `slug` out of the REPORTED queue (an entry in a stricter queue
    /// stays); whether it was there.
    async fn dismiss(&self, discussion: &DiscussionId, slug: &Slug) -> StoreResult<bool>;

    /// Puts the public comment `slug` in `queue` from `at`, or moves it there from a milder
    /// queue (reported, then pending, then rejected); an entry already in that queue or a
    /// stricter one stays as it is, with its time. Writers that race (reports, a rejection)
    /// may queue a comment out of order, so an entry only ever becomes stricter: the strictest
    /// queue wins, and only an approval takes it out ([`HeldStore::remove`]).
    async fn enqueue(
        &self,
        discussion: &DiscussionId,
        slug: &Slug,
        queue: Queue,
        at: Micros,
    ) -> StoreResult<()>;

    /// Up to `limit` entries of `queue` (in one discussion, or all), oldest first, after
    /// `after` (a queue cursor); and whether more follow.
    async fn queue_page(
        &self,
        queue: Queue,
        discussion: Option<&DiscussionId>,
        after: Option<&Cursor>,
        limit: usize,
    ) -> StoreResult<(Vec<QueueEntry>, bool)>;

    /// How many comments wait in `queue` (in one discussion, or all).
    async fn queue_size(&self, queue: Queue, discussion: Option<&DiscussionId>)
        -> StoreResult<u64>;

    /// The public comments of a discussion now shown as placeholders (queued PENDING or
    /// REJECTED in place): one range of its queues.
    async fn placeholders(&self, discussion: &DiscussionId) -> StoreResult<Vec<Slug>>;

    /// Stores a report: false when this reporter already reported this comment.
    async fn report(&self, report: &Report) -> StoreResult<bool>;

    /// The queue the comment waits in now (`None`: in none): one read by id.
    async fn queue_of(&self, discussion: &DiscussionId, slug: &Slug) -> StoreResult<Option<Queue>>;

    /// The reports of these comments, oldest first, at most `each` per comment: one command.
    async fn reports_of(
        &self,
        comments: &[(DiscussionId, Slug)],
        each: usize,
    ) -> StoreResult<Vec<Report>>;

    /// Takes back a report that could not be counted.
    async fn unreport(&self, report: &Report) -> StoreResult<()>;

    /// Whether the person has had a comment approved.
    async fn trusted(&self, person: &str) -> StoreResult<bool>;

    /// Counts an approved comment of the person (who is trusted from now on).
    async fn trust(&self, person: &str) -> StoreResult<()>;

    /// Adds one to the person's `tally` (one `$inc`).
    async fn count(&self, person: &str, tally: Tally) -> StoreResult<()>;

    /// What moderation counted of the person (zeros for someone it never counted).
    async fn tallies(&self, person: &str) -> StoreResult<Tallies>;
}

/// What moderation counts of each person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tally {
    /// Comments of theirs a moderator approved (published or restored).
    Approved,
    /// Comments of theirs a moderator rejected (a held or public one becoming REJECTED).
    Rejected,
    /// Reports counted against comments of theirs.
    Reported,
}

impl Tally {
    /// Its field on the person's document.
    pub(crate) fn field(self) -> &'static str {
        match self {
            Tally::Approved => "approved",
            Tally::Rejected => "rejected",
            Tally::Reported => "reported",
        }
    }
}

/// The tallies of one person.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tallies {
    /// See [`Tally::Approved`].
    pub approved: u64,
    /// See [`Tally::Rejected`].
    pub rejected: u64,
    /// See [`Tally::Reported`].
    pub reported: u64,
    /// The comments they have stored, held ones included (their counter less its gaps, kept
    /// on the same document: see `HistoryStore::authored_count`).
    pub comments: u64,
}

/// What [`HeldStore::claim`] found.
#[derive(Debug, Clone)]
pub enum Claim {
    /// The held comment, now claimed by the caller.
    Claimed(Box<Held>),
    /// Another approval holds it (for at most its lease).
    Busy,
    /// There is no such held comment (any more).
    Gone,
}
