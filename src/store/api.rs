//! The storage traits the API uses: `Storage` (the router), `DiscussionStore` and the
//! `CommentStore` every layout implements, with what they return.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use mongodb::bson::Bson;

use super::error::StoreResult;
use super::scope::ReadScope;
use crate::domain::moderation::{Ban, LogEntry, Logged, UserId};
use crate::domain::tree::Listing;
use crate::domain::{
    Author, Comment, Discussion, DiscussionId, DiscussionKey, DiscussionTitle, DomainError,
    FullSlug, Layout, Micros, ModerationMode, NewComment, NewDiscussion, Page, Rank, Slug, Vote,
    Window,
};

/// What a change makes of a comment read at a given time: the new comment, `None` when nothing
/// changes, or why it may not be made.
pub type Decide<'a> =
    dyn Fn(&Comment, Micros) -> Result<Option<Comment>, DomainError> + Send + Sync + 'a;

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
    /// Comments added by the move (see [`Storage::import`]).
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

/// Everything the API layer needs from storage: discussions, the layouts, and health.
#[async_trait]
pub trait Storage: Send + Sync {
    /// Discussion metadata, shared by every layout.
    fn discussions(&self) -> &dyn DiscussionStore;

    /// Bans, the moderators seen acting, and the moderation log.
    fn moderation(&self) -> &dyn ModerationStore;
    /// Held comments (waiting for a moderator), shared by every layout.
    fn held(&self) -> &dyn super::held::HeldStore;

    /// The implementation of a layout (`Unsupported` when it is not available).
    fn layout(&self, layout: Layout) -> StoreResult<&dyn CommentStore>;

    /// Checks that the database answers.
    async fn ping(&self) -> StoreResult<()>;

    /// Database commands sent so far, by command name.
    fn command_counts(&self) -> BTreeMap<String, u64>;

    /// Writes the store's metrics but the command counts: command durations, the connection
    /// pool and the change feed.
    fn write_metrics(&self, out: &mut crate::telemetry::metrics::Exposition);

    /// Posts a comment in the discussion's layout. A post that meets a move of the discussion
    /// to another layout waits for it and is posted in the new layout; one that does not fit an
    /// embedded discussion moves it to the bucketed layout first, where the store is configured
    /// to promote.
    async fn post(&self, discussion: &Discussion, new: NewComment) -> StoreResult<Posted>;

    /// Posts a comment to the discussion `id` (`NOT_FOUND` when there is none, `Locked` while
    /// it is locked), as [`Storage::post`] does; returns the discussion as the post found it
    /// (in the layout the comment went to) with the comment. An embedded or bucketed discussion
    /// this process posted to lately is not read first: the post's own write checks that it is
    /// still unlocked and has not moved (`open_for_posts`), and a refused post reads it.
    async fn post_to(
        &self,
        id: &DiscussionId,
        new: NewComment,
    ) -> StoreResult<(Arc<Discussion>, Posted)>;

    /// The discussion `id` as this process kept it for posting, when it did (see
    /// [`Storage::post_to`]): what a post may decide by without reading it.
    fn kept(&self, id: &DiscussionId) -> Option<Arc<Discussion>>;

    /// Forgets what this process kept of the discussion for posting (after a change of it
    /// that posts decide by, such as its moderation mode).
    fn forget(&self, id: &DiscussionId);

    /// Posts a comment as [`Storage::post_to`] does, to `discussion` as the caller read it (or
    /// as [`Storage::kept`] gave it): the post's own write checks that it is still unlocked,
    /// has not moved and moderates as it did.
    async fn post_from(
        &self,
        discussion: Arc<Discussion>,
        new: NewComment,
    ) -> StoreResult<(Arc<Discussion>, Posted)>;

    /// Moves a discussion to another layout while it stays online (see `migrate`), reporting
    /// its progress.
    async fn migrate(
        &self,
        id: &DiscussionId,
        to: Layout,
        report: &(dyn Fn(Step) + Send + Sync),
    ) -> StoreResult<Moved>;

    /// Moves discussion `id` to layout `to`, another than its own, as [`Storage::migrate`]
    /// does, and adds on the way the comments of `adding` whose slugs it does not hold: an
    /// import of comments with their original times and slugs, which posts cannot make (a post
    /// takes the current time). The discussion's numbers, counts and pages come out as if every
    /// comment had been posted in time order; posts made meanwhile wait for the move and are
    /// kept. Run again after an interruption, it adds nothing twice.
    async fn import(
        &self,
        id: &DiscussionId,
        to: Layout,
        adding: &[Comment],
        report: &(dyn Fn(Step) + Send + Sync),
    ) -> StoreResult<Moved>;

