//! The networks guests post from: the network a guest is counted and shown by (/24 for IPv4,
//! /48 for IPv6), and the networks moderators ban (any CIDR block).
//!
//! Only a client's network is kept, never its address: what a moderator needs to see a spam
//! run and ban it, and no more.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::moderation::{ends_later, Reason};
use super::{Author, DomainError, Micros};

/// Where a request came from, as the rate limits see it (`rate::ClientKey`): an IPv4 address,
/// the first 64 bits of an IPv6 address, or a proxy's value that is no address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClientAddress {
    /// An IPv4 address.
    V4(Ipv4Addr),
    /// The first 64 bits of an IPv6 address.
    V6(u64),
    /// A value that is no address, as a proxy sent it (at most 64 bytes).
    Other(String),
}

impl ClientAddress {
    /// The network a guest at this address is counted and shown by: `a.b.c.0/24`,
    /// `x:y:z::/48`, or the value itself when it is no address.
    pub fn network(&self) -> GuestNetwork {
        GuestNetwork(match self {
            Self::V4(v4) => {
                let [a, b, c, _] = v4.octets();
                format!("{a}.{b}.{c}.0/24")
            }
            Self::V6(prefix) => format!("{}/48", v6(prefix & !0xffff)),
            Self::Other(value) => format!("unknown:{value}"),
        })
    }
}

/// The IPv6 address whose first 64 bits are `prefix`, the rest zero.
fn v6(prefix: u64) -> Ipv6Addr {
    Ipv6Addr::from(u128::from(prefix) << 64)
}

/// The network a guest posted from, as text (`203.0.113.0/24`, `2001:db8:1::/48`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GuestNetwork(String);

impl GuestNetwork {
    /// The network as stored.
    pub fn from_stored(text: String) -> Self {
        Self(text)
    }

    /// The network as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GuestNetwork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A block of addresses in CIDR notation, as moderators ban it. IPv6 blocks are at most 64 bits
/// long: the rest of an address is never known (see [`ClientAddress::V6`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cidr {
    /// An IPv4 block: its first address (host bits zero) and its prefix length.
    V4(u32, u8),
    /// An IPv6 block: the first 64 bits of its first address (host bits zero) and its prefix
    /// length.
    V6(u64, u8),
}

impl Cidr {
    /// Parses `a.b.c.d/n` (n 8–32) or an IPv6 `addr/n` (n 16–64). Bits set past the prefix
    /// are refused: a block is written by its first address.
    pub fn parse(text: &str) -> Result<Self, DomainError> {
        let bad = |why: &str| DomainError::bad_input(format!("network {text:?} refused: {why}"));
        let (address, bits) = text.trim().split_once('/').ok_or_else(|| {
            bad("write it as an address and a prefix length, like 203.0.113.0/24")
        })?;
        let bits: u8 = bits
            .parse()
            .map_err(|_| bad("the prefix length is not a number"))?;
        if let Ok(v4) = address.parse::<Ipv4Addr>() {
            if !(8..=32).contains(&bits) {
                return Err(bad("an IPv4 prefix length is 8 to 32"));
            }
            let base = u32::from(v4);
            if base & !mask32(bits) != 0 {
                return Err(bad("the address has bits set past the prefix"));
            }
            return Ok(Self::V4(base, bits));
        }
        let v6: Ipv6Addr = address
            .parse()
            .map_err(|_| bad("not an IPv4 or IPv6 address"))?;
        if !(16..=64).contains(&bits) {
            return Err(bad(
                "an IPv6 prefix length is 16 to 64 (only the first 64 bits of an address are kept)",
            ));
        }
        let full = u128::from(v6);
        let prefix = u64::try_from(full >> 64).unwrap_or(u64::MAX);
        if full & u128::from(u64::MAX) != 0 || prefix & !mask64(bits) != 0 {
            return Err(bad("the address has bits set past the prefix"));
        }
        Ok(Self::V6(prefix, bits))
    }

    /// Whether the block holds `address`.
    pub fn contains(&self, address: &ClientAddress) -> bool {
        match (self, address) {
            (Self::V4(base, bits), ClientAddress::V4(v4)) => {
                u32::from(*v4) & mask32(*bits) == *base
            }
            (Self::V6(base, bits), ClientAddress::V6(prefix)) => prefix & mask64(*bits) == *base,
            _ => false,
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::V4(base, bits) => write!(f, "{}/{bits}", Ipv4Addr::from(*base)),
            Self::V6(base, bits) => write!(f, "{}/{bits}", v6(*base)),
        }
    }
}

