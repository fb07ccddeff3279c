//! Moderation workflows, whichever layout holds the comment: screen a text against the word
//! lists, approve (publish a held comment, restore a placeholder, dismiss reports), reject,
//! report, ban and unban. Every step that hides a public comment puts it in its queue first, so
//! a crash in between leaves a comment a moderator can still find.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::render::Renderer;
use super::{acted, public_comment, Caller, Services, Told};
use crate::domain::{
    Acted, Announce, Approval, Ban, Comment, CommentRef, CommentStatus, CommentText, Discussion,
    DiscussionId, DomainError, Event, Held, Micros, NewComment, Queue, Reason, ReportReason,
    Screening, Slug, Standing, UserId, WordLists,
};
use crate::store::{Announced, Claim, DynStorage, Report, Tally};

/// What the word lists make of a text posted or edited by a non-moderator: `None` when it goes
/// through as the discussion's mode says; a pending standing for a suspect word, a rejected
/// one for a banned word.
pub(super) fn screened(words: &WordLists, moderator: bool, text: &CommentText) -> Option<Standing> {
    if moderator {
        return None;
    }
    match words.screen(text.as_str()) {
        Screening::Clean => None,
        Screening::Suspect { .. } => Some(Standing {
            status: CommentStatus::Pending,
            reason: Some("suspect word".to_owned()),
            reports: 0,
        }),
        Screening::Banned { .. } => Some(Standing {
            status: CommentStatus::Rejected,
            reason: Some("banned word".to_owned()),
            reports: 0,
        }),
    }
}

/// How severe a status is: a change never makes a comment more public than it was.
fn severity(status: CommentStatus) -> u8 {
    match status {
        CommentStatus::Approved => 0,
        CommentStatus::Pending => 1,
        CommentStatus::Rejected => 2,
    }
}

/// The standing of a comment that was `current` once a screening says `screened`: the more
/// severe of the two, with its reason; reports kept.
pub(super) fn stricter(current: &Standing, screened: &Standing) -> Standing {
    if severity(screened.status) > severity(current.status) {
        current.set(screened.status, screened.reason.clone())
    } else {
        current.clone()
    }
}

/// What approving did.
pub struct Approved {
    /// The discussion as it is now.
    pub discussion: Arc<Discussion>,
    /// The comment as it is now.
    pub comment: Comment,
    /// Whether anything changed (approving a public comment without reports changes nothing).
    pub changed: bool,
    /// What it did.
    pub how: Approval,
}

/// Approves a comment: a held one is published (see [`publish`]); a placeholder is restored in
/// place; a public comment's reports are dismissed. `NOT_FOUND` when the discussion has no
/// such comment, held or public.
async fn approve(
    storage: DynStorage,
    discussion: Arc<Discussion>,
    slug: Slug,
    (max_text_chars, renderer): (usize, Renderer),
    acted: Acted,
) -> Result<Approved, DomainError> {
    if storage.held().find(&discussion.id, &slug).await?.is_some() {
        // Approvals of one held comment at once take turns by a claim on it: one publishes it,
        // the others find it public afterwards and approve it as such (changing nothing).
        if let Some(held) = claim_held(&storage, &discussion.id, &slug).await? {
            let published = publish(
                &storage,
                discussion.clone(),
                held,
                (max_text_chars, &renderer),
                acted,
            )
            .await;
            if published.is_err() {
                // Another approval may go ahead now rather than once the lease has run out.
                if let Err(err) = storage.held().release(&discussion.id, &slug).await {
                    tracing::warn!(error = %err, "could not release the claim on a held comment");
                }
            }
            let (discussion, comment) = published?;
            return Ok(Approved {
                discussion,
                comment,
                changed: true,
                how: Approval::Published,
            });
        }
    }
    let decide = |current: &Comment, _now| {
        if current.standing == Standing::default() {
            return Ok(None);
        }
        Ok(Some(Comment {
            standing: Standing::default(),
            ..current.clone()
        }))
    };
    let before = public_comment(&storage, &discussion, &slug)
        .await?
        .ok_or_else(|| not_found(&discussion.id, &slug))?;
    let announce = |current: &Comment, next: &Comment| {
        vec![Event::CommentApproved {
            acted: acted.clone(),
            comment: CommentRef::of(next),
            how: approval(current),
        }]
    };
    let comment = storage
        .posting()
        .change_comment(&discussion, &slug, &decide, &announce)
        .await?;
    storage.held().remove(&discussion.id, &slug).await?;
    let changed = before.standing != Standing::default();
    if changed {
        // A report counted meanwhile queues it again.
        settle_queue(&storage, &discussion, &slug).await;
    }
    if changed && !before.standing.is_public() {
        storage.held().trust(&comment.author.id).await?;
    }
    Ok(Approved {
        discussion,
        comment,
        changed,
        how: approval(&before),
    })
}

