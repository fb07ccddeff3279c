//! The import's writes: one prepared discussion found or created, its comments brought in by
//! the store's import move, then its held comments, votes, settings and source entries.

use std::time::Duration;

use super::{Options, Prepared};
use crate::domain::{
    Comment, Discussion, DiscussionId, DiscussionKey, DomainError, Held, Layout, Slug,
};
use crate::service::{Caller, Creating, Services};
use crate::store::{Step, Storage, StoreError};

/// A discussion the import leaves out, and why.
pub(super) struct Refused(pub(super) String);

impl From<anyhow::Error> for Refused {
    fn from(err: anyhow::Error) -> Self {
        Refused(format!("{err:#}"))
    }
}

impl From<StoreError> for Refused {
    fn from(err: StoreError) -> Self {
        Refused(err.to_string())
    }
}

impl From<DomainError> for Refused {
    fn from(err: DomainError) -> Self {
        Refused(err.to_string())
    }
}

/// Writes one discussion as `operator`; returns how many comments it added. Creating it, its
/// moderation mode and its lock are the services' workflows, with their events; the comments,
/// held comments, votes and pins are restored through the store's import steps.
pub(super) async fn write(
    services: &Services,
    operator: &Caller,
    mut prepared: Prepared,
    options: &Options,
) -> Result<u64, Refused> {
    let store = services.store().as_ref();
    let discussion = find_or_create(services, operator, &prepared).await?;
    let id = discussion.id.clone();
    for (_, comment) in prepared.comments.iter_mut().chain(prepared.held.iter_mut()) {
        comment.discussion_id = id.clone();
    }
    let known = store.imports().imported(&id).await?;
    let entries: Vec<(String, Slug)> = prepared
        .comments
        .iter()
        .chain(&prepared.held)
        .map(|(source, c)| (source.clone(), c.slug.clone()))
        .collect();
    let adding: Vec<Comment> = std::mem::take(&mut prepared.comments)
        .into_iter()
        .filter(|(source, _)| !known.contains(source))
        .map(|(_, c)| c)
        .collect();
    let new_held = prepared
        .held
        .iter()
        .filter(|(source, _)| !known.contains(source))
        .count();
    let mut added = 0;
    if !adding.is_empty() {
        added = bring_in(store, &discussion, prepared.new.layout, &adding, options).await?;
        drop(adding);
    } else if discussion.layout != prepared.new.layout && known.is_empty() {
        // A discussion created by a run that stopped before its move, with nothing to add.
        settle(store, &id, prepared.new.layout, &[], options).await?;
    }
    for (_, comment) in &prepared.held {
        store
            .held()
            .restore(&Held {
                comment: comment.clone(),
            })
            .await?;
    }
    added += new_held as u64;
    // Votes and the discussion's settings go on the discussion as the moves left it (read
    // only when the file gives some).
    let settings = prepared.locked || prepared.moderation.is_some() || !prepared.pinned.is_empty();
    if settings || !prepared.votes.is_empty() {
        let discussion = by_id(store, &id).await?;
        for (slug, voter, vote) in &prepared.votes {
            store
                .votes()
                .restore_vote(&discussion, slug, voter, *vote)
                .await
                .map_err(|e| Refused(format!("a vote on {slug} in discussion {id}: {e}")))?;
        }
        // Pins are restored as they were, like votes: a file may pin what the API no longer
        // pins (a comment deleted after it was pinned keeps its pin).
        for slug in &prepared.pinned {
            if !discussion.pinned.contains(slug) {
                store.discussions().set_pinned(&id, slug, true, &[]).await?;
            }
        }
        if let Some(mode) = prepared.moderation {
            if discussion.moderation != Some(mode) {
                services.set_moderation(operator, id.clone(), mode).await?;
            }
        }
        if prepared.locked && !discussion.locked {
            services.lock_discussion(operator, id.clone(), true).await?;
        }
    }
    store.imports().record_imported(&id, &entries).await?;
    Ok(added)
}

async fn by_id(store: &dyn Storage, id: &DiscussionId) -> Result<Discussion, Refused> {
    store
        .discussions()
        .by_ids(std::slice::from_ref(id))
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| Refused(format!("discussion {id} is gone")))
}

/// The discussion the file's discussion goes to: found by its key (or kept id), or created in
/// another layout than its own, so that the import's move brings the comments into its own.
async fn find_or_create(
    services: &Services,
    operator: &Caller,
    prepared: &Prepared,
) -> Result<Discussion, Refused> {
    let store = services.store().as_ref();
    let mut new = prepared.new.clone();
    new.layout = store.imports().import_scratch(prepared.new.layout);
    // A threadql discussion keeps the id the file gives it.
    let Some(id) = &prepared.new.id else {
        let how = Creating::UnlessKeyed;
        return Ok(services.create_discussion(operator, new, how).await?);
    };
    // A threadql discussion keeps its id; another discussion with its id or its key is not it.
    let by_id = store
        .discussions()
        .by_ids(std::slice::from_ref(id))
        .await?
        .into_iter()
        .next();
    if let Some(found) = by_id {
        if found.key != new.key {
            return Err(Refused(format!(
                "discussion {id} exists with the key {:?}, the file gives it {:?}: not imported",
                found.key.as_ref().map(DiscussionKey::as_str),
                new.key.as_ref().map(DiscussionKey::as_str)
            )));
        }
        return Ok(found);
    }
    match services
        .create_discussion(operator, new, Creating::Always)
        .await
    {
        Ok(created) => Ok(created),
        Err(DomainError::BadInput(why)) => {
            Err(Refused(format!("discussion {id}: {why}: not imported")))
        }
        Err(err) => Err(err.into()),
    }
}

/// Adds `adding` to the discussion, which ends in `layout`: one move when it is in another
/// layout, else two (out, adding, and back).
async fn bring_in(
    store: &dyn Storage,
    discussion: &Discussion,
    layout: Layout,
    adding: &[Comment],
    options: &Options,
) -> Result<u64, Refused> {
    if discussion.layout != layout {
        return settle(store, &discussion.id, layout, adding, options).await;
    }
    let scratch = store.imports().import_scratch(layout);
    let added = settle(store, &discussion.id, scratch, adding, options).await?;
    settle(store, &discussion.id, layout, &[], options).await?;
    Ok(added)
}

/// One import move, waiting out a fence left by a run that stopped.
async fn settle(
    store: &dyn Storage,
    id: &DiscussionId,
    to: Layout,
    adding: &[Comment],
    options: &Options,
) -> Result<u64, Refused> {
    let started = tokio::time::Instant::now();
    loop {
        let quiet = |_: Step| {};
        match store.imports().import(id, to, adding, &quiet).await {
            Ok(moved) => return Ok(moved.added),
            Err(StoreError::Busy(_)) if started.elapsed() < options.lease * 2 => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(err) => return Err(err.into()),
        }
    }
}
