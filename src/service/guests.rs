//! Guest posting: a post from someone without an account is the post workflow with a guest
//! caller, after checks that make a spammer pay and cost the server nothing until they have:
//! the proof of work is checked first (CPU only), then the network's limits (memory only), and
//! the proof is spent before any other database command.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{acted, Allowance, Caller, NewPost, Posted, Services, Told};
use crate::config::RateLimit;
use crate::domain::guest_posts::links_in;
use crate::domain::proof::{Challenge, Proofs};
use crate::domain::{
    check_identity, Author, Cidr, ClientAddress, CommentStatus, Discussion, DiscussionId,
    DomainError, Event, GuestDetails, GuestIdentity, GuestKeys, GuestPolicy, GuestTicket, Micros,
    NetworkBan, Reason, ServerKey, Slug, Standing,
};
use crate::rate::{retry_after_secs, Limiter};

/// The reason a comment caught by the honeypot is rejected with.
pub const HONEYPOT: &str = "honeypot";

/// How guests post on this server, from config.
#[derive(Debug, Clone)]
pub struct GuestRules {
    /// The policy of discussions where no moderator set one.
    pub policy: GuestPolicy,
    /// The largest secret number of a proof of work.
    pub pow_max_number: u64,
    /// Guest posts per network.
    pub rate: RateLimit,
    /// More links than this hold a guest comment.
    pub max_links: u64,
    /// Replies per network to one comment in an hour.
    pub max_direct_replies: u32,
}

impl Default for GuestRules {
    fn default() -> Self {
        Self {
            policy: GuestPolicy::Off,
            pow_max_number: 100_000,
            rate: RateLimit::Every {
                count: 2,
                per: std::time::Duration::from_secs(60),
            },
            max_links: 2,
            max_direct_replies: 3,
        }
    }
}

impl From<&crate::config::GuestSettings> for GuestRules {
    fn from(settings: &crate::config::GuestSettings) -> Self {
        Self {
            policy: settings.policy.into(),
            pow_max_number: settings.pow_max_number,
            rate: settings.rate_limit,
            max_links: settings.max_links,
            max_direct_replies: settings.max_direct_replies,
        }
    }
}

/// What guest posting needs at run time: the rules, the keys, the limits' state.
#[derive(Clone)]
pub(super) struct Guests {
    rules: GuestRules,
    proofs: Proofs,
    keys: GuestKeys,
    networks: Arc<Limiter<String>>,
    replies: Arc<Limiter<String>>,
}

impl Guests {
    pub(super) fn new(rules: GuestRules, key: &ServerKey) -> Self {
        let replies = RateLimit::Every {
            count: rules.max_direct_replies,
            per: std::time::Duration::from_secs(3_600),
        };
        Self {
            proofs: Proofs::new(
                key,
                rules.pow_max_number,
                crate::domain::proof::DEFAULT_TTL_SECS,
            ),
            keys: GuestKeys::new(key),
            networks: Arc::new(Limiter::new(rules.rate)),
            replies: Arc::new(Limiter::new(replies)),
            rules,
        }
    }
}

/// What a guest sends with a post.
#[derive(Debug, Clone)]
pub struct GuestPost {
    /// Their name.
    pub name: String,
    /// Their e-mail address, if they gave one.
    pub email: Option<String>,
    /// Their website, if they gave one.
    pub website: Option<String>,
    /// ALTCHA's payload for a challenge of ours.
    pub proof: String,
    /// The honeypot field: people leave it empty.
    pub trap: Option<String>,
    /// Where the request came from.
    pub address: ClientAddress,
}

/// What a guest's post became.
#[derive(Debug)]
pub struct GuestPosted {
    /// The comment, published or held.
    pub posted: Posted,
    /// The token that lets the guest edit or delete it.
    pub token: String,
    /// Whether the honeypot caught it: the answer must look like what the policy would give.
    pub trapped: bool,
    /// The policy it was posted under.
    pub policy: GuestPolicy,
}

impl Services {
    /// The same services, with guests posting as `rules` say, under `key`'s sub-keys.
    pub fn with_guests(self, rules: GuestRules, key: &ServerKey) -> Self {
        Self {
            guests: Guests::new(rules, key),
            ..self
        }
    }

    /// The guest policy of discussions where no moderator set one.
    pub fn default_guest_policy(&self) -> GuestPolicy {
        self.guests.rules.policy
    }

