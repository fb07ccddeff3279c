//! Webhook endpoints and their deliveries, for admins: the types, `webhookEndpoints`, and the
//! writes. Each write checks its caller (an admin) and calls one service workflow.

use std::time::Duration;

use async_graphql::{Context, Enum, InputObject, Object, ID};
use chrono::{DateTime, Utc};

use super::error::OrGql;
use super::events::{admin_reading, page_size, EventType};
use super::mutation::administrator;
use super::{services, store, Limits};
use crate::domain::webhooks::{Delivery, Endpoint, EndpointPatch};
use crate::domain::DomainError;
use crate::service::NewEndpoint;

/// How a delivery stands.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(remote = "crate::domain::webhooks::DeliveryStatus")]
pub enum WebhookDeliveryStatus {
    /// Not answered with a 2xx yet; attempts are left.
    Pending,
    /// Answered with a 2xx.
    Succeeded,
    /// Every attempt failed, or its endpoint was disabled.
    Failed,
}

/// Where events are delivered.
pub struct WebhookEndpointNode(pub Endpoint);

#[Object(name = "WebhookEndpoint")]
impl WebhookEndpointNode {
    /// Its id.
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }

    /// The URL deliveries are POSTed to.
    async fn url(&self) -> &str {
        &self.0.url
    }

    /// The kinds it gets; null: every kind.
    async fn events(&self) -> Option<Vec<EventType>> {
        self.0
            .events
            .as_ref()
            .map(|kinds| kinds.iter().map(|k| (*k).into()).collect())
    }

    /// What it is for.
    async fn description(&self) -> Option<&str> {
        self.0.description.as_deref()
    }

    /// Whether it gets deliveries.
    async fn enabled(&self) -> bool {
        self.0.enabled
    }

    /// Why it was disabled: a 410 answer, or every attempt failing for
    /// `THREADQL_WEBHOOK_DISABLE_AFTER_SECS`.
    async fn disabled_reason(&self) -> Option<&str> {
        self.0.disabled_reason.as_deref()
    }

    /// When it was created: it gets the events committed from then on.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created.to_datetime()
    }

    /// Its deliveries in event order, with `status` when given.
    async fn deliveries(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
        status: Option<WebhookDeliveryStatus>,
    ) -> async_graphql::Result<WebhookDeliveryConnection> {
        let limits = ctx.data_unchecked::<Limits>();
        let first = page_size(first, limits)?;
        let mut found = store(ctx)
            .webhooks()
            .deliveries_of(
                &self.0.id,
                after.as_deref(),
                status.map(Into::into),
                first + 1,
            )
            .await
            .gql()?;
        let has_next_page = found.len() > first;
        found.truncate(first);
        Ok(WebhookDeliveryConnection {
            deliveries: found,
            has_next_page,
        })
    }
}

/// One event to one endpoint, with its attempts.
pub struct WebhookDeliveryNode(pub Delivery);

#[Object(name = "WebhookDelivery")]
impl WebhookDeliveryNode {
    /// Its id (pass it to `redeliverWebhook`).
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }

    /// The event: its id is the `webhook-id` of every attempt.
    async fn event_id(&self) -> ID {
        ID(self.0.event.clone())
    }

    /// The event's kind.
    async fn event_type(&self) -> EventType {
        self.0.kind.into()
    }

    /// How it stands.
    async fn status(&self) -> WebhookDeliveryStatus {
        self.0.status.into()
    }

    /// Attempts made.
    async fn attempts(&self) -> u32 {
        self.0.attempts
    }

    /// When the last attempt was made.
    async fn last_attempt_at(&self) -> Option<DateTime<Utc>> {
        self.0.last_attempt_at.map(|at| at.to_datetime())
    }

    /// The status the last attempt was answered with.
    async fn last_response_status(&self) -> Option<u16> {
        self.0.last_status
    }

    /// Why the last attempt failed.
    async fn last_error(&self) -> Option<&str> {
        self.0.last_error.as_deref()
    }

    /// The first 4 KiB of the last answer's body.
    async fn last_response_body(&self) -> Option<&str> {
        self.0.last_body.as_deref()
    }

    /// When the next attempt is due (while pending).
    async fn next_attempt_at(&self) -> Option<DateTime<Utc>> {
        self.0.next_at.map(|at| at.to_datetime())
    }
}

/// A page of an endpoint's deliveries.
pub struct WebhookDeliveryConnection {
    deliveries: Vec<Delivery>,
    has_next_page: bool,
}

#[Object]
impl WebhookDeliveryConnection {
    /// The deliveries.
    async fn nodes(&self) -> Vec<WebhookDeliveryNode> {
        self.deliveries
            .iter()
            .cloned()
            .map(WebhookDeliveryNode)
            .collect()
    }

    /// Whether more follow.
    async fn has_next_page(&self) -> bool {
        self.has_next_page
    }

    /// Pass it as `after` for the next page.
    async fn end_cursor(&self) -> Option<&str> {
        self.deliveries.last().map(|d| d.id.as_str())
    }
}

/// A new endpoint and its secret, shown this once.
pub struct CreatedWebhookEndpoint {
    endpoint: Endpoint,
    secret: String,
}

