//! The write skeletons every layout shares: posting (placement under the depth cap, a fresh slug
//! and time per attempt, counters, giving up as a retryable conflict, and storing together the
//! posts that wait for a discussion's turn) and changing a posted comment (read, decide,
//! compare-and-set, retry).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use mongodb::bson::Document;
use mongodb::error::{TRANSIENT_TRANSACTION_ERROR, UNKNOWN_TRANSACTION_COMMIT_RESULT};
use mongodb::{Client, ClientSession};
use rand::Rng;
use tokio::sync::oneshot;

use super::metrics::Counted;
use super::{
    CommandCounter, CommentStore, Discussions, Posted, ReadScope, StoreError, StoreResult,
};
use crate::domain::slug::MonotonicClock;
use crate::domain::{
    Comment, Discussion, DiscussionId, DomainError, FullSlug, Micros, NewComment, Placement, Slug,
    SlugPart,
};

/// How often a write is tried before it gives up with a retryable `CONFLICT`: each refused try
/// (a slug collision, a concurrent write that changed what the write relied on) starts afresh.
pub(super) const ATTEMPTS: usize = 32;

/// What one try to store a new comment did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Attempt {
    /// The comment is stored.
    Stored,
    /// Refused (slug taken, or a guard saw a concurrent write); the layout refreshed its state.
    /// The next try draws a new slug part.
    Retry,
    /// Not stored, but the layout moved on (e.g. to the next bucket after a full one): the next
    /// try keeps the slug part and takes a new time.
    Moved,
}

/// How often a post may move on (see [`Attempt::Moved`]) before it gives up.
const MOVES: usize = 10_000;
/// How often a post's transaction may meet a concurrent one (a write conflict) before it gives
/// up; each time it waits a little, at random, so colliding posts spread out.
const CONFLICTS: usize = 500;

/// Where posts write: a client to open sessions on, and whether writes that span documents run
/// in a transaction (a replica set or a sharded cluster; a standalone server cannot).
#[derive(Clone)]
pub(super) struct Writer {
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
}

impl Writer {
    /// A writer over `client`.
    pub fn new(
        client: Client,
        transactions: bool,
        clock: Arc<MonotonicClock>,
        max_depth: usize,
        commands: CommandCounter,
    ) -> Self {
        Self {
            client,
            transactions,
            queues: Arc::default(),
            clock,
            max_depth,
            commands,
        }
    }

    /// Waits for this process's turn to post to `discussion`.
    async fn turn(&self, discussion: &DiscussionId) -> tokio::sync::OwnedMutexGuard<()> {
        let queue = {
            let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            queues.retain(|_, q| Arc::strong_count(q) > 1);
            queues.entry(discussion.clone()).or_default().clone()
        };
        queue.lock_owned().await
    }
}

/// A parent as a post needs it: where the reply goes.
pub(super) struct ParentPaths {
    /// The parent's slug.
    pub slug: Slug,
    /// The parent's full slug.
    pub full_slug: FullSlug,
}

impl From<&Comment> for ParentPaths {
    fn from(c: &Comment) -> Self {
        Self {
            slug: c.slug.clone(),
            full_slug: c.full_slug.clone(),
        }
    }
}

/// The steps of a post that differ by layout; [`post`] runs them.
#[async_trait]
pub(super) trait PostSteps: Send + Sync {
    /// What the layout carries between tries (positions, the current page…).
    type State: Send + Sync;

    /// Finds the requested parent (`NotFound` when it does not exist) and reads what the
    /// layout needs before writing. `part` is the slug part the first try will use (a layout
    /// that checks slugs itself can look it up in the same read).
    async fn prepare(
        &self,
        discussion: &Discussion,
        parent: Option<&Slug>,
        part: &SlugPart,
    ) -> StoreResult<(Option<ParentPaths>, Self::State)>;

    /// A time the new comment under `parent` must come after, when the layout orders by it.
    fn floor(&self, _state: &Self::State, _parent: Option<&Slug>) -> Option<Micros> {
        None
    }

    /// Whether a post's writes run in one transaction (when the deployment has them). A layout
    /// whose try is one single-document write needs none; one that accepts a counter left one low
    /// by a crash between its writes may do without (see docs/ARCHITECTURE.md).
    fn transactional(&self) -> bool {
        true
    }

    /// Whether this process's posts to one discussion wait for each other (always when they run
    /// in transactions, which would abort each other instead of waiting).
    fn queued(&self) -> bool {
        self.transactional()
    }

