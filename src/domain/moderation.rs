//! Moderation: user ids as bans name them, the reasons moderators give, bans and when they
//! apply, what the moderation log records, held comments, the queues and reports. How a
//! discussion moderates and where a comment stands with the moderators are `standing`.

use std::fmt;

use chrono::SecondsFormat;

use super::{
    text, Author, Comment, CommentStatus, DiscussionId, DomainError, Micros, Slug, Standing,
};

/// A user, as tokens name them (`sub`) and as bans and the log name them: opaque, compared
/// exactly, 1 to [`UserId::MAX_CHARS`] characters, not blank, no control characters. Any such
/// id may be banned, also one no token has carried yet.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserId(String);

impl UserId {
    /// Longest user id accepted, in characters.
    pub const MAX_CHARS: usize = 256;

    /// Validates a client-supplied user id. It is kept exactly as sent (no trimming, no case
    /// folding), as a token's `sub` is.
    pub fn parse(raw: &str) -> Result<Self, DomainError> {
        let chars = raw.chars().count();
        if text::is_blank(raw) {
            return Err(DomainError::bad_input(format!(
                "a user id must not be empty or blank (1 to {} characters)",
                Self::MAX_CHARS
            )));
        }
        if chars > Self::MAX_CHARS {
            return Err(DomainError::bad_input(format!(
                "a user id has at most {} characters (this one has {chars})",
                Self::MAX_CHARS
            )));
        }
        if let Some(c) = raw.chars().find(|c| c.is_control()) {
            return Err(DomainError::bad_input(format!(
                "a user id must not contain control characters (found U+{:04X})",
                u32::from(c)
            )));
        }
        Ok(Self(raw.to_owned()))
    }

