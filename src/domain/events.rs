//! What happened: one [`Event`] per committed change, with who made it, when, and the discussion,
//! comment or user it concerns. Services emit them after commit; the moderation log is the view
//! of those a moderator made ([`Event::logged`]).

use super::moderation::{Ban, Logged, ModerationAction, Reason, ReportReason, UserId};
use super::names::DisplayName;
use super::{
    Author, Cidr, Closing, Comment, DiscussionId, DiscussionUpdate, GuestPolicy, Layout, Micros,
    ModerationMode, Slug,
};

/// Who made a change, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acted {
    /// The caller, as an author.
    pub by: Author,
    /// Whether the caller acted as a moderator.
    pub moderator: bool,
    /// When the change was committed (as the service saw it).
    pub at: Micros,
}

/// What a moderator's approval did to a comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// A held comment was published: it is public for the first time.
    Published,
    /// A placeholder (held by an edit or by reports, or rejected) was restored.
    Restored,
    /// A public comment's reports were dismissed.
    Dismissed,
}

impl Approval {
    /// Its name in the event log's `detail`.
    pub fn as_str(self) -> &'static str {
        match self {
            Approval::Published => "published",
            Approval::Restored => "restored",
            Approval::Dismissed => "dismissed",
        }
    }

    /// The approval a `detail` names.
    pub fn from_name(name: &str) -> Option<Approval> {
        [Approval::Published, Approval::Restored, Approval::Dismissed]
            .into_iter()
            .find(|a| a.as_str() == name)
    }
}

/// A comment an event concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentRef {
    /// Its discussion.
    pub discussion: DiscussionId,
    /// Its slug.
    pub slug: Slug,
    /// Its author.
    pub author: UserId,
}

impl CommentRef {
    /// The reference to `comment`.
    pub fn of(comment: &Comment) -> Self {
        Self {
            discussion: comment.discussion_id.clone(),
            slug: comment.slug.clone(),
            author: UserId::from_stored(comment.author.id.clone()),
        }
    }
}

