//! Automatic persisted queries (Apollo's protocol, version 1): a client sends a document's
//! SHA-256 hash alone and gets `PERSISTED_QUERY_NOT_FOUND` until it has sent the document with
//! its hash once. The texts are kept per process, bounded in entries and in bytes, least recently
//! used dropped first, and only once the document has passed every check (see `Api::admit`).
//! Run before the engine, not as one of its extensions (see `limits`).

use std::sync::{Arc, Mutex};

use async_graphql::{Request, ServerError};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::bounded::Bounded;
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
pub(super) struct PersistedQueries(Arc<Mutex<Bounded<String, Arc<str>>>>);

/// The bytes an entry is counted as.
fn size(hash: &str, text: &str) -> usize {
    hash.len()
        .saturating_add(text.len())
        .saturating_add(ENTRY_OVERHEAD)
}

impl PersistedQueries {
    /// A cache of at most `entries` documents (at least one) and `bytes` bytes.
    pub(super) fn new(entries: usize, bytes: usize) -> Self {
        Self(Arc::new(Mutex::new(Bounded::new(entries, bytes))))
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Bounded<String, Arc<str>>> {
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
            let text = self.kept().get(&persisted.sha256_hash).ok_or_else(|| {
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
        let bytes = size(&pending.hash, &request.query);
        self.kept()
            .insert(pending.hash, Arc::from(request.query.as_str()), bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_counted_with_their_hash_and_overhead() {
        let cache = PersistedQueries::new(10, size("a", "query") * 2);
        for hash in ["a", "b", "c"] {
            let pending = Pending {
                hash: hash.to_owned(),
            };
            cache.keep(pending, &Request::new("query"));
        }
        assert_eq!(cache.kept().keys_by_use(), ["b", "c"]);
        assert_eq!(cache.kept().bytes(), 2 * size("a", "query"));
    }
}