#[Object]
impl CreatedWebhookEndpoint {
    /// The endpoint.
    async fn endpoint(&self) -> WebhookEndpointNode {
        WebhookEndpointNode(self.endpoint.clone())
    }

    /// The secret deliveries are signed with (`whsec_…`): shown this once, never again.
    async fn secret(&self) -> &str {
        &self.secret
    }
}

/// A new endpoint.
#[derive(InputObject)]
pub struct CreateWebhookEndpointInput {
    /// Where deliveries go: `https` (with `THREADQL_WEBHOOK_ALLOW_INSECURE`, `http` and private
    /// addresses too).
    pub url: String,
    /// The kinds it gets; leave it out for every kind.
    pub events: Option<Vec<EventType>>,
    /// What it is for (at most 500 characters).
    pub description: Option<String>,
}

/// What changes in an endpoint (a field left out stays).
#[derive(InputObject)]
pub struct UpdateWebhookEndpointInput {
    /// A new URL.
    pub url: Option<String>,
    /// New kinds.
    pub events: Option<Vec<EventType>>,
    /// A new description.
    pub description: Option<String>,
    /// Enabled or disabled (enabling clears `disabledReason`).
    pub enabled: Option<bool>,
}

/// The webhook reads; merged into [`super::Query`].
#[derive(Default)]
pub struct WebhookQuery;

#[Object]
impl WebhookQuery {
    /// Every webhook endpoint, oldest first (their secrets are never shown again). Admins only.
    async fn webhook_endpoints(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<Vec<WebhookEndpointNode>>> {
        admin_reading(ctx, "the webhook endpoints")?;
        let all = store(ctx).webhooks().endpoints().await.gql()?;
        Ok(Some(all.into_iter().map(WebhookEndpointNode).collect()))
    }
}

/// The webhook writes; merged into [`super::Mutation`].
#[derive(Default)]
pub struct WebhookMutation;

#[Object]
impl WebhookMutation {
    /// Creates an endpoint that gets the events committed from now on; its secret is in the
    /// answer, and never shown again. Admins only.
    async fn create_webhook_endpoint(
        &self,
        ctx: &Context<'_>,
        input: CreateWebhookEndpointInput,
    ) -> async_graphql::Result<Option<CreatedWebhookEndpoint>> {
        let caller = administrator(ctx).await?;
        let new = NewEndpoint {
            url: input.url,
            events: kinds(input.events),
            description: input.description,
        };
        let (endpoint, secret) = services(ctx).create_endpoint(&caller, new).await.gql()?;
        Ok(Some(CreatedWebhookEndpoint { endpoint, secret }))
    }

    /// Changes an endpoint. Admins only.
    async fn update_webhook_endpoint(
        &self,
        ctx: &Context<'_>,
        id: ID,
        input: UpdateWebhookEndpointInput,
    ) -> async_graphql::Result<Option<WebhookEndpointNode>> {
        let caller = administrator(ctx).await?;
        let patch = EndpointPatch {
            url: input.url,
            events: input.events.map(|k| kinds(Some(k))),
            description: input.description.map(Some),
            enabled: input.enabled,
        };
        let endpoint = services(ctx)
            .update_endpoint(&caller, id.as_str(), patch)
            .await
            .gql()?;
        Ok(Some(WebhookEndpointNode(endpoint)))
    }

    /// Deletes an endpoint and its pending deliveries: true when there was one. Admins only.
    async fn delete_webhook_endpoint(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> async_graphql::Result<Option<bool>> {
        let caller = administrator(ctx).await?;
        let deleted = services(ctx)
            .delete_endpoint(&caller, id.as_str())
            .await
            .gql()?;
        Ok(Some(deleted))
    }

    /// Gives an endpoint a new secret (returned this once); the old ones sign on for
    /// `overlapSeconds` (0 to 604 800), so every delivery meanwhile carries both signatures.
    /// Admins only.
    async fn rotate_webhook_secret(
        &self,
        ctx: &Context<'_>,
        id: ID,
        #[graphql(default = 86400)] overlap_seconds: i32,
    ) -> async_graphql::Result<Option<String>> {
        let caller = administrator(ctx).await?;
        let overlap = u64::try_from(overlap_seconds).map_err(|_| {
            DomainError::bad_input(format!(
                "overlapSeconds must be 0 or more, not {overlap_seconds}"
            ))
        });
        let overlap = Duration::from_secs(overlap.gql()?);
        let secret = services(ctx)
            .rotate_secret(&caller, id.as_str(), overlap)
            .await
            .gql()?;
        Ok(Some(secret))
    }

    /// Sends a delivery again now, with the same `webhook-id`. Admins only.
    async fn redeliver_webhook(
        &self,
        ctx: &Context<'_>,
        delivery_id: ID,
    ) -> async_graphql::Result<Option<WebhookDeliveryNode>> {
        let caller = administrator(ctx).await?;
        let delivery = services(ctx)
            .redeliver(&caller, delivery_id.as_str())
            .await
            .gql()?;
        Ok(Some(WebhookDeliveryNode(delivery)))
    }
}

fn kinds(events: Option<Vec<EventType>>) -> Option<Vec<crate::domain::EventType>> {
    events.map(|kinds| kinds.into_iter().map(Into::into).collect())
}