/// What approving the public comment `current` does: restores a placeholder, or dismisses
/// the reports of a comment that is shown.
fn approval(current: &Comment) -> Approval {
    match current.standing.is_public() {
        true => Approval::Dismissed,
        false => Approval::Restored,
    }
}

/// How long an approval's claim on a held comment lasts (see [`crate::store::HeldStore::claim`]).
const PUBLISH_LEASE: Duration = Duration::from_secs(10);

/// Claims the held comment `slug` for publishing, waiting while another approval holds it;
/// `None` once there is no such held comment (another approval published it).
async fn claim_held(
    storage: &DynStorage,
    discussion: &DiscussionId,
    slug: &Slug,
) -> Result<Option<Held>, DomainError> {
    let started = std::time::Instant::now();
    loop {
        match storage
            .held()
            .claim(discussion, slug, PUBLISH_LEASE)
            .await?
        {
            Claim::Claimed(held) => return Ok(Some(*held)),
            Claim::Gone => return Ok(None),
            // The lease runs out within this wait, so the claim is taken before it ends.
            Claim::Busy if started.elapsed() < PUBLISH_LEASE * 2 => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Claim::Busy => {
                return Err(DomainError::Conflict(format!(
                    "comment {slug} is being approved by another request: try again"
                )))
            }
        }
    }
}

/// Publishes a held comment: posts it as any comment is posted (its author and text, its slug
/// part when still free), so it appears at this time with every counter right and
/// `commentPosted` fired, then removes the held document and trusts its author. The post is one
/// atomic step (comment and counters); the removal is a separate write: a crash in between
/// leaves the comment published and still held, and approving it again finds it published
/// (same slug, author and text) and only removes the held document. The caller has claimed it
/// (see [`claim_held`]).
async fn publish(
    storage: &DynStorage,
    discussion: Arc<Discussion>,
    held: Held,
    (max_text_chars, renderer): (usize, &Renderer),
    acted: Acted,
) -> Result<(Arc<Discussion>, Comment), DomainError> {
    let id = discussion.id.clone();
    let slug = held.comment.slug.clone();
    if let Some(parent) = &held.comment.parent {
        if storage.held().find(&id, parent).await?.is_some() {
            return Err(DomainError::bad_input(format!(
                "comment {slug} replies to comment {parent}, which is still held: approve {parent} first"
            )));
        }
    }
    let already = public_comment(storage, &discussion, &slug)
        .await?
        .filter(|c| c.author == held.comment.author && c.text == held.comment.text);
    let published = match already {
        Some(comment) => (discussion, comment),
        None => {
            let text = held.comment.text.as_deref().unwrap_or_default();
            // Held with its HTML, or before HTML was stored with comments.
            let html = match &held.comment.html {
                Some(html) => html.clone(),
                None => renderer.render(text).await?,
            };
            let new = NewComment {
                parent: held.comment.parent.clone(),
                author: held.comment.author.clone(),
                text: CommentText::parse(text, max_text_chars.max(text.chars().count()))?,
                html,
                part: Some(slug.own_part()),
                announce: Some(Announce::Approved(acted)),
                number: held.comment.number,
            };
            let (now, posted) = storage.posting().post_to(&id, new).await?;
            (now, posted.comment)
        }
    };
    storage.held().remove(&id, &slug).await?;
    storage.held().trust(&held.comment.author.id).await?;
    Ok(published)
}