    /// A user id read from storage (written by [`UserId::parse`] or taken from a token).
    pub fn from_stored(raw: String) -> Self {
        Self(raw)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a moderator did something, as they wrote it: the text rules of a comment (line ends
/// made LF, trailing white space dropped, not blank, no control characters but newline and tab,
/// bidirectional controls closed at its end), at most [`Reason::MAX_CHARS`] characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason(String);

impl Reason {
    /// Longest reason accepted, in characters.
    pub const MAX_CHARS: usize = 500;

    /// Validates a client-supplied reason.
    pub fn parse(raw: &str) -> Result<Self, DomainError> {
        let normalized = raw.replace("\r\n", "\n");
        let reason = normalized.trim_end();
        if text::is_blank(reason) {
            return Err(DomainError::bad_input(
                "a reason must not be blank (white space and invisible characters alone are \
                 blank): leave it out instead",
            ));
        }
        let chars = reason.chars().count();
        if chars > Self::MAX_CHARS {
            return Err(DomainError::bad_input(format!(
                "a reason has at most {} characters (this one has {chars})",
                Self::MAX_CHARS
            )));
        }
        text::check_characters(reason, "a reason", &['\n', '\t'])?;
        let mut reason = reason.to_owned();
        text::close_bidi(&mut reason);
        Ok(Self(reason))
    }

    /// A reason read from storage.
    pub fn from_stored(raw: String) -> Self {
        Self(raw)
    }

    /// The reason as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A time as the API writes it: RFC 3339 in UTC, with as many fraction digits as it has.
pub fn rfc3339(at: Micros) -> String {
    at.to_datetime()
        .to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// A ban: the user may make no change until `until` (for good without it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ban {
    /// Who is banned.
    pub user: UserId,
    /// When it ends; `None`: it does not.
    pub until: Option<Micros>,
    /// Why, as the moderator wrote it.
    pub reason: Option<Reason>,
    /// The moderator who banned them.
    pub by: Author,
    /// When.
    pub at: Micros,
}

impl Ban {
    /// A new ban made at `now`: `BAD_USER_INPUT` when it would end at or before `now`.
    pub fn new(
        user: UserId,
        until: Option<Micros>,
        reason: Option<Reason>,
        by: Author,
        now: Micros,
    ) -> Result<Ban, DomainError> {
        ends_later(until, now, "unbanUser")?;
        Ok(Ban {
            user,
            until,
            reason,
            by,
            at: now,
        })
    }

    /// Whether it still applies at `now` (an expired ban needs no removal: it stops applying).
    pub fn applies_at(&self, now: Micros) -> bool {
        self.until.is_none_or(|until| until > now)
    }

    /// How long it lasts, as messages and the log say it: `until <time>` or `permanently`.
    pub fn term(&self) -> String {
        match self.until {
            Some(until) => format!("until {}", rfc3339(until)),
            None => "permanently".to_owned(),
        }
    }

    /// The error every change the banned user asks for gets: `FORBIDDEN`, with the ban's end and
    /// its reason.
    pub fn refusal(&self) -> DomainError {
        let reason = match &self.reason {
            Some(reason) => format!(" (reason: {})", reason.as_str()),
            None => String::new(),
        };
        DomainError::Forbidden(format!(
            "this account is banned {}{reason}: it may not post, edit, delete or change anything",
            self.term()
        ))
    }
}

/// `BAD_USER_INPUT` when a ban made at `now` would end at or before it (`lift` names the
/// mutation that lifts one).
pub(crate) fn ends_later(
    until: Option<Micros>,
    now: Micros,
    lift: &str,
) -> Result<(), DomainError> {
    match until.filter(|until| *until <= now) {
        Some(until) => Err(DomainError::bad_input(format!(
            "`until` is {}, which is not in the future: leave it out for a ban without end, \
             or use {lift} to lift a ban",
            rfc3339(until)
        ))),
        None => Ok(()),
    }
}

/// Lists every moderator action once, with its description (the API's too) and its stored
/// name, for `$define` to define an enum of: [`ModerationAction`] here, and the API's enum.
macro_rules! moderation_actions {
    ($define:ident) => {
        $define! {
            /// Published a held comment (`approveComment`).
            Approve = "approve",
            /// Rejected a comment (`rejectComment`).
            Reject = "reject",
            /// Edited someone else's comment (`editComment`; a moderator editing their own comment is
            /// not recorded).
            Edit = "edit",
            /// Deleted someone else's comment (`deleteComment`; a moderator deleting their own comment
            /// is not recorded).
            Delete = "delete",
            /// Locked a discussion (`lockDiscussion` with `locked: true`).
            Lock = "lock",
            /// Unlocked a discussion (`lockDiscussion` with `locked: false`).
            Unlock = "unlock",
            /// Set how a discussion moderates (`setModeration`).
            SetModeration = "set_moderation",
            /// Pinned a comment (`pinComment` with `pinned: true`).
            Pin = "pin",
            /// Unpinned a comment (`pinComment` with `pinned: false`).
            Unpin = "unpin",
            /// Banned a user (`banUser`).
            Ban = "ban",
            /// Lifted a ban (`unbanUser`, when there was one to lift).
            Unban = "unban",
            /// Moved a discussion to another storage layout (`migrateDiscussion`).
            Move = "move",
            /// Corrected a discussion's title or page address (`updateDiscussion`; the detail
            /// names the fields changed).
            UpdateDiscussion = "update_discussion",
            /// Reserved a display name (`reserveName`; the name is the entry's detail).
            ReserveName = "reserve_name",
            /// Released a reserved display name (`releaseName`; the name is the entry's detail).
            ReleaseName = "release_name",
            /// Set whether a discussion takes guests' comments (`setGuestPolicy`).
            SetGuests = "set_guests",
            /// Set when a discussion closes to new comments (`setDiscussionClosing`; the date,
            /// `never` or `default` is the detail).
            SetClosing = "set_closing",
            /// Banned a network from guest posting (`banNetwork`; the network is the detail).
            BanNetwork = "ban_network",
            /// Lifted a network's ban (`unbanNetwork`).
            UnbanNetwork = "unban_network",
            /// Erased a person's data (`eraseUser`, or their own `deleteMyAccount`; the detail
            /// counts the comments erased, and nobody is named).
            EraseUser = "erase_user",
        }
    };
}
pub(crate) use moderation_actions;

/// Defines [`ModerationAction`] from the list.
macro_rules! define_actions {
    ($($(#[doc = $doc:literal])* $name:ident = $stored:literal,)*) => {
        /// What a moderator did, as the moderation log records it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ModerationAction {
            $($(#[doc = $doc])* $name,)*
        }

        impl ModerationAction {
            /// Every action.
            pub const ALL: &'static [ModerationAction] = &[$(ModerationAction::$name,)*];

            /// The stored name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ModerationAction::$name => $stored,)*
                }
            }
        }
    };
}
moderation_actions!(define_actions);

impl ModerationAction {
    /// The action with this stored name.
    pub fn from_stored(name: &str) -> Option<ModerationAction> {
        Self::ALL.iter().copied().find(|a| a.as_str() == name)
    }
}

/// A moderator action to record: who did what, to what, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    /// When.
    pub at: Micros,
    /// The moderator.
    pub moderator: Author,
    /// What they did.
    pub action: ModerationAction,
    /// The discussion it concerns.
    pub discussion: Option<DiscussionId>,
    /// The comment it concerns (with `discussion`).
    pub slug: Option<Slug>,
    /// The user it concerns: the one banned or unbanned, or the author of the comment edited
    /// or deleted.
    pub user: Option<UserId>,
    /// Why, as the moderator wrote it.
    pub reason: Option<Reason>,
    /// What else the action says (a ban's term, a move's target layout).
    pub detail: Option<String>,
}

impl Logged {
    /// An action of `moderator` at `at`, concerning nothing yet.
    pub fn new(moderator: Author, action: ModerationAction, at: Micros) -> Logged {
        Logged {
            at,
            moderator,
            action,
            discussion: None,
            slug: None,
            user: None,
            reason: None,
            detail: None,
        }
    }

    /// The same, concerning a discussion.
    pub fn discussion(mut self, id: DiscussionId) -> Logged {
        self.discussion = Some(id);
        self
    }

    /// The same, concerning a comment of a discussion.
    pub fn comment(mut self, id: DiscussionId, slug: Slug) -> Logged {
        self.discussion = Some(id);
        self.slug = Some(slug);
        self
    }

    /// The same, concerning a user.
    pub fn user(mut self, user: UserId) -> Logged {
        self.user = Some(user);
        self
    }

    /// The same, with a reason.
    pub fn reason(mut self, reason: Option<Reason>) -> Logged {
        self.reason = reason;
        self
    }

    /// The same, with a detail.
    pub fn detail(mut self, detail: impl Into<String>) -> Logged {
        self.detail = Some(detail.into());
        self
    }
}

/// An entry of the moderation log: a recorded action and its number. Entries are numbered from
/// 1 in the order they were recorded, which is the log's stored order (the API lists it newest
/// first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// Its number.
    pub seq: u64,
    /// What was recorded.
    pub logged: Logged,
}

/// Which entries of the moderation log a page keeps: one action, one moderator's, or both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogFilter {
    /// Only entries of this action.
    pub action: Option<ModerationAction>,
    /// Only entries of the moderator with this id.
    pub moderator: Option<UserId>,
}

impl LogFilter {
    /// Whether it keeps every entry.
    pub fn is_empty(&self) -> bool {
        self.action.is_none() && self.moderator.is_none()
    }
}

/// A comment held back from the public (kept outside every layout until it is approved): its
/// `posted` is when it was submitted, its slug the one it keeps when it is published, its
/// `standing` pending or rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The comment as submitted.
    pub comment: Comment,
}

impl Held {
    /// Pending or rejected.
    pub fn status(&self) -> CommentStatus {
        self.comment.standing.status
    }
}

/// The moderator queues: where a comment waits for a moderator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Queue {
    /// Held comments, and public ones held by reports.
    Pending,
    /// Public comments with reports, not held.
    Reported,
    /// Rejected comments: held ones and placeholders.
    Rejected,
}