/// One committed change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A comment was published as it was posted (a held one is [`Event::CommentHeld`]).
    CommentPosted {
        /// Who posted it (its author), and when.
        acted: Acted,
        /// The comment.
        comment: CommentRef,
        /// The comment it replies to.
        parent: Option<Slug>,
    },
    /// A comment's text was replaced.
    CommentEdited {
        /// Who edited it, and when.
        acted: Acted,
        /// The comment.
        comment: CommentRef,
    },
    /// A comment became a tombstone.
    CommentDeleted {
        /// Who deleted it, and when.
        acted: Acted,
        /// The comment.
        comment: CommentRef,
    },
    /// A comment waits for a moderator (pending) or was refused by a word list (rejected): held
    /// when posted, or made a placeholder by an edit or by reports.
    CommentHeld {
        /// Whose change held it, and when.
        acted: Acted,
        /// The comment.
        comment: CommentRef,
        /// Why it was held.
        reason: Option<String>,
    },
    /// A moderator approved a comment: published a held one, restored a placeholder, or
    /// dismissed a public comment's reports.
    CommentApproved {
        /// The moderator, and when.
        acted: Acted,
        /// The comment.
        comment: CommentRef,
        /// What the approval did.
        how: Approval,
    },
    /// A moderator rejected a comment.
    CommentRejected {
        /// The moderator, and when.
        acted: Acted,
        /// The comment.
        comment: CommentRef,
        /// Why, as the moderator wrote it.
        reason: Option<Reason>,
    },
    /// A user's report of a comment counted.
    CommentReported {
        /// The reporter, and when.
        acted: Acted,
        /// The comment.
        comment: CommentRef,
        /// Why it was reported.
        reason: ReportReason,
    },
    /// A moderator pinned or unpinned a comment.
    CommentPinned {
        /// The moderator, and when.
        acted: Acted,
        /// The comment.
        comment: CommentRef,
        /// Pinned (true) or unpinned.
        pinned: bool,
    },
    /// A discussion was created.
    DiscussionCreated {
        /// Who created it, and when.
        acted: Acted,
        /// The discussion.
        discussion: DiscussionId,
    },
    /// A moderator locked or unlocked a discussion.
    DiscussionLocked {
        /// The moderator, and when.
        acted: Acted,
        /// The discussion.
        discussion: DiscussionId,
        /// Locked (true) or unlocked.
        locked: bool,
    },
    /// A moderator corrected a discussion's title or page address.
    DiscussionUpdated {
        /// The moderator, and when.
        acted: Acted,
        /// The discussion.
        discussion: DiscussionId,
        /// What changed, as it is now.
        update: DiscussionUpdate,
    },
    /// A moderator set how a discussion moderates new comments.
    ModerationChanged {
        /// The moderator, and when.
        acted: Acted,
        /// The discussion.
        discussion: DiscussionId,
        /// The mode from now on.
        mode: ModerationMode,
    },
    /// A discussion moved to another storage layout.
    DiscussionMoved {
        /// Who moved it, and when.
        acted: Acted,
        /// The discussion.
        discussion: DiscussionId,
        /// The layout it had.
        from: Layout,
        /// The layout it has now.
        to: Layout,
    },
    /// A moderator banned a user.
    UserBanned {
        /// The moderator, and when.
        acted: Acted,
        /// The ban.
        ban: Ban,
    },
    /// A moderator lifted a user's ban.
    UserUnbanned {
        /// The moderator, and when.
        acted: Acted,
        /// The user.
        user: UserId,
    },
    /// A moderator reserved a display name.
    NameReserved {
        /// The moderator, and when.
        acted: Acted,
        /// The name as reserved.
        name: DisplayName,
        /// Why, as the moderator wrote it.
        reason: Option<Reason>,
    },
    /// A moderator released a reserved display name.
    NameReleased {
        /// The moderator, and when.
        acted: Acted,
        /// The name as it was reserved.
        name: DisplayName,
    },
    /// A moderator set whether a discussion takes guests' comments.
    GuestPolicyChanged {
        /// The moderator, and when.
        acted: Acted,
        /// The discussion.
        discussion: DiscussionId,
        /// The policy from now on (`None`: the server's default).
        policy: Option<GuestPolicy>,
    },
    /// A moderator set when a discussion closes to new comments.
    ClosingChanged {
        /// The moderator, and when.
        acted: Acted,
        /// The discussion.
        discussion: DiscussionId,
        /// When it closes from now on (`None`: as the server's default says).
        closing: Option<Closing>,
    },
    /// A moderator banned a network from guest posting.
    NetworkBanned {
        /// The moderator, and when.
        acted: Acted,
        /// The network.
        network: Cidr,
        /// Why, as the moderator wrote it.
        reason: Option<Reason>,
        /// Until when; `None`: until lifted.
        until: Option<Micros>,
    },
    /// A moderator lifted a network's ban.
    NetworkUnbanned {
        /// The moderator, and when.
        acted: Acted,
        /// The network.
        network: Cidr,
    },
    /// A person's data was erased (`deleteMyAccount`, or a moderator's `eraseUser`). It names
    /// nobody: the actor of a person's own erasure is `erasure::erased_actor`.
    UserErased {
        /// Who erased (the moderator, or the erased stand-in), and when.
        acted: Acted,
        /// Why, as the moderator wrote it.
        reason: Option<Reason>,
        /// How many comments were erased.
        comments: u64,
    },
}

