//! Parsed documents kept by their text: clients send the same few queries over and over, and
//! parsing one (the engine's PEG parser) costs more than copying its parsed form. Only short
//! texts are kept, and only so many, so a client sending distinct documents cannot grow it.

use async_graphql::extensions::apollo_persisted_queries::{CacheStorage, LruCacheStorage};
use async_graphql::Request;

/// Documents kept.
const KEPT: usize = 256;
/// Longest text kept, in bytes.
const LONGEST: usize = 16 * 1024;

/// The parsed documents of recent requests, most recently used kept.
#[derive(Clone)]
pub(super) struct ParsedDocuments(LruCacheStorage);

impl Default for ParsedDocuments {
    fn default() -> Self {
        Self(LruCacheStorage::new(KEPT))
    }
}

impl ParsedDocuments {
    /// Gives the request the document parsed from the same text before, if one is kept;
    /// whether it did.
    pub(super) async fn recall(&self, request: &mut Request) -> bool {
        if !keeps(&request.query) {
            return false;
        }
        match self.0.get(request.query.clone()).await {
            Some(document) => {
                request.set_parsed_query(document);
                true
            }
            None => false,
        }
    }

    /// Keeps the request's parsed document under its text (the request must have been parsed).
    pub(super) async fn keep(&self, request: &mut Request) {
        if !keeps(&request.query) {
            return;
        }
        if let Ok(document) = request.parsed_query() {
            let document = document.clone();
            self.0.set(request.query.clone(), document).await;
        }
    }
}

fn keeps(query: &str) -> bool {
    !query.is_empty() && query.len() <= LONGEST
}