impl Queue {
    /// The queues from mildest to strictest: a public comment's entry only ever moves up this
    /// list, until a moderator approves it.
    pub const ESCALATION: [Queue; 3] = [Queue::Reported, Queue::Pending, Queue::Rejected];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Queue::Pending => "pending",
            Queue::Reported => "reported",
            Queue::Rejected => "rejected",
        }
    }

    /// The queue of a stored name.
    pub fn from_stored(name: &str) -> Option<Queue> {
        match name {
            "pending" => Some(Queue::Pending),
            "reported" => Some(Queue::Reported),
            "rejected" => Some(Queue::Rejected),
            _ => None,
        }
    }

    /// The queue a comment in a layout with `standing` waits in, if any.
    pub fn of(standing: &Standing) -> Option<Queue> {
        match standing.status {
            CommentStatus::Pending => Some(Queue::Pending),
            CommentStatus::Rejected => Some(Queue::Rejected),
            CommentStatus::Approved if standing.reports > 0 => Some(Queue::Reported),
            CommentStatus::Approved => None,
        }
    }
}

/// Why someone reported a comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReportReason {
    /// Advertising, scams, bots.
    Spam,
    /// Harassment, hate, threats.
    Abuse,
    /// Not about the discussion.
    OffTopic,
    /// Anything else (the note says what).
    Other,
}

