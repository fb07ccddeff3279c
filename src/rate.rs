//! Rate limits per key (an author's id, a client's address), on the `governor` crate, and the
//! key a client is counted by.

use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::config::RateLimit;
use crate::domain::ClientAddress;
use crate::telemetry::metrics::Counter;

/// Keys kept before idle ones are dropped (a key is idle once its bucket is full again).
const RETAIN_AFTER: usize = 10_000;

/// A rate limit per key, or none.
pub struct Limiter<K: Hash + Eq + Clone> {
    limiter: Option<DefaultKeyedRateLimiter<K>>,
    /// The most events one check may count at once: the burst.
    burst: NonZeroU32,
    clock: DefaultClock,
    /// Events refused so far.
    refused: Counter,
}

impl<K: Hash + Eq + Clone> Limiter<K> {
    /// A limiter for a configured rate: `count` in any window of `per`, with bursts of `count`.
    pub fn new(limit: RateLimit) -> Self {
        let (limiter, burst) = match limit {
            RateLimit::Off => (None, NonZeroU32::MIN),
            RateLimit::Every { count, per } => {
                let count = NonZeroU32::new(count).unwrap_or(NonZeroU32::MIN);
                let limiter = Quota::with_period(per / count.get())
                    .map(|quota| DefaultKeyedRateLimiter::keyed(quota.allow_burst(count)));
                (limiter, count)
            }
        };
        Self {
            limiter,
            burst,
            clock: DefaultClock::default(),
            refused: Counter::default(),
        }
    }

    /// Events refused so far.
    pub fn refused(&self) -> u64 {
        self.refused.get()
    }

    /// Counts one event for `key`: `Ok` when it is allowed, otherwise how long until the next
    /// one would be.
    pub fn check(&self, key: &K) -> Result<(), Duration> {
        self.check_n(key, 1)
    }

    /// Counts `n` events for `key` at once (at most the burst: a weight past it counts as the
    /// whole burst), all or none: `Ok` when they are allowed, otherwise how long until they
    /// would be.
    pub fn check_n(&self, key: &K, n: u32) -> Result<(), Duration> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        if limiter.len() > RETAIN_AFTER {
            limiter.retain_recent();
        }
        let n = NonZeroU32::new(n.min(self.burst.get())).unwrap_or(NonZeroU32::MIN);
        match limiter.check_key_n(key, n) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => {
                self.refused.inc();
                Err(not_until.wait_time_from(self.clock.now()))
            }
            // Never: `n` is at most the burst.
            Err(_) => {
                self.refused.inc();
                Err(Duration::from_secs(1))
            }
        }
    }
}

/// Longest value of a proxy header kept as a key of its own, in bytes.
const MAX_UNPARSED_KEY: usize = 64;

/// Whom a request that is not signed in is counted against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClientKey {
    /// An IPv4 address (IPv4-mapped IPv6 addresses, `::ffff:a.b.c.d`, included).
    V4(Ipv4Addr),
    /// The /64 network of an IPv6 address (its first 64 bits): what one subscriber is given, so
    /// one client cannot take a fresh allowance with each of its addresses.
    V6Network(u64),
    /// A proxy header value that is no address, as sent (its first 64 bytes).
    Unparsed(Box<str>),
}

