//! The signed-in person's own corner: `Query.viewer` (their inbox, unread count, settings and
//! follows), the mutations on them, and the `Notification` type the live subscription shares.

use async_graphql::{Context, Enum, InputObject, Object, ID};
use chrono::{DateTime, Utc};
use tracing::Instrument as _;

use super::error::OrGql;
use super::events::page_size;
use super::query::load_discussion;
use super::types::{Author, CommentNode, DiscussionConnection, DiscussionNode, PageInfo};
use super::{auth, reads, services, store, Limits};
use crate::auth::{AuthState, Viewer};
use crate::domain::notifications::{self as domain, Notification};
use crate::domain::{DiscussionId, DomainError};
use crate::graphql::loaders::{CommentKey, DiscussionRef};

/// Why a person is notified.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(remote = "crate::domain::NotificationKind")]
pub enum NotificationKind {
    /// A reply to their comment became public.
    Reply,
    /// A moderator approved or rejected their held comment (`reason` says why).
    Moderation,
    /// A comment became public in a discussion they follow.
    Followed,
}

/// How often a person is mailed.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(remote = "crate::domain::EmailFrequency")]
pub enum EmailFrequency {
    /// Never (the default unless the server sets another).
    Never,
    /// Soon after a notification, at most one message per `THREADQL_EMAIL_MIN_INTERVAL_SECS`.
    Immediate,
    /// One digest an hour, when something is unread.
    Hourly,
    /// One digest a day, when something is unread.
    Daily,
}

/// One notification of the viewer.
pub struct NotificationNode(pub Notification);

#[Object(name = "Notification")]
impl NotificationNode {
    /// Its id; `markNotificationsRead(upTo:)` takes it.
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }

    /// Why it was sent.
    async fn kind(&self) -> NotificationKind {
        self.0.kind.into()
    }

    /// When what it tells of happened.
    async fn at(&self) -> DateTime<Utc> {
        self.0.at.to_datetime()
    }

    /// Whether the viewer read it.
    async fn read(&self) -> bool {
        self.0.read
    }

    /// The discussion.
    async fn discussion(&self, ctx: &Context<'_>) -> async_graphql::Result<DiscussionNode> {
        Ok(DiscussionNode(
            load_discussion(ctx, self.0.discussion.as_str()).await?,
        ))
    }

    /// The comment, as it is now: null once it is deleted, rejected or hidden (moderators
    /// still see it).
    async fn comment(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<CommentNode>> {
        let moderator = matches!(auth(ctx), AuthState::Authenticated(v) if v.moderator);
        let Ok(discussion) = load_discussion(ctx, self.0.discussion.as_str()).await else {
            return Ok(None);
        };
        let key = CommentKey {
            discussion: DiscussionRef(discussion.clone()),
            slug: self.0.slug.clone(),
        };
        let found = reads(ctx).loader.load_one(key).await.gql()?;
        Ok(found
            .filter(|c| moderator || (!c.deleted && c.standing.is_public()))
            .map(|c| CommentNode::new(discussion, c)))
    }

    /// Who acted: the replier, the moderator.
    async fn actor(&self) -> Author {
        Author::from(&self.0.actor)
    }

    /// A moderator's reason.
    async fn reason(&self) -> Option<&str> {
        self.0.reason.as_deref()
    }

    /// For `MODERATION`: whether the comment was approved (true) or rejected.
    async fn approved(&self) -> Option<bool> {
        self.0.approved
    }
}

/// One notification of a page, with its cursor.
pub struct NotificationEdge(Notification);

#[Object]
impl NotificationEdge {
    /// Pass it as `after` to continue after this notification.
    async fn cursor(&self) -> &str {
        &self.0.id
    }

    /// The notification.
    async fn node(&self) -> NotificationNode {
        NotificationNode(self.0.clone())
    }
}

/// A page of the viewer's notifications, newest first.
pub struct NotificationConnection {
    items: Vec<Notification>,
    has_next_page: bool,
    after: bool,
}

#[Object]
impl NotificationConnection {
    /// The notifications with their cursors.
    async fn edges(&self) -> Vec<NotificationEdge> {
        self.items.iter().cloned().map(NotificationEdge).collect()
    }

    /// The notifications.
    async fn nodes(&self) -> Vec<NotificationNode> {
        self.items.iter().cloned().map(NotificationNode).collect()
    }

    /// Where this page stands.
    async fn page_info(&self) -> PageInfo {
        PageInfo {
            has_next_page: self.has_next_page,
            has_previous_page: self.after,
            start_cursor: self.items.first().map(|n| n.id.clone()),
            end_cursor: self.items.last().map(|n| n.id.clone()),
        }
    }
}

/// What the viewer asked to be told, and how.
pub struct NotificationSettingsNode {
    settings: domain::NotificationSettings,
    address: Option<String>,
    available: bool,
}

#[Object(name = "NotificationSettings")]
impl NotificationSettingsNode {
    /// How often they are mailed.
    async fn email(&self) -> EmailFrequency {
        self.settings.email.into()
    }

    /// Mail about replies to their comments.
    async fn on_reply(&self) -> bool {
        self.settings.on_reply
    }

