//! Guests in the API: the policy and proof-of-work challenge anyone may read, and the
//! moderators' guest settings and network bans (a guest's post is in `guest_post.rs`).

use async_graphql::{Context, Object, SimpleObject, ID};
use chrono::{DateTime, Utc};

use super::error::OrGql;
use super::mutation::moderator;
use super::services;
use super::types::{DiscussionNode, GuestPolicy};
use crate::domain::{Cidr, DiscussionId, NetworkBan, Reason};

/// A proof-of-work challenge, in ALTCHA's format: find the `number` (0 to `maxnumber`) with
/// hex(SHA-256(`salt` + `number`)) = `challenge`, and send ALTCHA's payload as the guest's
/// `proof`.
#[derive(SimpleObject)]
pub(super) struct GuestChallenge {
    /// Always `SHA-256`.
    pub algorithm: String,
    /// hex(SHA-256(salt + number)).
    pub challenge: String,
    /// Random hex and `?expires=<unix seconds>` (10 minutes from now).
    pub salt: String,
    /// The server's signature of the challenge.
    pub signature: String,
    /// The largest the number may be.
    pub maxnumber: u64,
}

/// A network banned from guest posting.
pub(super) struct NetworkBanNode(pub NetworkBan);

#[Object(name = "NetworkBan")]
impl NetworkBanNode {
    /// The network, in CIDR notation.
    async fn cidr(&self) -> String {
        self.0.network.to_string()
    }

    /// When it ends; null: when lifted.
    async fn until(&self) -> Option<DateTime<Utc>> {
        self.0.until.map(|u| u.to_datetime())
    }

    /// Why, as the moderator wrote it.
    async fn reason(&self) -> Option<&str> {
        self.0.reason.as_ref().map(|r| r.as_str())
    }

    /// When it was made.
    async fn at(&self) -> DateTime<Utc> {
        self.0.at.to_datetime()
    }
}

/// What anyone may read about guests; merged into [`super::Query`].
#[derive(Default)]
pub(super) struct GuestQuery;

#[Object]
impl GuestQuery {
    /// Whether discussions take comments from people without an account where no moderator
    /// set it (`THREADQL_GUESTS`); each discussion's own is `Discussion.guests`.
    async fn guest_policy(&self, ctx: &Context<'_>) -> GuestPolicy {
        services(ctx).default_guest_policy().into()
    }

    /// A new proof-of-work challenge for a guest's post (also at `GET /guest/challenge`, for
    /// ALTCHA's widget). Nothing is stored until a proof comes back.
    async fn guest_challenge(&self, ctx: &Context<'_>) -> GuestChallenge {
        // A new one each time: an answer holding it is never kept whole.
        crate::store::untracked_read();
        let challenge = services(ctx).guest_challenge();
        GuestChallenge {
            algorithm: challenge.algorithm.to_owned(),
            challenge: challenge.challenge,
            salt: challenge.salt,
            signature: challenge.signature,
            maxnumber: challenge.max_number,
        }
    }

    /// The networks banned from guest posting, newest first (bans that ended are left out).
    /// Moderators only.
    async fn network_bans(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<Vec<NetworkBanNode>>> {
        let caller = moderator(ctx).await?;
        let bans = services(ctx).network_bans(&caller).await.gql()?;
        Ok(Some(bans.into_iter().map(NetworkBanNode).collect()))
    }
}

/// The moderators' guest settings; merged into [`super::Mutation`].
#[derive(Default)]
pub(super) struct GuestMutation;

#[Object]
impl GuestMutation {
    /// Sets whether a discussion takes comments from people without an account (`OFF`, `PRE`,
    /// `POST`); null follows the server's default again. Recorded in the moderation log.
    /// Moderators only.
    async fn set_guest_policy(
        &self,
        ctx: &Context<'_>,
        id: ID,
        policy: Option<GuestPolicy>,
    ) -> async_graphql::Result<Option<DiscussionNode>> {
        let caller = moderator(ctx).await?;
        let id = DiscussionId::parse(&id).gql()?;
        let discussion = services(ctx)
            .set_guest_policy(&caller, id, policy.map(Into::into))
            .await
            .gql()?;
        super::mutation::forget_reads(ctx);
        Ok(Some(DiscussionNode(discussion.into())))
    }

    /// Bans a network from guest posting: a `cidr` such as `203.0.113.0/24` (IPv4, /8 to /32)
    /// or `2001:db8::/32` (IPv6, /16 to /64), until `until` (null: until lifted), with an
    /// optional `reason` guests are told. Banning a banned network replaces its ban. Signed-in
    /// users of the network are not affected. Recorded in the moderation log. Moderators only.
    async fn ban_network(
        &self,
        ctx: &Context<'_>,
        cidr: String,
        until: Option<DateTime<Utc>>,
        reason: Option<String>,
    ) -> async_graphql::Result<Option<NetworkBanNode>> {
        let caller = moderator(ctx).await?;
        let network = Cidr::parse(&cidr).gql()?;
        let reason = reason.as_deref().map(Reason::parse).transpose().gql()?;
        let ban = services(ctx)
            .ban_network(&caller, network, until, reason)
            .await
            .gql()?;
        Ok(Some(NetworkBanNode(ban)))
    }

    /// Lifts a network's ban (written as it was banned): true when one was in force, false
    /// otherwise, which changes nothing. Recorded in the moderation log. Moderators only.
    async fn unban_network(
        &self,
        ctx: &Context<'_>,
        cidr: String,
    ) -> async_graphql::Result<Option<bool>> {
        let caller = moderator(ctx).await?;
        let network = Cidr::parse(&cidr).gql()?;
        let lifted = services(ctx).unban_network(&caller, network).await.gql()?;
        Ok(Some(lifted))
    }
}
