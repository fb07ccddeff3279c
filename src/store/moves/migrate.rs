//! Moving a discussion from one layout to another while it stays online (see
//! docs/ARCHITECTURE.md, "Moving a discussion between layouts").
//!
//! A move holds a fence on the discussion document (the `moving` field: target layout, owner and
//! lease) from before the copy until the old storage is gone. Every write to the discussion's
//! comments checks the fence in the same transaction (posts with their counters, edits and
//! deletes with their change mark, the embedded layout's guarded updates in their filter), so
//! none lands in the old storage after the copy has read it; a refused write waits for the fence
//! to go and is made again in the layout the discussion has then. Reads never wait: until the
//! switch they read the old storage, which stays complete; after it, the new one. The fence is a
//! lease: a move renews it as it goes, a crashed move's lease runs out, and a new move (or a
//! waiting writer) takes over.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use mongodb::bson::{doc, Document};
use mongodb::options::ReturnDocument;

use crate::domain::{Comment, Discussion, DiscussionId, Layout};
use crate::store::api::{CommentStore, MoveTiming, Moved, Step};
use crate::store::discussions::Discussions;
use crate::store::discussions::FENCE;
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::metrics::Counted;

/// What a layout does for a move, besides being a [`CommentStore`].
#[async_trait]
pub(crate) trait Movable: CommentStore {
    /// Removes everything this layout stores for the discussion (idempotent: a no-op when there
    /// is nothing).
    async fn clear(&self, id: &DiscussionId) -> StoreResult<()>;

    /// Writes every comment of the discussion (chronological order, as read from the old layout)
    /// into this layout's storage, renewing the lease as it goes; returns the fields to set on the
    /// discussion document in the same update that switches its layout.
    async fn import(
        &self,
        discussion: &Discussion,
        comments: &[Comment],
        lease: &Lease<'_>,
    ) -> StoreResult<Document>;

    /// The documents that hold the discussion's comments (or copies of them): each of this
    /// layout's collections and the filter of the discussion's documents in it (what a rewrite
    /// of stored author ids reads).
    fn documents_of(&self, id: &DiscussionId) -> Vec<(&Counted<Document>, Document)>;
}

/// Milliseconds since the epoch.
fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A move's hold on the discussion's fence.
pub(crate) struct Lease<'a> {
    discussions: &'a Counted<Document>,
    id: &'a DiscussionId,
    owner: String,
    length: Duration,
    report: &'a (dyn Fn(Step) + Send + Sync),
    total: u64,
    chunk: usize,
}

impl Lease<'_> {
    /// Comments to write per command.
    pub(crate) fn chunk(&self) -> usize {
        self.chunk.max(1)
    }

    /// The filter that matches the discussion while this move holds its fence.
    fn held(&self) -> Document {
        doc! { "_id": self.id.as_str(), format!("{FENCE}.owner"): &self.owner }
    }

    /// Extends the lease (`Busy` when it was lost: the move stopped for longer than the lease and
    /// something else took over) and reports `done` comments written.
    pub(crate) async fn written(&self, done: u64) -> StoreResult<()> {
        self.renew().await?;
        (self.report)(Step::Writing {
            done,
            total: self.total,
        });
        Ok(())
    }

    async fn renew(&self) -> StoreResult<()> {
        let until = now_ms().saturating_add(millis(self.length));
        let result = self
            .discussions
            .update_one(
                self.held(),
                doc! { "$set": { format!("{FENCE}.until"): until } },
            )
            .await?;
        if result.matched_count == 0 {
            return Err(self.lost());
        }
        Ok(())
    }

    fn lost(&self) -> StoreError {
        StoreError::Busy(format!(
            "the move of discussion {} lost its fence (it stopped for longer than its lease); \
             nothing was switched, run it again",
            self.id
        ))
    }
}

/// The events a move announces, given the layout it moved the discussion from (written with the
/// switch to the new layout).
pub(crate) type Announce<'a> = dyn Fn(Layout) -> Vec<crate::domain::Event> + Send + Sync + 'a;

/// The layouts a move reads from and writes to.
pub(crate) type Movers<'a> = HashMap<Layout, &'a dyn Movable>;