/// The kinds of event, by the names other services know them by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// `comment.posted`
    CommentPosted,
    /// `comment.edited`
    CommentEdited,
    /// `comment.deleted`
    CommentDeleted,
    /// `comment.held`
    CommentHeld,
    /// `comment.approved`
    CommentApproved,
    /// `comment.rejected`
    CommentRejected,
    /// `comment.reported`
    CommentReported,
    /// `comment.pinned`
    CommentPinned,
    /// `discussion.created`
    DiscussionCreated,
    /// `discussion.locked`
    DiscussionLocked,
    /// `discussion.updated`
    DiscussionUpdated,
    /// `discussion.moderation_changed`
    ModerationChanged,
    /// `discussion.moved`
    DiscussionMoved,
    /// `user.banned`
    UserBanned,
    /// `user.unbanned`
    UserUnbanned,
    /// `name.reserved`
    NameReserved,
    /// `name.released`
    NameReleased,
    /// `discussion.guests_changed`
    GuestPolicyChanged,
    /// `discussion.closing_changed`
    ClosingChanged,
    /// `network.banned`
    NetworkBanned,
    /// `network.unbanned`
    NetworkUnbanned,
    /// `user.erased`
    UserErased,
}

impl EventType {
    /// Every kind, in a fixed order.
    pub const ALL: [EventType; 22] = [
        EventType::CommentPosted,
        EventType::CommentEdited,
        EventType::CommentDeleted,
        EventType::CommentHeld,
        EventType::CommentApproved,
        EventType::CommentRejected,
        EventType::CommentReported,
        EventType::CommentPinned,
        EventType::DiscussionCreated,
        EventType::DiscussionLocked,
        EventType::DiscussionUpdated,
        EventType::ModerationChanged,
        EventType::DiscussionMoved,
        EventType::UserBanned,
        EventType::UserUnbanned,
        EventType::NameReserved,
        EventType::NameReleased,
        EventType::GuestPolicyChanged,
        EventType::ClosingChanged,
        EventType::NetworkBanned,
        EventType::NetworkUnbanned,
        EventType::UserErased,
    ];

    /// The kind named `name` ([`EventType::as_str`]), if there is one.
    pub fn from_name(name: &str) -> Option<EventType> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// The name other services know it by (Standard Webhooks style).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::CommentPosted => "comment.posted",
            EventType::CommentEdited => "comment.edited",
            EventType::CommentDeleted => "comment.deleted",
            EventType::CommentHeld => "comment.held",
            EventType::CommentApproved => "comment.approved",
            EventType::CommentRejected => "comment.rejected",
            EventType::CommentReported => "comment.reported",
            EventType::CommentPinned => "comment.pinned",
            EventType::DiscussionCreated => "discussion.created",
            EventType::DiscussionLocked => "discussion.locked",
            EventType::DiscussionUpdated => "discussion.updated",
            EventType::ModerationChanged => "discussion.moderation_changed",
            EventType::DiscussionMoved => "discussion.moved",
            EventType::UserBanned => "user.banned",
            EventType::UserUnbanned => "user.unbanned",
            EventType::NameReserved => "name.reserved",
            EventType::NameReleased => "name.released",
            EventType::GuestPolicyChanged => "discussion.guests_changed",
            EventType::ClosingChanged => "discussion.closing_changed",
            EventType::NetworkBanned => "network.banned",
            EventType::NetworkUnbanned => "network.unbanned",
            EventType::UserErased => "user.erased",
        }
    }
}

/// Whether `text` has the form of an event id: 16 digits, then 8 of `[0-9a-z]`.
pub fn is_event_id(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 24
        && bytes[..16].iter().all(u8::is_ascii_digit)
        && bytes[16..]
            .iter()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
}

/// What a write that makes a comment (a post, a hold, the publication of a held comment)
/// announces, once the comment has the slug the write gave it: the store writes the event in
/// the same transaction as the comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Announce {
    /// `comment.posted`.
    Posted(Acted),
    /// `comment.held`, with the comment's moderation reason.
    Held(Acted),
    /// `comment.approved`: a moderator published a held comment.
    Approved(Acted),
}