    /// Casts a vote as [`Storage::vote`] does, without asking whether the voter may vote (an
    /// import restoring the votes a discussion had, some of them on comments deleted since).
    async fn restore_vote(
        &self,
        discussion: &Discussion,
        slug: &Slug,
        voter: &str,
        vote: Vote,
    ) -> Result<Comment, DomainError>;

    /// Changes a posted comment of `discussion`: reads it, lets `decide` say what it becomes (it
    /// gets the time of the change), and writes that unless the comment changed meanwhile, in
    /// which case it reads again. Returns the comment as it is afterwards.
    async fn change_comment(
        &self,
        discussion: &Discussion,
        slug: &Slug,
        decide: &Decide<'_>,
    ) -> Result<Comment, DomainError>;

    /// Casts `vote` (or takes back the vote, with `None`) as the user `voter` on the comment
    /// `slug`: the vote, the comment's counters (where its layout keeps it), its tally and the
    /// discussion's ranking change in one transaction. Voting as one already voted changes
    /// nothing. Returns the comment as it is afterwards. Whether the voter may vote is
    /// [`crate::domain::votes::may_vote`]; a locked discussion is the caller's to refuse.
    async fn vote(
        &self,
        discussion: &Discussion,
        slug: &Slug,
        voter: &str,
        vote: Option<Vote>,
    ) -> Result<Comment, DomainError>;

    /// The votes of `voter` on these comments, in one database command.
    async fn votes_of(
        &self,
        voter: &str,
        comments: &[(DiscussionId, Slug)],
    ) -> StoreResult<HashMap<(DiscussionId, Slug), Vote>>;

    /// The source ids of the comments imported into the discussion (see
    /// [`Storage::record_imported`]).
    async fn imported(&self, id: &DiscussionId) -> StoreResult<std::collections::HashSet<String>>;

    /// Records that the comments with these source ids (e.g. `disqus:1234`) were imported into
    /// the discussion, with their slugs; recording one again changes nothing.
    async fn record_imported(
        &self,
        id: &DiscussionId,
        entries: &[(String, Slug)],
    ) -> StoreResult<()>;

    /// Up to `limit` votes cast in the discussion (comment slug, voter, vote), by slug and then
    /// voter, after `after`: what an export reads, page by page.
    async fn votes_in(
        &self,
        discussion: &DiscussionId,
        after: Option<(&Slug, &str)>,
        limit: usize,
    ) -> StoreResult<Vec<(Slug, String, Vote)>>;

    /// One page of a ranked list of the discussion (see `store::ranked`), with the walk its
    /// cursors belong to.
    async fn ranked(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        list: Ranked<'_>,
        window: &Window,
    ) -> StoreResult<RankedPage>;

    /// The feed of posts and changes in every discussion, as the database reports them to this
    /// process (open it once per process: every call opens a change stream). It never ends; it
    /// reopens itself after failures, waiting `retry` before the first try.
    fn changes(&self, retry: std::time::Duration) -> BoxStream<'static, Watched>;
}

/// A ranked list: which comments, in which order.
#[derive(Debug, Clone, Copy)]
pub struct Ranked<'a> {
    /// The order.
    pub rank: Rank,
    /// The comments.
    pub of: RankedOf<'a>,
}

/// The comments of a ranked list.
#[derive(Debug, Clone, Copy)]
pub enum RankedOf<'a> {
    /// Every comment of the discussion.
    Comments,
    /// Its top-level comments.
    Threads,
    /// The direct replies of this comment.
    Replies(&'a Comment),
}

/// A page of a ranked list.
#[derive(Debug, Clone)]
pub struct RankedPage {
    /// The page, in the list's order.
    pub page: Page<Comment>,
    /// The walk its cursors belong to: the discussion's vote number when the walk's first page
    /// was read.
    pub walk: u64,
}

/// What happened to a comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// It was posted.
    Posted,
    /// It was edited or deleted.
    Changed,
    /// Something only moderators or counters show changed (votes, reports, a moderator's
    /// reason): live subscribers are not told, caches are.
    Quiet,
}

impl ChangeKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Posted => "posted",
            ChangeKind::Changed => "changed",
            ChangeKind::Quiet => "quiet",
        }
    }
}

/// A comment that was posted or changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentChange {
    /// Its discussion.
    pub discussion: DiscussionId,
    /// The comment.
    pub slug: Slug,
    /// What happened.
    pub kind: ChangeKind,
}

