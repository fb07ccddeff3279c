//! The store's change feed, as the live updates read it.

use std::collections::HashSet;
use std::time::Duration;

use futures::stream::{BoxStream, StreamExt};
use threadql::store::{ChangeKind, Storage, Store, Watched};

/// The store's change feed, once it is open.
pub(crate) async fn open_feed(store: &Store) -> BoxStream<'static, Watched> {
    let mut feed = store.changes().feed(Duration::from_millis(100));
    loop {
        match tokio::time::timeout(Duration::from_secs(30), feed.next()).await {
            Ok(Some(Watched::Open)) => return feed,
            Ok(Some(_)) => {}
            other => panic!("the change feed did not open: {other:?}"),
        }
    }
}

/// The slugs of the first `total` posts the feed reports in discussion `d` (each once).
pub(crate) async fn posts_reported(
    feed: &mut BoxStream<'static, Watched>,
    d: &str,
    total: usize,
) -> HashSet<String> {
    let mut reported: HashSet<String> = HashSet::new();
    while reported.len() < total {
        match tokio::time::timeout(Duration::from_secs(30), feed.next()).await {
            Ok(Some(Watched::Change(change))) => {
                assert_eq!(change.kind, ChangeKind::Posted);
                if change.discussion.as_str() == d {
                    assert!(reported.insert(change.slug.to_string()), "reported twice");
                }
            }
            // Reopened, or a change of the discussion document itself (counts, bookkeeping).
            Ok(Some(Watched::Open | Watched::Discussion(_))) => {}
            other => panic!(
                "the change feed stopped after {} of {total} posts: {other:?}",
                reported.len()
            ),
        }
    }
    reported
}
