//! The stored forms of webhook endpoints and deliveries.

use mongodb::bson::{doc, Bson, DateTime, Document};

use crate::domain::webhooks::{Delivery, DeliveryStatus, Endpoint, SigningSecret};
use crate::domain::{EventType, Micros};
use crate::store::shared::bson::{as_i64, corrupt, micros_of, string_of};
use crate::store::shared::error::{StoreError, StoreResult};

/// The document of a new endpoint (`description`, `disabled_reason` and `failing_since` only
/// when set).
pub(super) fn endpoint_doc(endpoint: &Endpoint) -> Document {
    let mut doc = doc! {
        "_id": &endpoint.id,
        "url": &endpoint.url,
        "events": kinds_bson(endpoint.events.as_deref()),
        "enabled": endpoint.enabled,
        "created": endpoint.created.0,
        "secrets": secrets_bson(&endpoint.secrets),
    };
    if let Some(description) = &endpoint.description {
        doc.insert("description", description);
    }
    if let Some(reason) = &endpoint.disabled_reason {
        doc.insert("disabled_reason", reason);
    }
    if let Some(since) = endpoint.failing_since {
        doc.insert("failing_since", since.0);
    }
    doc
}

/// The stored kinds of an endpoint: their names, or null for every kind.
pub(super) fn kinds_bson(kinds: Option<&[EventType]>) -> Bson {
    match kinds {
        None => Bson::Null,
        Some(kinds) => Bson::Array(kinds.iter().map(|k| Bson::from(k.as_str())).collect()),
    }
}

/// The stored secrets: `[{secret, until}]`, newest first (`until` null while it signs on).
pub(super) fn secrets_bson(secrets: &[SigningSecret]) -> Bson {
    Bson::Array(
        secrets
            .iter()
            .map(|s| Bson::Document(doc! { "secret": &s.secret, "until": s.until.map(|u| u.0) }))
            .collect(),
    )
}

/// The endpoint stored as `doc`.
pub(super) fn endpoint_of(doc: &Document) -> StoreResult<Endpoint> {
    let id = doc
        .get_str("_id")
        .map_err(|_| corrupt("a webhook endpoint has no id"))?
        .to_owned();
    let bad = |what: &str| corrupt(format!("webhook endpoint {id}: {what}"));
    let events = match doc.get("events") {
        None | Some(Bson::Null) => None,
        // A name this version does not know (written by a newer one) is a kind it never sends.
        Some(Bson::Array(names)) => Some(
            names
                .iter()
                .map(|name| {
                    name.as_str()
                        .ok_or_else(|| bad("an event kind is not a name"))
                })
                .collect::<StoreResult<Vec<&str>>>()?
                .into_iter()
                .filter_map(EventType::from_name)
                .collect(),
        ),
        Some(_) => return Err(bad("events is not a list")),
    };
    let secrets = match doc.get("secrets") {
        None | Some(Bson::Null) => Vec::new(),
        Some(Bson::Array(secrets)) => secrets
            .iter()
            .map(|s| secret_of(s).map_err(|e| bad(&e.to_string())))
            .collect::<StoreResult<_>>()?,
        Some(_) => return Err(bad("secrets is not a list")),
    };
    Ok(Endpoint {
        url: string_of(doc, "url")?.ok_or_else(|| bad("no url"))?,
        events,
        description: string_of(doc, "description")?,
        enabled: doc
            .get_bool("enabled")
            .map_err(|_| bad("no enabled flag"))?,
        disabled_reason: string_of(doc, "disabled_reason")?,
        created: micros_of(doc, "created")?.ok_or_else(|| bad("no creation time"))?,
        secrets,
        failing_since: micros_of(doc, "failing_since")?,
        id,
    })
}

/// One stored secret.
fn secret_of(value: &Bson) -> StoreResult<SigningSecret> {
    let doc = value
        .as_document()
        .ok_or_else(|| corrupt("a secret is not a document"))?;
    Ok(SigningSecret {
        secret: string_of(doc, "secret")?.ok_or_else(|| corrupt("a secret has no text"))?,
        until: micros_of(doc, "until")?,
    })
}

/// The document of a new delivery, unclaimed. `next_at` is there only while it is pending
/// (a pending one given no time is due at its event's commit: at once).
pub(super) fn delivery_doc(delivery: &Delivery) -> Document {
    let mut doc = doc! {
        "_id": &delivery.id,
        "endpoint": &delivery.endpoint,
        "event": &delivery.event,
        "type": delivery.kind.as_str(),
        "status": delivery.status.as_str(),
        "attempts": i64::from(delivery.attempts),
        "committed": delivery.committed.0,
    };
    if delivery.status == DeliveryStatus::Pending {
        doc.insert("next_at", delivery.next_at.unwrap_or(delivery.committed).0);
    } else {
        // Finished when stored: kept for the retention from now (the TTL index).
        doc.insert("finished", DateTime::now());
    }
    if let Some(at) = delivery.last_attempt_at {
        doc.insert("last_attempt_at", at.0);
    }
    if let Some(status) = delivery.last_status {
        doc.insert("last_status", i32::from(status));
    }
    if let Some(error) = &delivery.last_error {
        doc.insert("last_error", error);
    }
    if let Some(body) = &delivery.last_body {
        doc.insert("last_body", body);
    }
    doc
}

