//! A person's own data: its export (`GET /me/export`), read page by page so that memory does
//! not grow with what they have, and its erasure (`deleteMyAccount`, `eraseUser`), which works
//! through their comments by their numbers among their own (`HistoryStore::authored_range`, one
//! command per range over each layout's author index), then takes back their votes one by one
//! (so counts and ranks follow), then removes or rewrites the rest (`PersonalStore::forget`).
//!
//! An erasure cut short (a process killed in the middle) is finished by running it again: an
//! erased comment loses its number, so a second walk passes over it, and every later step is
//! idempotent. Each comment is erased by one compare-and-set change (as an edit is), so a read
//! meanwhile sees it either as it was or erased, never half.

use std::collections::HashMap;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use tracing::Instrument as _;

use crate::domain::erasure::{erased, erased_actor, opaque_author};
use crate::domain::{
    Acted, Author, Ban, Discussion, DiscussionId, DomainError, Event, Micros, Reason,
};
use crate::domain::{UserId, Vote};
use crate::store::{AuthoredComment, CastVote, Person, Report};

use super::{acted, Caller, Services};

/// An author's numbers read per command (export and erasure).
const NUMBERS: u64 = 200;
/// Votes, reports or follows read per command.
const PAGE: usize = 200;
/// Discussions whose comments (or votes) an erasure changes at once.
const AT_ONCE: usize = 8;

/// One record of a person's export.
#[derive(Debug, Clone)]
pub enum PersonalRecord {
    /// A comment they wrote, held or not, with its revisions.
    Comment(Box<AuthoredComment>),
    /// A vote they cast.
    Vote(CastVote),
    /// A comment they reported.
    Report(Report),
    /// A discussion they follow.
    Follow(DiscussionId),
    /// Their notification settings and address.
    Settings(Person),
    /// Their ban, while it lasts.
    Ban(Arc<Ban>),
}

/// Where an export is: what it reads next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportAt {
    /// Their comments numbered below this, newest first.
    Comments(u64),
    /// Their votes, after this key.
    Votes(Option<String>),
    /// Their reports, after this id.
    Reports(Option<String>),
    /// The discussions they follow, after this key.
    Follows(Option<String>),
    /// Their settings and ban.
    Standing,
}

/// What an erasure did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Erased {
    /// Comments erased (held ones removed).
    pub comments: u64,
    /// Votes taken back.
    pub votes: u64,
    /// Other records removed.
    pub removed: u64,
    /// Records rewritten to name nobody.
    pub rewritten: u64,
}

impl Services {
    /// Where the export of `person` starts: their newest comment (one point read).
    pub async fn export_start(&self, person: &UserId) -> Result<ExportAt, DomainError> {
        let top = self
            .storage
            .history()
            .numbers_drawn(person.as_str())
            .await?;
        Ok(ExportAt::Comments(top.saturating_add(1)))
    }

    /// The next records of the export of `person` from `at` (one database command, at most
    /// 200 records, or the comments of 200 numbers), and where it goes on; `None`
    /// at the end. Nothing of anybody else is read.
    pub async fn export_page(
        &self,
        person: &UserId,
        at: ExportAt,
    ) -> Result<(Vec<PersonalRecord>, Option<ExportAt>), DomainError> {
        let storage = &self.storage;
        let id = person.as_str();
        Ok(match at {
            ExportAt::Comments(below) => {
                let from = below.saturating_sub(NUMBERS).max(1);
                let found = match below > 1 {
                    true => storage.history().authored_range(id, from..below).await?,
                    false => Vec::new(),
                };
                let records = found
                    .into_iter()
                    .map(|c| PersonalRecord::Comment(Box::new(c)))
                    .collect();
                let next = match from > 1 {
                    true => ExportAt::Comments(from),
                    false => ExportAt::Votes(None),
                };
                (records, Some(next))
            }
            ExportAt::Votes(after) => {
                let votes = storage
                    .personal()
                    .votes_by(id, after.as_deref(), PAGE)
                    .await?;
                let next = match votes.last() {
                    Some(last) if votes.len() == PAGE => ExportAt::Votes(Some(last.key.clone())),
                    _ => ExportAt::Reports(None),
                };
                let records = votes.into_iter().map(PersonalRecord::Vote).collect();
                (records, Some(next))
            }
            ExportAt::Reports(after) => {
                let reports = storage
                    .personal()
                    .reports_by(id, after.as_deref(), PAGE)
                    .await?;
                let next = match reports.last() {
                    Some((key, _)) if reports.len() == PAGE => ExportAt::Reports(Some(key.clone())),
                    _ => ExportAt::Follows(None),
                };
                let records = reports
                    .into_iter()
                    .map(|(_, r)| PersonalRecord::Report(r))
                    .collect();
                (records, Some(next))
            }
            ExportAt::Follows(after) => {
                let follows = storage
                    .notifications()
                    .following(id, after.as_deref(), PAGE)
                    .await?;
                let next = match follows.last() {
                    Some((key, _)) if follows.len() == PAGE => ExportAt::Follows(Some(key.clone())),
                    _ => ExportAt::Standing,
                };
                let records = follows
                    .into_iter()
                    .map(|(_, d)| PersonalRecord::Follow(d))
                    .collect();
                (records, Some(next))
            }
            ExportAt::Standing => {
                let (person, ban) = tokio::try_join!(
                    async { Ok::<_, DomainError>(storage.notifications().person(id).await?) },
                    async { Ok::<_, DomainError>(storage.moderation().ban_of(id).await?) },
                )?;
                let now = Micros::now();
                let records = person
                    .map(PersonalRecord::Settings)
                    .into_iter()
                    .chain(ban.filter(|b| b.applies_at(now)).map(PersonalRecord::Ban))
                    .collect();
                (records, None)
            }
        })
    }

