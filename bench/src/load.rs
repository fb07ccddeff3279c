//! Bulk loading: posts a plan through the layout's real write path, concurrently, with progress.

use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use futures::StreamExt as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashSet;

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde::Serialize;
use threadql::domain::{
    markdown, Author, Comment, CommentStatus, CommentText, Discussion, DomainError, FullSlug,
    Micros, NewComment, Queue, Slug, Standing, Vote,
};
use threadql::store::{Storage, Store, StoreError};
use tokio::sync::Notify;

use crate::plan::{author_name, Plan};

/// The server's default text limit (generated texts are far shorter).
const MAX_TEXT_CHARS: usize = 10_000;
/// The server's default nesting limit of block quotes and lists (generated texts nest none).
const MAX_MARKDOWN_DEPTH: usize = 16;

/// What a load did.
pub(crate) struct Loaded {
    /// The slug of each planned comment that was posted (`None` past a size cap).
    pub slugs: Vec<Option<Slug>>,
    /// How many were posted (those held for a moderator among them).
    pub posted: usize,
    /// How many of them were held for a moderator instead of being posted in the layout.
    pub held: usize,
    /// How long it took.
    pub elapsed: Duration,
    /// Why loading stopped early (the layout's size cap, or the time budget), if it did.
    pub stopped: Option<String>,
    /// The discussion as it stands after the load (a layout may have moved it).
    pub discussion: Discussion,
}

/// Posts every comment of `plan` into `discussion` with `concurrency` posts in flight, in plan
/// order; a reply waits until its parent is posted. Loading stops at the layout's size cap
/// (`DISCUSSION_TOO_LARGE`) or when `budget` has passed. When the layout moves the discussion to
/// another layout, the load goes on in the new one. The comments whose plan index is in `held`
/// are held for a moderator, as the server holds a post to a pre-moderated discussion (outside
/// the layout: `HeldStore::hold`); they must be leaves of the plan, since nothing is posted under
/// a held comment.
pub(crate) async fn load(
    store: &Store,
    discussion: Discussion,
    plan: &Plan,
    held: &HashSet<usize>,
    concurrency: usize,
    budget: Duration,
    label: &str,
) -> anyhow::Result<Loaded> {
    let total = plan.comments.len();
    let bar = progress_bar(total as u64, label);
    let loaded = post_plan(store, discussion, plan, held, concurrency, budget, &bar).await;
    match &loaded {
        Ok(loaded) => {
            bar.finish();
            if bar.is_hidden() {
                eprintln!(
                    "{label}: posted {}/{total} in {:.1}s",
                    loaded.posted,
                    loaded.elapsed.as_secs_f64()
                );
            }
        }
        Err(_) => bar.abandon(),
    }
    loaded
}

/// Loads `plan` whole into each of `discussions` as [`load`] does (nothing held back), `at_once`
/// discussions at a time, under one progress bar; returns them in the order given.
pub(crate) async fn load_many(
    store: &Store,
    discussions: Vec<Discussion>,
    plan: &Plan,
    (concurrency, at_once): (usize, usize),
    label: &str,
) -> anyhow::Result<Vec<Loaded>> {
    let total = plan.comments.len() * discussions.len();
    let bar = progress_bar(total as u64, label);
    let started = Instant::now();
    let none = HashSet::new();
    let loaded: Vec<anyhow::Result<Loaded>> = futures::stream::iter(discussions)
        .map(|discussion| {
            post_plan(
                store,
                discussion,
                plan,
                &none,
                concurrency,
                Duration::MAX,
                &bar,
            )
        })
        .buffered(at_once.max(1))
        .collect()
        .await;
    let loaded = loaded
        .into_iter()
        .map(|loaded| match loaded? {
            Loaded {
                stopped: Some(why), ..
            } => bail!("a discussion stopped loading: {why}"),
            loaded => Ok(loaded),
        })
        .collect::<anyhow::Result<Vec<_>>>();
    match &loaded {
        Ok(_) => {
            bar.finish();
            if bar.is_hidden() {
                eprintln!(
                    "{label}: posted {total} in {:.1}s",
                    started.elapsed().as_secs_f64()
                );
            }
        }
        Err(_) => bar.abandon(),
    }
    loaded
}

