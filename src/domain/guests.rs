//! The ids of imported authors who had no account at the source: keyed with the server key, so
//! nobody can test a guessed e-mail address against a public id.

use super::secrets::{Purpose, ServerKey, SubKey};

/// The hex digits of an unkeyed imported guest id (what imports wrote before ids were keyed).
const UNKEYED_DIGITS: usize = 16;

/// The hex digits of a keyed imported guest id: more than an unkeyed one has, so the two can
/// never be taken for each other.
pub const KEYED_DIGITS: usize = 24;

/// Keys imported guest ids: `<source>-guest:` and the first [`KEYED_DIGITS`] hex digits of
/// HMAC-SHA256(the server key's sub-key for imported guests, the unkeyed id), where the unkeyed
/// id is `<source>-guest:` and the first 16 hex digits of the SHA-256 of the lower-cased e-mail
/// (or of the name). An import and the migration of ids stored unkeyed compute the same id.
#[derive(Debug, Clone)]
pub struct GuestIds {
    key: SubKey,
}

impl GuestIds {
    /// The sources whose guests have ids of this kind.
    pub const SOURCES: [&'static str; 2] = ["disqus", "wordpress"];

    /// Guest ids under `key`.
    pub fn new(key: &ServerKey) -> Self {
        Self {
            key: key.derive(Purpose::ImportedGuestIds),
        }
    }

    /// The prefix of a source's guest ids (`disqus-guest:`), for each source.
    pub fn prefixes() -> impl Iterator<Item = String> {
        Self::SOURCES
            .iter()
            .map(|source| format!("{source}-guest:"))
    }

    /// The source of `id` when it is an unkeyed imported guest id.
    pub fn unkeyed_source(id: &str) -> Option<&'static str> {
        Self::SOURCES.iter().copied().find(|source| {
            id.strip_prefix(source)
                .and_then(|rest| rest.strip_prefix("-guest:"))
                .is_some_and(|hash| {
                    hash.len() == UNKEYED_DIGITS
                        && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
                })
        })
    }

    /// The keyed id of an unkeyed imported guest id; `None` for any other id (a keyed one
    /// included, so keying twice changes nothing).
    pub fn keyed(&self, id: &str) -> Option<String> {
        let source = Self::unkeyed_source(id)?;
        let digest = self.key.mac(id.as_bytes());
        let hex: String = digest
            .iter()
            .take(KEYED_DIGITS / 2)
            .map(|b| format!("{b:02x}"))
            .collect();
        Some(format!("{source}-guest:{hex}"))
    }

    /// Keys `id` in place when it is an unkeyed imported guest id; whether it changed.
    pub fn key_in_place(&self, id: &mut String) -> bool {
        match self.keyed(id) {
            Some(keyed) => {
                *id = keyed;
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> GuestIds {
        GuestIds::new(&ServerKey::from_bytes((1..=32).collect()).expect("a key"))
    }

    #[test]
    fn only_unkeyed_guest_ids_are_keyed_and_keyed_ones_stay() {
        let ids = ids();
        let keyed = ids.keyed("disqus-guest:71d4f55f72fa128d").expect("keyed");
        assert!(keyed.starts_with("disqus-guest:"));
        assert_eq!(keyed.len(), "disqus-guest:".len() + KEYED_DIGITS);
        assert_ne!(keyed, "disqus-guest:71d4f55f72fa128d");
        assert_eq!(ids.keyed(&keyed), None);
        assert_eq!(
            ids.keyed("disqus-guest:71d4f55f72fa128d"),
            Some(keyed.clone())
        );
        let wp = ids
            .keyed("wordpress-guest:71d4f55f72fa128d")
            .expect("keyed");
        assert!(wp.starts_with("wordpress-guest:"));
        for other in [
            "disqus:ann",
            "disqus-guest:71D4F55F72FA128D",
            "disqus-guest:71d4f55f72fa128",
            "disqus-guest:71d4f55f72fa128dd",
            "blogger-guest:71d4f55f72fa128d",
            "user-1",
        ] {
            assert_eq!(ids.keyed(other), None, "{other}");
        }
    }

    #[test]
    fn another_key_gives_other_ids() {
        let other = GuestIds::new(&ServerKey::generate());
        assert_ne!(
            ids().keyed("disqus-guest:71d4f55f72fa128d"),
            other.keyed("disqus-guest:71d4f55f72fa128d")
        );
    }
}