    /// The guest policy that applies to `discussion`.
    pub fn guest_policy(&self, discussion: &Discussion) -> GuestPolicy {
        discussion.guests.unwrap_or(self.guests.rules.policy)
    }

    /// A new proof-of-work challenge (nothing is stored).
    pub fn guest_challenge(&self) -> Challenge {
        self.guests.proofs.challenge(Micros::now().0 / 1_000_000)
    }

    /// Posts a guest's comment, in this order: the identity and the text are checked, then
    /// the proof (CPU only), then the network's rate (memory only); then the proof is spent
    /// (a replay is refused on every replica), and only then is the database read: the
    /// network's bans, the discussion's policy (`FORBIDDEN` when off), the direct-reply limit,
    /// the name (a signed-in user's is refused), the guest id's ban. A non-empty `trap` stores
    /// the comment rejected (reason "honeypot") and answers as if it were taken; more links
    /// than allowed, or the `pre` policy, hold it.
    pub async fn post_as_guest(
        &self,
        guest: GuestPost,
        post: NewPost,
    ) -> Result<GuestPosted, DomainError> {
        let rules = &self.guests;
        let identity = GuestIdentity::parse(
            &guest.name,
            guest.email.as_deref(),
            guest.website.as_deref(),
        )?;
        let id = rules.keys.id(&identity);
        check_identity(&id, identity.name.as_str())?;
        if let Some(refusal) = self.name_refusal(identity.name.as_str()) {
            return Err(DomainError::bad_input(
                refusal.replace("the token's `name`", "the name"),
            ));
        }
        // The text is checked before the proof is spent (rendered once the caller is known).
        self.text(&post.text)?;
        let now = Micros::now();
        let proven = rules.proofs.check(&guest.proof, now.0 / 1_000_000)?;
        let network = guest.address.network();
        if let Err(wait) = rules.networks.check(&network.to_string()) {
            let secs = retry_after_secs(wait);
            return Err(DomainError::RateLimited {
                message: format!(
                    "too many guest comments from this network: try again in {secs} s"
                ),
                retry_after_secs: secs,
            });
        }
        let guests = self.storage.guests();
        if !guests
            .spend_proof(&proven.challenge, proven.expires)
            .await?
        {
            return Err(DomainError::bad_input(
                "this proof of work was used already: solve a new challenge (guestChallenge)",
            ));
        }
        let bans = guests.network_bans().await?;
        if let Some(ban) = bans.iter().find(|b| b.applies(&guest.address, now)) {
            return Err(ban.refusal());
        }
        let discussion = self.read_discussion(&post.discussion).await?;
        let policy = self.guest_policy(&discussion);
        if policy == GuestPolicy::Off {
            return Err(DomainError::Forbidden(format!(
                "discussion {} takes no guest comments: sign in to comment",
                discussion.id
            )));
        }
        if let Some(parent) = &post.parent {
            let key = format!("{network} {} {parent}", discussion.id);
            if let Err(wait) = rules.replies.check(&key) {
                let secs = retry_after_secs(wait);
                return Err(DomainError::RateLimited {
                    message: format!(
                        "too many guest replies to comment {parent} from this network: try again in {secs} s"
                    ),
                    retry_after_secs: secs,
                });
            }
        }
        if guests.name_taken(&identity.name_key()).await? {
            return Err(DomainError::bad_input(format!(
                "the name {:?} belongs to a signed-in user here: choose another name, or sign in",
                identity.name.as_str()
            )));
        }
        let author = Author {
            id: id.clone(),
            name: identity.name.as_str().to_owned(),
        };
        let caller = self
            .caller(&author, (false, false), Allowance::Changes)
            .await?;
        let details = GuestDetails {
            email: identity.email.clone(),
            website: identity.website.clone(),
            network,
            at: now,
        };
        guests.keep_details(&id, &details).await?;
        let trapped = guest.trap.as_deref().is_some_and(|t| !t.trim().is_empty());
        let new = self.new_comment(&caller, &post).await?;
        let links = u64::try_from(links_in(&new.html)).unwrap_or(u64::MAX);
        let pending = |why: Option<String>| Standing::default().set(CommentStatus::Pending, why);
        let forced = if trapped {
            Some(Standing::default().set(CommentStatus::Rejected, Some(HONEYPOT.to_owned())))
        } else if links > rules.rules.max_links {
            Some(pending(Some(format!(
                "a guest comment with {links} links (more than {})",
                rules.rules.max_links
            ))))
        } else if policy == GuestPolicy::Pre {
            Some(pending(None))
        } else {
            None
        };
        let posted = self
            .post_in(&caller, &post.discussion, new, forced, Some(discussion))
            .await?;
        let (discussion, slug) = match &posted {
            Posted::Published {
                discussion,
                comment,
            } => (discussion.id.clone(), comment.slug.clone()),
            Posted::Held { discussion, held } => (discussion.id.clone(), held.comment.slug.clone()),
        };
        let token = rules.keys.token(&GuestTicket {
            discussion,
            slug,
            guest: id,
            name: author.name,
        });
        Ok(GuestPosted {
            posted,
            token,
            trapped,
            policy,
        })
    }