/// Posts `plan` into `discussion` (see [`load`]), counting on `bar`.
async fn post_plan(
    store: &Store,
    discussion: Discussion,
    plan: &Plan,
    held: &HashSet<usize>,
    concurrency: usize,
    budget: Duration,
    bar: &ProgressBar,
) -> anyhow::Result<Loaded> {
    let total = plan.comments.len();
    let slots: Vec<OnceLock<(Slug, FullSlug)>> = (0..total).map(|_| OnceLock::new()).collect();
    let held_count = AtomicUsize::new(0);
    let posted_notify = Notify::new();
    let stop = AtomicBool::new(false);
    let stopped: Mutex<Option<String>> = Mutex::new(None);
    let posted = AtomicUsize::new(0);
    let current = tokio::sync::RwLock::new(discussion);
    let started = Instant::now();

    let post_one = |index: usize| {
        let slots = &slots;
        let posted_notify = &posted_notify;
        let stop = &stop;
        let stopped = &stopped;
        let posted = &posted;
        let current = &current;
        let held_count = &held_count;
        async move {
            if stop.load(Ordering::SeqCst) {
                return Ok::<(), anyhow::Error>(());
            }
            if started.elapsed() > budget {
                let done = posted.load(Ordering::Relaxed);
                let mut first = stopped.lock().unwrap_or_else(|p| p.into_inner());
                first.get_or_insert_with(|| {
                    format!(
                        "the load time budget of {:.0} s ran out after {done} comments ({:.1} posts/s)",
                        budget.as_secs_f64(),
                        done as f64 / budget.as_secs_f64()
                    )
                });
                stop.store(true, Ordering::SeqCst);
                posted_notify.notify_waiters();
                return Ok(());
            }
            let planned = &plan.comments[index];
            let parent = match planned.parent {
                None => None,
                Some(p) => match wait_for(&slots[p], posted_notify, stop).await {
                    Some(slug) => Some(slug),
                    None => return Ok(()),
                },
            };
            let (id, name) = author_name(planned.author);
            let new = NewComment {
                parent: parent.as_ref().map(|(slug, _)| slug.clone()),
                author: Author { id, name },
                text: CommentText::parse(&planned.text, MAX_TEXT_CHARS)?,
                html: markdown::render(&planned.text, MAX_MARKDOWN_DEPTH),
                part: None,
                announce: None,
                number: None,
            };
            if held.contains(&index) {
                let id = current.read().await.id.clone();
                let under = parent.as_ref().map(|(slug, full)| (slug, full));
                let kept = store
                    .held()
                    .hold(
                        &id,
                        under,
                        &new,
                        Standing::default().set(CommentStatus::Pending, None),
                    )
                    .await
                    .with_context(|| format!("holding comment {index} of the plan failed"))?;
                let _ = slots[index].set((kept.comment.slug, kept.comment.full_slug));
                held_count.fetch_add(1, Ordering::Relaxed);
                posted.fetch_add(1, Ordering::Relaxed);
                posted_notify.notify_waiters();
                bar.inc(1);
                return Ok(());
            }
            let mut moved_once = false;
            loop {
                let discussion = current.read().await.clone();
                let result = store.posting().post(&discussion, new.clone()).await;
                match result {
                    Ok(done) => {
                        let _ = slots[index].set((done.comment.slug, done.comment.full_slug));
                        posted.fetch_add(1, Ordering::Relaxed);
                        posted_notify.notify_waiters();
                        bar.inc(1);
                        return Ok(());
                    }
                    Err(StoreError::TooLarge(why)) => {
                        let mut first = stopped.lock().unwrap_or_else(|p| p.into_inner());
                        first.get_or_insert(why);
                        stop.store(true, Ordering::SeqCst);
                        posted_notify.notify_waiters();
                        return Ok(());
                    }
                    Err(err) => {
                        // A layout that moved the discussion elsewhere: go on in the new layout.
                        let fresh = reload(store, &discussion).await?;
                        if moved_once || fresh.layout == discussion.layout {
                            return Err(err).with_context(|| {
                                format!("posting comment {index} of the plan failed")
                            });
                        }
                        moved_once = true;
                        *current.write().await = fresh;
                    }
                }
            }
        }
    };

    let mut results = futures::stream::iter(0..total)
        .map(post_one)
        .buffer_unordered(concurrency.max(1));
    while let Some(result) = results.next().await {
        if let Err(err) = result {
            stop.store(true, Ordering::SeqCst);
            posted_notify.notify_waiters();
            return Err(err);
        }
    }
    drop(results);
    let elapsed = started.elapsed();
    let posted = posted.load(Ordering::Relaxed);
    let discussion = current.into_inner();
    let discussion = reload(store, &discussion).await?;
    Ok(Loaded {
        slugs: slots
            .into_iter()
            .map(|slot| slot.into_inner().map(|(slug, _)| slug))
            .collect(),
        posted,
        held: held_count.into_inner(),
        elapsed,
        stopped: stopped.into_inner().unwrap_or_else(|p| p.into_inner()),
        discussion,
    })
}

