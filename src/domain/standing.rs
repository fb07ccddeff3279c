//! How a discussion moderates new comments, and where a comment stands with the moderators:
//! the values discussions and comments carry (what moderators do with them is `moderation`).

use std::fmt;
use std::str::FromStr;

use super::{DomainError, Micros};

/// How a discussion moderates new comments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ModerationMode {
    /// Comments are published at once; moderators act afterwards.
    #[default]
    Post,
    /// Every comment waits for a moderator's approval.
    Pre,
    /// A comment waits for approval until its author has had one comment approved anywhere in
    /// the service.
    PreFirst,
}

impl ModerationMode {
    /// Every mode, in a fixed order.
    pub const ALL: [ModerationMode; 3] = [
        ModerationMode::Post,
        ModerationMode::Pre,
        ModerationMode::PreFirst,
    ];

    /// The name stored in the database and used in config.
    pub fn as_str(self) -> &'static str {
        match self {
            ModerationMode::Post => "post",
            ModerationMode::Pre => "pre",
            ModerationMode::PreFirst => "pre_first",
        }
    }
}

impl fmt::Display for ModerationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ModerationMode {
    type Err = DomainError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().replace('-', "_").as_str() {
            "post" => Ok(ModerationMode::Post),
            "pre" => Ok(ModerationMode::Pre),
            "pre_first" => Ok(ModerationMode::PreFirst),
            other => Err(DomainError::bad_input(format!(
                "unknown moderation mode {other:?}: expected post, pre or pre_first"
            ))),
        }
    }
}

/// Where a comment stands with the moderators.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum CommentStatus {
    /// Public: every comment stored in a layout.
    #[default]
    Approved,
    /// Held until a moderator approves or rejects it.
    Pending,
    /// Held, and refused by a moderator (who may still approve it).
    Rejected,
}

impl CommentStatus {
    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            CommentStatus::Approved => "approved",
            CommentStatus::Pending => "pending",
            CommentStatus::Rejected => "rejected",
        }
    }

    /// The status of a stored name (`None` for a name this version does not know).
    pub fn from_stored(name: &str) -> Option<Self> {
        match name {
            "approved" => Some(CommentStatus::Approved),
            "pending" => Some(CommentStatus::Pending),
            "rejected" => Some(CommentStatus::Rejected),
            _ => None,
        }
    }
}

/// Where a comment stands with the moderators. A comment in a layout is public while it is
/// `Approved`; rejected or held by reports, it stays in place as a placeholder (its text and
/// author hidden from the public, as a tombstone's are).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Standing {
    /// Approved (public), pending or rejected.
    pub status: CommentStatus,
    /// Why it is held or rejected: a moderator's reason, or the rule that held it.
    pub reason: Option<String>,
    /// Reports since a moderator last approved it.
    pub reports: u64,
}

impl Standing {
    /// Whether the public sees its text and author.
    pub fn is_public(&self) -> bool {
        self.status == CommentStatus::Approved
    }

    /// Held or rejected for `reason`, reports kept.
    pub fn set(&self, status: CommentStatus, reason: Option<String>) -> Standing {
        Standing {
            status,
            reason,
            reports: self.reports,
        }
    }
}

impl ModerationMode {
    /// Whether a post by an author who is `trusted` (has had a comment approved) waits for a
    /// moderator in this mode.
    pub fn holds(self, trusted: bool) -> bool {
        match self {
            ModerationMode::Post => false,
            ModerationMode::Pre => true,
            ModerationMode::PreFirst => !trusted,
        }
    }
}

/// Whether a discussion takes comments from guests, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GuestPolicy {
    /// Only signed-in users may comment.
    #[default]
    Off,
    /// Guests may comment; every guest comment waits for a moderator.
    Pre,
    /// Guest comments are published, still subject to the word lists, reports and limits.
    Post,
}

impl GuestPolicy {
    /// The name stored in the database and used in config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Pre => "pre",
            Self::Post => "post",
        }
    }
}

