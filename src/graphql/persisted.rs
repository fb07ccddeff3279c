//! Automatic persisted queries (Apollo's protocol, version 1): a client sends a document's
//! SHA-256 hash alone and gets `PERSISTED_QUERY_NOT_FOUND` until it has sent the document with
//! its hash once; parsed documents are kept in an LRU cache per process. Run before the engine,
//! not as one of its extensions (see `limits`).

use async_graphql::extensions::apollo_persisted_queries::{CacheStorage, LruCacheStorage};
use async_graphql::{Request, ServerError};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::limits::with_code;

/// The `persistedQuery` request extension.
#[derive(Deserialize)]
struct PersistedQuery {
    version: i32,
    #[serde(rename = "sha256Hash")]
    sha256_hash: String,
}

/// The documents this process was sent with their hashes, most recently used kept.
#[derive(Clone)]
pub(super) struct PersistedQueries(LruCacheStorage);

impl PersistedQueries {
    /// A cache of at most `size` documents (at least one).
    pub(super) fn new(size: usize) -> Self {
        Self(LruCacheStorage::new(size.max(1)))
    }

    /// Gives a request that names a persisted query its document: the one kept under its hash
    /// (a request with the hash alone), or its own text, checked against the hash, parsed and
    /// kept. A request without the extension is left as it is.
    pub(super) async fn resolve(&self, request: &mut Request) -> Result<(), ServerError> {
        let Some(value) = request.extensions.remove("persistedQuery") else {
            return Ok(());
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
            let document = self.0.get(persisted.sha256_hash).await.ok_or_else(|| {
                with_code(
                    ServerError::new("PersistedQueryNotFound", None),
                    "PERSISTED_QUERY_NOT_FOUND",
                )
            })?;
            request.set_parsed_query(document);
            return Ok(());
        }
        let hash = format!("{:x}", Sha256::digest(request.query.as_bytes()));
        if persisted.sha256_hash != hash {
            return Err(bad("provided sha does not match query".to_owned()));
        }
        let document = request
            .parsed_query()
            .map_err(|e| with_code(e, "GRAPHQL_PARSE_FAILED"))?
            .clone();
        self.0.set(hash, document).await;
        Ok(())
    }
}