impl Announce {
    /// The event of `comment`, as written.
    pub fn event(&self, comment: &Comment) -> Event {
        let on = CommentRef::of(comment);
        match self {
            Announce::Posted(acted) => Event::CommentPosted {
                acted: acted.clone(),
                comment: on,
                parent: comment.parent.clone(),
            },
            Announce::Held(acted) => Event::CommentHeld {
                acted: acted.clone(),
                comment: on,
                reason: comment.standing.reason.clone(),
            },
            Announce::Approved(acted) => Event::CommentApproved {
                acted: acted.clone(),
                comment: on,
                how: Approval::Published,
            },
        }
    }
}

/// An event as the event log keeps it: flat, with the ids of what it concerns (the comment
/// and discussion themselves are read when it is shown, so a deleted text is never kept here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    /// Its id: sorts in commit order within a discussion.
    pub id: String,
    /// Its kind.
    pub kind: EventType,
    /// When it was committed.
    pub at: Micros,
    /// Who made the change.
    pub actor: Author,
    /// Whether they acted as a moderator.
    pub moderator: bool,
    /// The discussion it concerns.
    pub discussion: Option<DiscussionId>,
    /// The comment it concerns (with `discussion`).
    pub slug: Option<Slug>,
    /// The author of that comment.
    pub author: Option<UserId>,
    /// The comment a posted comment replies to.
    pub parent: Option<Slug>,
    /// The user it concerns (banned or unbanned).
    pub user: Option<UserId>,
    /// Why, where there is a reason (a hold, a rejection, a report, a ban, a reservation).
    pub reason: Option<String>,
    /// What else it says: `pinned`/`unpinned`, `locked`/`unlocked`, the mode, `from to` of a
    /// move, a ban's term, a name, the fields an update changed.
    pub detail: Option<String>,
}

impl Event {
    /// Its record in the event log, with the id and commit time the log gives it.
    pub fn record(&self, id: String, at: Micros) -> EventRecord {
        let acted = self.acted();
        let comment = self.comment();
        let mut record = EventRecord {
            id,
            kind: self.kind(),
            at,
            actor: acted.by.clone(),
            moderator: acted.moderator,
            discussion: self.discussion().cloned(),
            slug: comment.map(|c| c.slug.clone()),
            author: comment.map(|c| c.author.clone()),
            parent: None,
            user: None,
            reason: None,
            detail: None,
        };
        let flag = |on: bool, yes: &str, no: &str| Some(if on { yes } else { no }.to_owned());
        match self {
            Event::CommentPosted { parent, .. } => record.parent = parent.clone(),
            Event::CommentHeld { reason, .. } => record.reason = reason.clone(),
            Event::CommentRejected { reason, .. } => {
                record.reason = reason.as_ref().map(|r| r.as_str().to_owned())
            }
            Event::CommentReported { reason, .. } => {
                record.reason = Some(reason.as_str().to_owned())
            }
            Event::CommentPinned { pinned, .. } => {
                record.detail = flag(*pinned, "pinned", "unpinned")
            }
            Event::DiscussionLocked { locked, .. } => {
                record.detail = flag(*locked, "locked", "unlocked")
            }
            Event::DiscussionUpdated { update, .. } => record.detail = Some(update.fields()),
            Event::ModerationChanged { mode, .. } => record.detail = Some(mode.as_str().to_owned()),
            Event::DiscussionMoved { from, to, .. } => {
                record.detail = Some(format!("{} {}", from.as_str(), to.as_str()))
            }
            Event::UserBanned { ban, .. } => {
                record.user = Some(ban.user.clone());
                record.reason = ban.reason.as_ref().map(|r| r.as_str().to_owned());
                record.detail = Some(ban.term());
            }
            Event::UserUnbanned { user, .. } => record.user = Some(user.clone()),
            Event::NameReserved { name, reason, .. } => {
                record.reason = reason.as_ref().map(|r| r.as_str().to_owned());
                record.detail = Some(name.as_str().to_owned());
            }
            Event::NameReleased { name, .. } => record.detail = Some(name.as_str().to_owned()),
            Event::GuestPolicyChanged { policy, .. } => {
                record.detail = Some(policy.map_or("default", |p| p.as_str()).to_owned())
            }
            Event::ClosingChanged { closing, .. } => record.detail = Some(closing_detail(*closing)),
            Event::NetworkBanned {
                network, reason, ..
            } => {
                record.reason = reason.as_ref().map(|r| r.as_str().to_owned());
                record.detail = Some(network.to_string());
            }
            Event::NetworkUnbanned { network, .. } => record.detail = Some(network.to_string()),
            Event::UserErased {
                reason, comments, ..
            } => {
                record.reason = reason.as_ref().map(|r| r.as_str().to_owned());
                record.detail = Some(format!("{comments} comments"));
            }
            Event::CommentApproved { how, .. } => record.detail = Some(how.as_str().to_owned()),
            Event::CommentEdited { .. }
            | Event::CommentDeleted { .. }
            | Event::DiscussionCreated { .. } => {}
        }
        record
    }