    /// Whether a queued post may make its read (`prepare`) before its turn, so that it overlaps
    /// the post ahead of it: true where what `prepare` reads cannot be changed by another post
    /// (or a change is caught by the try and refreshed in [`PostSteps::after_turn`]).
    fn prepares_before_turn(&self) -> bool {
        false
    }

    /// Brings what `prepare` read up to date with what this process learned while the post
    /// waited for its turn (without a database command).
    fn after_turn(&self, _discussion: &Discussion, _state: &mut Self::State) {}

    /// Where this process's posts to one discussion wait to be stored together, when the layout
    /// stores several comments in one try ([`PostSteps::attempt_group`]); `None` stores them
    /// one at a time. Only for queued layouts that prepare before their turn.
    fn grouping(&self) -> Option<&Waiting<Self::State>> {
        None
    }

    /// Tries to store every comment of `group` (one comment unless the layout groups posts),
    /// setting each one's outcome; a layout may store some and not others (those try again).
    /// A layout implements this or [`PostSteps::attempt`], each defined by the other.
    async fn attempt_group(
        &self,
        discussion: &Discussion,
        group: &mut [Try<'_, Self::State>],
        session: &mut ClientSession,
    ) -> StoreResult<()> {
        for one in group.iter_mut() {
            one.outcome = self
                .attempt(discussion, one.comment, &mut *one.state, session)
                .await?;
        }
        Ok(())
    }

    /// Counts the comments of `group` that were stored, in the same transaction.
    async fn count_group(
        &self,
        discussion: &Discussion,
        group: &[Try<'_, Self::State>],
        session: &mut ClientSession,
    ) -> StoreResult<()> {
        for one in group.iter().filter(|t| t.outcome == Attempt::Stored) {
            self.count(discussion, one.comment, &*one.state, session)
                .await?;
        }
        Ok(())
    }

    /// Tries to store `comment`. Writes that must land together with the counters go through
    /// `session` (inside the post's transaction). A grouping layout's is a group of one.
    async fn attempt(
        &self,
        discussion: &Discussion,
        comment: &Comment,
        state: &mut Self::State,
        session: &mut ClientSession,
    ) -> StoreResult<Attempt> {
        let mut one = [Try {
            comment,
            state,
            outcome: Attempt::Retry,
        }];
        self.attempt_group(discussion, &mut one, session).await?;
        Ok(one[0].outcome)
    }

    /// Learns what the layout keeps about a comment this process stored (and committed).
    fn stored(&self, _discussion: &Discussion, _comment: &Comment, _state: &Self::State) {}

    /// Counts a stored comment (replies of its parent, comments of the discussion) where the
    /// write did not already, in the same transaction as the comment (nothing, for a layout
    /// whose write counts everything or that counts in [`PostSteps::count_group`]).
    async fn count(
        &self,
        _discussion: &Discussion,
        _comment: &Comment,
        _state: &Self::State,
        _session: &mut ClientSession,
    ) -> StoreResult<()> {
        Ok(())
    }
}

/// One comment of a try: what to store, the layout's state for it, and what became of it.
pub(super) struct Try<'a, S> {
    /// The comment as this try would store it.
    pub comment: &'a Comment,
    /// What the layout carries for this post.
    pub state: &'a mut S,
    /// Set by the layout's attempt.
    pub outcome: Attempt,
}

/// A post on its way: what was asked, what `prepare` found, and how its tries went.
pub(super) struct Entry<S> {
    new: NewComment,
    parent: Option<ParentPaths>,
    part: SlugPart,
    state: S,
    reattached: bool,
    refused: usize,
    moved: usize,
    result: Option<StoreResult<Posted>>,
    /// Where a post stored by another post's turn hears how it went.
    reply: Option<oneshot::Sender<StoreResult<Posted>>>,
}

/// The posts of this process waiting for their discussion's turn, per discussion, for a layout
/// that stores several in one try: whoever gets the turn stores the ones waiting (up to `limit`)
/// together and tells each how it went.
pub(super) struct Waiting<S> {
    posts: Mutex<HashMap<DiscussionId, Vec<Entry<S>>>>,
    limit: usize,
}

impl<S> Waiting<S> {
    /// Waiting posts, stored `limit` (at least 1) at a time.
    pub fn new(limit: usize) -> Self {
        Self {
            posts: Mutex::default(),
            limit: limit.max(1),
        }
    }

    fn add(&self, id: &DiscussionId, entry: Entry<S>) {
        let mut posts = self.posts.lock().unwrap_or_else(|p| p.into_inner());
        posts.entry(id.clone()).or_default().push(entry);
    }

