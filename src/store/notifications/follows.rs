//! Follows: one document per person and discussion followed, `_id` `<discussion>:<user>`.
//! Followers are read in ranges of `{discussion_id, user}`, a person's follows in ranges of
//! `{user, key}`, where `key` is the follow time and the discussion (latest first).

use std::collections::HashSet;

use futures::TryStreamExt;
use mongodb::bson::{doc, Document};

use crate::domain::{DiscussionId, Micros};
use crate::store::api::Following;
use crate::store::shared::connect::index_model;
use crate::store::shared::error::{as_limit, StoreResult};
use crate::store::shared::metrics::Counted;

/// The follows' indexes.
pub(super) async fn ensure_indexes(follows: &Counted<Document>) -> StoreResult<()> {
    follows
        .create_indexes([
            index_model(
                "discussion_user",
                doc! { "discussion_id": 1, "user": 1 },
                false,
            ),
            index_model("user_key", doc! { "user": 1, "key": 1 }, false),
        ])
        .await?;
    Ok(())
}

fn id_of(user: &str, discussion: &DiscussionId) -> String {
    format!("{}:{user}", discussion.as_str())
}

/// Follows or unfollows; whether that changed anything.
pub(super) async fn follow(
    follows: &Counted<Document>,
    user: &str,
    discussion: &DiscussionId,
    follow: bool,
    at: Micros,
) -> StoreResult<bool> {
    let id = id_of(user, discussion);
    if !follow {
        return Ok(follows.delete_one(doc! { "_id": id }).await?.deleted_count == 1);
    }
    let key = format!("{:016}:{}", at.0, discussion.as_str());
    let stored = doc! {
        "discussion_id": discussion.as_str(),
        "user": user,
        "at": at.0,
        "key": key,
    };
    let done = follows
        .update_one(doc! { "_id": &id }, doc! { "$setOnInsert": stored })
        .upsert(true)
        .await;
    match done {
        Ok(done) => Ok(done.upserted_id.is_some()),
        // Two follows at once: the other stored it.
        Err(err) if crate::store::shared::error::is_duplicate_key(&err) => Ok(false),
        Err(err) => Err(err.into()),
    }
}

/// Which of `discussions` `user` follows: one read by `_id`.
pub(super) async fn follows(
    follows: &Counted<Document>,
    user: &str,
    discussions: &[DiscussionId],
) -> StoreResult<HashSet<DiscussionId>> {
    if discussions.is_empty() {
        return Ok(HashSet::new());
    }
    let ids: Vec<String> = discussions.iter().map(|d| id_of(user, d)).collect();
    let found: Vec<Document> = follows
        .find(doc! { "_id": { "$in": ids } })
        .projection(doc! { "discussion_id": 1 })
        .await?
        .try_collect()
        .await?;
    Ok(found
        .iter()
        .filter_map(|d| d.get_str("discussion_id").ok())
        .filter_map(|d| DiscussionId::parse(d).ok())
        .collect())
}

/// A person's follows, latest first, after `after`.
pub(super) async fn following(
    follows: &Counted<Document>,
    user: &str,
    after: Option<&str>,
    limit: usize,
) -> StoreResult<Following> {
    let Some(limit) = as_limit(limit) else {
        return Ok(Vec::new());
    };
    let mut filter = doc! { "user": user };
    if let Some(after) = after {
        filter.insert("key", doc! { "$lt": after });
    }
    let found: Vec<Document> = follows
        .find(filter)
        .sort(doc! { "key": -1 })
        .limit(limit)
        .await?
        .try_collect()
        .await?;
    Ok(found
        .iter()
        .filter_map(|d| {
            let key = d.get_str("key").ok()?.to_owned();
            let discussion = DiscussionId::parse(d.get_str("discussion_id").ok()?).ok()?;
            Some((key, discussion))
        })
        .collect())
}

/// A discussion's followers after `after`, by id, who followed it by `by`: a page of the range
/// is read whole and those who followed later are left out of it (a short page is the end only
/// when the range had no more).
pub(super) async fn followers(
    follows: &Counted<Document>,
    discussion: &DiscussionId,
    by: Micros,
    after: Option<&str>,
    limit: usize,
) -> StoreResult<Vec<String>> {
    let Some(limit_i64) = as_limit(limit) else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    let mut after = after.map(str::to_owned);
    loop {
        let mut filter = doc! { "discussion_id": discussion.as_str() };
        if let Some(after) = &after {
            filter.insert("user", doc! { "$gt": after });
        }
        let page: Vec<Document> = follows
            .find(filter)
            .sort(doc! { "user": 1 })
            .limit(limit_i64)
            .projection(doc! { "user": 1, "at": 1 })
            .await?
            .try_collect()
            .await?;
        let ended = page.len() < limit;
        after = page
            .last()
            .and_then(|d| d.get_str("user").ok().map(str::to_owned));
        found.extend(page.iter().filter_map(|d| {
            let at = d.get_i64("at").unwrap_or(i64::MIN);
            (at <= by.0).then(|| d.get_str("user").ok().map(str::to_owned))?
        }));
        if ended || found.len() >= limit {
            return Ok(found);
        }
    }
}