    /// Who made the change, and when.
    pub fn acted(&self) -> &Acted {
        match self {
            Event::CommentPosted { acted, .. }
            | Event::CommentEdited { acted, .. }
            | Event::CommentDeleted { acted, .. }
            | Event::CommentHeld { acted, .. }
            | Event::CommentApproved { acted, .. }
            | Event::CommentRejected { acted, .. }
            | Event::CommentReported { acted, .. }
            | Event::CommentPinned { acted, .. }
            | Event::DiscussionCreated { acted, .. }
            | Event::DiscussionLocked { acted, .. }
            | Event::DiscussionUpdated { acted, .. }
            | Event::ModerationChanged { acted, .. }
            | Event::DiscussionMoved { acted, .. }
            | Event::UserBanned { acted, .. }
            | Event::UserUnbanned { acted, .. }
            | Event::NameReserved { acted, .. }
            | Event::NameReleased { acted, .. }
            | Event::GuestPolicyChanged { acted, .. }
            | Event::ClosingChanged { acted, .. }
            | Event::NetworkBanned { acted, .. }
            | Event::NetworkUnbanned { acted, .. }
            | Event::UserErased { acted, .. } => acted,
        }
    }

    /// Its kind.
    pub fn kind(&self) -> EventType {
        match self {
            Event::CommentPosted { .. } => EventType::CommentPosted,
            Event::CommentEdited { .. } => EventType::CommentEdited,
            Event::CommentDeleted { .. } => EventType::CommentDeleted,
            Event::CommentHeld { .. } => EventType::CommentHeld,
            Event::CommentApproved { .. } => EventType::CommentApproved,
            Event::CommentRejected { .. } => EventType::CommentRejected,
            Event::CommentReported { .. } => EventType::CommentReported,
            Event::CommentPinned { .. } => EventType::CommentPinned,
            Event::DiscussionCreated { .. } => EventType::DiscussionCreated,
            Event::DiscussionLocked { .. } => EventType::DiscussionLocked,
            Event::DiscussionUpdated { .. } => EventType::DiscussionUpdated,
            Event::ModerationChanged { .. } => EventType::ModerationChanged,
            Event::DiscussionMoved { .. } => EventType::DiscussionMoved,
            Event::UserBanned { .. } => EventType::UserBanned,
            Event::UserUnbanned { .. } => EventType::UserUnbanned,
            Event::NameReserved { .. } => EventType::NameReserved,
            Event::NameReleased { .. } => EventType::NameReleased,
            Event::GuestPolicyChanged { .. } => EventType::GuestPolicyChanged,
            Event::ClosingChanged { .. } => EventType::ClosingChanged,
            Event::NetworkBanned { .. } => EventType::NetworkBanned,
            Event::NetworkUnbanned { .. } => EventType::NetworkUnbanned,
            Event::UserErased { .. } => EventType::UserErased,
        }
    }

