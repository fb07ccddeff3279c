//! The feed itself: one change stream on the discussions collection, projected on the server to
//! the marks, read as reports, resumed from its last resume token after a failure, each event
//! counted with its lag.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::stream::{BoxStream, StreamExt};
use mongodb::bson::{doc, Bson, Document};
use mongodb::change_stream::event::ResumeToken;
use mongodb::change_stream::ChangeStream;

use super::marks::{FIELD, QUIET};
use crate::domain::{DiscussionId, Slug};
use crate::store::api::{ChangeKind, CommentChange, Watched};
use crate::store::shared::metrics::Counted;

/// Longest wait between two tries to reopen the feed.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The stream's pipeline: changes of existing discussion documents, projected on the server to
/// the mark (when the change set one), the document key and the event's times, so an embedded
/// discussion's comments never travel with the event.
fn pipeline() -> Vec<Document> {
    let marked = format!("updateDescription.updatedFields.{FIELD}");
    vec![
        doc! { "$match": { "operationType": { "$in": ["update", "replace", "delete"] } } },
        doc! { "$project": { "documentKey": 1, &marked: 1, "clusterTime": 1, "wallTime": 1 } },
    ]
}

/// Microseconds from an event's time on the database (its `wallTime`, to the millisecond; else
/// its `clusterTime`, to the second) to now on this machine's clock.
fn lag_micros(event: &Document) -> Option<i64> {
    let happened = match (event.get("wallTime"), event.get("clusterTime")) {
        (Some(Bson::DateTime(wall)), _) => wall.timestamp_millis().checked_mul(1_000)?,
        (_, Some(Bson::Timestamp(cluster))) => i64::from(cluster.time).checked_mul(1_000_000)?,
        _ => return None,
    };
    let now = i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .ok()?
            .as_micros(),
    )
    .ok()?;
    now.checked_sub(happened)
}

/// Reads what an event reports: the changes its mark names, or, for a change of the document
/// without a mark (or with one this version does not read), that the discussion changed.
/// `None` for an event without a discussion id (logged and skipped).
fn change_of(event: &Document) -> Option<Vec<Watched>> {
    let discussion = event
        .get_document("documentKey")
        .ok()?
        .get_str("_id")
        .ok()?;
    let discussion = DiscussionId::parse(discussion).ok()?;
    let marked = event
        .get_document("updateDescription")
        .and_then(|u| u.get_document("updatedFields"))
        .and_then(|f| f.get_document(FIELD))
        .ok()
        .and_then(|mark| marked_changes(&discussion, mark));
    Some(match marked {
        Some(changes) => changes.into_iter().map(Watched::Change).collect(),
        None => vec![Watched::Discussion(discussion)],
    })
}

/// The comment changes a mark names (`None` for a mark this version does not read).
fn marked_changes(discussion: &DiscussionId, mark: &Document) -> Option<Vec<CommentChange>> {
    let kind = match mark.get_str("kind").ok()? {
        "posted" => ChangeKind::Posted,
        "changed" => ChangeKind::Changed,
        QUIET => ChangeKind::Quiet,
        // Kinds a later version may write.
        _ => return None,
    };
    let slugs = match mark.get_array("slugs") {
        Ok(all) => all
            .iter()
            .map(|s| s.as_str().and_then(|s| Slug::parse(s).ok()))
            .collect::<Option<Vec<_>>>()?,
        Err(_) => vec![Slug::parse(mark.get_str("slug").ok()?).ok()?],
    };
    Some(
        slugs
            .into_iter()
            .map(|slug| CommentChange {
                discussion: discussion.clone(),
                slug,
                kind,
            })
            .collect(),
    )
}

/// Where the feed is.
enum Step {
    /// Not open: open it (after `wait`), resuming after `token` when there is one.
    Closed {
        token: Option<ResumeToken>,
        wait: Duration,
    },
    /// Open and reading; `pending` holds the rest of an event that reported several changes.
    Open {
        stream: Box<ChangeStream<Document>>,
        pending: VecDeque<Watched>,
    },
}