/// The discussion as stored now.
pub(crate) async fn reload(store: &Store, discussion: &Discussion) -> anyhow::Result<Discussion> {
    let found = store
        .discussions()
        .by_ids(std::slice::from_ref(&discussion.id))
        .await?;
    match found.into_iter().next() {
        Some(d) => Ok(d),
        None => bail!("discussion {} disappeared", discussion.id),
    }
}

/// Waits until the slot is filled; `None` when loading stopped first.
async fn wait_for(
    slot: &OnceLock<(Slug, FullSlug)>,
    notify: &Notify,
    stop: &AtomicBool,
) -> Option<(Slug, FullSlug)> {
    loop {
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(stored) = slot.get() {
            return Some(stored.clone());
        }
        if stop.load(Ordering::SeqCst) {
            return None;
        }
        notified.await;
    }
}

/// A progress bar on standard error; when standard error is not a terminal, a line every 10%.
fn progress_bar(len: u64, label: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        let label = label.to_owned();
        let step = (len / 10).max(1);
        let watcher = bar.clone();
        tokio::spawn(async move {
            let mut next = step;
            while !watcher.is_finished() {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let pos = watcher.position();
                if pos >= next && pos < len {
                    eprintln!("{label}: {pos}/{len} loaded ({:.0}/s)", watcher.per_sec());
                    next = (pos / step + 1) * step;
                }
            }
        });
        return bar;
    }
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:>28} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} ({per_sec}, eta {eta})",
    ) {
        bar.set_style(style);
    }
    bar.set_prefix(label.to_owned());
    bar
}

/// Rejects each of `slugs` in place, as a moderator's `rejectComment` rejects a public comment:
/// queued as rejected, then a REJECTED placeholder through the store's change path (its text
/// and author hidden from the public, its place and replies kept). Returns how many it rejected.
pub(crate) async fn reject_in_place(
    store: &Store,
    discussion: &Discussion,
    slugs: &[Slug],
    concurrency: usize,
) -> anyhow::Result<usize> {
    let reject_one = |slug: &Slug| {
        let slug = slug.clone();
        async move {
            store
                .held()
                .enqueue(&discussion.id, &slug, Queue::Rejected, Micros::now())
                .await?;
            let decide = |current: &Comment, _now| {
                let standing = current
                    .standing
                    .set(CommentStatus::Rejected, Some("benchmark".to_owned()));
                Ok(Some(Comment {
                    standing,
                    ..current.clone()
                }))
            };
            let changed = store
                .posting()
                .change_comment(discussion, &slug, &decide, &|_, _| Vec::new())
                .await?;
            if changed.standing.status != CommentStatus::Rejected {
                bail!("comment {slug} was not rejected");
            }
            anyhow::Ok(())
        }
    };
    let mut results = futures::stream::iter(slugs)
        .map(reject_one)
        .buffer_unordered(concurrency.max(1));
    let mut done = 0;
    while let Some(result) = results.next().await {
        result?;
        done += 1;
    }
    Ok(done)
}