/// Rejects a comment: a held one stays hidden, REJECTED; a public one becomes a REJECTED
/// placeholder in place (its replies kept). Rejecting again replaces the reason. `NOT_FOUND`
/// when the discussion has no such comment; `COMMENT_DELETED` for a tombstone.
async fn reject(
    storage: DynStorage,
    discussion: Arc<Discussion>,
    slug: Slug,
    (reason, said): (Option<String>, Option<Reason>),
    acted: Acted,
) -> Result<Comment, DomainError> {
    let id = &discussion.id;
    let announce = |comment: &Comment| {
        vec![Event::CommentRejected {
            acted: acted.clone(),
            comment: CommentRef::of(comment),
            reason: said.clone(),
        }]
    };
    if let Some((held, now)) = storage
        .held()
        .reject(id, &slug, reason.clone(), &announce)
        .await?
    {
        if now {
            tally(&storage, &held.comment.author.id, Tally::Rejected).await;
        }
        return Ok(held.comment);
    }
    let current = public_comment(&storage, &discussion, &slug)
        .await?
        .ok_or_else(|| not_found(id, &slug))?;
    if current.deleted {
        return Err(DomainError::CommentDeleted(format!(
            "comment {slug} was deleted: there is nothing left to reject"
        )));
    }
    storage
        .held()
        .enqueue(id, &slug, Queue::Rejected, Micros::now())
        .await?;
    // Whether the change made (the last one decided) made it REJECTED: a rejection to count.
    let newly = AtomicBool::new(false);
    let decide = |current: &Comment, _now| {
        let standing = current
            .standing
            .set(CommentStatus::Rejected, reason.clone());
        newly.store(
            current.standing.status != CommentStatus::Rejected,
            Ordering::Relaxed,
        );
        if standing == current.standing {
            return Ok(None);
        }
        Ok(Some(Comment {
            standing,
            ..current.clone()
        }))
    };
    let rejected = storage
        .posting()
        .change_comment(&discussion, &slug, &decide, &|_, next| announce(next))
        .await?;
    if newly.load(Ordering::Relaxed) {
        tally(&storage, &rejected.author.id, Tally::Rejected).await;
    }
    Ok(rejected)
}

/// Adds one to a person's tally (see `authorStanding`). The change it counts is made already:
/// a failure is logged, and the change stands.
async fn tally(storage: &DynStorage, person: &str, tally: Tally) {
    if let Err(err) = storage.held().count(person, tally).await {
        tracing::warn!(%err, ?tally, "a moderation tally could not be counted");
    }
}

/// What a report did.
pub(super) enum Reported {
    /// A repeat: nothing changed.
    Repeat,
    /// Counted (its events are those the change announced).
    Counted,
}

