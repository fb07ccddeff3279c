//! The body of a delivery: `{"type", "timestamp", "data"}`, with the discussion and the comment
//! an event concerns read as they are at the attempt (a deleted comment's text and HTML are
//! null), the actor and the reason.

use serde_json::{json, Value};

use crate::domain::{Comment, Discussion, EventRecord};
use crate::store::{ReadScope, Storage, StoreResult};

/// The JSON body of `event`'s deliveries.
pub(super) async fn body(storage: &dyn Storage, event: &EventRecord) -> StoreResult<Vec<u8>> {
    let discussion = match &event.discussion {
        Some(id) => storage
            .discussions()
            .by_ids(std::slice::from_ref(id))
            .await?
            .pop(),
        None => None,
    };
    let comment = match (&discussion, &event.slug) {
        (Some(discussion), Some(slug)) => comment_of(storage, discussion, slug).await?,
        _ => None,
    };
    let mut data = json!({
        "id": event.id,
        "discussion": discussion.as_ref().map(discussion_json),
        "comment": comment.as_ref().map(comment_json),
        "actor": { "id": event.actor.id, "name": event.actor.name },
        "reason": event.reason,
    });
    if let (Some(id), None) = (&event.discussion, &discussion) {
        data["discussion"] = json!({ "id": id.as_str(), "key": null, "url": null, "title": null });
    }
    if let (Some(slug), None) = (&event.slug, &comment) {
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
    Ok(serde_json::to_vec(&body).unwrap_or_default())
}

/// The comment `slug` as it is now: held, or in the discussion's layout.
async fn comment_of(
    storage: &dyn Storage,
    discussion: &Discussion,
    slug: &crate::domain::Slug,
) -> StoreResult<Option<Comment>> {
    if let Some(held) = storage.held().find(&discussion.id, slug).await? {
        return Ok(Some(held.comment));
    }
    let layout = storage.layout(discussion.layout)?;
    Ok(layout
        .by_slugs(&ReadScope::new(), discussion, std::slice::from_ref(slug))
        .await?
        .pop())
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
