//! The post skeleton: turns per discussion, tries, transactions and grouped posts.

use std::collections::HashMap;
use std::sync::Mutex;

use mongodb::bson::Bson;
use mongodb::error::TRANSIENT_TRANSACTION_ERROR;
use mongodb::ClientSession;
use tokio::sync::oneshot;

use super::{Attempt, ParentPaths, PostSteps, Try, ATTEMPTS};
use crate::domain::{
    Announce, Comment, Discussion, DiscussionId, Event, Micros, NewComment, Placement, SlugPart,
};
use crate::store::api::Posted;
use crate::store::events::EventLog;
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::metrics::CommandCounter;
use crate::store::shared::transactions::{abort, commit, pause};
use crate::store::shared::writer::Writer;

/// How often a post may move on (see [`Attempt::Moved`]) before it gives up.
const MOVES: usize = 10_000;
/// How often a post's transaction may meet a concurrent one (a write conflict) before it gives
/// up; each time it waits a little, at random, so colliding posts spread out.
const CONFLICTS: usize = 500;

/// A post on its way: what was asked, what `prepare` found, and how its tries went.
pub(crate) struct Entry<S> {
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
pub(crate) struct Waiting<S> {
    posts: Mutex<HashMap<DiscussionId, Vec<Entry<S>>>>,
    limit: usize,
}

impl<S> Waiting<S> {
    /// Waiting posts, stored `limit` (at least 1) at a time.
    pub(crate) fn new(limit: usize) -> Self {
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
    (transaction, log, announced): (bool, &EventLog, &[Option<Announce>]),
) -> StoreResult<Outcome> {
    if transaction {
        session.start_transaction().await?;
    }
    let result = async {
        steps.attempt_group(discussion, group, session).await?;
        if group.iter().any(|t| t.outcome == Attempt::Stored) {
            steps.count_group(discussion, group, session).await?;
            let (events, homes): (Vec<Event>, Vec<Option<Bson>>) = group
                .iter()
                .zip(announced)
                .filter(|(t, _)| t.outcome == Attempt::Stored)
                .filter_map(|(t, announce)| {
                    let event = announce.as_ref()?.event(t.comment);
                    Some((event, steps.home(discussion, t.state)))
                })
                .unzip();
            log.append_homed(session, &events, &homes).await?;
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

/// Posts `new` through a layout's steps: the placement under the depth cap, a fresh slug part and
/// time for every try, the counters, and a retryable `Exhausted` when every try was refused.
/// A layout that groups posts stores the ones waiting for the discussion's turn together.
pub(crate) async fn post<S: PostSteps>(
    steps: &S,
    writer: &Writer,
    discussion: &Discussion,
    new: &NewComment,
) -> StoreResult<Posted> {
    let policy = steps.policy();
    // A post that announces an event writes it in the post's transaction (the outbox), even in
    // a layout whose post is otherwise one atomic update.
    let transaction = writer.transactions && (policy.transaction || new.announce.is_some());
    // The read comes before the turn (see `PostPolicy`).
    let part = new.part.clone().unwrap_or_else(SlugPart::generate);
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
    if let Some(waiting) = policy.grouping {
        return grouped(steps, writer, waiting, discussion, entry, transaction).await;
    }
    let _turn = writer.turn(&discussion.id).await;
    steps.after_turn(discussion, &mut entry.state);
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
        let announced: Vec<Option<Announce>> = live
            .iter()
            .map(|entry| entry.new.announce.clone())
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
            (transaction, &writer.log, &announced),
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
                pause(u32::try_from(conflicts).unwrap_or(u32::MAX)).await;
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
                            // A part given by the caller (a held comment published under the
                            // slug it was held with) is kept: a refusal by a concurrent write
                            // is tried again with it, and a slug truly taken ends in `CONFLICT`.
                            if entry.new.part.is_none() {
                                entry.part = SlugPart::generate();
                            }
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
                html: format!("<p>post {n}</p>\n"),
                part: None,
                announce: None,
                number: None,
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
