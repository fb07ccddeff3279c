//! Moderation's objects: bans, and the moderation log with its entries and pages.

use async_graphql::{Enum, Object, ID};
use chrono::{DateTime, Utc};

use super::{Author, PageInfo};
use crate::domain::paging::Cursor;
use crate::domain::{Ban, CursorKind, LogEntry, Page, Paged};

/// A ban: the user may make no change (post, edit, delete, anything) until it ends.
pub struct BanNode(pub Ban);

#[Object(name = "Ban")]
impl BanNode {
    /// The banned user (a token's `sub`).
    async fn user_id(&self) -> ID {
        ID(self.0.user.to_string())
    }

    /// When the ban ends; null for a ban without end.
    async fn until(&self) -> Option<DateTime<Utc>> {
        self.0.until.map(|u| u.to_datetime())
    }

    /// Why, as the moderator wrote it.
    async fn reason(&self) -> Option<&str> {
        self.0.reason.as_ref().map(|r| r.as_str())
    }

    /// The moderator who made it.
    async fn by(&self) -> Author {
        Author::from(&self.0.by)
    }

    /// When it was made.
    async fn at(&self) -> DateTime<Utc> {
        self.0.at.to_datetime()
    }
}

/// A page of the bans in force, newest first.
pub struct BanConnection(pub Page<Ban>);

/// One ban of a page, with its cursor.
pub struct BanEdge(Ban);

/// The cursor of a ban in the list of bans.
fn ban_cursor(ban: &Ban) -> String {
    Cursor::Ban {
        at: ban.at,
        user: ban.user.to_string(),
    }
    .encode()
}

#[Object]
impl BanEdge {
    /// Pass it as `after` to continue with older bans.
    async fn cursor(&self) -> String {
        ban_cursor(&self.0)
    }

    /// The ban.
    async fn node(&self) -> BanNode {
        BanNode(self.0.clone())
    }
}

#[Object]
impl BanConnection {
    /// The bans with their cursors.
    async fn edges(&self) -> Vec<BanEdge> {
        self.0.items.iter().cloned().map(BanEdge).collect()
    }

    /// The bans.
    async fn nodes(&self) -> Vec<BanNode> {
        self.0.items.iter().cloned().map(BanNode).collect()
    }

    /// Where this page stands (forward paging only: `hasPreviousPage` is false).
    async fn page_info(&self) -> PageInfo {
        PageInfo {
            has_next_page: self.0.has_next,
            has_previous_page: false,
            start_cursor: self.0.items.first().map(ban_cursor),
            end_cursor: self.0.items.last().map(ban_cursor),
        }
    }
}

/// Defines the API's moderator actions from the domain's list.
macro_rules! api_actions {
    ($($(#[doc = $doc:literal])* $name:ident = $stored:literal,)*) => {
        /// What a moderator did.
        #[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
        #[graphql(remote = "crate::domain::ModerationAction")]
        pub enum ModerationAction {
            $($(#[doc = $doc])* $name,)*
        }
    };
}
crate::domain::moderation::moderation_actions!(api_actions);

/// One recorded moderator action.
pub struct ModerationLogEntry(pub LogEntry);

#[Object]
impl ModerationLogEntry {
    /// The entry's id: its number in the log (entries are numbered from 1 as they are recorded).
    async fn id(&self) -> ID {
        ID(self.0.seq.to_string())
    }

    /// When it was recorded, just after the action succeeded.
    async fn at(&self) -> DateTime<Utc> {
        self.0.logged.at.to_datetime()
    }

    /// The moderator who acted.
    async fn moderator(&self) -> Author {
        Author::from(&self.0.logged.moderator)
    }

    /// What they did.
    async fn action(&self) -> ModerationAction {
        self.0.logged.action.into()
    }

    /// The discussion it concerns (everything but bans).
    async fn discussion_id(&self) -> Option<ID> {
        self.0.logged.discussion.as_ref().map(|d| ID(d.to_string()))
    }

    /// The comment it concerns, in `discussionId` (approvals, rejections, pins, edits,
    /// deletes).
    async fn slug(&self) -> Option<&str> {
        self.0.logged.slug.as_ref().map(|s| s.as_str())
    }

    /// The user it concerns: the one banned or unbanned, or the author of the comment
    /// approved, rejected, edited or deleted.
    async fn user_id(&self) -> Option<ID> {
        self.0.logged.user.as_ref().map(|u| ID(u.to_string()))
    }

    /// Why, as the moderator wrote it (bans, rejections).
    async fn reason(&self) -> Option<&str> {
        self.0.logged.reason.as_ref().map(|r| r.as_str())
    }

    /// What else the action says: a ban's term (`until <time>` or `permanently`), the layout a
    /// discussion moved to (`PER_COMMENT`, `EMBEDDED` or `BUCKETED`), the mode set (`POST`,
    /// `PRE` or `PRE_FIRST`), the fields a discussion update changed (`title`, `url`).
    async fn detail(&self) -> Option<&str> {
        self.0.logged.detail.as_deref()
    }
}

/// The cursor of an entry.
fn cursor(entry: &LogEntry) -> String {
    Cursor::Log(entry.seq).encode_for(CursorKind::ModerationLog)
}

/// A page of the moderation log, newest first.
pub struct ModerationLogConnection(pub Paged<LogEntry>);

/// One entry of a page, with its cursor.
pub struct ModerationLogEdge(LogEntry);

#[Object]
impl ModerationLogEdge {
    /// Pass it as `after` to continue with older entries, or as `before` for newer ones.
    async fn cursor(&self) -> String {
        cursor(&self.0)
    }

    /// The entry.
    async fn node(&self) -> ModerationLogEntry {
        ModerationLogEntry(self.0.clone())
    }
}

#[Object]
impl ModerationLogConnection {
    /// The entries with their cursors.
    async fn edges(&self) -> Vec<ModerationLogEdge> {
        self.0
            .items
            .iter()
            .cloned()
            .map(ModerationLogEdge)
            .collect()
    }

    /// The entries.
    async fn nodes(&self) -> Vec<ModerationLogEntry> {
        self.0
            .items
            .iter()
            .cloned()
            .map(ModerationLogEntry)
            .collect()
    }

    /// Where this page stands.
    async fn page_info(&self) -> PageInfo {
        PageInfo {
            has_next_page: self.0.has_next_page,
            has_previous_page: self.0.has_previous_page,
            start_cursor: self.0.items.first().map(cursor),
            end_cursor: self.0.items.last().map(cursor),
        }
    }
}

/// A display name a moderator reserved: no token may carry it (in any spelling with the same
/// letters, case, width and invisible characters aside) until it is released.
pub struct ReservedNameNode(pub crate::domain::ReservedName);

#[Object(name = "ReservedName")]
impl ReservedNameNode {
    /// The name as the moderator wrote it.
    async fn name(&self) -> &str {
        self.0.name.as_str()
    }

    /// Why, as the moderator wrote it.
    async fn reason(&self) -> Option<&str> {
        self.0.reason.as_ref().map(|r| r.as_str())
    }

    /// The moderator who reserved it.
    async fn by(&self) -> Author {
        Author::from(&self.0.by)
    }

    /// When it was reserved.
    async fn at(&self) -> DateTime<Utc> {
        self.0.at.to_datetime()
    }
}