    /// Mail about the moderation of their comments.
    async fn on_moderation(&self) -> bool {
        self.settings.on_moderation
    }

    /// Mail about new comments in discussions they follow.
    async fn on_followed(&self) -> bool {
        self.settings.on_followed
    }

    /// The address mail goes to: the latest one a token of theirs carried as verified
    /// (`email` with `email_verified: true`). Shown to its owner only.
    async fn email_address(&self) -> Option<&str> {
        self.address.as_deref()
    }

    /// Whether this server sends mail at all (it has an SMTP server); without it `email` can
    /// only be `NEVER`.
    async fn email_available(&self) -> bool {
        self.available
    }
}

/// What `setNotificationSettings` changes; a field left out keeps its value.
#[derive(InputObject)]
pub struct NotificationSettingsInput {
    /// How often to be mailed.
    pub email: Option<EmailFrequency>,
    /// Mail about replies.
    pub on_reply: Option<bool>,
    /// Mail about moderation.
    pub on_moderation: Option<bool>,
    /// Mail about followed discussions.
    pub on_followed: Option<bool>,
}

/// The signed-in person.
pub struct ViewerNode(Viewer);

#[Object(name = "Viewer")]
impl ViewerNode {
    /// Their id (the token's `sub`).
    async fn id(&self) -> ID {
        ID(self.0.author.id.clone())
    }

    /// Their display name.
    async fn name(&self) -> &str {
        &self.0.author.name
    }

    /// Their roles: `moderator`, `admin`.
    async fn roles(&self) -> Vec<String> {
        let mut roles = Vec::new();
        if self.0.moderator {
            roles.push("moderator".to_owned());
        }
        if self.0.admin {
            roles.push("admin".to_owned());
        }
        roles
    }

    /// The ids of the people they ignore (`ignoreUser`), in the order they were ignored.
    async fn ignored_users(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<ID>> {
        let ids = services(ctx).ignored_by(&self.0.author.id).await.gql()?;
        Ok(ids.iter().cloned().map(ID).collect())
    }

    /// Their notifications, newest first; `unreadOnly` leaves out the read ones.
    async fn notifications(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
        unread_only: Option<bool>,
    ) -> async_graphql::Result<NotificationConnection> {
        let first = page_size(first, ctx.data_unchecked::<Limits>())?;
        if let Some(after) = &after {
            check_id(after, "after")?;
        }
        let mut items = store(ctx)
            .notifications()
            .inbox(
                &self.0.author.id,
                after.as_deref(),
                unread_only.unwrap_or(false),
                first + 1,
            )
            .instrument(tracing::debug_span!("store.inbox"))
            .await
            .gql()?;
        let has_next_page = items.len() > first;
        items.truncate(first);
        Ok(NotificationConnection {
            items,
            has_next_page,
            after: after.is_some(),
        })
    }

    /// How many of their notifications are unread (exact: a count of what is stored).
    async fn unread_notification_count(&self, ctx: &Context<'_>) -> async_graphql::Result<u64> {
        store(ctx)
            .notifications()
            .unread_count(&self.0.author.id)
            .instrument(tracing::debug_span!("store.unreadCount"))
            .await
            .gql()
    }

    /// What they asked to be told, and how.
    async fn notification_settings(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<NotificationSettingsNode> {
        settings_of(ctx, &self.0).await
    }

    /// The discussions they follow, latest followed first.
    async fn following(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<DiscussionConnection> {
        let first = page_size(first, ctx.data_unchecked::<Limits>())?;
        if after.as_ref().is_some_and(|a| a.len() > 64) {
            return Err(DomainError::bad_input("after is not a cursor of this list")).gql();
        }
        let store = store(ctx).notifications();
        let mut follows = store
            .following(&self.0.author.id, after.as_deref(), first + 1)
            .await
            .gql()?;
        let has_next_page = follows.len() > first;
        follows.truncate(first);
        let total = store.following_count(&self.0.author.id).await.gql()?;
        // One batch for the page's discussions; one gone since is left out.
        let ids: Vec<DiscussionId> = follows.iter().map(|(_, id)| id.clone()).collect();
        let mut found = reads(ctx).loader.load_many(ids).await.gql()?;
        let (mut items, mut cursors) = (Vec::new(), Vec::new());
        for (key, id) in follows {
            if let Some(discussion) = found.remove(&id) {
                items.push(discussion);
                cursors.push(key);
            }
        }
        Ok(DiscussionConnection {
            page_info: PageInfo {
                has_next_page,
                has_previous_page: after.is_some(),
                start_cursor: cursors.first().cloned(),
                end_cursor: cursors.last().cloned(),
            },
            items,
            cursors: Some(cursors),
            total: Some(total),
        })
    }
}

/// An id of a notification, or `BAD_USER_INPUT` naming `what`.
fn check_id(id: &str, what: &str) -> async_graphql::Result<()> {
    match id.len() <= 600 && crate::domain::events::is_event_id(id.split(':').next().unwrap_or(""))
    {
        true => Ok(()),
        false => Err(DomainError::bad_input(format!(
            "{what} must be a notification id, not {id:?}"
        )))
        .gql(),
    }
}

/// The viewer's settings as the API shows them.
async fn settings_of(
    ctx: &Context<'_>,
    viewer: &Viewer,
) -> async_graphql::Result<NotificationSettingsNode> {
    let services = services(ctx);
    let person = store(ctx)
        .notifications()
        .person(&viewer.author.id)
        .await
        .gql()?;
    let rules = services.mail_rules();
    let settings = person
        .as_ref()
        .and_then(|p| p.settings)
        .unwrap_or_else(|| domain::NotificationSettings::defaults(rules.default));
    Ok(NotificationSettingsNode {
        settings,
        address: person
            .and_then(|p| p.address)
            .or_else(|| viewer.email.clone()),
        available: rules.enabled,
    })
}

/// The signed-in viewer, or `UNAUTHENTICATED`.
pub(super) fn signed_in<'a>(ctx: &Context<'a>) -> async_graphql::Result<&'a Viewer> {
    match auth(ctx) {
        AuthState::Authenticated(viewer) => Ok(viewer),
        AuthState::Rejected(why) => Err(DomainError::Unauthenticated(why.clone())).gql(),
        AuthState::Anonymous => Err(DomainError::Unauthenticated(
            "this needs a signed-in user: send `Authorization: Bearer <token>`".into(),
        ))
        .gql(),
    }
}

/// Keeps the viewer's verified address (one write the first time this process sees it).
async fn remember(ctx: &Context<'_>, viewer: &Viewer) -> async_graphql::Result<()> {
    if let Some(address) = &viewer.email {
        services(ctx)
            .remember_address(&viewer.author.id, address)
            .await
            .gql()?;
    }
    Ok(())
}

/// The viewer's reads; merged into [`super::Query`].
#[derive(Default)]
pub struct InboxQuery;

#[Object]
impl InboxQuery {
    /// The signed-in person: their notifications, settings and follows (null without a token).
    async fn viewer(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<ViewerNode>> {
        match auth(ctx) {
            AuthState::Authenticated(viewer) => {
                remember(ctx, viewer).await?;
                Ok(Some(ViewerNode(viewer.clone())))
            }
            AuthState::Anonymous => Ok(None),
            AuthState::Rejected(why) => Err(DomainError::Unauthenticated(why.clone())).gql(),
        }
    }
}

/// The viewer's changes; merged into [`super::Mutation`].
#[derive(Default)]
pub struct InboxMutation;

#[Object]
impl InboxMutation {
    /// Marks the viewer's notifications read: every one up to `upTo` (by id, newer ones stay
    /// unread), or all of them. Returns how many changed.
    async fn mark_notifications_read(
        &self,
        ctx: &Context<'_>,
        up_to: Option<ID>,
    ) -> async_graphql::Result<u64> {
        let viewer = signed_in(ctx)?;
        if let Some(id) = &up_to {
            check_id(id, "upTo")?;
        }
        services(ctx)
            .mark_notifications_read(&viewer.author, up_to.as_ref().map(|id| id.as_str()))
            .await
            .gql()
    }

