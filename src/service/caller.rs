//! The checked caller: signed in, not banned, within its rate. Only [`Services::caller`] makes
//! one, and every workflow takes one, so no change can be made without these checks.

use tracing::Instrument as _;

use super::Services;
use crate::domain::{Author, DomainError, Micros};
use crate::rate::retry_after_secs;

/// Which allowance a change spends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowance {
    /// Posts, edits and every other change (`THREADQL_RATE_LIMIT`).
    Changes,
    /// Votes (`THREADQL_VOTE_RATE_LIMIT`).
    Votes,
    /// A moderator's action (`THREADQL_MODERATION_RATE_LIMIT`); a caller who is no moderator
    /// spends `Changes` (and is refused for want of the role).
    Moderation,
}

/// A caller whose identity was checked by a transport and whose standing was checked here.
#[derive(Debug, Clone)]
pub struct Caller {
    author: Author,
    moderator: bool,
    admin: bool,
}

impl Caller {
    /// Who they are, as an author.
    pub fn author(&self) -> &Author {
        &self.author
    }

    /// Whether they may moderate.
    pub fn moderator(&self) -> bool {
        self.moderator
    }

    /// The same caller, refused with `FORBIDDEN` unless an admin.
    pub fn must_administer(&self) -> Result<&Caller, DomainError> {
        match self.admin {
            true => Ok(self),
            false => Err(DomainError::Forbidden(
                "only admins (a token with the `admin` role) may do this".into(),
            )),
        }
    }

    /// The same caller, refused with `FORBIDDEN` unless a moderator.
    pub fn must_moderate(&self) -> Result<&Caller, DomainError> {
        match self.moderator {
            true => Ok(self),
            false => Err(DomainError::Forbidden(
                "only moderators (a token with the `moderator` role) may do this".into(),
            )),
        }
    }
}

impl Services {
    /// Checks a signed-in identity (`author`, and whether its token may moderate) for a change
    /// that spends `allowance`: refused with `FORBIDDEN` while banned (before the rate, so a
    /// banned user hears why, whatever they send), and counted against the rate per author
    /// (`RATE_LIMITED` past it). A transport calls this once per change it is asked for, so
    /// each spends exactly one of its author's tokens. The ban check costs at most one database
    /// command, and none while this process knows the caller's ban state (5 s); a moderator's
    /// first change in this process records them as a moderator (one write), later ones cost
    /// nothing. A moderator is never held back by a ban.
    pub async fn caller(
        &self,
        author: &Author,
        (moderator, admin): (bool, bool),
        allowance: Allowance,
    ) -> Result<Caller, DomainError> {
        let moderation = self.storage.moderation();
        if moderator {
            moderation
                .moderator_acted(author)
                .instrument(tracing::debug_span!("store.moderatorActed"))
                .await?;
        } else if let Some(ban) = moderation
            .ban_of(&author.id)
            .instrument(tracing::debug_span!("store.banOf"))
            .await?
        {
            if ban.applies_at(Micros::now()) {
                return Err(ban.refusal());
            }
        }
        let (limiter, what) = match allowance {
            Allowance::Moderation if moderator || admin => (&self.moderations, "moderator actions"),
            Allowance::Changes | Allowance::Moderation => (&self.changes, "changes"),
            Allowance::Votes => (&self.votes, "votes"),
        };
        if let Err(wait) = limiter.check(&author.id) {
            let secs = retry_after_secs(wait);
            return Err(DomainError::RateLimited {
                message: format!("too many {what} from this author: try again in {secs} s"),
                retry_after_secs: secs,
            });
        }
        Ok(Caller {
            author: author.clone(),
            moderator: moderator || admin,
            admin,
        })
    }

    /// A visitor without an account, who may only make the discussion of a page of the allowed
    /// origins exist (`ensureDiscussion`), so that a guest can comment on a page nobody has
    /// commented on yet: only while this server takes guests' comments (`UNAUTHENTICATED`
    /// otherwise). Their requests are counted by the limit on anonymous clients.
    pub fn visitor(&self) -> Result<Caller, DomainError> {
        if self.default_guest_policy() == crate::domain::GuestPolicy::Off {
            return Err(DomainError::Unauthenticated(
                "this needs a signed-in user: send `Authorization: Bearer <token>` (this server takes no guest comments)".into(),
            ));
        }
        Ok(Caller {
            author: Author {
                id: "visitor".to_owned(),
                name: "a visitor".to_owned(),
            },
            moderator: false,
            admin: false,
        })
    }

    /// A caller with a moderator's rights that no token carries: the operator of this
    /// installation, acting through a command (the import). Not rate-limited, never banned.
    pub fn operator(&self, name: &str) -> Caller {
        Caller {
            author: Author {
                id: format!("operator:{name}"),
                name: name.to_owned(),
            },
            moderator: true,
            admin: false,
        }
    }
}
