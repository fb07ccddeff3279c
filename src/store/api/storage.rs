//! `Storage`, everything the API layer needs from storage, as the router provides it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;

use super::{
    CommentStore, Decide, DiscussionStore, HeldStore, ModerationStore, Moved, Posted, Ranked,
    RankedPage, Step, Watched,
};
use crate::domain::{
    Comment, Discussion, DiscussionId, DomainError, Layout, NewComment, Slug, Vote, Window,
};
use crate::store::shared::error::StoreResult;
use crate::store::shared::scope::ReadScope;

/// Everything the API layer needs from storage: discussions, the layouts, and health.
#[async_trait]
pub trait Storage: Send + Sync {
    /// Discussion metadata, shared by every layout.
    fn discussions(&self) -> &dyn DiscussionStore;

    /// Bans, the moderators seen acting, and the moderation log.
    fn moderation(&self) -> &dyn ModerationStore;
    /// Held comments (waiting for a moderator), shared by every layout.
    fn held(&self) -> &dyn HeldStore;

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

    /// The layout an import keeps a discussion in before its move brings it into `layout` with
    /// the imported comments (see [`CommentStore::import_scratch`]).
    fn import_scratch(&self, layout: Layout) -> Layout;

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

/// Storage as the API layer holds it.
pub type DynStorage = Arc<dyn Storage>;
