//! The event log for admins: `Query.events`, a pull feed for services that prefer polling to
//! webhooks, and the types it shares with the webhook endpoints.

use async_graphql::{Context, Enum, Object, ID};
use chrono::{DateTime, Utc};
use tracing::Instrument as _;

use super::error::OrGql;
use super::query::load_discussion;
use super::types::{comment_by_slug, Author, CommentNode, DiscussionNode, PageInfo};
use super::{auth, store, Limits};
use crate::auth::AuthState;
use crate::domain::{DomainError, EventRecord, Micros};

/// How long after its commit time an event is listed: a page never ends past an event whose
/// transaction may still be committing, so a poller that moves on from a page misses nothing.
pub(crate) const SETTLE: Micros = Micros(1_000_000);

/// What happened, by the name webhooks carry in lower case, with `.` for the first `_`
/// (`COMMENT_POSTED` is `comment.posted`).
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(remote = "crate::domain::EventType")]
pub enum EventType {
    /// `comment.posted`: a comment was published as it was posted.
    CommentPosted,
    /// `comment.edited`
    CommentEdited,
    /// `comment.deleted`
    CommentDeleted,
    /// `comment.held`: held for moderators (when posted, by an edit, or by reports).
    CommentHeld,
    /// `comment.approved`
    CommentApproved,
    /// `comment.rejected`
    CommentRejected,
    /// `comment.reported`
    CommentReported,
    /// `comment.pinned`: pinned or unpinned (`detail`).
    CommentPinned,
    /// `discussion.created`
    DiscussionCreated,
    /// `discussion.locked`: locked or unlocked (`detail`).
    DiscussionLocked,
    /// `discussion.updated`: its title or page address corrected.
    DiscussionUpdated,
    /// `discussion.moderation_changed`
    #[graphql(name = "DISCUSSION_MODERATION_CHANGED")]
    ModerationChanged,
    /// `discussion.moved`: to another storage layout.
    DiscussionMoved,
    /// `user.banned`
    UserBanned,
    /// `user.unbanned`
    UserUnbanned,
    /// `name.reserved`
    NameReserved,
    /// `name.released`
    NameReleased,
    /// `discussion.guests_changed`: whether it takes guests' comments (`detail`).
    #[graphql(name = "DISCUSSION_GUESTS_CHANGED")]
    GuestPolicyChanged,
    /// `discussion.closing_changed`: when it closes to new comments (`detail`: the date,
    /// `never` or `default`).
    #[graphql(name = "DISCUSSION_CLOSING_CHANGED")]
    ClosingChanged,
    /// `network.banned`: a network banned from guest posting (`detail`).
    NetworkBanned,
    /// `network.unbanned`
    NetworkUnbanned,
    /// `user.erased`: a person's data erased (`detail` counts their comments; nobody is named).
    UserErased,
}

/// One committed change.
pub struct EventNode(pub EventRecord);