impl fmt::Display for GuestPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for GuestPolicy {
    type Err = DomainError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" => Ok(Self::Off),
            "pre" => Ok(Self::Pre),
            "post" => Ok(Self::Post),
            other => Err(DomainError::bad_input(format!(
                "unknown guest policy {other:?}: expected off, pre or post"
            ))),
        }
    }
}

/// When a discussion closes to new comments, replies, edits and votes, as a moderator set it
/// (`setDiscussionClosing`); a discussion without one follows the server's default
/// (`THREADQL_AUTO_CLOSE_AFTER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Closing {
    /// It never closes.
    Never,
    /// It closes at this time.
    At(Micros),
}

impl Closing {
    /// When a discussion created at `created` closes: at what a moderator set (`set`), else
    /// `after` its creation (the server's default), else never (`None`).
    pub fn closes_at(
        set: Option<Closing>,
        created: Micros,
        after: Option<std::time::Duration>,
    ) -> Option<Micros> {
        match set {
            Some(Closing::Never) => None,
            Some(Closing::At(at)) => Some(at),
            None => after.map(|after| {
                let micros = i64::try_from(after.as_micros()).unwrap_or(i64::MAX);
                Micros(created.0.saturating_add(micros))
            }),
        }
    }

    /// `FORBIDDEN` when a discussion that closes at `closes_at` is closed at `now` (from that
    /// instant on): "this discussion closed on <RFC 3339 date, UTC>".
    pub fn check_open(closes_at: Option<Micros>, now: Micros) -> Result<(), DomainError> {
        match closes_at.filter(|at| now >= *at) {
            Some(at) => Err(DomainError::Forbidden(format!(
                "this discussion closed on {}",
                at.to_datetime()
                    .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
            ))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_refused() {
        for mode in ModerationMode::ALL {
            assert_eq!(mode.as_str().parse::<ModerationMode>().ok(), Some(mode));
            assert_eq!(mode.to_string(), mode.as_str());
        }
        assert_eq!(
            "PRE-FIRST".parse::<ModerationMode>().ok(),
            Some(ModerationMode::PreFirst)
        );
        for bad in ["", "pre first", "premoderation", "posts"] {
            assert!(bad.parse::<ModerationMode>().is_err(), "{bad:?}");
        }
        assert_eq!(ModerationMode::default(), ModerationMode::Post);
    }

    #[test]
    fn statuses_round_trip_and_modes_hold_as_documented() {
        for status in [
            CommentStatus::Approved,
            CommentStatus::Pending,
            CommentStatus::Rejected,
        ] {
            assert_eq!(CommentStatus::from_stored(status.as_str()), Some(status));
        }
        assert_eq!(CommentStatus::from_stored("held"), None);
        assert!(!ModerationMode::Post.holds(false));
        assert!(ModerationMode::Pre.holds(true));
        assert!(ModerationMode::PreFirst.holds(false));
        assert!(!ModerationMode::PreFirst.holds(true));
    }

    #[test]
    fn a_discussion_closes_at_its_override_else_after_the_default_and_from_that_instant() {
        let day = std::time::Duration::from_secs(86_400);
        let created = Micros(1_000);
        let at = Micros(5_000);
        assert_eq!(Closing::closes_at(None, created, None), None);
        let default = Closing::closes_at(None, created, Some(day));
        assert_eq!(default, Some(Micros(1_000 + 86_400_000_000)));
        assert_eq!(
            Closing::closes_at(Some(Closing::At(at)), created, Some(day)),
            Some(at)
        );
        assert_eq!(
            Closing::closes_at(Some(Closing::Never), created, Some(day)),
            None
        );
        assert!(Closing::check_open(Some(at), Micros(4_999)).is_ok());
        assert!(Closing::check_open(None, Micros(i64::MAX)).is_ok());
        for now in [at, Micros(5_001)] {
            let refused = Closing::check_open(Some(at), now)
                .err()
                .map(|e| e.to_string());
            assert_eq!(
                refused.as_deref(),
                Some("this discussion closed on 1970-01-01T00:00:00.005Z")
            );
        }
    }
}