/// Moves discussion `id` to layout `to` (see the module documentation), adding the comments of
/// `adding` whose slugs it does not hold yet (an import: see [`merged`]). Idempotent: run again
/// after a crash at any point, it finishes the job (a partial copy is cleared and made again; a
/// move that switched but did not remove the old storage removes it).
pub(crate) async fn run(
    store: &Discussions,
    movers: &Movers<'_>,
    (id, to): (&DiscussionId, Layout),
    adding: &[Comment],
    timing: MoveTiming,
    (report, announce): (&(dyn Fn(Step) + Send + Sync), &Announce<'_>),
) -> StoreResult<Moved> {
    let raw = store.raw();
    let discussions = &raw;
    let owner = format!("{:032x}@{}", rand::random::<u128>(), std::process::id());
    acquire(discussions, id, to, &owner, timing.lease).await?;
    let mut lease = Lease {
        discussions,
        id,
        owner,
        length: timing.lease,
        report,
        total: 0,
        chunk: timing.chunk,
    };
    let result = async {
        let discussion = store.by_id(id).await?;
        let from = discussion.layout;
        let mut comments = 0;
        let mut added = 0;
        if from != to {
            let source = mover(movers, from)?;
            let target = mover(movers, to)?;
            lease.total = discussion.comment_count;
            let all = export(source, &discussion, &lease).await?;
            comments = all.len() as u64;
            if comments != discussion.comment_count {
                return Err(StoreError::Corrupt(format!(
                    "discussion {id} counts {} comments but {comments} were read; nothing was moved",
                    discussion.comment_count
                )));
            }
            let all = match adding.is_empty() {
                true => all,
                false => merged(all, adding),
            };
            added = all.len() as u64 - comments;
            target.clear(id).await?;
            let mut fields = target.import(&discussion, &all, &lease).await?;
            fields.insert("layout", to.as_str());
            if added > 0 {
                let threads = all.iter().filter(|c| c.parent.is_none()).count();
                fields.insert("comment_count", i64::try_from(all.len()).unwrap_or(i64::MAX));
                fields.insert("thread_count", i64::try_from(threads).unwrap_or(i64::MAX));
            }
            // The switch and the move's events commit together.
            let (switch, held, events) = (
                doc! { "$set": fields, "$inc": { "moves": 1_i64 } },
                lease.held(),
                announce(from),
            );
            let (switch, held, events) = (&switch, &held, &events);
            let switched = store
                .log()
                .atomically(|mut session| async move {
                    let switched = discussions
                        .update_one(held.clone(), switch.clone())
                        .session(&mut session)
                        .await;
                    let told = switched.map(|s| match s.matched_count {
                        0 => (false, Vec::new()),
                        _ => (true, events.clone()),
                    });
                    (session, told.map_err(Into::into))
                })
                .await?;
            if !switched {
                return Err(lease.lost());
            }
            report(Step::Switched);
            // Reads that began before the switch finish in the old storage; when that held
            // nothing (a discussion an import just created), they have nothing to finish.
            if comments > 0 {
                tokio::time::sleep(timing.grace).await;
            }
            lease.renew().await?;
        }
        // The old storage, and anything an interrupted earlier move left in a third layout.
        for (layout, store) in movers {
            if *layout != to {
                store.clear(id).await?;
            }
        }
        Ok((from, comments, added))
    }
    .await;
    let released = discussions
        .update_one(lease.held(), doc! { "$unset": { FENCE: "" } })
        .await;
    let (from, comments, added) = result?;
    released?;
    report(Step::Done);
    Ok(Moved {
        discussion: store.by_id(id).await?,
        from,
        comments,
        added,
    })
}

/// The discussion's comments `all` (chronological) with those of `adding` whose slugs are not
/// among them, in chronological order, each with its count of replies in the result. A comment
/// of `adding` is stored as it is (its slug, full slug and time), so the caller places it.
fn merged(mut all: Vec<Comment>, adding: &[Comment]) -> Vec<Comment> {
    let have: std::collections::HashSet<crate::domain::Slug> =
        all.iter().map(|c| c.slug.clone()).collect();
    all.extend(adding.iter().filter(|c| !have.contains(&c.slug)).cloned());
    all.sort_by(|a, b| (a.posted, a.slug.as_str()).cmp(&(b.posted, b.slug.as_str())));
    let mut replies: HashMap<crate::domain::Slug, u64> = HashMap::new();
    for comment in &all {
        if let Some(parent) = &comment.parent {
            *replies.entry(parent.clone()).or_default() += 1;
        }
    }
    for comment in &mut all {
        comment.reply_count = replies.get(&comment.slug).copied().unwrap_or(0);
    }
    all
}

fn mover<'a>(movers: &Movers<'a>, layout: Layout) -> StoreResult<&'a dyn Movable> {
    movers.get(&layout).copied().ok_or_else(|| {
        StoreError::Unsupported(format!(
            "the {layout} layout is not available in this build"
        ))
    })
}

