//! Domain types of threadql: ids, slugs, comments, discussions, paging, word lists and errors
//! (no I/O).

pub mod atom;
pub mod comment;
mod cursors;
pub mod erasure;
pub mod error;
pub mod events;
pub mod guest_posts;
pub mod guests;
pub mod ids;
pub mod keys;
pub mod lifecycle;
pub mod markdown;
pub mod moderation;
pub mod names;
pub mod networks;
pub mod notifications;
pub mod paging;
pub mod proof;
pub mod ranking;
pub mod secrets;
pub mod slug;
pub mod standing;
pub mod text;
pub mod tokens;
pub mod tree;
pub mod votes;
pub mod webhooks;
pub mod words;

pub use comment::{
    Author, Comment, CommentText, Discussion, LayoutHints, NewComment, Placement, Revision, SortKey,
};
pub use error::DomainError;
pub use events::{Acted, Announce, Approval, CommentRef, Event, EventRecord, EventType};
pub use guest_posts::{GuestDetails, GuestIdentity, GuestKeys, GuestPolicy, GuestTicket};
pub use guests::GuestIds;
pub use ids::{DiscussionId, Layout};
pub use keys::{DiscussionKey, DiscussionTitle, DiscussionUpdate, DiscussionUrl, NewDiscussion};
pub use lifecycle::{Actor, Change, EditRules};
pub use moderation::{Ban, LogEntry, LogFilter, Logged, ModerationAction, Reason, UserId};
pub use moderation::{Held, Queue, ReportReason};
pub use names::{check_identity, name_key, DisplayName, ReservedName};
pub use networks::{Cidr, ClientAddress, GuestNetwork, NetworkBan};
pub use notifications::{EmailFrequency, NotificationKind, NotificationSettings};
pub use paging::{
    share_all, shared_pages, Cursor, CursorKind, Page, PageArgs, Paged, Paging, Span, Window,
};
pub use secrets::{KeyError, Purpose, ServerKey, SubKey};
pub use slug::{FullSlug, Micros, Slug, SlugPart};
pub use standing::{Closing, CommentStatus, ModerationMode, Standing};
pub use votes::{Rank, RankKey, Vote, Votes};
pub use words::{ListError, Screening, WordList, WordLists};
