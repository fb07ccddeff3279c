//! A guest's post in the API: what a guest sends with `postComment`, and the answer, in which
//! a post caught by the honeypot looks like one that was taken.

use async_graphql::{Context, InputObject};

use super::error::OrGql;
use super::services;
use super::types::CommentNode;
use crate::domain::{ClientAddress, CommentStatus};
use crate::service::{GuestPost, GuestPosted, NewPost, Posted};

/// Who a guest says they are, and what makes their post cost them something.
#[derive(InputObject)]
pub(super) struct GuestInput {
    /// The name shown with the comment (1–64 visible characters). A name a signed-in user
    /// posted under on this server is refused, in any case or width.
    pub name: String,
    /// An e-mail address: shown to moderators only, never published. Guests who give the same
    /// address share one author id.
    pub email: Option<String>,
    /// A website (`http` or `https`): shown to moderators only.
    pub website: Option<String>,
    /// ALTCHA's payload (base64 JSON) answering a `guestChallenge`; each is accepted once.
    pub proof: String,
    /// The honeypot field a client renders where people never see it: leave it empty.
    pub trap: Option<String>,
}

/// Posts `post` as the guest `guest`: the request must carry no token.
pub(super) async fn post(
    ctx: &Context<'_>,
    post: NewPost,
    guest: GuestInput,
) -> async_graphql::Result<CommentNode> {
    let address = ctx
        .data_opt::<ClientAddress>()
        .cloned()
        .unwrap_or(ClientAddress::Other("unknown".into()));
    let guest = GuestPost {
        name: guest.name,
        email: guest.email,
        website: guest.website,
        proof: guest.proof,
        trap: guest.trap,
        address,
    };
    let GuestPosted {
        posted,
        token,
        trapped,
        policy,
    } = services(ctx).post_as_guest(guest, post).await.gql()?;
    let mut node = match posted {
        Posted::Published {
            discussion,
            comment,
        } => CommentNode::new(discussion, comment),
        Posted::Held { discussion, held } => CommentNode::held(discussion, held),
    };
    // Caught by the honeypot: answered as the policy would have it, so the bot learns nothing.
    if trapped {
        let status = match policy {
            crate::domain::GuestPolicy::Pre => CommentStatus::Pending,
            _ => CommentStatus::Approved,
        };
        std::sync::Arc::make_mut(&mut node.comment).standing =
            crate::domain::Standing::default().set(status, None);
        node.held = status != CommentStatus::Approved;
    }
    node.guest_token = Some(token);
    Ok(node)
}