    /// The longest-waiting posts to `id`, up to the limit.
    fn take(&self, id: &DiscussionId) -> Vec<Entry<S>> {
        let mut posts = self.posts.lock().unwrap_or_else(|p| p.into_inner());
        let Some(queue) = posts.get_mut(id) else {
            return Vec::new();
        };
        let taken: Vec<Entry<S>> = queue.drain(..queue.len().min(self.limit)).collect();
        if queue.is_empty() {
            posts.remove(id);
        }
        taken
    }
}

/// What one transaction of a post came to.
enum Outcome {
    /// Each comment's outcome is set.
    Done,
    /// A concurrent transaction wrote the same document first; nothing was written.
    Conflict,
}

/// One try: the writes and the counters, committed together, or nothing.
async fn try_once<S: PostSteps>(
    steps: &S,
    commands: &CommandCounter,
    discussion: &Discussion,
    group: &mut [Try<'_, S::State>],
    session: &mut ClientSession,
    transaction: bool,
) -> StoreResult<Outcome> {
    if transaction {
        session.start_transaction().await?;
    }
    let result = async {
        steps.attempt_group(discussion, group, session).await?;
        if group.iter().any(|t| t.outcome == Attempt::Stored) {
            steps.count_group(discussion, group, session).await?;
            if transaction {
                commit(session, commands).await?;
            }
        } else if transaction {
            // A refused write may have ended the transaction on the server already.
            abort(session, commands).await;
        }
        Ok::<_, StoreError>(())
    }
    .await;
    match result {
        Ok(()) => Ok(Outcome::Done),
        Err(err) => {
            if transaction {
                // The server may have aborted it already; either way nothing of it stays.
                abort(session, commands).await;
            }
            match &err {
                StoreError::Db(e) if e.contains_label(TRANSIENT_TRANSACTION_ERROR) => {
                    Ok(Outcome::Conflict)
                }
                _ => Err(err),
            }
        }
    }
}

/// Aborts the session's transaction (an error only means there is nothing left to abort).
async fn abort(session: &mut ClientSession, commands: &CommandCounter) {
    commands.sent("abortTransaction");
    let _ = session.abort_transaction().await;
}

/// Commits, asking again while the outcome is unknown (committing twice is safe).
async fn commit(session: &mut ClientSession, commands: &CommandCounter) -> StoreResult<()> {
    let mut tries = 0;
    loop {
        commands.sent("commitTransaction");
        match session.commit_transaction().await {
            Err(e) if e.contains_label(UNKNOWN_TRANSACTION_COMMIT_RESULT) && tries < 3 => {
                tries += 1;
            }
            other => return Ok(other?),
        }
    }
}

/// Posts `new` through a layout's steps: the placement under the depth cap, a fresh slug part and
/// time for every try, the counters, and a retryable `Exhausted` when every try was refused.
/// A layout that groups posts stores the ones waiting for the discussion's turn together.
pub(super) async fn post<S: PostSteps>(
    steps: &S,
    writer: &Writer,
    discussion: &Discussion,
    new: &NewComment,
) -> StoreResult<Posted> {
    let transaction = writer.transactions && steps.transactional();
    let queued = transaction || steps.queued();
    let early = queued && steps.prepares_before_turn();
    let mut turn = match queued && !early {
        true => Some(writer.turn(&discussion.id).await),
        false => None,
    };
    let part = SlugPart::generate();
    let (parent, state) = steps
        .prepare(discussion, new.parent.as_ref(), &part)
        .await?;
    let mut entry = Entry {
        new: new.clone(),
        parent,
        part,
        state,
        reattached: false,
        refused: 0,
        moved: 0,
        result: None,
        reply: None,
    };
    if early {
        if let Some(waiting) = steps.grouping() {
            return grouped(steps, writer, waiting, discussion, entry, transaction).await;
        }
        turn = Some(writer.turn(&discussion.id).await);
        steps.after_turn(discussion, &mut entry.state);
    }
    let _turn = turn;
    let mut entries = [entry];
    store(steps, writer, discussion, &mut entries, transaction).await;
    let [entry] = entries;
    entry.result.unwrap_or_else(|| Err(unsettled(discussion)))
}

/// The error of a post whose outcome nobody reported (the turn that took it was dropped).
fn unsettled(discussion: &Discussion) -> StoreError {
    StoreError::Exhausted(format!(
        "a post to discussion {} was interrupted: look for the comment before sending it again",
        discussion.id
    ))
}

/// A grouping layout's post: waits among the discussion's other posts until one of their turns
/// stores it, or its own turn comes and it stores the ones waiting, itself among them.
async fn grouped<S: PostSteps>(
    steps: &S,
    writer: &Writer,
    waiting: &Waiting<S::State>,
    discussion: &Discussion,
    mut entry: Entry<S::State>,
    transaction: bool,
) -> StoreResult<Posted> {
    let (tx, mut rx) = oneshot::channel();
    entry.reply = Some(tx);
    waiting.add(&discussion.id, entry);
    let _turn = tokio::select! {
        biased;
        result = &mut rx => return result.unwrap_or_else(|_| Err(unsettled(discussion))),
        turn = writer.turn(&discussion.id) => turn,
    };
    loop {
        match rx.try_recv() {
            Ok(result) => return result,
            Err(oneshot::error::TryRecvError::Closed) => return Err(unsettled(discussion)),
            Err(oneshot::error::TryRecvError::Empty) => {}
        }
        let mut group = waiting.take(&discussion.id);
        if group.is_empty() {
            return Err(unsettled(discussion));
        }
        for entry in &mut group {
            steps.after_turn(discussion, &mut entry.state);
        }
        store(steps, writer, discussion, &mut group, transaction).await;
        for entry in group {
            if let (Some(reply), Some(result)) = (entry.reply, entry.result) {
                let _ = reply.send(result);
            }
        }
    }
}

/// Stores `entries` (together when the layout groups them), trying again each one refused, until
/// every entry has its result.
async fn store<S: PostSteps>(
    steps: &S,
    writer: &Writer,
    discussion: &Discussion,
    entries: &mut [Entry<S::State>],
    transaction: bool,
) {
    let (clock, max_depth) = (&writer.clock, writer.max_depth);
    let mut session = match writer.client.start_session().await {
        Ok(session) => session,
        Err(err) => {
            let err = StoreError::from(err);
            for entry in entries.iter_mut() {
                entry.result = Some(Err(err.clone()));
            }
            return;
        }
    };
    let mut conflicts = 0;
    loop {
        let mut live: Vec<&mut Entry<S::State>> =
            entries.iter_mut().filter(|e| e.result.is_none()).collect();
        if live.is_empty() {
            return;
        }
        let comments: Vec<Comment> = live
            .iter_mut()
            .map(|entry| {
                let parent = entry.parent.as_ref().map(|p| (&p.slug, &p.full_slug));
                // The placement's parent does not depend on the time; the time must follow
                // the floor of the parent the comment really goes to.
                let target = Placement::new(parent, max_depth, Micros(0), &entry.part).parent;
                let posted = match steps.floor(&entry.state, target.as_ref()) {
                    Some(floor) => clock.now_after(floor),
                    None => clock.now(),
                };
                let placement = Placement::new(parent, max_depth, posted, &entry.part);
                entry.reattached = placement.reattached;
                placement.into_comment(discussion.id.clone(), posted, &entry.new)
            })
            .collect();
        let mut group: Vec<Try<'_, S::State>> = live
            .iter_mut()
            .zip(&comments)
            .map(|(entry, comment)| Try {
                comment,
                state: &mut entry.state,
                outcome: Attempt::Retry,
            })
            .collect();
        let outcome = try_once(
            steps,
            &writer.commands,
            discussion,
            &mut group,
            &mut session,
            transaction,
        )
        .await;
        let outcomes: Vec<Attempt> = group.iter().map(|t| t.outcome).collect();
        drop(group);
        match outcome {
            Err(err) => {
                for entry in live {
                    entry.result = Some(Err(err.clone()));
                }
                return;
            }
            Ok(Outcome::Conflict) => {
                conflicts += 1;
                let wait = rand::thread_rng().gen_range(0..=(conflicts.min(20) as u64));
                tokio::time::sleep(Duration::from_millis(wait)).await;
            }
            Ok(Outcome::Done) => {
                for ((entry, comment), outcome) in live.iter_mut().zip(comments).zip(outcomes) {
                    match outcome {
                        Attempt::Stored => {
                            steps.stored(discussion, &comment, &entry.state);
                            entry.result = Some(Ok(Posted {
                                comment,
                                reattached: entry.reattached,
                                moved: None,
                            }));
                        }
                        Attempt::Retry => {
                            tracing::debug!(discussion = %discussion.id, "post refused by a guard: retrying");
                            entry.refused += 1;
                            entry.part = SlugPart::generate();
                        }
                        Attempt::Moved => entry.moved += 1,
                    }
                }
            }
        }
        for entry in entries.iter_mut().filter(|e| e.result.is_none()) {
            if entry.refused >= ATTEMPTS || entry.moved >= MOVES || conflicts >= CONFLICTS {
                entry.result = Some(Err(StoreError::Exhausted(format!(
                    "the post to discussion {} met concurrent writes {} times and moved on {} times",
                    discussion.id,
                    entry.refused + conflicts,
                    entry.moved
                ))));
            }
        }
    }
}

/// What a change makes of a comment read at a given time: the new comment, `None` when nothing
/// changes, or why it may not be made.
pub type Decide<'a> =
    dyn Fn(&Comment, Micros) -> Result<Option<Comment>, DomainError> + Send + Sync + 'a;

/// Changes a posted comment: reads it, lets `decide` say what it becomes (or that nothing
/// changes, or why not), and writes that only if nobody changed the comment in between; a lost
/// race reads again, up to [`ATTEMPTS`] times. `decide` gets a time strictly after every earlier
/// version of the comment.
pub(super) async fn revise(
    layout: &dyn CommentStore,
    clock: &MonotonicClock,
    discussion: &Discussion,
    slug: &Slug,
    decide: &Decide<'_>,
) -> Result<Comment, DomainError> {
    for _ in 0..ATTEMPTS {
        let scope = ReadScope::new();
        let current = layout
            .by_slugs(&scope, discussion, std::slice::from_ref(slug))
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| {
                DomainError::not_found(format!("no comment {slug} in discussion {}", discussion.id))
            })?;
        let now = clock.now_after(current.edited.unwrap_or(current.posted));
        let Some(next) = decide(&current, now)? else {
            return Ok(current);
        };
        if layout.replace(&scope, discussion, &current, &next).await? {
            return Ok(next);
        }
        tracing::debug!(discussion = %discussion.id, %slug, "comment changed while being changed: retrying");
    }
    Err(StoreError::Exhausted(format!(
        "comment {slug} in discussion {} kept changing during {ATTEMPTS} tries",
        discussion.id
    ))
    .into())
}

/// Replaces a comment stored outside its discussion document: one update of `coll` (`filter`
/// matches the comment only while it is as read). With transactions, the discussion's change
/// mark goes in the same transaction, which a move of the discussion to another layout cannot
/// overlap (`Moving` once one has begun); without, the mark follows the change. `Ok(false)` when
/// the comment changed meanwhile.
pub(super) async fn replace_outside<T: Send + Sync>(
    writer: &Writer,
    discussions: &Discussions,
    (id, slug): (&DiscussionId, &Slug),
    coll: &Counted<T>,
    filter: Document,
    update: Document,
) -> StoreResult<bool> {
    let mut session = writer.client.start_session().await?;
    if !writer.transactions {
        let result = coll.update_one(filter, update).await?;
        return Ok(discussions
            .after_replace(id, slug, result.matched_count == 1)
            .await);
    }
    session.start_transaction().await?;
    let result = async {
        discussions.mark_change(id, slug, &mut session).await?;
        let result = coll
            .update_one(filter, update)
            .session(&mut session)
            .await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Author, CommentText};

    fn entry(n: usize) -> Entry<usize> {
        Entry {
            new: NewComment {
                parent: None,
                author: Author {
                    id: "u1".into(),
                    name: "Ada".into(),
                },
                text: CommentText::parse(&format!("post {n}"), 100).expect("text"),
            },
            parent: None,
            part: SlugPart::generate(),
            state: n,
            reattached: false,
            refused: 0,
            moved: 0,
            result: None,
            reply: None,
        }
    }

    #[test]
    fn waiting_posts_are_taken_oldest_first_up_to_the_limit_per_discussion() {
        let waiting = Waiting::new(3);
        let (a, b) = (DiscussionId::generate(), DiscussionId::generate());
        for n in 0..5 {
            waiting.add(&a, entry(n));
        }
        waiting.add(&b, entry(100));
        let taken = |id| -> Vec<usize> { waiting.take(id).into_iter().map(|e| e.state).collect() };
        assert_eq!(taken(&a), vec![0, 1, 2]);
        assert_eq!(taken(&b), vec![100]);
        assert_eq!(taken(&a), vec![3, 4]);
        assert!(taken(&a).is_empty());
        assert!(
            waiting.posts.lock().unwrap().is_empty(),
            "emptied lists are dropped"
        );
        assert_eq!(Waiting::<usize>::new(0).limit, 1);
    }
}