    /// Erases the signed-in person's own data (`deleteMyAccount`): `confirm` must be their own
    /// id. Not refused by a ban (nor counted against a rate: it is sent once).
    pub async fn erase_me(&self, me: &Author, confirm: &str) -> Result<Erased, DomainError> {
        let me = &me.id;
        if confirm != me {
            return Err(DomainError::bad_input(
                "`confirm` must be your own user id (as `viewer { id }` gives it): nothing was \
                 erased",
            ));
        }
        let acted = Acted {
            by: erased_actor(),
            moderator: false,
            at: Micros::now(),
        };
        self.erase(UserId::from_stored(me.clone()), acted, None)
            .await
    }

    /// Erases another person's data (`eraseUser`, moderators).
    pub async fn erase_user(
        &self,
        caller: &Caller,
        user: UserId,
        reason: Option<Reason>,
    ) -> Result<Erased, DomainError> {
        caller.must_moderate()?;
        self.erase(user, acted(caller), reason).await
    }

    /// Erases `person` (see the module documentation), recording `user.erased` as `acted`. The
    /// erasure runs in a task of its own, which a shutdown waits for: a request that times out
    /// (a person with many comments) does not cut it short, it goes on to its end.
    async fn erase(
        &self,
        person: UserId,
        acted: Acted,
        reason: Option<Reason>,
    ) -> Result<Erased, DomainError> {
        let writing = self.closing.start_write()?;
        let services = self.clone();
        let work = async move {
            let erased = services.erase_all(person, acted, reason).await;
            drop(writing);
            erased
        };
        match tokio::spawn(work.in_current_span()).await {
            Ok(erased) => erased,
            Err(err) => Err(DomainError::Internal(format!("an erasure failed: {err}"))),
        }
    }

    /// The erasure itself (see [`Services::erase`]).
    async fn erase_all(
        &self,
        person: UserId,
        acted: Acted,
        reason: Option<Reason>,
    ) -> Result<Erased, DomainError> {
        let mut done = Erased {
            comments: self.erase_comments(&person).await?,
            votes: self.take_back_votes(&person).await?,
            ..Erased::default()
        };
        let events = vec![Event::UserErased {
            acted,
            reason,
            comments: done.comments,
        }];
        let forgotten = self
            .storage
            .personal()
            .forget(person.as_str(), &events)
            .await?;
        done.removed = forgotten.removed;
        done.rewritten = forgotten.rewritten;
        self.ignoring.forget_all();
        self.sink.deliver(&events).await?;
        tracing::info!(
            comments = done.comments,
            votes = done.votes,
            removed = done.removed,
            rewritten = done.rewritten,
            "a person's data was erased"
        );
        Ok(done)
    }