impl ReportReason {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReportReason::Spam => "spam",
            ReportReason::Abuse => "abuse",
            ReportReason::OffTopic => "off_topic",
            ReportReason::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn author() -> Author {
        Author {
            id: "mod".into(),
            name: "Mo".into(),
        }
    }

    #[test]
    fn user_ids_are_opaque_but_bounded() {
        for good in ["u1", "auth0|5f7c8ec7c33c6c004bbafe82", " padded ", "ü"] {
            assert_eq!(UserId::parse(good).unwrap().as_str(), good);
        }
        let long = "x".repeat(UserId::MAX_CHARS + 1);
        for bad in ["", "   ", "\u{200B}", "a\nb", "a\u{0}b", long.as_str()] {
            assert!(
                matches!(UserId::parse(bad), Err(DomainError::BadInput(_))),
                "{bad:?}"
            );
        }
        assert!(UserId::parse(&"x".repeat(UserId::MAX_CHARS)).is_ok());
    }

    #[test]
    fn reasons_follow_the_comment_text_rules() {
        assert_eq!(
            Reason::parse("spam\r\nagain\t \n").unwrap().as_str(),
            "spam\nagain"
        );
        assert_eq!(
            Reason::parse("a\u{202E}b").unwrap().as_str(),
            "a\u{202E}b\u{202C}"
        );
        let long = "é".repeat(Reason::MAX_CHARS + 1);
        for bad in ["", " \n", "\u{1b}[31m", "a\rb", long.as_str()] {
            assert!(
                matches!(Reason::parse(bad), Err(DomainError::BadInput(_))),
                "{bad:?}"
            );
        }
        assert!(Reason::parse(&"é".repeat(Reason::MAX_CHARS)).is_ok());
    }

    #[test]
    fn a_ban_ends_in_the_future_and_says_when() {
        let now = Micros(1_800_000_000_000_000);
        let user = UserId::parse("u1").unwrap();
        for past in [now, Micros(now.0 - 1), Micros(0)] {
            let made = Ban::new(user.clone(), Some(past), None, author(), now);
            assert!(matches!(made, Err(DomainError::BadInput(_))), "{past:?}");
        }
        let until = Micros(1_800_000_060_000_000);
        let ban = Ban::new(
            user.clone(),
            Some(until),
            Some(Reason::parse("spam").unwrap()),
            author(),
            now,
        )
        .unwrap();
        assert!(ban.applies_at(now));
        assert!(ban.applies_at(Micros(until.0 - 1)));
        assert!(!ban.applies_at(until));
        let DomainError::Forbidden(message) = ban.refusal() else {
            panic!("a ban refuses with FORBIDDEN");
        };
        assert!(
            message.contains("banned until 2027-01-15T08:01:00Z (reason: spam)"),
            "{message}"
        );
        let forever = Ban::new(user, None, None, author(), now).unwrap();
        assert!(forever.applies_at(Micros(i64::MAX)));
        assert!(forever
            .refusal()
            .to_string()
            .contains("banned permanently:"));
        assert_eq!(rfc3339(Micros(1_500)), "1970-01-01T00:00:00.001500Z");
    }

    #[test]
    fn actions_round_trip_their_stored_names() {
        for &action in ModerationAction::ALL {
            assert_eq!(ModerationAction::from_stored(action.as_str()), Some(action));
        }
        assert_eq!(ModerationAction::from_stored("nuke"), None);
    }

    #[test]
    fn a_comment_waits_in_the_queue_its_standing_says() {
        let standing = |status, reports| Standing {
            status,
            reason: None,
            reports,
        };
        assert_eq!(Queue::of(&standing(CommentStatus::Approved, 0)), None);
        assert_eq!(
            Queue::of(&standing(CommentStatus::Approved, 2)),
            Some(Queue::Reported)
        );
        assert_eq!(
            Queue::of(&standing(CommentStatus::Pending, 2)),
            Some(Queue::Pending)
        );
        assert_eq!(
            Queue::of(&standing(CommentStatus::Rejected, 0)),
            Some(Queue::Rejected)
        );
        for queue in Queue::ESCALATION {
            assert_eq!(Queue::from_stored(queue.as_str()), Some(queue));
        }
        assert_eq!(Queue::from_stored("held"), None);
        let held =
            standing(CommentStatus::Approved, 3).set(CommentStatus::Pending, Some("x".into()));
        assert_eq!(
            (held.status, held.reports, held.is_public()),
            (CommentStatus::Pending, 3, false)
        );
    }
}