/// The feed over the discussions collection, forever: `Open` each time the stream is (re)opened,
/// a `Change` per marked update, `Interrupted` when the stream fails (it is then reopened from its
/// last resume token, waiting longer each time up to [`MAX_BACKOFF`]), and `Gap` when the
/// database no longer has the history after that token, so changes in between were lost. Its
/// database commands are not traced.
pub(crate) fn feed(coll: Counted<Document>, retry: Duration) -> BoxStream<'static, Watched> {
    let start = Step::Closed {
        token: None,
        wait: Duration::ZERO,
    };
    let feed = futures::stream::unfold((coll, start), move |(coll, step)| async move {
        match step {
            Step::Closed { token, wait } => {
                tokio::time::sleep(wait).await;
                let resuming = token.is_some();
                match coll
                    .watch()
                    .pipeline(pipeline())
                    .resume_after(token.clone())
                    .await
                {
                    Ok(stream) => {
                        let stream = Box::new(stream.with_type::<Document>());
                        let open = Step::Open {
                            stream,
                            pending: VecDeque::new(),
                        };
                        Some((Watched::Open, (coll, open)))
                    }
                    Err(err) if resuming && is_history_lost(&err) => {
                        tracing::warn!(%err, "the change feed cannot resume where it stopped: changes in between are lost");
                        let next = Step::Closed {
                            token: None,
                            wait: Duration::ZERO,
                        };
                        Some((Watched::Gap, (coll, next)))
                    }
                    Err(err) => {
                        tracing::warn!(%err, "cannot open the change feed; trying again");
                        let wait = (wait * 2).clamp(retry, MAX_BACKOFF.max(retry));
                        Some((Watched::Interrupted, (coll, Step::Closed { token, wait })))
                    }
                }
            }
            Step::Open {
                mut stream,
                mut pending,
            } => loop {
                if let Some(watched) = pending.pop_front() {
                    let open = Step::Open { stream, pending };
                    return Some((watched, (coll, open)));
                }
                match stream.next().await {
                    Some(Ok(event)) => {
                        coll.commands().change_event(lag_micros(&event));
                        match change_of(&event) {
                            Some(reported) => pending.extend(reported),
                            None => {
                                tracing::warn!(
                                    ?event,
                                    "skipping a change event without a discussion id"
                                )
                            }
                        }
                    }
                    failed => {
                        match failed {
                            Some(Err(err)) => {
                                tracing::warn!(%err, "the change feed failed; reopening it")
                            }
                            _ => tracing::warn!("the change feed ended; reopening it"),
                        }
                        let next = Step::Closed {
                            token: stream.resume_token(),
                            wait: retry,
                        };
                        return Some((Watched::Interrupted, (coll, next)));
                    }
                }
            },
        }
    });
    // The stream waits on the server for changes and asks again all the time: a trace of each
    // of its commands would be noise, and a trace of the whole would never end.
    let untraced = opentelemetry::Context::new().with_telemetry_suppressed();
    opentelemetry::context::FutureExt::with_context(feed, untraced).boxed()
}

/// Whether opening a stream failed because its resume token is no longer in the history
/// (`ChangeStreamHistoryLost`, or the fatal error a server gives for an unknown token).
fn is_history_lost(err: &mongodb::error::Error) -> bool {
    matches!(
        err.kind.as_ref(),
        mongodb::error::ErrorKind::Command(e) if e.code == 286 || e.code == 280
    )
}

#[cfg(test)]
mod tests {
    use mongodb::bson::Bson;

    use super::*;
    use crate::domain::SlugPart;
    use crate::store::changes::marks::{mark, mark_all};

    fn event(mark: Document) -> Document {
        doc! {
            "_id": { "_data": "00" },
            "documentKey": { "_id": DiscussionId::generate().to_string() },
            "updateDescription": { "updatedFields": { FIELD: Bson::Document(mark) } },
        }
    }

    /// The comment changes an event reports.
    fn changes(event: &Document) -> Vec<CommentChange> {
        change_of(event)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|watched| match watched {
                Watched::Change(change) => Some(change),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn marks_read_back_as_changes() {
        let slug = Slug::top_level(&SlugPart::generate());
        for kind in [ChangeKind::Posted, ChangeKind::Changed] {
            let changes = changes(&event(mark(kind, &slug)));
            assert_eq!(changes.len(), 1);
            assert_eq!(changes[0].kind, kind);
            assert_eq!(changes[0].slug, slug);
        }
        assert_ne!(
            mark(ChangeKind::Posted, &slug),
            mark(ChangeKind::Posted, &slug)
        );
    }

    #[test]
    fn unmarked_or_unknown_marks_read_back_as_a_change_of_the_discussion() {
        let slug = Slug::top_level(&SlugPart::generate());
        let mut odd = mark(ChangeKind::Posted, &slug);
        odd.insert("kind", "renamed");
        let mut bad = mark(ChangeKind::Posted, &slug);
        bad.insert("slugs", vec!["not a slug!"]);
        let id = DiscussionId::generate();
        let unmarked = doc! {
            "_id": { "_data": "00" },
            "documentKey": { "_id": id.to_string() },
            "updateDescription": { "updatedFields": {} },
        };
        for event in [event(odd), event(bad), unmarked] {
            let reported = change_of(&event).expect("a discussion id");
            assert!(
                matches!(reported.as_slice(), [Watched::Discussion(_)]),
                "{reported:?}"
            );
        }
        assert!(change_of(&doc! { "_id": 1 }).is_none());
    }

    #[test]
    fn a_mark_of_posts_stored_together_reads_back_as_each_post() {
        let slugs: Vec<Slug> = (0..3)
            .map(|_| Slug::top_level(&SlugPart::generate()))
            .collect();
        let refs: Vec<&Slug> = slugs.iter().collect();
        let changes = changes(&event(mark_all(ChangeKind::Posted, &refs)));
        let read: Vec<&Slug> = changes.iter().map(|c| &c.slug).collect();
        assert_eq!(read, refs);
        assert!(changes.iter().all(|c| c.kind == ChangeKind::Posted));
        assert!(!mark_all(ChangeKind::Posted, &refs[..1]).contains_key("slugs"));
    }
}
