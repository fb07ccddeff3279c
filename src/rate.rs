//! Rate limits per key (an author's id, a client's address), on the `governor` crate.

use std::hash::Hash;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::config::RateLimit;

/// Keys kept before idle ones are dropped (a key is idle once its bucket is full again).
const RETAIN_AFTER: usize = 10_000;

/// A rate limit per key, or none.
pub struct Limiter<K: Hash + Eq + Clone> {
    limiter: Option<DefaultKeyedRateLimiter<K>>,
    clock: DefaultClock,
}

impl<K: Hash + Eq + Clone> Limiter<K> {
    /// A limiter for a configured rate: `count` in any window of `per`, with bursts of `count`.
    pub fn new(limit: RateLimit) -> Self {
        let limiter = match limit {
            RateLimit::Off => None,
            RateLimit::Every { count, per } => {
                let count = NonZeroU32::new(count).unwrap_or(NonZeroU32::MIN);
                Quota::with_period(per / count.get())
                    .map(|quota| DefaultKeyedRateLimiter::keyed(quota.allow_burst(count)))
            }
        };
        Self {
            limiter,
            clock: DefaultClock::default(),
        }
    }

    /// Counts one event for `key`: `Ok` when it is allowed, otherwise how long until the next
    /// one would be.
    pub fn check(&self, key: &K) -> Result<(), Duration> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        if limiter.len() > RETAIN_AFTER {
            limiter.retain_recent();
        }
        limiter
            .check_key(key)
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }
}

/// Whole seconds to wait, rounded up (at least 1), for a `Retry-After` hint.
pub fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0).max(u64::from(wait.as_secs() == 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_the_key_waits() {
        let limiter = Limiter::new(RateLimit::Every {
            count: 3,
            per: Duration::from_secs(30),
        });
        for _ in 0..3 {
            assert!(limiter.check(&"ann").is_ok());
        }
        let wait = limiter.check(&"ann").err().unwrap_or_default();
        assert!(wait > Duration::from_secs(5) && wait <= Duration::from_secs(10));
        assert!(limiter.check(&"bob").is_ok(), "keys are counted apart");
        let off: Limiter<&str> = Limiter::new(RateLimit::Off);
        assert!((0..1000).all(|_| off.check(&"ann").is_ok()));
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(2500)), 3);
        assert_eq!(retry_after_secs(Duration::from_secs(2)), 2);
    }
}
