//! The Subscription root: comments posted and changed in a discussion, live.

use std::sync::Arc;

use async_graphql::{Context, Object, Subscription as GqlSubscription, ID};
use futures::{Stream, StreamExt};
use tokio::sync::broadcast::{self, error::RecvError};

use super::error::{gql, OrGql};
use super::events::EventType;
use super::live::{Event, Live};
use super::query::{load_discussion, moderator_reading};
use super::shared::Ready;
use super::types::{CommentNode, ModerationQueue};
use super::RequestReads;
use crate::domain::{DiscussionId, DomainError};
use crate::service::{QueueChange, QueueNews};
use crate::store::ChangeKind;

/// Live updates.
pub struct Subscription;

#[GqlSubscription]
impl Subscription {
    /// Every comment posted to the discussion from now on (replies included), as it is
    /// posted. An event with `EVENTS_MISSED` says some were missed: read the discussion again.
    async fn comment_posted<'ctx>(
        &self,
        ctx: &Context<'ctx>,
        discussion_id: ID,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<CommentNode>> + 'ctx> {
        follow(ctx, &discussion_id, ChangeKind::Posted).await
    }

    /// Every comment of the discussion edited or deleted from now on, as it is afterwards.
    /// An event with `EVENTS_MISSED` says some were missed: read the discussion again.
    async fn comment_changed<'ctx>(
        &self,
        ctx: &Context<'ctx>,
        discussion_id: ID,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<CommentNode>> + 'ctx> {
        follow(ctx, &discussion_id, ChangeKind::Changed).await
    }

    /// The signed-in viewer's notifications from now on, as they are made (on any replica).
    async fn notification_received<'ctx>(
        &self,
        ctx: &Context<'ctx>,
    ) -> async_graphql::Result<impl Stream<Item = super::inbox::NotificationNode> + 'ctx> {
        let received = super::inbox::received(ctx)?;
        if let Some(ready) = ctx.data_opt::<Ready>() {
            ready.mark();
        }
        Ok(received)
    }

    /// Every change of the moderators' queues from now on (in `discussionId`'s, or all): a
    /// comment held, reported, rejected, approved or deleted, with the queue it waits in now,
    /// as it is committed on any replica. An event with `EVENTS_MISSED` says some were
    /// missed: read the queues again. Moderators only.
    async fn moderation_queue_changed<'ctx>(
        &self,
        ctx: &Context<'ctx>,
        discussion_id: Option<ID>,
    ) -> async_graphql::Result<
        impl Stream<Item = async_graphql::Result<ModerationQueueChange>> + 'ctx,
    > {
        moderator_reading(ctx, "the moderation queues")?;
        let discussion = discussion_id
            .as_deref()
            .map(|id| DiscussionId::parse(id))
            .transpose()
            .gql()?;
        let changes = super::services(ctx).queue_changes(discussion);
        if let Some(ready) = ctx.data_opt::<Ready>() {
            ready.mark();
        }
        Ok(changes.map(|news| match news {
            QueueNews::Changed(change) => Ok(ModerationQueueChange(change)),
            QueueNews::Missed(missed) => Err(gql(DomainError::EventsMissed(format!(
                "this subscription fell behind and missed {missed} queue changes"
            )))),
        }))
    }
}

/// A comment that entered a moderators' queue, moved between queues or left them.
pub(super) struct ModerationQueueChange(QueueChange);

#[Object]
impl ModerationQueueChange {
    /// The comment's discussion.
    async fn discussion_id(&self) -> ID {
        ID(self.0.discussion.to_string())
    }

    /// The comment.
    async fn slug(&self) -> &str {
        self.0.slug.as_str()
    }

    /// The queue it waits in now; null when it waits in none (approved, or deleted).
    async fn queue(&self) -> Option<ModerationQueue> {
        self.0.queue.map(Into::into)
    }

    /// What happened to it.
    async fn event(&self) -> EventType {
        self.0.event.into()
    }
}

/// The comments of one kind of change in a discussion (`NOT_FOUND` for an unknown discussion).
async fn follow<'ctx>(
    ctx: &Context<'ctx>,
    discussion_id: &str,
    kind: ChangeKind,
) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<CommentNode>> + 'ctx> {
    let discussion = load_discussion(ctx, discussion_id).await?;
    let receiver = ctx
        .data_unchecked::<Arc<Live>>()
        .subscribe(&discussion.id)
        .await
        .gql()?;
    // Subscribers that share this run count as in place from now on.
    if let Some(ready) = ctx.data_opt::<Ready>() {
        ready.mark();
    }
    let reads = ctx.data_unchecked::<RequestReads>();
    Ok(events(receiver).filter_map(move |event| {
        let node = match event {
            Event::Comment {
                kind: happened,
                discussion,
                comment,
            } if happened == kind => {
                // Fields below the comment read the store as it is now, not as it was at the
                // last event.
                reads.invalidate();
                Some(Ok(CommentNode::new(discussion, comment)))
            }
            Event::Comment { .. } => None,
            Event::Missed(why) => Some(Err(gql(DomainError::EventsMissed(why)))),
        };
        futures::future::ready(node)
    }))
}

/// A receiver as a stream; falling behind is reported as missed changes.
fn events(receiver: broadcast::Receiver<Event>) -> impl Stream<Item = Event> {
    futures::stream::unfold(receiver, |mut receiver| async move {
        match receiver.recv().await {
            Ok(event) => Some((event, receiver)),
            Err(RecvError::Lagged(missed)) => {
                let why = format!("this subscription fell behind and missed {missed} changes");
                Some((Event::Missed(why), receiver))
            }
            Err(RecvError::Closed) => None,
        }
    })
}
