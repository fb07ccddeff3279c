//! The change feed, through the read cache: the cache hears every report first.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::{BoxStream, StreamExt as _};

use super::Store;
use crate::store::api::{ChangeFeed, Watched};
use crate::store::cache::ReadCache;
use crate::store::changes;
use crate::store::discussions::Discussions;
use crate::store::shared::metrics::Counted;

/// The read cache as the change feed keeps it exact; when the feed is dropped, the cache is
/// bypassed.
struct FeedHeard(Arc<ReadCache>);

impl Drop for FeedHeard {
    fn drop(&mut self) {
        self.0.feed_down();
    }
}

impl ChangeFeed for Store {
    fn feed(&self, retry: Duration) -> BoxStream<'static, Watched> {
        let feed = changes::feed(
            Counted::new(&self.db, Discussions::COLLECTION, &self.commands),
            retry,
        );
        let Some(cached) = &self.cache else {
            return feed;
        };
        // The cache hears every report before the feed's reader does: a change read after its
        // event is read past the cache.
        // Once the feed is dropped (the process is shutting down), nothing keeps the cache
        // exact: it is bypassed from then on.
        let heard = FeedHeard(cached.cache.clone());
        Box::pin(feed.inspect(move |watched| {
            let cache = &heard.0;
            match watched {
                Watched::Open => cache.feed_open(),
                Watched::Interrupted | Watched::Gap => cache.feed_down(),
                Watched::Change(change) => cache.invalidate(&change.discussion),
                Watched::Discussion(id) => cache.invalidate(id),
            }
        }))
    }
}