    /// Erases every comment of `person`, range by range of their numbers: held ones are
    /// removed (nothing hangs off them), the others become tombstones under opaque authors.
    async fn erase_comments(&self, person: &UserId) -> Result<u64, DomainError> {
        let history = self.storage.history();
        let top = history.numbers_drawn(person.as_str()).await?;
        let mut erased_count = 0;
        let mut from = 1;
        while from <= top {
            let to = from.saturating_add(NUMBERS).min(top.saturating_add(1));
            let found = history.authored_range(person.as_str(), from..to).await?;
            erased_count += per_discussion(
                found,
                |c| c.discussion.id.clone(),
                |comment| self.erase_comment(person, comment),
            )
            .await?;
            from = to;
        }
        Ok(erased_count)
    }

    /// Erases one comment of `person`; whether it was theirs to erase still.
    async fn erase_comment(
        &self,
        person: &UserId,
        found: AuthoredComment,
    ) -> Result<bool, DomainError> {
        let (discussion, slug) = (&found.discussion, &found.comment.slug);
        if found.held {
            return Ok(self.storage.held().remove(&discussion.id, slug).await?);
        }
        let changed = std::sync::atomic::AtomicBool::new(false);
        let decide = |current: &crate::domain::Comment, _now| {
            let next = match current.author.id == person.as_str() {
                true => erased(current, opaque_author()),
                false => None,
            };
            changed.store(next.is_some(), std::sync::atomic::Ordering::Relaxed);
            Ok(next)
        };
        let announce = |_: &crate::domain::Comment, _: &crate::domain::Comment| Vec::new();
        let outcome = self
            .storage
            .posting()
            .change_comment(discussion, slug, &decide, &announce)
            .await;
        match outcome {
            Ok(_) => Ok(changed.load(std::sync::atomic::Ordering::Relaxed)),
            // Gone since it was listed (its discussion deleted): nothing left to erase.
            Err(DomainError::NotFound(_)) => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Takes back every vote of `person`, so that each comment's counts and rank follow; a
    /// vote on a comment gone since is left for `forget`, which removes it.
    async fn take_back_votes(&self, person: &UserId) -> Result<u64, DomainError> {
        let storage = &self.storage;
        let mut taken = 0;
        let mut after: Option<String> = None;
        loop {
            let votes = storage
                .personal()
                .votes_by(person.as_str(), after.as_deref(), PAGE)
                .await?;
            let Some(last) = votes.last() else {
                return Ok(taken);
            };
            after = Some(last.key.clone());
            let ids: Vec<DiscussionId> = votes.iter().map(|v| v.discussion.clone()).collect();
            let discussions = storage.discussions().by_ids_map(&ids).await?;
            let full = votes.len() == PAGE;
            let discussions = &discussions;
            taken += per_discussion(
                votes,
                |v| v.discussion.clone(),
                |vote| self.take_back(person, discussions.get(&vote.discussion), vote),
            )
            .await?;
            if !full {
                return Ok(taken);
            }
        }
    }

    /// Takes back one vote; whether it was there to take back.
    async fn take_back(
        &self,
        person: &UserId,
        discussion: Option<&Discussion>,
        vote: CastVote,
    ) -> Result<bool, DomainError> {
        let Some(discussion) = discussion else {
            return Ok(false);
        };
        let taken = self
            .storage
            .votes()
            .vote(discussion, &vote.slug, person.as_str(), None::<Vote>)
            .await;
        match taken {
            Ok(_) => Ok(true),
            Err(DomainError::NotFound(_)) => Ok(false),
            Err(err) => Err(err),
        }
    }
}

/// Runs `work` on each of `items`, those of one discussion one after another (changes of one
/// discussion contend for its change mark), [`AT_ONCE`] discussions at once; how many it did
/// (`work` says whether it did one).
async fn per_discussion<T, Fut>(
    items: Vec<T>,
    discussion_of: impl Fn(&T) -> DiscussionId,
    work: impl Fn(T) -> Fut,
) -> Result<u64, DomainError>
where
    Fut: std::future::Future<Output = Result<bool, DomainError>>,
{
    let mut by_discussion: HashMap<DiscussionId, Vec<T>> = HashMap::new();
    for item in items {
        by_discussion
            .entry(discussion_of(&item))
            .or_default()
            .push(item);
    }
    let work = &work;
    futures::stream::iter(by_discussion.into_values())
        .map(|items| async move {
            let mut done = 0;
            for item in items {
                done += u64::from(work(item).await?);
            }
            Ok::<_, DomainError>(done)
        })
        .buffer_unordered(AT_ONCE)
        .try_fold(0, |n, done| async move { Ok(n + done) })
        .await
}
