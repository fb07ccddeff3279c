//! A collection's inserts from now on, as a stream: a change stream of inserts, opened again
//! after a failure from where it stopped (or from the moment it reopens, when its place is
//! lost). What one process's live features hear from every replica: notifications stored, and
//! events committed.

use std::time::Duration;

use futures::stream::{BoxStream, StreamExt};
use mongodb::bson::{doc, Document};

use super::error::StoreResult;
use super::metrics::Counted;

/// The wait before a failed stream is opened again.
const REOPEN: Duration = Duration::from_secs(1);

/// The documents inserted into `coll` from now on that `filter` keeps (a `$match` on the
/// change events: `fullDocument.<field>`), decoded by `decode` (a document it refuses is
/// passed over). `what` names them in the log.
pub(crate) fn inserted<T: Send + 'static>(
    coll: Counted<Document>,
    filter: Document,
    what: &'static str,
    decode: fn(&Document) -> StoreResult<T>,
) -> BoxStream<'static, T> {
    let mut matched = doc! { "operationType": "insert" };
    matched.extend(filter);
    let pipeline = vec![doc! { "$match": matched }];
    let stream = futures::stream::unfold((coll, None, None), move |(coll, mut open, mut token)| {
        let pipeline = pipeline.clone();
        async move {
            loop {
                let stream = match open.as_mut() {
                    Some(stream) => stream,
                    None => {
                        let opened = coll
                            .watch()
                            .pipeline(pipeline.clone())
                            .resume_after(token.clone())
                            .await;
                        match opened {
                            Ok(stream) => open.insert(stream),
                            Err(err) => {
                                tracing::warn!(%err, "cannot open the stream of {what}");
                                token = None;
                                tokio::time::sleep(REOPEN).await;
                                continue;
                            }
                        }
                    }
                };
                match stream.next().await {
                    Some(Ok(event)) => {
                        let read = event.full_document.as_ref().map(decode);
                        if let Some(Ok(item)) = read {
                            return Some((item, (coll, open, token)));
                        }
                    }
                    _ => {
                        token = stream.resume_token();
                        open = None;
                        tokio::time::sleep(REOPEN).await;
                    }
                }
            }
        }
    });
    let untraced = opentelemetry::Context::new().with_telemetry_suppressed();
    opentelemetry::context::FutureExt::with_context(stream, untraced).boxed()
}