/// Voters of the vote load: `voter-0` … `voter-199`, none of them a plan author.
pub(crate) const VOTERS: usize = 200;
/// Votes in flight while loading votes.
pub(crate) const VOTE_CONCURRENCY: usize = 32;
/// Share of the loaded votes that are UP (the rest DOWN).
const UP_SHARE: f64 = 0.7;

/// What a vote load did.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct VoteLoad {
    /// Votes asked for (round(votes per comment × comments)).
    pub asked: usize,
    /// Votes cast.
    pub cast: usize,
    /// Of them UP.
    pub up: usize,
    /// Picks skipped: a voter drawn twice for the same comment, or a vote refused as FORBIDDEN.
    pub skipped: usize,
    /// Seconds the load took.
    pub secs: f64,
    /// Votes per second (in-process, through `VoteStore::vote`, [`VOTE_CONCURRENCY`] in flight).
    pub votes_per_sec: f64,
}

/// Casts round(`per_comment` × comments) votes on `comments` (those public in the layout)
/// through the store's vote path, [`VOTE_CONCURRENCY`] in flight: each by a voter of
/// `voter-0` … `voter-199` on a comment drawn uniformly at random (seeded), UP with probability
/// 0.7, else DOWN. A pick that repeats a voter's comment, or a vote refused as FORBIDDEN, is
/// skipped (the count goes on with the next pick).
pub(crate) async fn cast_votes(
    store: &Store,
    discussion: &Discussion,
    comments: &[Slug],
    per_comment: f64,
    seed: u64,
    label: &str,
) -> anyhow::Result<VoteLoad> {
    let asked = (per_comment * comments.len() as f64).round() as usize;
    let mut rng = StdRng::seed_from_u64(seed ^ 0x766f_7465);
    let mut picked: HashSet<(usize, usize)> = HashSet::with_capacity(asked);
    let mut picks = Vec::with_capacity(asked);
    let mut skipped = 0;
    // Each voter can vote once per comment: past that, picks could never finish.
    let possible = comments.len().saturating_mul(VOTERS);
    while picks.len() < asked.min(possible) {
        let voter = rng.gen_range(0..VOTERS);
        let comment = rng.gen_range(0..comments.len());
        let vote = if rng.gen_bool(UP_SHARE) {
            Vote::Up
        } else {
            Vote::Down
        };
        if picked.insert((voter, comment)) {
            picks.push((voter, comment, vote));
        } else {
            skipped += 1;
        }
    }
    let bar = progress_bar(picks.len() as u64, &format!("{label} votes"));
    let started = Instant::now();
    let cast_one = |(voter, comment, vote): (usize, usize, Vote)| {
        let bar = &bar;
        async move {
            let slug = &comments[comment];
            let voter = format!("voter-{voter}");
            match store
                .votes()
                .vote(discussion, slug, &voter, Some(vote))
                .await
            {
                Ok(_) => {
                    bar.inc(1);
                    Ok(Some(vote))
                }
                Err(DomainError::Forbidden(_)) => {
                    bar.inc(1);
                    Ok(None)
                }
                Err(err) => Err(anyhow::Error::new(err))
                    .with_context(|| format!("{voter} voting on comment {slug}")),
            }
        }
    };
    let mut results = futures::stream::iter(picks)
        .map(cast_one)
        .buffer_unordered(VOTE_CONCURRENCY);
    let (mut cast, mut up) = (0, 0);
    while let Some(result) = results.next().await {
        match result {
            Ok(Some(vote)) => {
                cast += 1;
                up += usize::from(vote == Vote::Up);
            }
            Ok(None) => skipped += 1,
            Err(err) => {
                bar.abandon();
                return Err(err);
            }
        }
    }
    drop(results);
    let secs = started.elapsed().as_secs_f64();
    bar.finish();
    let votes_per_sec = cast as f64 / secs.max(1e-9);
    eprintln!(
        "{label}: cast {cast}/{asked} votes ({up} UP, {skipped} picks skipped) in {secs:.1}s: {votes_per_sec:.0} votes/s"
    );
    Ok(VoteLoad {
        asked,
        cast,
        up,
        skipped,
        secs,
        votes_per_sec,
    })
}