    /// The comment it concerns, if any.
    pub fn comment(&self) -> Option<&CommentRef> {
        match self {
            Event::CommentPosted { comment, .. }
            | Event::CommentEdited { comment, .. }
            | Event::CommentDeleted { comment, .. }
            | Event::CommentHeld { comment, .. }
            | Event::CommentApproved { comment, .. }
            | Event::CommentRejected { comment, .. }
            | Event::CommentReported { comment, .. }
            | Event::CommentPinned { comment, .. } => Some(comment),
            _ => None,
        }
    }

    /// The discussion it concerns, if any.
    pub fn discussion(&self) -> Option<&DiscussionId> {
        match self {
            Event::DiscussionCreated { discussion, .. }
            | Event::DiscussionLocked { discussion, .. }
            | Event::DiscussionUpdated { discussion, .. }
            | Event::ModerationChanged { discussion, .. }
            | Event::GuestPolicyChanged { discussion, .. }
            | Event::ClosingChanged { discussion, .. }
            | Event::DiscussionMoved { discussion, .. } => Some(discussion),
            _ => self.comment().map(|c| &c.discussion),
        }
    }

    /// The moderation log's entry for it: the changes moderators make (an edit or delete only
    /// of someone else's comment). `None` for everything else.
    pub fn logged(&self) -> Option<Logged> {
        let acted = self.acted();
        // A person's own erasure is logged too, under the erased stand-in.
        if !acted.moderator && !matches!(self, Event::UserErased { .. }) {
            return None;
        }
        let entry = |action| Logged::new(acted.by.clone(), action, acted.at);
        let on =
            |action, c: &CommentRef| entry(action).comment(c.discussion.clone(), c.slug.clone());
        let others = |c: &CommentRef| c.author.as_str() != acted.by.id;
        Some(match self {
            Event::CommentEdited { comment, .. } if others(comment) => {
                on(ModerationAction::Edit, comment).user(comment.author.clone())
            }
            Event::CommentDeleted { comment, .. } if others(comment) => {
                on(ModerationAction::Delete, comment).user(comment.author.clone())
            }
            Event::CommentApproved { comment, .. } => {
                on(ModerationAction::Approve, comment).user(comment.author.clone())
            }
            Event::CommentRejected {
                comment, reason, ..
            } => on(ModerationAction::Reject, comment)
                .user(comment.author.clone())
                .reason(reason.clone()),
            Event::CommentPinned {
                comment, pinned, ..
            } => match pinned {
                true => on(ModerationAction::Pin, comment),
                false => on(ModerationAction::Unpin, comment),
            },
            Event::DiscussionLocked {
                discussion, locked, ..
            } => match locked {
                true => entry(ModerationAction::Lock),
                false => entry(ModerationAction::Unlock),
            }
            .discussion(discussion.clone()),
            Event::DiscussionUpdated {
                discussion, update, ..
            } => entry(ModerationAction::UpdateDiscussion)
                .discussion(discussion.clone())
                .detail(update.fields()),
            Event::ModerationChanged {
                discussion, mode, ..
            } => entry(ModerationAction::SetModeration)
                .discussion(discussion.clone())
                .detail(mode.as_str().to_uppercase()),
            Event::DiscussionMoved { discussion, to, .. } => entry(ModerationAction::Move)
                .discussion(discussion.clone())
                .detail(to.as_str().to_uppercase()),
            Event::UserBanned { ban, .. } => entry(ModerationAction::Ban)
                .user(ban.user.clone())
                .reason(ban.reason.clone())
                .detail(ban.term()),
            Event::UserUnbanned { user, .. } => entry(ModerationAction::Unban).user(user.clone()),
            Event::NameReserved { name, reason, .. } => entry(ModerationAction::ReserveName)
                .reason(reason.clone())
                .detail(name.as_str().to_owned()),
            Event::NameReleased { name, .. } => {
                entry(ModerationAction::ReleaseName).detail(name.as_str().to_owned())
            }
            Event::GuestPolicyChanged {
                discussion, policy, ..
            } => entry(ModerationAction::SetGuests)
                .discussion(discussion.clone())
                .detail(policy.map_or("DEFAULT", |p| p.as_str()).to_uppercase()),
            Event::ClosingChanged {
                discussion,
                closing,
                ..
            } => entry(ModerationAction::SetClosing)
                .discussion(discussion.clone())
                .detail(closing_detail(*closing)),
            Event::NetworkBanned {
                network,
                reason,
                until,
                ..
            } => entry(ModerationAction::BanNetwork)
                .reason(reason.clone())
                .detail(match until {
                    Some(until) => format!("{network} until {}", until.to_datetime().to_rfc3339()),
                    None => network.to_string(),
                }),
            Event::NetworkUnbanned { network, .. } => {
                entry(ModerationAction::UnbanNetwork).detail(network.to_string())
            }
            Event::UserErased {
                reason, comments, ..
            } => entry(ModerationAction::EraseUser)
                .reason(reason.clone())
                .detail(format!("{comments} comments")),
            _ => return None,
        })
    }
}