/// Counts a report of a public comment by `reporter`. At `hold_at` reports (0: never) a public
/// comment becomes a PENDING placeholder, unless its author is a moderator (one who has acted
/// as one on this service, the users `banUser` refuses): their comments (notices, pinned
/// answers) are counted and queued as REPORTED, never hidden by reports.
async fn report(
    storage: DynStorage,
    discussion: Arc<Discussion>,
    report: Report,
    (hold_at, announce): (u64, &Announced<'_>),
) -> Result<Reported, DomainError> {
    let (id, slug) = (&discussion.id, &report.slug);
    let current = public_comment(&storage, &discussion, slug)
        .await?
        .ok_or_else(|| not_found(id, slug))?;
    if current.deleted {
        return Err(DomainError::CommentDeleted(format!(
            "comment {slug} was deleted: there is nothing left to report"
        )));
    }
    // A placeholder is with the moderators already, and its text is not shown to be judged.
    if !current.standing.is_public() && current.author.id != report.reporter {
        return Err(not_found(id, slug));
    }
    if current.author.id == report.reporter {
        return Err(DomainError::bad_input(format!(
            "comment {slug} is your own: delete or edit it instead of reporting it"
        )));
    }
    if !storage.held().report(&report).await? {
        return Ok(Reported::Repeat);
    }
    // A moderator's comment is never held by reports (one read, when reports may hold).
    let author = UserId::from_stored(current.author.id.clone());
    let may_hold = hold_at > 0 && current.standing.is_public();
    let hold_at = match may_hold && storage.moderation().is_moderator(&author).await? {
        true => 0,
        false => hold_at,
    };
    // In its queue before it changes: reported, or pending once this report holds it.
    let reports = current.standing.reports.saturating_add(1);
    let holds = hold_at > 0 && reports >= hold_at && current.standing.is_public();
    let queue = match current.standing.status {
        CommentStatus::Rejected => Queue::Rejected,
        CommentStatus::Pending => Queue::Pending,
        CommentStatus::Approved if holds => Queue::Pending,
        CommentStatus::Approved => Queue::Reported,
    };
    storage.held().enqueue(id, slug, queue, report.at).await?;
    let counted = move |current: &Comment, _now| {
        // Deleted since it was read: the delete took it out of the queues, and the report (and
        // the entry it made) is taken back below.
        if current.deleted {
            return Err(DomainError::CommentDeleted(format!(
                "comment {} was deleted: there is nothing left to report",
                current.slug
            )));
        }
        let reports = current.standing.reports.saturating_add(1);
        let mut standing = Standing {
            reports,
            ..current.standing.clone()
        };
        if hold_at > 0 && reports >= hold_at && current.standing.is_public() {
            standing.status = CommentStatus::Pending;
            standing.reason = Some(format!("reported by {reports} users"));
        }
        Ok(Some(Comment {
            standing,
            ..current.clone()
        }))
    };
    let comment = match storage
        .posting()
        .change_comment(&discussion, slug, &counted, announce)
        .await
    {
        Ok(comment) => comment,
        Err(err) => {
            // Not counted: take the report back, so that sending it again counts it.
            if let Err(undo) = storage.held().unreport(&report).await {
                tracing::warn!(%undo, "a report that could not be counted could not be taken back");
            }
            settle_queue(&storage, &discussion, slug).await;
            return Err(err);
        }
    };
    // A concurrent report may have held it after this one queued it as reported, or a
    // moderator approved it meanwhile: its entry follows the comment as it is now (one more
    // read; reports are rare next to reads).
    settle_queue(&storage, &discussion, slug).await;
    tally(&storage, &comment.author.id, Tally::Reported).await;
    Ok(Reported::Counted)
}

/// Brings the queue entry of a public comment in line with the comment as it is now read:
/// after a change that queued it did not happen, or after one that may have raced another (a
/// report and an approval). Queued (only ever into a stricter queue, so a read older than a
/// concurrent rejection cannot undo it), or, when it waits for nobody, taken out of the REPORTED
/// queue (never out of a stricter one, which only an approval leaves). What is left is narrow:
/// an approval racing a report can leave a reported comment out of the REPORTED queue until its
/// next report, or a stale entry that approving clears. Failures are logged.
async fn settle_queue(storage: &DynStorage, discussion: &Discussion, slug: &Slug) {
    let settle = async {
        // A deleted comment waits for no moderator.
        let queue = public_comment(storage, discussion, slug)
            .await?
            .filter(|c| !c.deleted)
            .and_then(|c| Queue::of(&c.standing));
        match queue {
            Some(queue) => {
                storage
                    .held()
                    .enqueue(&discussion.id, slug, queue, Micros::now())
                    .await?
            }
            // Only a REPORTED entry goes: a read older than a concurrent rejection or hold
            // must not take that out (only an approval does).
            None => {
                storage.held().dismiss(&discussion.id, slug).await?;
            }
        }
        Ok::<_, DomainError>(())
    };
    if let Err(err) = settle.await {
        tracing::warn!(%err, discussion = %discussion.id, %slug, "a moderator queue entry could not be settled");
    }
}

fn not_found(discussion: &DiscussionId, slug: &Slug) -> DomainError {
    DomainError::not_found(format!("no comment {slug} in discussion {discussion}"))
}

impl Services {
    /// Approves a comment: publishes a held one, restores a placeholder, or dismisses a public
    /// comment's reports. Moderators only. `CommentApproved` when it changed
    /// something.
    pub async fn approve(
        &self,
        caller: &Caller,
        id: DiscussionId,
        slug: Slug,
    ) -> Result<Approved, DomainError> {
        caller.must_moderate()?;
        let discussion = self.read_discussion(&id).await?;
        let storage = self.storage.clone();
        let text = (self.rules.max_text_chars, self.renderer.clone());
        let acted = acted(caller);
        let write = async move {
            let approved = approve(storage, discussion, slug, text, acted.clone()).await?;
            let events = match approved.changed {
                true => vec![Event::CommentApproved {
                    acted,
                    comment: CommentRef::of(&approved.comment),
                    how: approved.how,
                }],
                false => Vec::new(),
            };
            Ok((approved, events))
        };
        let span = tracing::debug_span!("store.approve");
        Ok(self.run(caller, span, write).await?.value)
    }

    /// Rejects a comment (a held one stays hidden; a public one becomes a placeholder), with an
    /// optional reason its author sees. Moderators
    /// only.
    pub async fn reject(
        &self,
        caller: &Caller,
        id: DiscussionId,
        slug: Slug,
        reason: Option<Reason>,
    ) -> Result<(Arc<Discussion>, Comment), DomainError> {
        caller.must_moderate()?;
        let discussion = self.read_discussion(&id).await?;
        let storage = self.storage.clone();
        let target = discussion.clone();
        let acted = acted(caller);
        let write = async move {
            let kept = reason.as_ref().map(|r| r.as_str().to_owned());
            let comment =
                reject(storage, target, slug, (kept, reason.clone()), acted.clone()).await?;
            let event = Event::CommentRejected {
                acted,
                comment: CommentRef::of(&comment),
                reason,
            };
            Ok((comment, vec![event]))
        };
        let span = tracing::debug_span!("store.reject");
        let comment = self.run(caller, span, write).await?.value;
        Ok((discussion, comment))
    }

    /// Reports a public comment to the moderators, once per user and comment: true when the
    /// report counted, false for a repeat (which changes nothing). Not one's own comment.
    /// `CommentReported` when it counted, then `CommentHeld` when it held the comment.
    pub async fn report(
        &self,
        caller: &Caller,
        id: DiscussionId,
        slug: Slug,
        reason: ReportReason,
        note: Option<Reason>,
    ) -> Result<bool, DomainError> {
        let discussion = self.read_discussion(&id).await?;
        let report_of = Report {
            discussion: discussion.id.clone(),
            slug,
            reporter: caller.author().id.clone(),
            reason,
            note: note.map(|n| n.as_str().to_owned()),
            at: Micros::now(),
        };
        let storage = self.storage.clone();
        let hold_at = self.rules.reports_to_hold;
        let acted = acted(caller);
        let write = async move {
            let told = Told::default();
            // Counted, and held when this report made the comment a placeholder.
            let announce = |current: &Comment, next: &Comment| {
                let on = CommentRef::of(next);
                let mut events = vec![Event::CommentReported {
                    acted: acted.clone(),
                    comment: on.clone(),
                    reason,
                }];
                if current.standing.is_public() && !next.standing.is_public() {
                    events.push(Event::CommentHeld {
                        acted: acted.clone(),
                        comment: on,
                        reason: next.standing.reason.clone(),
                    });
                }
                told.tell(events)
            };
            match report(storage, discussion, report_of, (hold_at, &announce)).await? {
                Reported::Repeat => Ok((false, Vec::new())),
                Reported::Counted => Ok((true, told.take())),
            }
        };
        let span = tracing::debug_span!("store.report");
        Ok(self.run(caller, span, write).await?.value)
    }

    /// Bans a user until `until` (a time in the future), or for good without it. Banning a
    /// banned user replaces their ban. Not a user a moderator token has acted with
    /// (`BAD_USER_INPUT`). Moderators only.
    pub async fn ban(
        &self,
        caller: &Caller,
        user: UserId,
        until: Option<DateTime<Utc>>,
        reason: Option<Reason>,
    ) -> Result<Ban, DomainError> {
        caller.must_moderate()?;
        let until = until.map(|until| Micros(until.timestamp_micros()));
        let ban = Ban::new(user, until, reason, caller.author().clone(), Micros::now())?;
        let storage = self.storage.clone();
        let acted = super::Acted {
            at: ban.at,
            ..acted(caller)
        };
        let write = async move {
            let moderation = storage.moderation();
            if moderation.is_moderator(&ban.user).await? {
                return Err(DomainError::bad_input(format!(
                    "moderators cannot be banned: {} has acted as a moderator on this service",
                    ban.user
                )));
            }
            let events = vec![Event::UserBanned {
                acted,
                ban: ban.clone(),
            }];
            moderation.ban(&ban, &events).await?;
            Ok((ban, events))
        };
        let span = tracing::debug_span!("store.ban");
        Ok(self.run(caller, span, write).await?.value)
    }

    /// Lifts a user's ban: true when they were banned, false when they were not (or their ban
    /// had already ended), which changes nothing. Moderators only.
    pub async fn unban(&self, caller: &Caller, user: UserId) -> Result<bool, DomainError> {
        caller.must_moderate()?;
        let storage = self.storage.clone();
        let acted = acted(caller);
        let write = async move {
            // Lifting a ban that had ended already changes nothing, and says nothing.
            let told = Told::default();
            let announce = |ban: &Ban| {
                told.tell(match ban.applies_at(acted.at) {
                    true => vec![Event::UserUnbanned {
                        acted: acted.clone(),
                        user: user.clone(),
                    }],
                    false => Vec::new(),
                })
            };
            storage.moderation().unban(&user, &announce).await?;
            let events = told.take();
            Ok((!events.is_empty(), events))
        };
        let span = tracing::debug_span!("store.unban");
        Ok(self.run(caller, span, write).await?.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standing(status: CommentStatus, reason: &str) -> Standing {
        Standing {
            status,
            reason: Some(reason.to_owned()),
            reports: 2,
        }
    }

    #[test]
    fn screening_never_makes_a_comment_more_public() {
        let public = Standing::default();
        let suspect = standing(CommentStatus::Pending, "suspect word");
        let banned = standing(CommentStatus::Rejected, "banned word");
        assert_eq!(stricter(&public, &suspect).status, CommentStatus::Pending);
        assert_eq!(stricter(&suspect, &banned).status, CommentStatus::Rejected);
        let kept = stricter(&standing(CommentStatus::Rejected, "rude"), &suspect);
        assert_eq!(kept.reason.as_deref(), Some("rude"));
        assert_eq!(stricter(&suspect, &banned).reports, 2, "reports are kept");
    }
}