#[Object(name = "Event")]
impl EventNode {
    /// Its id: the same on every webhook delivery of it (`webhook-id`); ids sort in commit
    /// order within a discussion.
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }

    /// What happened.
    #[graphql(name = "type")]
    async fn kind(&self) -> EventType {
        self.0.kind.into()
    }

    /// When it was committed.
    async fn timestamp(&self) -> DateTime<Utc> {
        self.0.at.to_datetime()
    }

    /// Who made the change.
    async fn actor(&self) -> Author {
        Author::from(&self.0.actor)
    }

    /// Whether they acted as a moderator.
    async fn by_moderator(&self) -> bool {
        self.0.moderator
    }

    /// The discussion it concerns.
    async fn discussion_id(&self) -> Option<ID> {
        self.0.discussion.as_ref().map(|d| ID(d.to_string()))
    }

    /// That discussion as it is now (null once it is gone).
    async fn discussion(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<DiscussionNode>> {
        let Some(id) = &self.0.discussion else {
            return Ok(None);
        };
        Ok(gone_is_null(load_discussion(ctx, id.as_str()).await)?.map(DiscussionNode))
    }

    /// The slug of the comment it concerns.
    async fn slug(&self) -> Option<String> {
        self.0.slug.as_ref().map(|s| s.to_string())
    }

    /// That comment as it is now, held or public (text null once deleted).
    async fn comment(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<CommentNode>> {
        let (Some(id), Some(slug)) = (&self.0.discussion, &self.0.slug) else {
            return Ok(None);
        };
        let Some(discussion) = gone_is_null(load_discussion(ctx, id.as_str()).await)? else {
            return Ok(None);
        };
        gone_is_null(comment_by_slug(ctx, discussion, slug.as_str()).await)
    }

    /// The comment a posted reply answers.
    async fn parent_slug(&self) -> Option<String> {
        self.0.parent.as_ref().map(|s| s.to_string())
    }

    /// The user it concerns (banned or unbanned).
    async fn user_id(&self) -> Option<ID> {
        self.0.user.as_ref().map(|u| ID(u.as_str().to_owned()))
    }

    /// Why, where there is a reason: a hold's, a rejection's, a report's (`spam`, `abuse`,
    /// `off_topic`, `other`), a ban's or a reservation's.
    async fn reason(&self) -> Option<&str> {
        self.0.reason.as_deref()
    }

    /// What else it says: `pinned`/`unpinned`, `locked`/`unlocked`, the mode, `<from> <to>`
    /// of a move, a ban's term, a reserved name, the fields an update changed.
    async fn detail(&self) -> Option<&str> {
        self.0.detail.as_deref()
    }
}

/// `NOT_FOUND` as null: what an event named may be gone since.
fn gone_is_null<T>(found: async_graphql::Result<T>) -> async_graphql::Result<Option<T>> {
    match found {
        Ok(found) => Ok(Some(found)),
        Err(err)
            if err
                .extensions
                .as_ref()
                .and_then(|e| e.get("code"))
                .is_some_and(|code| *code == async_graphql::Value::from("NOT_FOUND")) =>
        {
            Ok(None)
        }
        Err(err) => Err(err),
    }
}

/// One event of a page, with its cursor.
pub struct EventEdge(EventRecord);

#[Object]
impl EventEdge {
    /// Pass it as `after` to continue after this event.
    async fn cursor(&self) -> &str {
        &self.0.id
    }

    /// The event.
    async fn node(&self) -> EventNode {
        EventNode(self.0.clone())
    }
}

/// A page of the event log, oldest first.
pub struct EventConnection {
    events: Vec<EventRecord>,
    has_next_page: bool,
    after: bool,
}

#[Object]
impl EventConnection {
    /// The events with their cursors.
    async fn edges(&self) -> Vec<EventEdge> {
        self.events.iter().cloned().map(EventEdge).collect()
    }

    /// The events.
    async fn nodes(&self) -> Vec<EventNode> {
        self.events.iter().cloned().map(EventNode).collect()
    }

    /// Where this page stands: `endCursor` is where the next poll starts (null on an empty
    /// page: poll again with the same `after`).
    async fn page_info(&self) -> PageInfo {
        PageInfo {
            has_next_page: self.has_next_page,
            has_previous_page: self.after,
            start_cursor: self.events.first().map(|e| e.id.clone()),
            end_cursor: self.events.last().map(|e| e.id.clone()),
        }
    }
}

/// The event log's reads; merged into [`super::Query`].
#[derive(Default)]
pub struct EventQuery;

#[Object]
impl EventQuery {
    /// The event log, oldest first: every committed change, as webhooks deliver them, kept for
    /// `THREADQL_EVENT_RETENTION_DAYS`. A pull feed: start without `after`, then pass the last
    /// `endCursor` each time. An event is listed a second after its commit, so that a page
    /// never passes an event still committing. `types` keeps only those kinds. Admins only.
    async fn events(
        &self,
        ctx: &Context<'_>,
        after: Option<String>,
        first: Option<i32>,
        types: Option<Vec<EventType>>,
    ) -> async_graphql::Result<Option<EventConnection>> {
        admin_reading(ctx, "the event log")?;
        let first = page_size(first, ctx.data_unchecked::<Limits>())?;
        if let Some(after) = &after {
            if !crate::domain::events::is_event_id(after) {
                return Err(DomainError::bad_input(format!(
                    "after must be an event id (an endCursor of this feed), not {after:?}"
                )))
                .gql();
            }
        }
        let kinds: Vec<crate::domain::EventType> = types
            .unwrap_or_default()
            .into_iter()
            .map(Into::into)
            .collect();
        let mut events = store(ctx)
            .events()
            .page(
                after.as_deref(),
                &kinds,
                Micros(Micros::now().0 - SETTLE.0),
                first + 1,
            )
            .instrument(tracing::debug_span!("store.events"))
            .await
            .gql()?;
        let has_next_page = events.len() > first;
        events.truncate(first);
        Ok(Some(EventConnection {
            events,
            has_next_page,
            after: after.is_some(),
        }))
    }
}

/// Refuses a read that is for admins unless the caller is one (`FORBIDDEN`, or
/// `UNAUTHENTICATED` without a valid token).
pub(super) fn admin_reading(ctx: &Context<'_>, what: &str) -> async_graphql::Result<()> {
    match auth(ctx) {
        AuthState::Authenticated(viewer) if viewer.admin => Ok(()),
        AuthState::Authenticated(_) => Err(DomainError::Forbidden(format!(
            "only admins (a token with the `admin` role) may read {what}"
        )))
        .gql(),
        _ => Err(DomainError::Unauthenticated(format!(
            "{what} is for admins: send `Authorization: Bearer <token>`"
        )))
        .gql(),
    }
}

/// A page size in the configured range (`BAD_USER_INPUT` otherwise).
pub(super) fn page_size(first: Option<i32>, limits: &Limits) -> async_graphql::Result<usize> {
    match first {
        None => Ok(limits.default_page_size),
        Some(n) if n >= 1 && n as usize <= limits.max_page_size => Ok(n as usize),
        Some(n) => Err(DomainError::bad_input(format!(
            "first must be between 1 and {}, not {n}",
            limits.max_page_size
        )))
        .gql(),
    }
}