impl ClientKey {
    /// The key of an address.
    pub fn of_ip(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Self::V4(v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self::V4(v4),
                None => {
                    let [a, b, c, d, ..] = v6.segments();
                    Self::V6Network(
                        u64::from(a) << 48 | u64::from(b) << 32 | u64::from(c) << 16 | u64::from(d),
                    )
                }
            },
        }
    }

    /// The address as guest posting sees it (the same parts of it).
    pub fn address(&self) -> ClientAddress {
        match self {
            Self::V4(v4) => ClientAddress::V4(*v4),
            Self::V6Network(prefix) => ClientAddress::V6(*prefix),
            Self::Unparsed(value) => ClientAddress::Other(value.to_string()),
        }
    }

    /// The key of one address as a proxy wrote it: `a.b.c.d`, an IPv6 address, either with a
    /// port (`a.b.c.d:port`, `[v6]:port`), or `[v6]`. Any other value (`unknown`, an obfuscated
    /// identifier, garbage) is a key of its own, its first 64 bytes: it is never the proxy's.
    pub fn parse(value: &str) -> Self {
        let value = value.trim();
        let address = value
            .parse::<IpAddr>()
            .ok()
            .or_else(|| value.parse::<SocketAddr>().ok().map(|s| s.ip()))
            .or_else(|| {
                value
                    .strip_prefix('[')
                    .and_then(|v| v.strip_suffix(']'))
                    .and_then(|v| v.parse::<IpAddr>().ok())
            });
        match address {
            Some(ip) => Self::of_ip(ip),
            None => {
                let mut end = value.len().min(MAX_UNPARSED_KEY);
                while !value.is_char_boundary(end) {
                    end -= 1;
                }
                Self::Unparsed(value[..end].into())
            }
        }
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
        assert_eq!(limiter.refused(), 1);
        let off: Limiter<&str> = Limiter::new(RateLimit::Off);
        assert!((0..1000).all(|_| off.check(&"ann").is_ok()));
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(2500)), 3);
        assert_eq!(retry_after_secs(Duration::from_secs(2)), 2);
    }

    #[test]
    fn weighted_checks_spend_their_weight_all_or_none() {
        let limiter = Limiter::new(RateLimit::Every {
            count: 10,
            per: Duration::from_secs(60),
        });
        assert!(limiter.check_n(&"ann", 7).is_ok());
        assert!(limiter.check_n(&"ann", 4).is_err(), "7 + 4 is past 10");
        assert!(
            limiter.check_n(&"ann", 3).is_ok(),
            "a refused weight spent nothing"
        );
        assert!(limiter.check(&"ann").is_err());
        // A weight past the burst counts as the whole burst.
        assert!(limiter.check_n(&"bob", 50).is_ok());
        assert!(limiter.check(&"bob").is_err());
        assert_eq!(limiter.refused(), 3);
    }

    #[test]
    fn clients_are_keyed_by_ipv4_address_and_ipv6_network() {
        let key = ClientKey::parse;
        let v4 = ClientKey::V4(Ipv4Addr::new(1, 2, 3, 4));
        for same in [
            "1.2.3.4",
            " 1.2.3.4 ",
            "1.2.3.4:5678",
            "::ffff:1.2.3.4",
            "[::ffff:1.2.3.4]:80",
        ] {
            assert_eq!(key(same), v4, "{same}");
        }
        let net = key("2001:db8:1:2::1");
        assert_eq!(net, ClientKey::V6Network(0x2001_0db8_0001_0002));
        for same in [
            "2001:db8:1:2:ffff:ffff:ffff:ffff",
            "[2001:db8:1:2::9]",
            "[2001:db8:1:2::9]:443",
        ] {
            assert_eq!(key(same), net, "{same}");
        }
        assert_ne!(key("2001:db8:1:3::1"), net);
        assert_eq!(key("::1"), ClientKey::V6Network(0));
        assert_eq!(key("unknown"), ClientKey::Unparsed("unknown".into()));
        assert_eq!(key(""), ClientKey::Unparsed("".into()));
        assert_ne!(key("1.2.3.4.5"), v4);
        let long = "é".repeat(100);
        match key(&long) {
            ClientKey::Unparsed(kept) => {
                assert!(kept.len() <= MAX_UNPARSED_KEY && long.starts_with(&*kept));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            ClientKey::of_ip(IpAddr::from([0, 0, 0, 0, 0, 0xffff, 0x0a00, 1])),
            ClientKey::V4(Ipv4Addr::new(10, 0, 0, 1))
        );
    }
}
