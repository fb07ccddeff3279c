//! The webhook settings: delivery timeouts, the retry schedule, leases, limits, and whether
//! private addresses may be used (development and tests only).

use clap::Args;

use crate::webhooks::RetrySchedule;

/// How webhooks are delivered.
#[derive(Debug, Clone, Args)]
pub struct WebhookSettings {
    /// Seconds an attempt waits for an answer before it counts as failed.
    #[arg(long = "webhook-timeout-secs", env = "THREADQL_WEBHOOK_TIMEOUT_SECS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=300), global = true)]
    pub timeout_secs: u64,
    /// The waits before each attempt, comma-separated (`0s,5s,5m,30m,2h,5h,10h,10h`, the
    /// Standard Webhooks schedule, by default); after the last attempt a delivery has failed.
    #[arg(
        long = "webhook-retry-schedule",
        env = "THREADQL_WEBHOOK_RETRY_SCHEDULE",
        default_value = "0s,5s,5m,30m,2h,5h,10h,10h",
        global = true
    )]
    pub retry_schedule: RetrySchedule,
    /// An endpoint whose attempts have all failed for this many seconds is disabled.
    #[arg(long = "webhook-disable-after-secs", env = "THREADQL_WEBHOOK_DISABLE_AFTER_SECS", default_value_t = 5 * 86_400, value_parser = clap::value_parser!(u64).range(1..=365 * 86_400), global = true)]
    pub disable_after_secs: u64,
    /// Most requests in flight per endpoint, per process.
    #[arg(long = "webhook-concurrency", env = "THREADQL_WEBHOOK_CONCURRENCY", default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=256), global = true)]
    pub concurrency: u64,
    /// Seconds a replica holds an attempt (or a fan-out) it claimed: another replica takes it
    /// over once this has passed without a result.
    #[arg(long = "webhook-lease-secs", env = "THREADQL_WEBHOOK_LEASE_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(2..=3600), global = true)]
    pub lease_secs: u64,
    /// Allows `http` URLs and private, loopback and link-local addresses (development and
    /// tests only: the server warns at start).
    #[arg(long = "webhook-allow-insecure", env = "THREADQL_WEBHOOK_ALLOW_INSECURE", default_value_t = false, action = clap::ArgAction::Set, global = true)]
    pub allow_insecure: bool,
}
