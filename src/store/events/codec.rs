//! The stored form of an [`EventRecord`].

use mongodb::bson::{doc, Bson, DateTime, Document};

use crate::domain::moderation::UserId;
use crate::domain::{DiscussionId, EventRecord, EventType, Slug};
use crate::store::shared::bson::{author_doc, author_of, corrupt, micros_of, string_of};
use crate::store::shared::error::StoreResult;

/// The document of `record`, due for its webhook fan-out (`dispatch`) from its commit time, and
/// for its notifications (`notify`) when it may notify anyone.
pub(super) fn event_doc(record: &EventRecord) -> Document {
    let mut doc = doc! {
        "_id": &record.id,
        "type": record.kind.as_str(),
        "at": record.at.0,
        "created": DateTime::from_millis(record.at.0 / 1000),
        "dispatch": DateTime::from_millis(record.at.0 / 1000),
        "actor": author_doc(&record.actor),
        "moderator": record.moderator,
    };
    if crate::domain::notifications::notifies(record.kind) {
        doc.insert("notify", DateTime::from_millis(record.at.0 / 1000));
    }
    let mut put = |key: &str, value: Option<&str>| {
        if let Some(value) = value {
            doc.insert(key, value);
        }
    };
    put(
        "discussion_id",
        record.discussion.as_ref().map(|d| d.as_str()),
    );
    put("slug", record.slug.as_ref().map(|s| s.as_str()));
    put("author", record.author.as_ref().map(|a| a.as_str()));
    put("parent", record.parent.as_ref().map(|p| p.as_str()));
    put("user", record.user.as_ref().map(|u| u.as_str()));
    put("reason", record.reason.as_deref());
    put("detail", record.detail.as_deref());
    doc
}

/// The record stored as `doc`.
pub(crate) fn record_of(doc: &Document) -> StoreResult<EventRecord> {
    let bad = |what: String| corrupt(format!("an event: {what}"));
    let id = doc
        .get_str("_id")
        .map_err(|_| bad("no id".into()))?
        .to_owned();
    let kind = doc
        .get_str("type")
        .ok()
        .and_then(EventType::from_name)
        .ok_or_else(|| bad(format!("{id} has no known type")))?;
    let slug = |key: &str| -> StoreResult<Option<Slug>> {
        string_of(doc, key)?
            .map(|s| Slug::parse(&s).map_err(|e| bad(e.to_string())))
            .transpose()
    };
    Ok(EventRecord {
        kind,
        at: micros_of(doc, "at")?.ok_or_else(|| bad(format!("{id} has no time")))?,
        actor: author_of(doc, "actor")?,
        moderator: matches!(doc.get("moderator"), Some(Bson::Boolean(true))),
        discussion: string_of(doc, "discussion_id")?
            .map(|d| DiscussionId::parse(&d).map_err(|e| bad(e.to_string())))
            .transpose()?,
        slug: slug("slug")?,
        author: string_of(doc, "author")?.map(UserId::from_stored),
        parent: slug("parent")?,
        user: string_of(doc, "user")?.map(UserId::from_stored),
        reason: string_of(doc, "reason")?,
        detail: string_of(doc, "detail")?,
        id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Author, Micros};

    #[test]
    fn a_record_is_stored_with_its_ids_a_date_for_the_ttl_and_its_fan_out_due() {
        let record = EventRecord {
            id: "0000000000000001abcdefgh".into(),
            kind: EventType::CommentHeld,
            at: Micros(1_700_000_000_000_000),
            actor: Author {
                id: "u".into(),
                name: "U".into(),
            },
            moderator: false,
            discussion: Some(DiscussionId::generate()),
            slug: Some(Slug::parse("abcdefgh").expect("slug")),
            author: Some(UserId::from_stored("u".into())),
            parent: Some(Slug::parse("abcdefgh/ijklmnop").expect("slug")),
            user: None,
            reason: Some("held".into()),
            detail: None,
        };
        let doc = event_doc(&record);
        assert_eq!(doc.get_str("type"), Ok("comment.held"));
        assert_eq!(doc.get_str("slug"), Ok("abcdefgh"));
        assert_eq!(doc.get_str("parent"), Ok("abcdefgh/ijklmnop"));
        assert_eq!(doc.get_str("reason"), Ok("held"));
        assert!(doc.get("user").is_none() && doc.get("detail").is_none());
        assert_eq!(
            doc.get("created"),
            Some(&Bson::DateTime(DateTime::from_millis(1_700_000_000_000)))
        );
        assert_eq!(
            doc.get("dispatch"),
            doc.get("created"),
            "due for fan-out when committed"
        );
        assert_eq!(record_of(&doc).expect("read back"), record);
    }
}
