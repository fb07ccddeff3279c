//! The guest settings: whether people without an account may comment, what their proof of
//! work costs, and the limits on what one network may post.

use clap::{Args, ValueEnum};

use super::RateLimit;
use crate::domain::GuestPolicy;

/// Whether guests may comment, as named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum GuestArg {
    /// Only signed-in users comment.
    Off,
    /// Guests comment; every guest comment waits for a moderator.
    Pre,
    /// Guest comments are published (word lists, reports and limits still apply).
    Post,
}

impl From<GuestArg> for GuestPolicy {
    fn from(arg: GuestArg) -> Self {
        match arg {
            GuestArg::Off => GuestPolicy::Off,
            GuestArg::Pre => GuestPolicy::Pre,
            GuestArg::Post => GuestPolicy::Post,
        }
    }
}

/// How guests comment.
#[derive(Debug, Clone, Args)]
pub struct GuestSettings {
    /// Whether people without an account may comment, in discussions where no moderator set
    /// it (`setGuestPolicy`): `off`, `pre` (held for moderators) or `post` (published).
    #[arg(
        long = "guests",
        env = "THREADQL_GUESTS",
        value_enum,
        default_value = "off",
        global = true
    )]
    pub policy: GuestArg,
    /// The largest secret number of a guest's proof of work: its cost (a browser tries half
    /// of it on average).
    #[arg(long = "guest-pow-maxnumber", env = "THREADQL_GUEST_POW_MAXNUMBER", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1_000..=100_000_000), global = true)]
    pub pow_max_number: u64,
    /// Guest posts per client network (/24 for IPv4, /48 for IPv6): `<count>/<window>`, or
    /// `off`.
    #[arg(
        id = "guest_rate_limit",
        long = "guest-rate-limit",
        env = "THREADQL_GUEST_RATE_LIMIT",
        default_value = "2/60s",
        global = true
    )]
    pub rate_limit: RateLimit,
    /// A guest comment with more links than this is held for moderators, whatever the policy.
    #[arg(long = "guest-max-links", env = "THREADQL_GUEST_MAX_LINKS", default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=1_000), global = true)]
    pub max_links: u64,
    /// Most replies guests of one network may post to one comment in an hour.
    #[arg(long = "guest-max-direct-replies", env = "THREADQL_GUEST_MAX_DIRECT_REPLIES", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10_000), global = true)]
    pub max_direct_replies: u32,
}