/// Takes the discussion's fence: free, or held by a move whose lease ran out. `Busy` when a
/// live move holds it, `NotFound` when there is no such discussion.
async fn acquire(
    discussions: &Counted<Document>,
    id: &DiscussionId,
    to: Layout,
    owner: &str,
    lease: Duration,
) -> StoreResult<()> {
    let now = now_ms();
    let fence =
        doc! { "to": to.as_str(), "owner": owner, "until": now.saturating_add(millis(lease)) };
    let filter = doc! {
        "_id": id.as_str(),
        "$or": [
            { FENCE: { "$exists": false } },
            { format!("{FENCE}.until"): { "$lt": now } },
        ],
    };
    // A write to the discussion inside a transaction that has not committed yet makes the
    // database refuse this one for a moment (a write conflict): try again shortly.
    let mut tries = 0;
    let taken = loop {
        let attempt = discussions
            .find_one_and_update(filter.clone(), doc! { "$set": { FENCE: &fence } })
            .projection(doc! { "_id": 1 })
            .return_document(ReturnDocument::After)
            .await;
        match attempt {
            Err(err) if is_write_conflict(&err) => {
                tries += 1;
                if tries == 50 {
                    return Err(StoreError::Busy(format!(
                        "discussion {id} kept being written to for a second: no move began; try again"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => break other?,
        }
    };
    if taken.is_some() {
        return Ok(());
    }
    let current = discussions
        .find_one(doc! { "_id": id.as_str() })
        .projection(doc! { FENCE: 1 })
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("no discussion {id}")))?;
    let until = current
        .get_document(FENCE)
        .ok()
        .and_then(|f| f.get_i64("until").ok())
        .unwrap_or(now);
    Err(StoreError::Busy(format!(
        "discussion {id} is already moving to another layout (its move holds it for up to {} ms more); \
         try again once that move is over",
        (until - now).max(0)
    )))
}

/// Whether a driver error is a write conflict with a transaction in progress.
fn is_write_conflict(err: &mongodb::error::Error) -> bool {
    use mongodb::error::{ErrorKind, WriteFailure, TRANSIENT_TRANSACTION_ERROR};
    const WRITE_CONFLICT: i32 = 112;
    err.contains_label(TRANSIENT_TRANSACTION_ERROR)
        || match err.kind.as_ref() {
            ErrorKind::Command(e) => e.code == WRITE_CONFLICT,
            ErrorKind::Write(WriteFailure::WriteError(e)) => e.code == WRITE_CONFLICT,
            _ => false,
        }
}

/// Every comment of the discussion, chronological, read from its layout page by page.
async fn export(
    source: &dyn Movable,
    discussion: &Discussion,
    lease: &Lease<'_>,
) -> StoreResult<Vec<Comment>> {
    let mut all: Vec<Comment> = Vec::new();
    loop {
        let page = source
            .posted_after(discussion, all.last(), lease.chunk())
            .await?;
        all.extend(page.items.into_iter().map(std::sync::Arc::unwrap_or_clone));
        lease.renew().await?;
        (lease.report)(Step::Reading {
            done: all.len() as u64,
            total: discussion.comment_count,
        });
        if !page.has_next {
            return Ok(all);
        }
    }
}

/// Waits until no move holds the discussion's fence: a live move is waited for (up to
/// `timing.wait`, then `Moving`); a fence whose lease ran out is removed (the move that held it
/// stopped before its switch, or after it: either way the discussion's layout is the one to
/// write to). `NotFound` when the discussion is gone.
pub(crate) async fn until_unfenced(
    discussions: &Counted<Document>,
    id: &DiscussionId,
    wait: Duration,
) -> StoreResult<()> {
    let started = tokio::time::Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        let found = discussions
            .find_one(doc! { "_id": id.as_str() })
            .projection(doc! { FENCE: 1 })
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("no discussion {id}")))?;
        let Ok(fence) = found.get_document(FENCE) else {
            return Ok(());
        };
        let until = fence.get_i64("until").unwrap_or(0);
        if until < now_ms() {
            let owner = fence.get_str("owner").unwrap_or_default();
            discussions
                .update_one(
                    doc! {
                        "_id": id.as_str(),
                        format!("{FENCE}.owner"): owner,
                        format!("{FENCE}.until"): { "$lt": now_ms() },
                    },
                    doc! { "$unset": { FENCE: "" } },
                )
                .await?;
            tracing::warn!(discussion = %id, "removed the fence of a move that stopped (its lease ran out)");
            continue;
        }
        if started.elapsed() >= wait {
            return Err(StoreError::Moving(format!(
                "discussion {id} is still moving to another layout after {} s",
                wait.as_secs()
            )));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}
