//! The database's own floor for rewriting an embedded discussion's document: a one-field `$set`
//! of a changing value on that document, timed like the reads.

use std::time::Instant;

use anyhow::Context as _;
use mongodb::bson::{doc, Document, RawDocumentBuf};
use serde::Serialize;
use threadql::domain::DiscussionId;
use threadql::store::Discussions;

use crate::measure::Effort;
use crate::stats::{median, RunStats};

/// What rewriting the document costs the database, whatever the server does around it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Floor {
    /// The document's size, bytes.
    pub document_bytes: usize,
    /// Time of one `$set` of a changing value, ms (median over runs of the run's p50).
    pub set_p50_ms: f64,
    /// Updates timed per run.
    pub updates: usize,
    /// The same, measured again after the single writer's posts (which grow the document by
    /// up to a third at 1 000 comments), when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Box<Floor>>,
}

impl Floor {
    /// The floor to hold the single writer's posts against: the mean of the floors before and
    /// after them (their document grew between the two), or the one before.
    pub(crate) fn for_posts_ms(&self) -> f64 {
        match &self.after {
            Some(after) => (self.set_p50_ms + after.set_p50_ms) / 2.0,
            None => self.set_p50_ms,
        }
    }
}

/// Times `$set: {bench_floor: n}` (a new `n` every time, so every update really changes the
/// document) on the discussion's document, one at a time.
pub(crate) async fn measure(
    uri: &str,
    database: &str,
    discussion: &DiscussionId,
    effort: Effort,
) -> anyhow::Result<Floor> {
    let client = mongodb::Client::with_uri_str(uri)
        .await
        .context("cannot connect for the floor measurement")?;
    let docs = client
        .database(database)
        .collection::<Document>(Discussions::COLLECTION);
    let raw = client
        .database(database)
        .collection::<RawDocumentBuf>(Discussions::COLLECTION)
        .find_one(doc! { "_id": discussion.as_str() })
        .await?
        .context("the discussion document is missing")?;
    let updates = effort.requests.clamp(5, 50);
    let mut n: i64 = 0;
    let mut runs = Vec::new();
    for _ in 0..effort.runs {
        let mut samples = Vec::with_capacity(updates);
        for _ in 0..updates {
            n += 1;
            let started = Instant::now();
            docs.update_one(
                doc! { "_id": discussion.as_str() },
                doc! { "$set": { "bench_floor": n } },
            )
            .await?;
            samples.push(started.elapsed());
        }
        runs.push(RunStats::of(&samples).p50_ms);
    }
    Ok(Floor {
        document_bytes: raw.as_bytes().len(),
        set_p50_ms: median(runs),
        updates,
        after: None,
    })
}
