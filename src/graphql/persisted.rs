//! Automatic persisted queries (Apollo's protocol, version 1): a client sends a document's
//! SHA-256 hash alone and gets `PERSISTED_QUERY_NOT_FOUND` until it has sent the document with
//! its hash once. The texts are kept per process, bounded in entries and in bytes, least recently
//! used dropped first, and only once the document has passed every check (see `Api::admit`).
//! Run before the engine, not as one of its extensions (see `limits`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_graphql::{Request, ServerError};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::limits::with_code;

/// What an entry takes besides its hash and its text: its map entry, its place in the order of
/// use and the shared text's header, rounded up.
const ENTRY_OVERHEAD: usize = 128;

/// The `persistedQuery` request extension.
#[derive(Deserialize)]
struct PersistedQuery {
    version: i32,
    #[serde(rename = "sha256Hash")]
    sha256_hash: String,
}

/// A document sent with its hash, to be kept once it has passed every check.
pub(super) struct Pending {
    hash: String,
}

/// The document texts this process was sent with their hashes.
#[derive(Clone)]
pub(super) struct PersistedQueries(Arc<Mutex<Kept>>);

/// The kept texts and the order they were last used in.
struct Kept {
    /// Text and last use, by hash.
    texts: HashMap<String, (Arc<str>, u64)>,
    /// Hashes by last use, oldest first.
    order: BTreeMap<u64, String>,
    /// Uses so far: the clock of `order`.
    clock: u64,
    /// Bytes kept (see [`size`]).
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

/// The bytes an entry is counted as.
fn size(hash: &str, text: &str) -> usize {
    hash.len()
        .saturating_add(text.len())
        .saturating_add(ENTRY_OVERHEAD)
}

impl Kept {
    fn touch(&mut self, hash: &str) -> Option<Arc<str>> {
        self.clock += 1;
        let clock = self.clock;
        let (text, used) = self.texts.get_mut(hash)?;
        let previous = std::mem::replace(used, clock);
        let text = text.clone();
        if let Some(hash) = self.order.remove(&previous) {
            self.order.insert(clock, hash);
        }
        Some(text)
    }

    fn insert(&mut self, hash: String, text: &str) {
        let bytes = size(&hash, text);
        if bytes > self.max_bytes || self.touch(&hash).is_some() {
            return;
        }
        while self.texts.len() >= self.max_entries || self.bytes + bytes > self.max_bytes {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some((text, _)) = self.texts.remove(&oldest) {
                self.bytes -= size(&oldest, &text);
            }
        }
        self.clock += 1;
        self.order.insert(self.clock, hash.clone());
        self.texts.insert(hash, (Arc::from(text), self.clock));
        self.bytes += bytes;
    }
}

impl PersistedQueries {
    /// A cache of at most `entries` documents (at least one) and `bytes` bytes.
    pub(super) fn new(entries: usize, bytes: usize) -> Self {
        Self(Arc::new(Mutex::new(Kept {
            texts: HashMap::new(),
            order: BTreeMap::new(),
            clock: 0,
            bytes: 0,
            max_entries: entries.max(1),
            max_bytes: bytes,
        })))
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Gives a request that names a persisted query its text: the one kept under its hash (a
    /// request with the hash alone), or its own, checked against the hash; the latter is
    /// [`Pending`] until [`Self::keep`] keeps it. A request without the extension is left as
    /// it is.
    pub(super) fn resolve(&self, request: &mut Request) -> Result<Option<Pending>, ServerError> {
        let Some(value) = request.extensions.remove("persistedQuery") else {
            return Ok(None);
        };
        let bad = |message: String| with_code(ServerError::new(message, None), "BAD_USER_INPUT");
        let persisted: PersistedQuery = async_graphql::from_value(value)
            .map_err(|_| bad("Invalid \"PersistedQuery\" extension configuration.".to_owned()))?;
        if persisted.version != 1 {
            return Err(bad(format!(
                "Only the \"PersistedQuery\" extension of version \"1\" is supported, and the current version is \"{}\".",
                persisted.version
            )));
        }
        if request.query.is_empty() {
            let text = self.kept().touch(&persisted.sha256_hash).ok_or_else(|| {
                with_code(
                    ServerError::new("PersistedQueryNotFound", None),
                    "PERSISTED_QUERY_NOT_FOUND",
                )
            })?;
            request.query = text.to_string();
            return Ok(None);
        }
        let hash = format!("{:x}", Sha256::digest(request.query.as_bytes()));
        if persisted.sha256_hash != hash {
            return Err(bad("provided sha does not match query".to_owned()));
        }
        Ok(Some(Pending { hash }))
    }

    /// Keeps the text of a request that was sent with its hash (and has passed every check).
    pub(super) fn keep(&self, pending: Pending, request: &Request) {
        self.kept().insert(pending.hash, &request.query);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(cache: &PersistedQueries) -> Vec<String> {
        let kept = cache.kept();
        kept.order.values().cloned().collect()
    }

    #[test]
    fn the_least_recently_used_go_first_past_either_bound() {
        let text = "x".repeat(100);
        let one = size("a", &text);
        let cache = PersistedQueries::new(10, 3 * one);
        for hash in ["a", "b", "c"] {
            cache.kept().insert(hash.to_owned(), &text);
        }
        assert_eq!(kept(&cache), ["a", "b", "c"]);
        assert!(cache.kept().touch("a").is_some());
        cache.kept().insert("d".to_owned(), &text);
        assert_eq!(kept(&cache), ["c", "a", "d"]);
        assert_eq!(cache.kept().bytes, 3 * one);
        // Too large to keep at all: nothing is dropped for it.
        cache.kept().insert("e".to_owned(), &"x".repeat(4 * one));
        assert_eq!(kept(&cache), ["c", "a", "d"]);
        // Bounded in entries too.
        let cache = PersistedQueries::new(2, usize::MAX);
        for hash in ["a", "b", "c"] {
            cache.kept().insert(hash.to_owned(), &text);
        }
        assert_eq!(kept(&cache), ["b", "c"]);
    }
}