/// The delivery stored as `doc`.
pub(super) fn delivery_of(doc: &Document) -> StoreResult<Delivery> {
    let id = doc
        .get_str("_id")
        .map_err(|_| corrupt("a webhook delivery has no id"))?
        .to_owned();
    let bad = |what: &str| corrupt(format!("webhook delivery {id}: {what}"));
    let text = |key: &str| -> StoreResult<String> {
        string_of(doc, key)?.ok_or_else(|| bad(&format!("no {key}")))
    };
    let number = |key: &str| -> StoreResult<Option<i64>> {
        match doc.get(key) {
            None | Some(Bson::Null) => Ok(None),
            Some(value) => as_i64(value)
                .map(Some)
                .ok_or_else(|| bad(&format!("{key} is not a number"))),
        }
    };
    let out_of_range = |key: &str| -> StoreError { bad(&format!("{key} is out of range")) };
    Ok(Delivery {
        endpoint: text("endpoint")?,
        event: text("event")?,
        kind: EventType::from_name(&text("type")?).ok_or_else(|| bad("an unknown event kind"))?,
        status: DeliveryStatus::from_stored(&text("status")?)
            .ok_or_else(|| bad("an unknown status"))?,
        attempts: u32::try_from(number("attempts")?.unwrap_or(0))
            .map_err(|_| out_of_range("attempts"))?,
        next_at: micros_of(doc, "next_at")?,
        last_attempt_at: micros_of(doc, "last_attempt_at")?,
        last_status: number("last_status")?
            .map(|n| u16::try_from(n).map_err(|_| out_of_range("last_status")))
            .transpose()?,
        last_error: string_of(doc, "last_error")?,
        last_body: string_of(doc, "last_body")?,
        committed: micros_of(doc, "committed")?.ok_or_else(|| bad("no commit time"))?,
        id,
    })
}

