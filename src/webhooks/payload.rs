//! The body of a delivery: `{"type", "timestamp", "data"}`, with the discussion and the comment
//! an event concerns read as they are at the attempt (a deleted comment's text and HTML are
//! null), the actor and the reason. A round's events are read together: their discussions in
//! one read, each discussion's comments in one more, at the homes their events name (a page
//! or a document by id: one index key per page or comment, where a slug costs the
//! development database about 80 µs each) and by slug where none is named or it moved.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};

use mongodb::bson::Bson;

use crate::domain::{Comment, Discussion, DiscussionId, EventRecord, Slug};
use crate::store::{ReadScope, Storage, StoreResult, StoredEvent};

/// The JSON bodies of `events`' deliveries, by event id.
pub(super) async fn bodies<'a>(
    storage: &dyn Storage,
    stored: impl Iterator<Item = &'a StoredEvent>,
) -> StoreResult<HashMap<String, Vec<u8>>> {
    let stored: Vec<&StoredEvent> = stored.collect();
    let events: Vec<&EventRecord> = stored.iter().map(|e| &e.record).collect();
    let ids: Vec<DiscussionId> = events.iter().filter_map(|e| e.discussion.clone()).collect();
    let discussions = storage.discussions().by_ids_map(&ids).await?;
    let mut comments: HashMap<(DiscussionId, Slug), Arc<Comment>> = HashMap::new();
    for discussion in discussions.values() {
        let wanted: Vec<(Slug, Option<Bson>)> = stored
            .iter()
            .filter(|e| e.record.discussion.as_ref() == Some(&discussion.id))
            .filter_map(|e| Some((e.record.slug.clone()?, e.home.clone())))
            .collect();
        for comment in comments_of(storage, discussion, wanted).await? {
            comments.insert((discussion.id.clone(), comment.slug.clone()), comment);
        }
    }
    Ok(events
        .into_iter()
        .map(|event| {
            let discussion = event.discussion.as_ref().and_then(|id| discussions.get(id));
            let comment = match (&event.discussion, &event.slug) {
                (Some(id), Some(slug)) => comments.get(&(id.clone(), slug.clone())).map(|c| &**c),
                _ => None,
            };
            (event.id.clone(), body(event, discussion, comment))
        })
        .collect())
}

/// The JSON body of `event`'s deliveries, with its discussion and comment as read.
fn body(
    event: &EventRecord,
    discussion: Option<&Discussion>,
    comment: Option<&Comment>,
) -> Vec<u8> {
    let mut data = json!({
        "id": event.id,
        "discussion": discussion.map(discussion_json),
        "comment": comment.map(comment_json),
        "actor": { "id": event.actor.id, "name": event.actor.name },
        "reason": event.reason,
    });
    if let (Some(id), None) = (&event.discussion, discussion) {
        data["discussion"] = json!({ "id": id.as_str(), "key": null, "url": null, "title": null });
    }
    if let (Some(slug), None) = (&event.slug, comment) {
        data["comment"] = json!({ "slug": slug.as_str() });
    }
    if let Some(user) = &event.user {
        data["user"] = json!({ "id": user.as_str() });
    }
    if let Some(detail) = &event.detail {
        data["detail"] = json!(detail);
    }
    let body = json!({
        "type": event.kind.as_str(),
        "timestamp": event.at.to_datetime().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "data": data,
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

/// The comments `wanted` of a discussion as they are now: in its layout (at their homes where
/// given), else held.
async fn comments_of(
    storage: &dyn Storage,
    discussion: &Discussion,
    mut wanted: Vec<(Slug, Option<Bson>)>,
) -> StoreResult<Vec<Arc<Comment>>> {
    // One entry a slug, with a home where any of its events named one.
    wanted.sort_by(|a, b| {
        a.0.as_str()
            .cmp(b.0.as_str())
            .then(b.1.is_some().cmp(&a.1.is_some()))
    });
    wanted.dedup_by(|a, b| a.0 == b.0);
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let layout = storage.layout(discussion.layout)?;
    let mut found = layout
        .by_homes(&ReadScope::new(), discussion, &wanted)
        .await?;
    let missing: Vec<&Slug> = wanted
        .iter()
        .map(|(slug, _)| slug)
        .filter(|s| !found.iter().any(|c| &c.slug == *s))
        .collect();
    for slug in missing {
        if let Some(held) = storage.held().find(&discussion.id, slug).await? {
            found.push(Arc::new(held.comment));
        }
    }
    Ok(found)
}

fn discussion_json(discussion: &Discussion) -> Value {
    json!({
        "id": discussion.id.as_str(),
        "key": discussion.key.as_ref().map(|k| k.as_str()),
        "url": discussion.url,
        "title": discussion.title,
    })
}

fn comment_json(comment: &Comment) -> Value {
    let shown = !comment.deleted;
    json!({
        "slug": comment.slug.as_str(),
        "fullSlug": comment.full_slug.as_str(),
        "parentSlug": comment.parent.as_ref().map(|p| p.as_str()),
        "depth": comment.depth(),
        "author": { "id": comment.author.id, "name": comment.author.name },
        "text": if shown { comment.text.as_deref() } else { None },
        "html": if shown { comment.html.as_deref() } else { None },
        "status": comment.standing.status.as_str().to_uppercase(),
        "deleted": comment.deleted,
        "posted": comment.posted.to_datetime().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
    })
}