/// A network banned from guest posting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkBan {
    /// The network.
    pub network: Cidr,
    /// When it ends; `None`: it does not.
    pub until: Option<Micros>,
    /// Why, as the moderator wrote it.
    pub reason: Option<Reason>,
    /// The moderator who banned it.
    pub by: Author,
    /// When.
    pub at: Micros,
}

impl NetworkBan {
    /// A new ban made at `now`: `BAD_USER_INPUT` when it would end at or before `now`.
    pub fn new(
        network: Cidr,
        until: Option<Micros>,
        reason: Option<Reason>,
        by: Author,
        now: Micros,
    ) -> Result<Self, DomainError> {
        ends_later(until, now, "unbanNetwork")?;
        Ok(Self {
            network,
            until,
            reason,
            by,
            at: now,
        })
    }

    /// Whether it applies to `address` at `now`.
    pub fn applies(&self, address: &ClientAddress, now: Micros) -> bool {
        self.until.is_none_or(|until| until > now) && self.network.contains(address)
    }

    /// The error a guest post from the network gets: `FORBIDDEN`, with its reason.
    pub fn refusal(&self) -> DomainError {
        let reason = match &self.reason {
            Some(reason) => format!(" (reason: {})", reason.as_str()),
            None => String::new(),
        };
        DomainError::Forbidden(format!(
            "guest comments from this network are banned{reason}: sign in to comment"
        ))
    }
}

/// The mask of the first `bits` bits of an IPv4 address.
fn mask32(bits: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0)
}

/// The mask of the first `bits` bits of 64.
fn mask64(bits: u8) -> u64 {
    u64::MAX.checked_shl(64 - u32::from(bits)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(text: &str) -> ClientAddress {
        ClientAddress::V4(text.parse().expect("an address"))
    }

    fn v6_of(text: &str) -> ClientAddress {
        let full = u128::from(text.parse::<Ipv6Addr>().expect("an address"));
        ClientAddress::V6(u64::try_from(full >> 64).expect("64 bits"))
    }

    #[test]
    fn guests_are_counted_by_their_24_or_48() {
        assert_eq!(v4("203.0.113.77").network().as_str(), "203.0.113.0/24");
        assert_eq!(v4("203.0.113.1").network(), v4("203.0.113.254").network());
        assert_ne!(v4("203.0.113.1").network(), v4("203.0.114.1").network());
        assert_eq!(
            v6_of("2001:db8:1:2:3::4").network().as_str(),
            "2001:db8:1::/48"
        );
        assert_eq!(
            v6_of("2001:db8:1:ffff::").network(),
            v6_of("2001:db8:1:0::9").network()
        );
        assert_ne!(
            v6_of("2001:db8:1::").network(),
            v6_of("2001:db8:2::").network()
        );
        assert_eq!(
            ClientAddress::Other("unknown".into()).network().as_str(),
            "unknown:unknown"
        );
    }

    #[test]
    fn blocks_hold_their_addresses_and_no_others() {
        let block = Cidr::parse("203.0.113.0/24").expect("a block");
        assert!(block.contains(&v4("203.0.113.9")));
        assert!(!block.contains(&v4("203.0.112.9")));
        assert!(!block.contains(&v6_of("2001:db8::")));
        assert_eq!(block.to_string(), "203.0.113.0/24");
        let host = Cidr::parse("198.51.100.7/32").expect("a block");
        assert!(host.contains(&v4("198.51.100.7")) && !host.contains(&v4("198.51.100.8")));
        let wide = Cidr::parse("2001:db8::/32").expect("a block");
        assert!(wide.contains(&v6_of("2001:db8:ffff:1::")));
        assert!(!wide.contains(&v6_of("2001:db9::")));
        assert_eq!(wide.to_string(), "2001:db8::/32");
        let sub = Cidr::parse("2001:db8:1:2::/64").expect("a block");
        assert!(sub.contains(&v6_of("2001:db8:1:2:ffff::1")));
        assert!(!sub.contains(&v6_of("2001:db8:1:3::")));
    }

    #[test]
    fn malformed_blocks_are_refused_with_a_reason() {
        for bad in [
            "",
            "203.0.113.0",
            "203.0.113.0/",
            "203.0.113.0/x",
            "203.0.113.0/33",
            "10.0.0.0/4",
            "203.0.113.1/24",
            "2001:db8::/65",
            "2001:db8::/8",
            "2001:db8::1/64",
            "2001:db8:ff00::/24",
            "example.com/24",
        ] {
            let err = Cidr::parse(bad).expect_err(bad);
            assert_eq!(err.code(), "BAD_USER_INPUT", "{bad}");
        }
    }
}