/// The secrets after `new` becomes the newest: the others sign until `until` at the latest
/// (those ending sooner keep their end), and those ended at `now` (or with `new`'s text) go.
pub(super) fn rotated(
    secrets: &[SigningSecret],
    new: &SigningSecret,
    until: Micros,
    now: Micros,
) -> Vec<SigningSecret> {
    let others = secrets
        .iter()
        .filter(|s| s.secret != new.secret)
        .map(|s| SigningSecret {
            secret: s.secret.clone(),
            until: Some(s.until.map_or(until, |own| own.min(until))),
        })
        .filter(|s| s.until.is_some_and(|end| end > now));
    std::iter::once(new.clone()).chain(others).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint() -> Endpoint {
        Endpoint {
            id: "ep_0123456789abcdef01234567".into(),
            url: "https://hooks.example.com/threadql".into(),
            events: Some(vec![EventType::CommentPosted, EventType::UserBanned]),
            description: Some("the moderation bot".into()),
            enabled: false,
            disabled_reason: Some("answered 410 Gone".into()),
            created: Micros(1_700_000_000_000_000),
            secrets: vec![
                SigningSecret {
                    secret: "whsec_bmV3ZXN0".into(),
                    until: None,
                },
                SigningSecret {
                    secret: "whsec_b2xkZXI=".into(),
                    until: Some(Micros(1_700_000_100_000_000)),
                },
            ],
            failing_since: Some(Micros(1_700_000_050_000_000)),
        }
    }

    fn delivery() -> Delivery {
        Delivery {
            id: Delivery::id_of("1700000000000000abcdefgh", "ep_0123456789abcdef01234567"),
            endpoint: "ep_0123456789abcdef01234567".into(),
            event: "1700000000000000abcdefgh".into(),
            kind: EventType::CommentEdited,
            status: DeliveryStatus::Pending,
            attempts: 3,
            next_at: Some(Micros(1_700_000_200_000_000)),
            last_attempt_at: Some(Micros(1_700_000_100_000_000)),
            last_status: Some(503),
            last_error: Some("answered 503".into()),
            last_body: Some("busy".into()),
            committed: Micros(1_700_000_000_000_000),
        }
    }

    #[test]
    fn an_endpoint_reads_back_as_it_was_stored() {
        let endpoint = endpoint();
        let doc = endpoint_doc(&endpoint);
        assert_eq!(doc.get_str("_id"), Ok(endpoint.id.as_str()));
        assert_eq!(
            doc.get_array("events").map(|a| a.len()),
            Ok(2),
            "kinds by name"
        );
        assert_eq!(endpoint_of(&doc).expect("read back"), endpoint);

        let every = Endpoint {
            events: None,
            description: None,
            enabled: true,
            disabled_reason: None,
            failing_since: None,
            secrets: vec![],
            ..endpoint
        };
        let doc = endpoint_doc(&every);
        assert_eq!(doc.get("events"), Some(&Bson::Null), "null: every kind");
        for absent in ["description", "disabled_reason", "failing_since"] {
            assert!(doc.get(absent).is_none(), "{absent} is left out");
        }
        assert_eq!(endpoint_of(&doc).expect("read back"), every);
    }

    #[test]
    fn an_unknown_kind_is_one_the_endpoint_never_gets() {
        let mut doc = endpoint_doc(&endpoint());
        doc.insert("events", vec!["comment.posted", "comment.teleported"]);
        let read = endpoint_of(&doc).expect("read");
        assert_eq!(read.events, Some(vec![EventType::CommentPosted]));
        doc.insert("events", "comment.posted");
        assert!(endpoint_of(&doc).is_err(), "a list, or nothing");
    }

    #[test]
    fn no_secret_shows_in_debug_output() {
        let endpoint = endpoint_of(&endpoint_doc(&endpoint())).expect("read back");
        let shown = format!("{endpoint:?} {:?}", endpoint.secrets);
        for secret in &endpoint.secrets {
            assert!(!shown.contains(&secret.secret), "{shown}");
        }
        assert!(shown.contains("https://hooks.example.com/threadql"));
    }

    #[test]
    fn a_delivery_reads_back_as_it_was_stored() {
        let delivery = delivery();
        let doc = delivery_doc(&delivery);
        assert_eq!(doc.get_str("type"), Ok("comment.edited"));
        assert_eq!(doc.get_str("status"), Ok("pending"));
        assert_eq!(doc.get_i64("next_at"), Ok(1_700_000_200_000_000));
        assert!(doc.get("claim").is_none(), "stored unclaimed");
        assert_eq!(delivery_of(&doc).expect("read back"), delivery);

        let done = Delivery {
            status: DeliveryStatus::Succeeded,
            next_at: None,
            last_status: Some(204),
            last_error: None,
            last_body: None,
            ..delivery.clone()
        };
        let doc = delivery_doc(&done);
        assert!(doc.get("next_at").is_none(), "only while pending");
        assert_eq!(delivery_of(&doc).expect("read back"), done);

        let fresh = Delivery {
            attempts: 0,
            next_at: None,
            last_attempt_at: None,
            last_status: None,
            last_error: None,
            last_body: None,
            ..delivery
        };
        let doc = delivery_doc(&fresh);
        assert_eq!(
            doc.get_i64("next_at"),
            Ok(fresh.committed.0),
            "pending with no time: due at once"
        );
        let read = delivery_of(&doc).expect("read back");
        assert_eq!(read.next_at, Some(fresh.committed));
        assert_eq!(read.last_status, None);
    }

    #[test]
    fn a_delivery_of_a_bad_shape_is_refused() {
        let mut doc = delivery_doc(&delivery());
        doc.insert("status", "lost");
        assert!(delivery_of(&doc).is_err());
        let mut doc = delivery_doc(&delivery());
        doc.insert("last_status", 70_000_i64);
        assert!(delivery_of(&doc).is_err());
        let mut doc = delivery_doc(&delivery());
        doc.remove("committed");
        assert!(delivery_of(&doc).is_err());
    }

    #[test]
    fn a_rotation_puts_the_new_secret_first_and_ends_the_others_by_the_overlap() {
        let secret = |s: &str, until: Option<i64>| SigningSecret {
            secret: s.into(),
            until: until.map(Micros),
        };
        let old = vec![
            secret("whsec_b", None),
            secret("whsec_a", Some(150)),
            secret("whsec_z", Some(90)),
            secret("whsec_y", Some(500)),
        ];
        let new = secret("whsec_c", None);
        assert_eq!(
            rotated(&old, &new, Micros(200), Micros(100)),
            vec![
                new.clone(),
                secret("whsec_b", Some(200)),
                secret("whsec_a", Some(150)),
                secret("whsec_y", Some(200)),
            ],
            "whsec_z ended already"
        );
        // No overlap: the others end now.
        assert_eq!(
            rotated(&old, &new, Micros(100), Micros(100)),
            vec![new.clone()]
        );
        // The same text twice is one secret.
        assert_eq!(
            rotated(&[secret("whsec_c", None)], &new, Micros(200), Micros(100)),
            vec![new]
        );
    }
}