    /// Follows (or stops following) a discussion: a follower is notified of every new public
    /// comment in it.
    async fn follow_discussion(
        &self,
        ctx: &Context<'_>,
        discussion_id: ID,
        follow: bool,
    ) -> async_graphql::Result<DiscussionNode> {
        let viewer = signed_in(ctx)?;
        let id = DiscussionId::parse(&discussion_id).gql()?;
        remember(ctx, viewer).await?;
        let discussion = services(ctx)
            .follow_discussion(&viewer.author, id, follow)
            .await
            .gql()?;
        Ok(DiscussionNode(discussion))
    }

    /// Changes what the viewer is told, and how. Mail needs a verified address (from the
    /// token) and a server that sends mail.
    async fn set_notification_settings(
        &self,
        ctx: &Context<'_>,
        input: NotificationSettingsInput,
    ) -> async_graphql::Result<NotificationSettingsNode> {
        let viewer = signed_in(ctx)?;
        remember(ctx, viewer).await?;
        let services = services(ctx);
        let mut settings = services.notification_settings(&viewer.author).await.gql()?;
        if let Some(email) = input.email {
            settings.email = email.into();
        }
        settings.on_reply = input.on_reply.unwrap_or(settings.on_reply);
        settings.on_moderation = input.on_moderation.unwrap_or(settings.on_moderation);
        settings.on_followed = input.on_followed.unwrap_or(settings.on_followed);
        services
            .set_notification_settings(&viewer.author, settings)
            .await
            .gql()?;
        settings_of(ctx, viewer).await
    }
}

/// The signed-in viewer's notifications from now on (`UNAUTHENTICATED` without a token).
pub(crate) fn received(
    ctx: &Context<'_>,
) -> async_graphql::Result<futures::stream::BoxStream<'static, NotificationNode>> {
    use futures::StreamExt as _;
    let viewer = signed_in(ctx)?;
    Ok(services(ctx)
        .notifications_received(&viewer.author.id)
        .map(NotificationNode)
        .boxed())
}