    /// The caller a guest token makes for a change of the comment `slug` of `discussion`:
    /// `FORBIDDEN` unless it is that comment's token; checked as every caller is (a ban of the
    /// guest id, the rate per author). The edit window bounds what the guest may do.
    pub async fn guest_caller(
        &self,
        token: &str,
        discussion: &DiscussionId,
        slug: &Slug,
    ) -> Result<Caller, DomainError> {
        let ticket = self.guests.keys.check(token, discussion, slug)?;
        let author = Author {
            id: ticket.guest,
            name: ticket.name,
        };
        self.caller(&author, (false, false), Allowance::Changes)
            .await
    }

    /// Sets whether a discussion takes guests' comments (`None`: the server's default).
    /// Moderators only; logged.
    pub async fn set_guest_policy(
        &self,
        caller: &Caller,
        id: DiscussionId,
        policy: Option<GuestPolicy>,
    ) -> Result<Discussion, DomainError> {
        caller.must_moderate()?;
        let storage = self.storage.clone();
        let acted = acted(caller);
        let write = async move {
            let events = vec![Event::GuestPolicyChanged {
                acted,
                discussion: id.clone(),
                policy,
            }];
            let set = storage.discussions().set_guests(&id, policy, &events).await;
            storage.posting().forget(&id);
            Ok((set?, events))
        };
        let span = tracing::debug_span!("store.setGuests");
        Ok(self.run(caller, span, write).await?.value)
    }

    /// Bans a network from guest posting (replacing its ban, if any). Moderators only; logged.
    pub async fn ban_network(
        &self,
        caller: &Caller,
        network: Cidr,
        until: Option<DateTime<Utc>>,
        reason: Option<Reason>,
    ) -> Result<NetworkBan, DomainError> {
        caller.must_moderate()?;
        let until = until.map(|until| Micros(until.timestamp_micros()));
        let ban = NetworkBan::new(
            network,
            until,
            reason,
            caller.author().clone(),
            Micros::now(),
        )?;
        let storage = self.storage.clone();
        let acted = super::Acted {
            at: ban.at,
            ..acted(caller)
        };
        let write = async move {
            let events = vec![Event::NetworkBanned {
                acted,
                network: ban.network,
                reason: ban.reason.clone(),
                until: ban.until,
            }];
            storage.guests().ban_network(&ban, &events).await?;
            Ok((ban, events))
        };
        let span = tracing::debug_span!("store.banNetwork");
        Ok(self.run(caller, span, write).await?.value)
    }

    /// Lifts a network's ban: true when one was in force. Moderators only; logged.
    pub async fn unban_network(&self, caller: &Caller, network: Cidr) -> Result<bool, DomainError> {
        caller.must_moderate()?;
        let storage = self.storage.clone();
        let acted = acted(caller);
        let write = async move {
            let told = Told::default();
            let announce = |ban: &NetworkBan| {
                told.tell(match ban.until.is_none_or(|until| until > acted.at) {
                    true => vec![Event::NetworkUnbanned {
                        acted: acted.clone(),
                        network,
                    }],
                    false => Vec::new(),
                })
            };
            storage.guests().unban_network(&network, &announce).await?;
            let events = told.take();
            Ok((!events.is_empty(), events))
        };
        let span = tracing::debug_span!("store.unbanNetwork");
        Ok(self.run(caller, span, write).await?.value)
    }

    /// The network bans in force. Moderators only.
    pub async fn network_bans(&self, caller: &Caller) -> Result<Vec<NetworkBan>, DomainError> {
        caller.must_moderate()?;
        Ok(self.storage.guests().network_bans().await?)
    }
}
