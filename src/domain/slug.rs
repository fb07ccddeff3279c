//! Comment paths: slug parts, slugs (`k3x9q2ab/0pz81m4c`), full slugs (`<time>:<part>/…`) and the clock.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};

use rand::Rng;

use super::DomainError;

/// Characters a slug part is made of: URL-safe, and ordered the same as ASCII.
const ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
/// Length of one slug part. 36^8 ≈ 2.8e12 values: collisions are rare even among 100 000 siblings,
/// and the rare one is retried.
pub const PART_LEN: usize = 8;
/// Width of the time part of a full-slug segment: microseconds since the epoch, zero-padded.
const TIME_LEN: usize = 16;
/// Longest slug text accepted from a client (deep enough for any depth cap we allow).
const MAX_SLUG_TEXT: usize = 64 * (PART_LEN + 1);

/// Microseconds since the Unix epoch.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Micros(pub i64);

impl Micros {
    /// The wall clock's time now (not strictly increasing: see [`MonotonicClock`] for that).
    pub fn now() -> Micros {
        Micros(chrono::Utc::now().timestamp_micros())
    }

    /// As a UTC date-time.
    pub fn to_datetime(self) -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::from_timestamp_micros(self.0).unwrap_or_default()
    }
}

/// A clock whose readings strictly increase, so two posts made one after the other never tie.
#[derive(Debug, Default)]
pub struct MonotonicClock {
    last: AtomicI64,
}

impl MonotonicClock {
    /// The current time, strictly later than every earlier reading of this clock.
    pub fn now(&self) -> Micros {
        self.advance(chrono::Utc::now().timestamp_micros())
    }

    /// The current time, strictly later than `floor` and than every earlier reading of this clock.
    /// A time seen elsewhere (e.g. written by another server whose clock runs ahead) moves this
    /// clock forward, so later readings stay in order with it.
    pub fn now_after(&self, floor: Micros) -> Micros {
        let wall = chrono::Utc::now().timestamp_micros();
        self.advance(wall.max(floor.0.saturating_add(1)))
    }

    fn advance(&self, wall: i64) -> Micros {
        let mut prev = self.last.load(Ordering::Relaxed);
        loop {
            let next = wall.max(prev + 1);
            match self
                .last
                .compare_exchange_weak(prev, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Micros(next),
                Err(seen) => prev = seen,
            }
        }
    }
}

/// One random, URL-safe part of a slug.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SlugPart(String);

impl SlugPart {
    /// A fresh random part.
    pub fn generate() -> Self {
        let mut rng = rand::thread_rng();
        let part = (0..PART_LEN)
            .map(|_| char::from(ALPHABET[rng.gen_range(0..ALPHABET.len())]))
            .collect();
        Self(part)
    }

    /// The part an import gives the comment with source id `seed`: the same seed always gives
    /// the same part, so an import run again finds what it stored before.
    pub fn derived(seed: &str) -> Self {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(seed.as_bytes());
        let part = digest
            .iter()
            .cycle()
            .take(PART_LEN)
            .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
            .collect();
        Self(part)
    }

    /// The part as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn is_valid(raw: &str) -> bool {
        raw.len() == PART_LEN && raw.bytes().all(|b| ALPHABET.contains(&b))
    }
}

/// The path of a comment inside its discussion: its ancestors' parts and its own, `/`-separated.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slug(String);

impl Slug {
    /// Parses a client-supplied slug; anything but `part(/part)*` is refused.
    pub fn parse(raw: &str) -> Result<Self, DomainError> {
        let ok =
            !raw.is_empty() && raw.len() <= MAX_SLUG_TEXT && raw.split('/').all(SlugPart::is_valid);
        if ok {
            Ok(Self(raw.to_owned()))
        } else {
            let shown: String = raw.chars().take(80).collect();
            Err(DomainError::bad_input(format!(
                "malformed slug {shown:?}: expected parts of {PART_LEN} characters [0-9a-z] joined by '/'"
            )))
        }
    }

    /// Trusts text that the store wrote itself.
    pub fn from_stored(raw: String) -> Self {
        Self(raw)
    }

    /// Its own part, the last one.
    pub fn own_part(&self) -> SlugPart {
        SlugPart(self.last_part().to_owned())
    }

    /// The slug of a top-level comment.
    pub fn top_level(part: &SlugPart) -> Self {
        Self(part.0.clone())
    }

    /// The slug of a reply to `self`.
    pub fn child(&self, part: &SlugPart) -> Self {
        Self(format!("{}/{}", self.0, part.0))
    }

    /// 0 for a top-level comment.
    pub fn depth(&self) -> usize {
        self.0.matches('/').count()
    }

    /// The parent's slug, `None` at the top level.
    pub fn parent(&self) -> Option<Slug> {
        self.0.rfind('/').map(|i| Self(self.0[..i].to_owned()))
    }

    /// The ancestor (or self) at `depth`.
    pub fn ancestor_at(&self, depth: usize) -> Slug {
        Self(
            self.0
                .split('/')
                .take(depth + 1)
                .collect::<Vec<_>>()
                .join("/"),
        )
    }

    /// The last part.
    pub fn last_part(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }

    /// The slug as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Slug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The sortable path of a comment: one `<micros>:<part>` segment per level. Sorting full slugs
/// gives threaded order (each thread after its parent, siblings oldest first).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FullSlug(String);

impl FullSlug {
    /// Trusts text that the store wrote itself.
    pub fn from_stored(raw: String) -> Self {
        Self(raw)
    }

    /// Parses a full slug out of a client cursor; refuses anything that is not `segment(/segment)*`.
    pub fn parse(raw: &str) -> Result<Self, DomainError> {
        let ok = !raw.is_empty()
            && raw.len() <= 64 * (TIME_LEN + PART_LEN + 2)
            && raw.split('/').all(|seg| match seg.split_once(':') {
                Some((time, part)) => {
                    time.len() == TIME_LEN
                        && time.bytes().all(|b| b.is_ascii_digit())
                        && SlugPart::is_valid(part)
                }
                None => false,
            });
        if ok {
            Ok(Self(raw.to_owned()))
        } else {
            Err(DomainError::bad_input("malformed full slug"))
        }
    }

    fn segment(posted: Micros, part: &SlugPart) -> String {
        format!("{:0width$}:{}", posted.0.max(0), part.0, width = TIME_LEN)
    }

    /// The full slug of a top-level comment.
    pub fn top_level(posted: Micros, part: &SlugPart) -> Self {
        Self(Self::segment(posted, part))
    }

    /// The full slug of a reply to `self`.
    pub fn child(&self, posted: Micros, part: &SlugPart) -> Self {
        Self(format!("{}/{}", self.0, Self::segment(posted, part)))
    }

    /// The ancestor (or self) at `depth`.
    pub fn ancestor_at(&self, depth: usize) -> FullSlug {
        Self(
            self.0
                .split('/')
                .take(depth + 1)
                .collect::<Vec<_>>()
                .join("/"),
        )
    }

    /// The half-open range `[lower, upper)` that holds exactly the descendants of this comment:
    /// every descendant starts with `self/`, and `'0'` is the character right after `'/'`.
    /// A range query needs no regex, so no client text can ever become a pattern.
    pub fn descendant_range(&self) -> (String, String) {
        (format!("{}/", self.0), format!("{}0", self.0))
    }

    /// The comment's slug: the parts of its segments, without their times.
    pub fn slug(&self) -> Slug {
        Slug(
            self.0
                .split('/')
                .map(|seg| seg.split_once(':').map_or(seg, |(_, part)| part))
                .collect::<Vec<_>>()
                .join("/"),
        )
    }

    /// How many levels below the top it is (0 for a top-level comment).
    pub fn depth(&self) -> usize {
        self.0.matches('/').count()
    }

    /// Whether `other` is a strict descendant of `self`.
    pub fn is_ancestor_of(&self, other: &FullSlug) -> bool {
        other.0.len() > self.0.len()
            && other.0.starts_with(&self.0)
            && other.0.as_bytes()[self.0.len()] == b'/'
    }

    /// The full slug as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FullSlug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_never_ties() {
        let clock = MonotonicClock::default();
        let mut last = clock.now();
        for _ in 0..10_000 {
            let next = clock.now();
            assert!(next > last);
            last = next;
        }
    }

    #[test]
    fn clock_moves_past_a_floor() {
        let clock = MonotonicClock::default();
        let now = clock.now();
        let ahead = Micros(now.0 + 60_000_000);
        let after = clock.now_after(ahead);
        assert!(after > ahead);
        assert!(clock.now() > after);
        assert!(clock.now_after(Micros(0)) > after);
    }

    #[test]
    fn slugs_parse_and_refuse_metacharacters() {
        let a = SlugPart::generate();
        let b = SlugPart::generate();
        let slug = Slug::top_level(&a).child(&b);
        assert_eq!(Slug::parse(slug.as_str()), Ok(slug.clone()));
        assert_eq!(slug.depth(), 1);
        assert_eq!(slug.parent(), Some(Slug::top_level(&a)));
        assert_eq!(slug.ancestor_at(0), Slug::top_level(&a));
        for bad in [
            ".*",
            "(",
            "\\",
            "$",
            "abcd",
            "",
            "abcdefgh/",
            "/abcdefgh",
            "ABCDEFGH",
            "abcdefg$",
        ] {
            assert!(Slug::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn descendant_range_is_segment_bounded() {
        let p = SlugPart::generate();
        let root = FullSlug::top_level(Micros(5), &p);
        let child = root.child(Micros(6), &SlugPart::generate());
        let (lo, hi) = root.descendant_range();
        assert!(child.as_str() >= lo.as_str() && child.as_str() < hi.as_str());
        assert!(root.as_str() < lo.as_str());
        assert!(root.is_ancestor_of(&child));
        assert!(!child.is_ancestor_of(&root));
        // A sibling whose time part merely starts with the same digits is not a descendant.
        let sibling = FullSlug::from_stored(format!("{}x", root.as_str()));
        assert!(!(sibling.as_str() >= lo.as_str() && sibling.as_str() < hi.as_str()));
        assert_eq!(FullSlug::parse(child.as_str()), Ok(child.clone()));
        assert!(FullSlug::parse("0000:abc").is_err());
    }

    #[test]
    fn full_slugs_sort_in_time_order() {
        let a = FullSlug::top_level(Micros(999), &SlugPart::generate());
        let b = FullSlug::top_level(Micros(1000), &SlugPart::generate());
        assert!(a < b);
    }
}
