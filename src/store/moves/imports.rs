//! What imports brought in: one entry per imported comment, `{discussion_id, source, slug}`,
//! under a unique `{discussion_id, source}` index (the source id, e.g. `disqus:1234`). A second
//! run of an import reads a discussion's entries (one range of that index) to add nothing twice.

use std::collections::HashSet;

use futures::TryStreamExt as _;
use mongodb::bson::{doc, Document};
use mongodb::Database;

use crate::domain::{DiscussionId, Slug};
use crate::store::shared::connect::index_model;
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::metrics::{CommandCounter, Counted};

/// The collection.
pub(crate) const COLLECTION: &str = "imports";

/// The imported comments' source ids.
pub(crate) struct Imports {
    coll: Counted<Document>,
}

impl Imports {
    pub(crate) fn new(db: &Database, commands: &CommandCounter) -> Self {
        Self {
            coll: Counted::new(db, COLLECTION, commands),
        }
    }

    /// One entry per source id in a discussion.
    pub(crate) async fn ensure_indexes(&self) -> StoreResult<()> {
        self.coll
            .create_index(index_model(
                "discussion_source",
                doc! { "discussion_id": 1, "source": 1 },
                true,
            ))
            .await?;
        Ok(())
    }

    /// The source ids imported into the discussion.
    pub(crate) async fn sources(&self, id: &DiscussionId) -> StoreResult<HashSet<String>> {
        let found: Vec<Document> = self
            .coll
            .find(doc! { "discussion_id": id.as_str() })
            .projection(doc! { "_id": 0, "source": 1 })
            .await?
            .try_collect()
            .await?;
        found
            .iter()
            .map(|d| {
                d.get_str("source").map(str::to_owned).map_err(|_| {
                    StoreError::Corrupt(format!(
                        "an import entry of discussion {id} without a source"
                    ))
                })
            })
            .collect()
    }

    /// Records imported comments (source id and slug); entries already there stay as they are.
    pub(crate) async fn record(
        &self,
        id: &DiscussionId,
        entries: &[(String, Slug)],
    ) -> StoreResult<()> {
        for chunk in entries.chunks(1000) {
            let docs: Vec<Document> = chunk
                .iter()
                .map(|(source, slug)| {
                    doc! { "discussion_id": id.as_str(), "source": source, "slug": slug.as_str() }
                })
                .collect();
            match self.coll.insert_many(docs).ordered(false).await {
                Ok(_) => {}
                Err(err) if only_duplicates(&err) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(())
    }
}

/// Whether every write error of an unordered insert is a duplicate key (entries already there).
fn only_duplicates(err: &mongodb::error::Error) -> bool {
    use mongodb::error::ErrorKind;
    const DUPLICATE_KEY: i32 = 11000;
    match err.kind.as_ref() {
        ErrorKind::InsertMany(failure) => {
            failure.write_concern_error.is_none()
                && failure
                    .write_errors
                    .as_ref()
                    .is_some_and(|errors| errors.iter().all(|e| e.code == DUPLICATE_KEY))
        }
        _ => false,
    }
}