/// How the event log and the moderation log write a discussion's closing: its date (RFC 3339,
/// UTC), `never`, or `default` (the server's).
fn closing_detail(closing: Option<Closing>) -> String {
    match closing {
        Some(Closing::At(at)) => super::moderation::rfc3339(at),
        Some(Closing::Never) => "never".to_owned(),
        None => "default".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acted(moderator: bool) -> Acted {
        Acted {
            by: Author {
                id: "m".into(),
                name: "M".into(),
            },
            moderator,
            at: Micros(1),
        }
    }

    fn comment(author: &str) -> CommentRef {
        CommentRef {
            discussion: DiscussionId::generate(),
            slug: Slug::parse("abcdefgh").expect("a slug"),
            author: UserId::from_stored(author.to_owned()),
        }
    }

    #[test]
    fn the_log_holds_moderators_changes_of_others_comments_only() {
        let edit = |moderator, author| Event::CommentEdited {
            acted: acted(moderator),
            comment: comment(author),
        };
        assert!(edit(true, "m").logged().is_none(), "own comment");
        assert!(edit(false, "x").logged().is_none(), "not a moderator");
        let logged = edit(true, "x").logged().expect("logged");
        assert_eq!(logged.action, ModerationAction::Edit);
        assert_eq!(logged.user, Some(UserId::from_stored("x".into())));
        let posted = Event::CommentPosted {
            acted: acted(true),
            comment: comment("m"),
            parent: None,
        };
        assert!(posted.logged().is_none());
    }

    #[test]
    fn every_kind_is_found_by_its_name() {
        for kind in EventType::ALL {
            assert_eq!(EventType::from_name(kind.as_str()), Some(kind));
        }
        assert_eq!(EventType::from_name("comment"), None);
    }

    #[test]
    fn a_record_keeps_the_ids_and_the_reason_of_its_event() {
        let held = Event::CommentHeld {
            acted: acted(false),
            comment: comment("a"),
            reason: Some("banned word".into()),
        };
        let record = held.record("e1".into(), Micros(7));
        assert_eq!(record.kind, EventType::CommentHeld);
        assert_eq!((record.id.as_str(), record.at), ("e1", Micros(7)));
        assert_eq!(record.author, Some(UserId::from_stored("a".into())));
        assert_eq!(record.reason.as_deref(), Some("banned word"));
        assert!(record.discussion.is_some() && record.slug.is_some());
    }

    #[test]
    fn every_kind_has_a_dotted_name() {
        assert_eq!(
            EventType::ModerationChanged.as_str(),
            "discussion.moderation_changed"
        );
        assert_eq!(EventType::UserUnbanned.as_str(), "user.unbanned");
    }
}
