//! The stored form of an [`EventRecord`].

use mongodb::bson::{doc, DateTime, Document};

use crate::domain::EventRecord;
use crate::store::shared::bson::author_doc;

/// The document of `record`.
pub(super) fn event_doc(record: &EventRecord) -> Document {
    let mut doc = doc! {
        "_id": &record.id,
        "type": record.kind.as_str(),
        "at": record.at.0,
        "created": DateTime::from_millis(record.at.0 / 1000),
        "actor": author_doc(&record.actor),
        "moderator": record.moderator,
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::moderation::UserId;
    use crate::domain::{Author, DiscussionId, EventType, Micros, Slug};
    use mongodb::bson::Bson;

    #[test]
    fn a_record_is_stored_with_its_ids_and_a_date_for_the_ttl() {
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
    }
}
