//! The stored forms of a notification and of a person.

use mongodb::bson::{doc, Bson, DateTime, Document};

use crate::domain::notifications::{
    EmailFrequency, Notification, NotificationKind, NotificationSettings,
};
use crate::domain::{DiscussionId, Slug};
use crate::store::api::Person;
use crate::store::shared::bson::{author_doc, author_of, corrupt, micros_of, string_of};
use crate::store::shared::error::StoreResult;

/// The document of `notification`: `_id` is what keeps it once (`<once>|<recipient>`; a
/// `once` never holds `|`), `key` its id (which sorts by commit time), `created` the date its
/// TTL index counts from.
pub(super) fn notification_doc(notification: &Notification) -> Document {
    let mut doc = doc! {
        "_id": format!("{}|{}", notification.once(), notification.recipient),
        "key": &notification.id,
        "recipient": &notification.recipient,
        "kind": notification.kind.as_str(),
        "at": notification.at.0,
        "read": notification.read,
        "discussion_id": notification.discussion.as_str(),
        "slug": notification.slug.as_str(),
        "actor": author_doc(&notification.actor),
        "created": DateTime::from_millis(notification.at.0 / 1000),
    };
    if let Some(reason) = &notification.reason {
        doc.insert("reason", reason);
    }
    if let Some(approved) = notification.approved {
        doc.insert("approved", approved);
    }
    doc
}

/// The notification stored as `doc`.
pub(super) fn notification_of(doc: &Document) -> StoreResult<Notification> {
    let bad = |what: &str| corrupt(format!("a notification: {what}"));
    let text = |key: &str| doc.get_str(key).map_err(|_| bad(key));
    Ok(Notification {
        id: text("key")?.to_owned(),
        recipient: text("recipient")?.to_owned(),
        kind: NotificationKind::from_name(text("kind")?).ok_or_else(|| bad("kind"))?,
        at: micros_of(doc, "at")?.ok_or_else(|| bad("at"))?,
        read: matches!(doc.get("read"), Some(Bson::Boolean(true))),
        discussion: DiscussionId::parse(text("discussion_id")?).map_err(|e| bad(&e.to_string()))?,
        slug: Slug::parse(text("slug")?).map_err(|e| bad(&e.to_string()))?,
        actor: author_of(doc, "actor")?,
        reason: string_of(doc, "reason")?,
        approved: match doc.get("approved") {
            Some(Bson::Boolean(approved)) => Some(*approved),
            _ => None,
        },
    })
}

/// The stored form of `settings`.
pub(super) fn settings_doc(settings: &NotificationSettings) -> Document {
    doc! {
        "email": settings.email.as_str(),
        "on_reply": settings.on_reply,
        "on_moderation": settings.on_moderation,
        "on_followed": settings.on_followed,
    }
}

/// The person stored as `doc`.
pub(super) fn person_of(doc: &Document) -> StoreResult<Person> {
    let settings = match doc.get_document("settings") {
        Ok(s) => Some(NotificationSettings {
            email: s
                .get_str("email")
                .ok()
                .and_then(EmailFrequency::from_name)
                .ok_or_else(|| corrupt("a person's settings: email"))?,
            on_reply: s.get_bool("on_reply").unwrap_or(true),
            on_moderation: s.get_bool("on_moderation").unwrap_or(true),
            on_followed: s.get_bool("on_followed").unwrap_or(true),
        }),
        Err(_) => None,
    };
    Ok(Person {
        id: doc
            .get_str("_id")
            .map_err(|_| corrupt("a person without an id"))?
            .to_owned(),
        address: string_of(doc, "address")?,
        settings,
        mail_due: micros_of(doc, "mail_due")?,
        last_mailed: micros_of(doc, "last_mailed")?,
        mail_tries: match doc.get("mail_tries") {
            Some(Bson::Int32(t)) => u32::try_from(*t).unwrap_or(0),
            Some(Bson::Int64(t)) => u32::try_from(*t).unwrap_or(0),
            _ => 0,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Author, Micros};

    #[test]
    fn a_notification_reads_back_as_stored_with_its_once_key_and_ttl_date() {
        let notification = Notification {
            id: "0000000000000001abcdefgh:ada".into(),
            recipient: "ada".into(),
            kind: NotificationKind::Moderation,
            at: Micros(1_700_000_000_000_000),
            read: false,
            discussion: DiscussionId::generate(),
            slug: Slug::parse("abcdefgh").expect("slug"),
            actor: Author {
                id: "mod".into(),
                name: "Mod".into(),
            },
            reason: Some("spam".into()),
            approved: Some(false),
        };
        let doc = notification_doc(&notification);
        assert_eq!(
            doc.get_str("_id"),
            Ok("0000000000000001abcdefgh:ada|ada"),
            "a moderation notice is kept once per event"
        );
        assert_eq!(doc.get_str("key"), Ok("0000000000000001abcdefgh:ada"));
        assert!(matches!(doc.get("created"), Some(Bson::DateTime(_))));
        assert_eq!(notification_of(&doc).expect("read back"), notification);
    }

    #[test]
    fn a_person_without_settings_has_none_and_bad_settings_are_corrupt() {
        let person = person_of(&doc! { "_id": "ada", "address": "a@example.com" }).expect("ok");
        assert_eq!(person.settings, None);
        assert_eq!(person.address.as_deref(), Some("a@example.com"));
        let settings = NotificationSettings::defaults(EmailFrequency::Daily);
        let stored = person_of(&doc! { "_id": "ada", "settings": settings_doc(&settings) });
        assert_eq!(stored.expect("ok").settings, Some(settings));
        assert!(person_of(&doc! { "_id": "ada", "settings": { "email": "weekly" } }).is_err());
    }
}