/// What the change feed reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watched {
    /// The feed is open: every change from now on is reported.
    Open,
    /// A comment was posted or changed.
    Change(CommentChange),
    /// The discussion document changed without a comment changing: its settings (lock,
    /// moderation mode, pins, key), its layout's bookkeeping, a move. Only caches care.
    Discussion(DiscussionId),
    /// The feed failed and is being reopened; changes made meanwhile are reported once it is
    /// open again.
    Interrupted,
    /// The feed had to start afresh: changes made while it was down were lost.
    Gap,
}

/// Storage as the API layer holds it.
pub type DynStorage = Arc<dyn Storage>;

/// Discussion metadata: creation, lookup (by id or by the host page's key), listing, locking.
#[async_trait]
pub trait DiscussionStore: Send + Sync {
    /// Creates a discussion with the given layout (no key, no URL).
    async fn create(&self, title: DiscussionTitle, layout: Layout) -> StoreResult<Discussion> {
        self.add(NewDiscussion::new(title, layout)).await
    }

    /// Creates a discussion; `KeyTaken` when another discussion has its key.
    async fn add(&self, new: NewDiscussion) -> StoreResult<Discussion>;

    /// The discussion with the key of `new`, as it is (its title, URL and layout are kept), or
    /// `new`, created with it. Concurrent calls with one key, from any number of processes,
    /// give one discussion. Without a key, the same as [`DiscussionStore::add`].
    async fn ensure(&self, new: NewDiscussion) -> StoreResult<Discussion>;

    /// The discussions with these ids (missing ones are left out).
    async fn by_ids(&self, ids: &[DiscussionId]) -> StoreResult<Vec<Discussion>>;

    /// The discussions with these keys (unknown ones are left out), in one database command.
    async fn by_keys(&self, keys: &[DiscussionKey]) -> StoreResult<Vec<Discussion>>;

    /// One page of discussions, oldest first.
    async fn list(&self, window: &Window) -> StoreResult<Page<Discussion>>;

    /// How many discussions exist.
    async fn count(&self) -> StoreResult<u64>;

    /// Pins the comment `slug` (last in pin order) or unpins it; pinning a pinned comment and
    /// unpinning one that is not pinned change nothing. `PinsFull` past
    /// [`Discussion::MAX_PINNED`]. Whether the comment exists is the caller's to check.
    async fn set_pinned(
        &self,
        id: &DiscussionId,
        slug: &Slug,
        pinned: bool,
    ) -> StoreResult<Discussion>;

    /// Opens or closes a discussion for posting; returns it as it is now (`NotFound` if unknown).
    async fn set_locked(&self, id: &DiscussionId, locked: bool) -> StoreResult<Discussion>;

    /// Sets how a discussion moderates new comments; returns it as it is now (`NotFound` if
    /// unknown).
    async fn set_moderation(
        &self,
        id: &DiscussionId,
        mode: ModerationMode,
    ) -> StoreResult<Discussion>;
}

/// Bans, the moderators seen acting, and the moderation log: what moderation keeps apart from
/// discussions and comments, the same in every layout.
#[async_trait]
pub trait ModerationStore: Send + Sync {
    /// The ban stored for the user with this id (a token's `sub`), expired or not, as this
    /// process knows it: read at most 5 s ago (`BAN_STATE_LIFETIME`), or as this process last
    /// stored it. At most one database command; none while the state is kept.
    async fn ban_of(&self, user: &str) -> StoreResult<Option<Arc<Ban>>>;

    /// Stores a ban, replacing the user's earlier one.
    async fn ban(&self, ban: &Ban) -> StoreResult<()>;

    /// Removes the user's ban; returns the ban removed (expired or not), if there was one.
    async fn unban(&self, user: &UserId) -> StoreResult<Option<Ban>>;

    /// Records that a moderator token with this author made a mutation (one write per process
    /// and moderator; none after the first).
    async fn moderator_acted(&self, moderator: &Author) -> StoreResult<()>;

    /// Whether a moderator token with this id has made a mutation on the service.
    async fn is_moderator(&self, user: &UserId) -> StoreResult<bool>;

    /// Appends an action to the moderation log; returns it with its number.
    async fn record(&self, logged: Logged) -> StoreResult<LogEntry>;

    /// One page of the moderation log in stored order (oldest first; the API lists it newest
    /// first), read as a range of entry numbers.
    async fn log_page(&self, window: &Window) -> StoreResult<Page<LogEntry>>;
}

/// The result of posting a comment.
#[derive(Debug, Clone)]
pub struct Posted {
    /// The stored comment.
    pub comment: Comment,
    /// True when the requested parent was too deep and the comment went to an ancestor.
    pub reattached: bool,
    /// The discussion as it is after the post, when the post met a move of it to another layout
    /// (or made one).
    pub moved: Option<Discussion>,
}

