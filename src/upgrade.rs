//! The upgrades of stored data that every start runs once, before the server serves: what an
//! earlier version stored is brought up to date (each step records in `server` that it ran).

use anyhow::Context as _;

use crate::domain::{GuestIds, ServerKey};
use crate::store::Storage;

/// Brings the data an earlier version stored up to date, before a server serves: guest ids
/// keyed, embedded discussions' flat arrays of authors, comments numbered among their
/// authors', the names signed-in users posted under. Each step runs once per database (it records that it ran); every later start costs
/// one read per step.
pub async fn at_start(storage: &dyn Storage, key: &ServerKey) -> anyhow::Result<()> {
    key_guest_ids_at_start(storage, key).await?;
    index_embedded_authors(storage).await?;
    number_comments(storage).await?;
    record_names(storage).await
}

/// Records the names signed-in users posted under before each post recorded its author's
/// (guests may not take them), once, after the keying of guest ids (so imported guests are
/// told apart) and before serving: when the database records it done, one read and nothing
/// else.
async fn record_names(storage: &dyn Storage) -> anyhow::Result<()> {
    let server = storage.server();
    if !server.names_recorded().await? {
        let authors = server
            .record_names()
            .await
            .context("cannot record the names signed-in users posted under")?;
        tracing::info!(authors, "names of signed-in authors recorded");
    }
    Ok(())
}

/// Keys the imported guest ids stored unkeyed (by a version before keyed ids), once: when the
/// database records that they are keyed, one read and nothing else. Runs before the server
/// serves, so no read cache holds an unkeyed id; other processes' caches hear of each changed
/// discussion through the change feed.
async fn key_guest_ids_at_start(storage: &dyn Storage, key: &ServerKey) -> anyhow::Result<()> {
    let server = storage.server();
    if server.guest_ids_keyed().await? {
        return Ok(());
    }
    tracing::debug!("keying the imported guest ids stored unkeyed (once; see docs/operations.md)");
    let keyed = server
        .key_guest_ids(&GuestIds::new(key), &|_| {})
        .await
        .context("cannot key the imported guest ids (run `threadql key-guest-ids` to retry)")?;
    if keyed.ids == 0 {
        return Ok(());
    }
    tracing::info!(
        discussions = keyed.discussions,
        documents = keyed.documents,
        ids = keyed.ids,
        passes = keyed.passes,
        "imported guest ids keyed"
    );
    Ok(())
}

/// Writes the flat array of authors of the embedded discussions stored without it (by a
/// version before it), once, after the keying of guest ids (so it holds keyed ids) and before
/// serving: when the database records it done, one read and nothing else.
async fn index_embedded_authors(storage: &dyn Storage) -> anyhow::Result<()> {
    let server = storage.server();
    if !server.embedded_authors_indexed().await? {
        let written = server
            .index_embedded_authors()
            .await
            .context("cannot index the authors of embedded discussions")?;
        tracing::info!(
            discussions = written,
            "authors of embedded discussions indexed"
        );
    }
    Ok(())
}

/// Numbers the comments stored without their number among their author's (by a version
/// before comments were numbered), once, after the indexing of embedded authors (whose entries
/// get numbers too) and before serving: when the database records it done, one read and
/// nothing else.
async fn number_comments(storage: &dyn Storage) -> anyhow::Result<()> {
    let server = storage.server();
    if !server.comments_numbered().await? {
        let numbered = server
            .number_comments()
            .await
            .context("cannot number the stored comments among their authors'")?;
        if numbered > 0 {
            tracing::info!(
                comments = numbered,
                "stored comments numbered among their authors'"
            );
        }
    }
    Ok(())
}
