//! TTL indexes kept at a configured time.

use std::time::Duration;

use mongodb::bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::{Database, IndexModel};

use super::error::StoreResult;

/// A TTL index: `name`, on the date `field`, keeping a document `keep` after that date,
/// sparse when only some documents have the field.
pub(crate) struct Ttl<'a> {
    pub name: &'a str,
    pub field: &'a str,
    pub keep: Duration,
    pub sparse: bool,
}

/// Makes the TTL index `ttl` on `collection`; one made with another time is changed in place.
pub(crate) async fn ensure_ttl(db: &Database, collection: &str, ttl: &Ttl<'_>) -> StoreResult<()> {
    let index = IndexModel::builder()
        .keys(doc! { ttl.field: 1 })
        .options(
            IndexOptions::builder()
                .name(ttl.name.to_owned())
                .expire_after(ttl.keep)
                .sparse(ttl.sparse.then_some(true))
                .build(),
        )
        .build();
    let Err(err) = db
        .collection::<Document>(collection)
        .create_index(index)
        .await
    else {
        return Ok(());
    };
    let seconds = i64::try_from(ttl.keep.as_secs()).unwrap_or(i64::MAX);
    let changed = db
        .run_command(doc! {
            "collMod": collection,
            "index": { "name": ttl.name, "expireAfterSeconds": seconds },
        })
        .await;
    match changed {
        Ok(_) => Ok(()),
        Err(_) => Err(err.into()),
    }
}