/// The slugs of `wanted` that `found` does not hold: what a layout's `by_homes` reads by slug
/// after reading the others at their homes.
pub(crate) fn not_at_home(wanted: &[(Slug, Option<Bson>)], found: &[Comment]) -> Vec<Slug> {
    wanted
        .iter()
        .map(|(slug, _)| slug)
        .filter(|slug| !found.iter().any(|c| &c.slug == *slug))
        .cloned()
        .collect()
}

/// The comment operations every storage layout provides. Batched reads take many parents or roots
/// at once so that one level of a tree costs one query; `scope` is the per-request cache a layout
/// may use to read a document only once per request.
#[async_trait]
pub trait CommentStore: Send + Sync {
    /// Replaces a comment's changeable fields (text, edit time and editor, revisions, tombstone)
    /// with those of `next`, only if they are still those of `current`. `Ok(false)` means the
    /// comment changed since it was read (read it again and retry, as the change skeleton does). `scope` is
    /// the one `current` was read in (a layout may use what that read saw to find the comment).
    async fn replace(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        current: &Comment,
        next: &Comment,
    ) -> StoreResult<bool>;

    /// As [`CommentStore::replace`], in the caller's `session` (inside its transaction where
    /// the deployment has them), so that the caller's own writes commit with it or not at all;
    /// `Moving` while a move of the discussion holds it. What a vote writes to the comment's
    /// counters; its change mark is quiet (votes emit no event).
    async fn replace_in(
        &self,
        session: &mut mongodb::ClientSession,
        scope: &ReadScope,
        discussion: &Discussion,
        current: &Comment,
        next: &Comment,
    ) -> StoreResult<bool>;

    /// One page of the discussion's comments.
    async fn list(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        listing: Listing,
        window: &Window,
    ) -> StoreResult<Page<Comment>>;

    /// One page of a listing when the request reads nothing below the listed comments (no
    /// replies, parents or sub-discussions of them). A layout that can read such a page more
    /// cheaply than a full `list` overrides this; by default it is `list`.
    async fn list_shallow(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        listing: Listing,
        window: &Window,
    ) -> StoreResult<Page<Comment>> {
        self.list(scope, discussion, listing, window).await
    }

    /// The `limit` comments that follow `after` in posting order (from the first without it):
    /// what a move and an export read, page by page.
    async fn posted_after(
        &self,
        discussion: &Discussion,
        after: Option<&Comment>,
        limit: usize,
    ) -> StoreResult<Page<Comment>> {
        let cursor = after.map(|c| {
            crate::domain::paging::Cursor::of_comment(
                c,
                crate::domain::paging::CursorKind::Chronological,
            )
        });
        let window = Window::After { cursor, limit };
        self.list(
            &ReadScope::new(),
            discussion,
            Listing::Chronological,
            &window,
        )
        .await
    }

    /// The comments with these slugs (missing ones are left out).
    async fn by_slugs(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        slugs: &[Slug],
    ) -> StoreResult<Vec<Comment>>;

    /// Where this request read the comment `slug` (the document that holds it), for a later
    /// [`Self::by_homes`]; `None` when it was not read or the layout has no such thing.
    fn home_of(&self, _scope: &ReadScope, _discussion: &Discussion, _slug: &Slug) -> Option<Bson> {
        None
    }

    /// The comments with these slugs, each with the home [`Self::home_of`] gave for it when it
    /// was read before, if any (missing ones are left out). A home may be out of date (a move
    /// writes new documents): a comment not found there is read by slug.
    async fn by_homes(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        wanted: &[(Slug, Option<Bson>)],
    ) -> StoreResult<Vec<Comment>> {
        let slugs: Vec<Slug> = wanted.iter().map(|(slug, _)| slug.clone()).collect();
        self.by_slugs(scope, discussion, &slugs).await
    }

    /// One page of direct replies (oldest first) for each parent.
    async fn replies(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        parents: &[Slug],
        window: &Window,
    ) -> StoreResult<HashMap<Slug, Page<Comment>>>;

    /// One page of all descendants (threaded order) for each root.
    async fn sub_discussions(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
        window: &Window,
    ) -> StoreResult<HashMap<FullSlug, Page<Comment>>>;

    /// How many descendants each root has.
    async fn sub_discussion_counts(
        &self,
        scope: &ReadScope,
        discussion: &Discussion,
        roots: &[FullSlug],
    ) -> StoreResult<HashMap<FullSlug, u64>>;
}
