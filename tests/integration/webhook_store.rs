//! The webhook store on the real database: endpoints and their secrets, the fan-out of
//! committed events (each delivery stored once, by the one replica that then holds it), the
//! leases on deliveries (one holder at a time, only the holder writes an attempt, an ended
//! lease is claimed again), and how long events and finished deliveries are kept.

use std::collections::BTreeSet;

use mongodb::bson::{doc, Document};
use serde_json::json;
use threadql::domain::webhooks::{
    AttemptRecord, Delivery, DeliveryStatus, Endpoint, EndpointPatch, SigningSecret,
};
use threadql::domain::{EventRecord, EventType, Layout, Micros};
use threadql::store::{Retention, Storage, Store, WebhookStore};

use crate::support::{server_uri, store_config, Settings, TestApp};

const CREATE: &str = "mutation($t: String!) { createDiscussion(input: {title: $t}) { id } }";
const POST: &str =
    "mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug } }";

/// A second, in microseconds.
const SECOND: i64 = 1_000_000;

fn later(by: i64) -> Micros {
    Micros(Micros::now().0 + by)
}

/// A discussion with `posts` comments: `posts + 1` events (its creation, then each post).
async fn with_events(label: &str, posts: usize) -> TestApp {
    let app = TestApp::new(label, Layout::PerComment).await;
    let ada = app.token("ada", "Ada");
    let d = app
        .ok_as(Some(&ada), CREATE, json!({ "t": "Hooked" }))
        .await["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for n in 0..posts {
        app.ok_as(
            Some(&ada),
            POST,
            json!({ "d": d, "t": format!("post {n}") }),
        )
        .await;
    }
    app
}

fn secret(text: &str, until: Option<Micros>) -> SigningSecret {
    SigningSecret {
        secret: text.into(),
        until,
    }
}

fn endpoint(id: &str, created: i64) -> Endpoint {
    Endpoint {
        id: id.into(),
        url: format!("https://hooks.example.com/{id}"),
        events: Some(vec![EventType::CommentPosted]),
        description: Some("for the tests".into()),
        enabled: true,
        disabled_reason: None,
        created: Micros(created),
        secrets: vec![secret(&format!("whsec_{id}"), None)],
        failing_since: None,
    }
}

/// A pending delivery of `event` to `endpoint`, due at `next_at`.
fn delivery(event: &str, endpoint: &str, next_at: Micros) -> Delivery {
    Delivery {
        id: Delivery::id_of(event, endpoint),
        endpoint: endpoint.into(),
        event: event.into(),
        kind: EventType::CommentPosted,
        status: DeliveryStatus::Pending,
        attempts: 0,
        next_at: Some(next_at),
        last_attempt_at: None,
        last_status: None,
        last_error: None,
        last_body: None,
        committed: Micros(next_at.0 - SECOND),
    }
}

/// An event id of the log's form, numbered `n`.
fn event_id(n: usize) -> String {
    format!("{:016}evtabcde", 1_700_000_000_000_000_u64 + n as u64)
}

/// The documents of a collection of the test's database, by id.
async fn docs_of(app: &TestApp, collection: &str) -> Vec<Document> {
    use futures::TryStreamExt;
    mongodb::Client::with_uri_str(server_uri())
        .await
        .unwrap()
        .database(&app.database)
        .collection::<Document>(collection)
        .find(doc! {})
        .sort(doc! { "_id": 1 })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

fn ids<T>(items: &[T], id: impl Fn(&T) -> &str) -> BTreeSet<String> {
    items.iter().map(|i| id(i).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_are_created_listed_updated_rotated_disabled_and_deleted() {
    let app = TestApp::new("webhook_endpoints", Layout::PerComment).await;
    let store = app.store().webhooks();
    let (first, second) = (endpoint("ep_first", 2_000), endpoint("ep_second", 1_000));
    store.create_endpoint(&first).await.unwrap();
    store.create_endpoint(&second).await.unwrap();
    assert!(
        store.create_endpoint(&first).await.is_err(),
        "an id is taken once"
    );
    assert_eq!(
        store.endpoints().await.unwrap(),
        [second.clone(), first.clone()]
    );
    assert_eq!(
        store.endpoint("ep_first").await.unwrap(),
        Some(first.clone())
    );
    assert_eq!(store.endpoint("ep_none").await.unwrap(), None);

    // Updates change what the patch names, and nothing else.
    let patch = EndpointPatch {
        url: Some("https://other.example.com/in".into()),
        events: Some(None),
        description: Some(None),
        enabled: None,
    };
    let updated = store
        .update_endpoint("ep_first", &patch)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        updated,
        Endpoint {
            url: "https://other.example.com/in".into(),
            events: None,
            description: None,
            ..first.clone()
        }
    );
    assert_eq!(
        store
            .update_endpoint("ep_first", &EndpointPatch::default())
            .await
            .unwrap(),
        Some(updated.clone()),
        "an empty patch changes nothing"
    );
    assert_eq!(
        store.update_endpoint("ep_none", &patch).await.unwrap(),
        None
    );

    // Failures: failing since the first one; a success ends it.
    let failed = store
        .endpoint_attempted("ep_first", false, Micros(10))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(failed.failing_since, Some(Micros(10)));
    let failed = store
        .endpoint_attempted("ep_first", false, Micros(20))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        failed.failing_since,
        Some(Micros(10)),
        "kept from the first"
    );
    let ok = store
        .endpoint_attempted("ep_first", true, Micros(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ok.failing_since, None);
    assert_eq!(
        store
            .endpoint_attempted("ep_none", false, Micros(10))
            .await
            .unwrap(),
        None
    );

    // Rotations: the new secret first, the old one signs until the overlap ends.
    let overlap = later(3_600 * SECOND);
    let rotated = store
        .rotate_secret("ep_first", &secret("whsec_two", None), overlap)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        rotated.secrets,
        [
            secret("whsec_two", None),
            secret("whsec_ep_first", Some(overlap))
        ]
    );
    let longer = later(7_200 * SECOND);
    let again = store
        .rotate_secret("ep_first", &secret("whsec_three", None), longer)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        again.secrets,
        [
            secret("whsec_three", None),
            secret("whsec_two", Some(longer)),
            secret("whsec_ep_first", Some(overlap)),
        ],
        "one ending sooner keeps its end"
    );
    let now = store
        .rotate_secret("ep_first", &secret("whsec_four", None), Micros::now())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        now.secrets,
        [secret("whsec_four", None)],
        "no overlap: the others end at once"
    );
    assert_eq!(
        store.endpoint("ep_first").await.unwrap().unwrap().secrets,
        now.secrets
    );
    assert_eq!(
        store
            .rotate_secret("ep_none", &secret("whsec_x", None), overlap)
            .await
            .unwrap(),
        None
    );
    // Rotations at once: each one's secret is kept, none lost to another.
    let racing: Vec<SigningSecret> = (0..4)
        .map(|n| secret(&format!("whsec_race{n}"), None))
        .collect();
    let rotations = racing
        .iter()
        .map(|s| store.rotate_secret("ep_second", s, overlap));
    for rotated in futures::future::join_all(rotations).await {
        assert!(rotated.unwrap().is_some());
    }
    let kept = store.endpoint("ep_second").await.unwrap().unwrap().secrets;
    let kept: BTreeSet<&str> = kept.iter().map(|s| s.secret.as_str()).collect();
    for s in &racing {
        assert!(kept.contains(s.secret.as_str()), "{s:?} in {kept:?}");
    }

    // Disabling fails the endpoint's pending deliveries, and only those.
    let due = Micros::now();
    let deliveries = [
        delivery(&event_id(1), "ep_first", Micros(due.0 - 1)),
        delivery(&event_id(2), "ep_first", due),
        delivery(&event_id(1), "ep_second", due),
    ];
    store.finish_round(&deliveries, "t").await.unwrap();
    let claimed = store
        .claim_deliveries(later(SECOND), later(60 * SECOND), "holder", 1)
        .await
        .unwrap();
    assert_eq!(ids(&claimed, |d| &d.id), ids(&deliveries[..1], |d| &d.id));
    store
        .disable_endpoint("ep_first", "answered 410 Gone")
        .await
        .unwrap();
    let disabled = store.endpoint("ep_first").await.unwrap().unwrap();
    assert!(!disabled.enabled);
    assert_eq!(
        disabled.disabled_reason.as_deref(),
        Some("answered 410 Gone")
    );
    for d in &deliveries[..2] {
        let failed = store.delivery(&d.id).await.unwrap().unwrap();
        assert_eq!(failed.status, DeliveryStatus::Failed);
        assert_eq!(failed.next_at, None);
    }
    assert_eq!(
        store
            .delivery(&deliveries[2].id)
            .await
            .unwrap()
            .unwrap()
            .status,
        DeliveryStatus::Pending
    );
    assert!(
        docs_of(&app, "webhook_deliveries")
            .await
            .iter()
            .filter(|d| d.get_str("endpoint") == Ok("ep_first"))
            .all(|d| d.get("claim").is_none() && d.get("next_at").is_none()),
        "no claim or due time left on a failed delivery"
    );
    let attempt = AttemptRecord {
        at: Micros::now(),
        status: Some(200),
        error: None,
        body: None,
        then: DeliveryStatus::Succeeded,
        next_at: None,
    };
    assert!(
        !store
            .record_attempt(&claimed[0].id, "holder", &attempt)
            .await
            .unwrap(),
        "a failed delivery takes no attempt"
    );

    // Enabling clears the reason and the failures.
    store
        .endpoint_attempted("ep_first", false, Micros(40))
        .await
        .unwrap();
    let enabled = store
        .update_endpoint(
            "ep_first",
            &EndpointPatch {
                enabled: Some(true),
                ..EndpointPatch::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert!(enabled.enabled);
    assert_eq!(enabled.disabled_reason, None);
    assert_eq!(enabled.failing_since, None);

    // Deleting removes the endpoint and its pending deliveries, and keeps the others'.
    store
        .redeliver(&deliveries[0].id, Micros::now())
        .await
        .unwrap();
    assert!(store.delete_endpoint("ep_first").await.unwrap());
    assert!(!store.delete_endpoint("ep_first").await.unwrap());
    assert_eq!(store.endpoint("ep_first").await.unwrap(), None);
    assert_eq!(store.delivery(&deliveries[0].id).await.unwrap(), None);
    assert_eq!(
        store
            .delivery(&deliveries[1].id)
            .await
            .unwrap()
            .unwrap()
            .status,
        DeliveryStatus::Failed,
        "the record of what was tried stays"
    );
    assert!(store.delivery(&deliveries[2].id).await.unwrap().is_some());
    let left = store.endpoints().await.unwrap();
    assert_eq!(
        ids(&left, |e| &e.id),
        BTreeSet::from(["ep_second".to_owned()])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_event_is_claimed_by_one_round_and_a_dead_rounds_events_are_taken_over() {
    let app = with_events("webhook_fan_out", 5).await;
    let store = app.store().webhooks();
    let committed = docs_of(&app, "events").await;
    assert_eq!(committed.len(), 6);
    assert!(
        committed.iter().all(|e| e.get_datetime("dispatch").is_ok()),
        "every event is due for its fan-out"
    );
    let events: Vec<String> = committed
        .iter()
        .map(|e| e.get_str("_id").unwrap().to_owned())
        .collect();
    let (now, lease) = (later(SECOND), later(60 * SECOND));
    assert!(store
        .claim_events(Micros(0), lease, "early", 10)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .claim_events(now, lease, "none", 0)
        .await
        .unwrap()
        .is_empty());
    assert!(
        docs_of(&app, "webhook_rounds").await.is_empty(),
        "no round for nothing"
    );

    // Three replicas claim at once: each event goes to one round, and each round names what
    // it took; a limit takes the longest due first.
    let (a, b, c) = tokio::join!(
        store.claim_events(now, lease, "a", 4),
        store.claim_events(now, lease, "b", 4),
        store.claim_events(now, lease, "c", 4),
    );
    let mut taken: BTreeSet<String> = BTreeSet::new();
    let rounds = docs_of(&app, "webhook_rounds").await;
    for (token, claimed) in [("a", a.unwrap()), ("b", b.unwrap()), ("c", c.unwrap())] {
        let ids: Vec<String> = claimed.iter().map(|e| e.record.id.clone()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted, "in id order");
        assert!(
            ids.iter().all(|id| taken.insert(id.clone())),
            "one round each"
        );
        let named: Vec<String> = rounds
            .iter()
            .find(|r| r.get_str("_id") == Ok(token))
            .map(|r| {
                let events = r.get_array("events").unwrap();
                events
                    .iter()
                    .map(|e| e.as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(named, ids, "round {token} names what it took");
    }
    let rest = store.claim_events(now, lease, "d", 10).await.unwrap();
    taken.extend(rest.iter().map(|e| e.record.id.clone()));
    assert_eq!(taken, events.iter().cloned().collect::<BTreeSet<_>>());
    assert!(store
        .claim_events(now, lease, "e", 10)
        .await
        .unwrap()
        .is_empty());
    assert!(
        docs_of(&app, "events")
            .await
            .iter()
            .all(|e| e.get("dispatch").is_none()),
        "claimed: out of the index of events to fan out"
    );

    // A round held is not taken over; one whose lease ended is, whole (its holder died).
    assert_eq!(store.take_round(now, lease, "x").await.unwrap(), None);
    store.renew("d", &[], later(600 * SECOND)).await.unwrap();
    let (after, heirs_lease) = (later(61 * SECOND), later(900 * SECOND));
    let mut inherited: BTreeSet<String> = BTreeSet::new();
    while let Some(over) = store.take_round(after, heirs_lease, "heir").await.unwrap() {
        assert!(over.iter().all(|e| inherited.insert(e.record.id.clone())));
    }
    let of_abc: BTreeSet<String> = taken
        .iter()
        .filter(|id| !rest.iter().any(|e| &e.record.id == *id))
        .cloned()
        .collect();
    assert_eq!(inherited, of_abc, "the rounds of a, b and c; d still holds");
    let rounds = docs_of(&app, "webhook_rounds").await;
    assert!(rounds
        .iter()
        .all(|r| r.get_str("holder") == Ok("heir") || r.get_str("_id") == Ok("d")));

    // What the dead holders stored is known, and the heir stores the rest: each delivery
    // stays as first stored, and finishing ends the heir's rounds.
    let record = committed_record(store, &inherited).await;
    let first = Delivery {
        committed: record.at,
        kind: record.kind,
        ..delivery(&record.id, "ep_one", Micros::now())
    };
    let stored = store
        .finish_round(std::slice::from_ref(&first), "a")
        .await
        .unwrap();
    assert_eq!(stored, std::slice::from_ref(&first.id));
    let ids = vec![first.id.clone(), Delivery::id_of(&record.id, "ep_none")];
    let found = store.stored_deliveries(&ids).await.unwrap();
    assert_eq!(found, std::slice::from_ref(&first.id));
    assert!(store.stored_deliveries(&[]).await.unwrap().is_empty());
    let mut again = first.clone();
    again.attempts = 7;
    let second = delivery(&event_id(99), "ep_one", Micros::now());
    let stored = store
        .finish_round(&[again, second.clone()], "heir")
        .await
        .unwrap();
    assert_eq!(stored, std::slice::from_ref(&second.id));
    assert_eq!(store.delivery(&first.id).await.unwrap(), Some(first));
    let left: Vec<String> = docs_of(&app, "webhook_rounds")
        .await
        .iter()
        .map(|r| r.get_str("_id").unwrap().to_owned())
        .collect();
    let held = if rest.is_empty() { vec![] } else { vec!["d"] };
    assert_eq!(left, held, "a finished round is removed");

    // Events by id, missing ones left out.
    let mut asked = vec![events[2].clone(), "0000000000000000missing0".to_owned()];
    asked.push(events[0].clone());
    let found = store.events(&asked).await.unwrap();
    assert_eq!(
        found
            .iter()
            .map(|e| e.record.id.as_str())
            .collect::<Vec<_>>(),
        [events[0].as_str(), events[2].as_str()]
    );
    let due = store.events(&events[..1]).await.unwrap();
    assert_eq!(found[0], due[0]);
    assert_eq!(found[0].record.kind, EventType::DiscussionCreated);
    assert!(store.events(&[]).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_posted_comments_event_names_the_page_or_document_it_is_stored_in() {
    for (layout, collection) in [
        (Layout::Bucketed, Some("comment_pages")),
        (Layout::PerComment, Some("comments")),
        (Layout::Embedded, None),
    ] {
        let app = TestApp::new("webhook_homes", layout).await;
        let ada = app.token("ada", "Ada");
        let d = app.ok_as(Some(&ada), CREATE, json!({ "t": "Homes" })).await["createDiscussion"]
            ["id"]
            .as_str()
            .unwrap()
            .to_owned();
        for n in 0..3 {
            let text = format!("post {n}");
            app.ok_as(Some(&ada), POST, json!({ "d": d, "t": text }))
                .await;
        }
        let due = app
            .store()
            .webhooks()
            .claim_events(later(SECOND), later(60 * SECOND), "t", 10)
            .await
            .unwrap();
        assert_eq!(due.len(), 4, "{layout:?}");
        let Some(collection) = collection else {
            assert!(
                due.iter().all(|e| e.home.is_none()),
                "one document: no home"
            );
            continue;
        };
        let docs = docs_of(&app, collection).await;
        for event in &due[1..] {
            let home = event.home.as_ref().expect("a home");
            let doc = docs.iter().find(|d| d.get("_id") == Some(home)).unwrap();
            let slug = event.record.slug.as_ref().unwrap().as_str();
            let holds = match doc.get_array("comments") {
                Ok(comments) => comments
                    .iter()
                    .any(|c| c.as_document().unwrap().get_str("slug") == Ok(slug)),
                Err(_) => doc.get_str("slug") == Ok(slug),
            };
            assert!(holds, "{layout:?}: {slug} at {home}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_has_one_holder_and_only_the_holder_records_an_attempt() {
    let app = TestApp::new("webhook_deliveries", Layout::PerComment).await;
    let store = app.store().webhooks();
    let due = later(-SECOND);
    let deliveries: Vec<Delivery> = (0..20)
        .map(|n| delivery(&event_id(n), "ep_one", Micros(due.0 + n as i64)))
        .collect();
    let not_yet = delivery(&event_id(50), "ep_one", later(3_600 * SECOND));
    let mut all = deliveries.clone();
    all.push(not_yet.clone());
    store.finish_round(&all, "t").await.unwrap();
    assert_eq!(store.pending().await.unwrap(), 21);

    // Claims at once never share a delivery; between them they take every due one.
    let (now, lease) = (Micros::now(), later(60 * SECOND));
    let (a, b) = tokio::join!(
        store.claim_deliveries(now, lease, "a", 20),
        store.claim_deliveries(now, lease, "b", 20),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let (a_ids, b_ids) = (ids(&a, |d| &d.id), ids(&b, |d| &d.id));
    assert!(a_ids.is_disjoint(&b_ids), "{a_ids:?} {b_ids:?}");
    let taken: BTreeSet<String> = a_ids.union(&b_ids).cloned().collect();
    assert_eq!(taken, ids(&deliveries, |d| &d.id));
    assert!(a.iter().chain(&b).all(|d| d.next_at == Some(lease)));
    let soonest = store.claim_deliveries(now, lease, "c", 20).await.unwrap();
    assert!(
        soonest.is_empty(),
        "leased ones wait, the later one is not due"
    );
    assert!(store
        .claim_deliveries(now, lease, "c", 0)
        .await
        .unwrap()
        .is_empty());

    let (held, holder) = match a.first() {
        Some(d) => (d.clone(), "a"),
        None => (b[0].clone(), "b"),
    };
    let before = docs_of(&app, "webhook_deliveries").await;
    let failed = AttemptRecord {
        at: Micros::now(),
        status: Some(503),
        error: Some("answered 503".into()),
        body: Some("busy".into()),
        then: DeliveryStatus::Pending,
        next_at: Some(later(-SECOND)),
    };
    assert!(!store
        .record_attempt(&held.id, "stranger", &failed)
        .await
        .unwrap());
    assert_eq!(
        docs_of(&app, "webhook_deliveries").await,
        before,
        "a stale token writes nothing"
    );
    assert!(store
        .record_attempt(&held.id, holder, &failed)
        .await
        .unwrap());
    let after = store.delivery(&held.id).await.unwrap().unwrap();
    assert_eq!(
        after,
        Delivery {
            attempts: 1,
            next_at: failed.next_at,
            last_attempt_at: Some(failed.at),
            last_status: Some(503),
            last_error: Some("answered 503".into()),
            last_body: Some("busy".into()),
            ..held.clone()
        }
    );
    assert!(
        !store
            .record_attempt(&held.id, holder, &failed)
            .await
            .unwrap(),
        "an attempt ends its claim"
    );

    // Due again: claimed again, and this attempt succeeds.
    let again = store
        .claim_deliveries(Micros::now(), lease, "d", 5)
        .await
        .unwrap();
    assert_eq!(ids(&again, |d| &d.id), BTreeSet::from([held.id.clone()]));
    let succeeded = AttemptRecord {
        at: Micros::now(),
        status: Some(204),
        error: None,
        body: None,
        then: DeliveryStatus::Succeeded,
        next_at: None,
    };
    assert!(store
        .record_attempt(&held.id, "d", &succeeded)
        .await
        .unwrap());
    let done = store.delivery(&held.id).await.unwrap().unwrap();
    assert_eq!(done.status, DeliveryStatus::Succeeded);
    assert_eq!((done.attempts, done.next_at), (2, None));
    assert_eq!(
        (done.last_status, done.last_error, done.last_body),
        (Some(204), None, None)
    );
    assert_eq!(store.pending().await.unwrap(), 20);

    // A lease that ended is claimed again; its first holder has lost it.
    let next = deliveries.iter().find(|d| d.id != held.id).unwrap();
    let owner = if a_ids.contains(&next.id) { "a" } else { "b" };
    store
        .redeliver(&next.id, Micros::now())
        .await
        .unwrap()
        .unwrap();
    let short = store
        .claim_deliveries(later(SECOND), later(-SECOND), "e", 1)
        .await
        .unwrap();
    assert_eq!(ids(&short, |d| &d.id), BTreeSet::from([next.id.clone()]));
    let retaken = store
        .claim_deliveries(later(SECOND), lease, "f", 1)
        .await
        .unwrap();
    assert_eq!(ids(&retaken, |d| &d.id), BTreeSet::from([next.id.clone()]));
    assert!(!store
        .record_attempt(&next.id, owner, &failed)
        .await
        .unwrap());
    assert!(!store.record_attempt(&next.id, "e", &failed).await.unwrap());
    assert!(store.record_attempt(&next.id, "f", &failed).await.unwrap());

    // A redelivery makes a delivery pending and due now, its attempts counting on.
    let at = Micros::now();
    let redone = store.redeliver(&held.id, at).await.unwrap().unwrap();
    assert_eq!(
        (redone.status, redone.next_at, redone.attempts),
        (DeliveryStatus::Pending, Some(at), 2)
    );
    assert_eq!(redone.last_status, Some(204));
    assert_eq!(store.redeliver("missing:ep_one", at).await.unwrap(), None);
    assert_eq!(store.delivery("missing:ep_one").await.unwrap(), None);
    assert_eq!(store.pending().await.unwrap(), 21);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rounds_attempts_are_recorded_together_and_a_lost_claim_is_left_as_it_is() {
    let app = TestApp::new("webhook_batch_records", Layout::PerComment).await;
    let store = app.store().webhooks();
    let lease = later(60 * SECOND);
    let deliveries: Vec<Delivery> = (0..6)
        .map(|n| delivery(&event_id(n), "ep_one", later(-SECOND)))
        .collect();
    let stored = store.finish_round(&deliveries, "t").await.unwrap();
    assert_eq!(stored.len(), 6);
    let mine = store
        .claim_deliveries(Micros::now(), lease, "mine", 10)
        .await
        .unwrap();
    assert_eq!(mine.len(), 6);
    // One lease runs out (here: a redelivery) and another replica takes that delivery.
    let lost = &deliveries[5];
    store.redeliver(&lost.id, Micros::now()).await.unwrap();
    let taken = store
        .claim_deliveries(later(SECOND), lease, "other", 10)
        .await
        .unwrap();
    assert_eq!(ids(&taken, |d| &d.id), BTreeSet::from([lost.id.clone()]));

    let at = Micros::now();
    let ok = AttemptRecord {
        at,
        status: Some(200),
        error: None,
        body: Some("ok".into()),
        then: DeliveryStatus::Succeeded,
        next_at: None,
    };
    let retry = |wait: i64| AttemptRecord {
        status: Some(500),
        error: Some("answered 500".into()),
        body: None,
        then: DeliveryStatus::Pending,
        next_at: Some(later(wait * SECOND)),
        ..ok.clone()
    };
    let results = [ok.clone(), retry(5), ok.clone(), ok.clone(), retry(7), ok];
    let writes: Vec<(String, AttemptRecord)> = deliveries
        .iter()
        .zip(&results)
        .map(|(d, r)| (d.id.clone(), r.clone()))
        .collect();
    let held = store.record_attempts("mine", &writes).await.unwrap();
    let held: BTreeSet<String> = held.into_iter().collect();
    assert_eq!(held, ids(&deliveries[..5], |d| &d.id));
    for (d, r) in deliveries[..5].iter().zip(&results) {
        let now = store.delivery(&d.id).await.unwrap().unwrap();
        assert_eq!(
            (now.status, now.attempts, now.next_at, now.last_status),
            (r.then, 1, r.next_at, r.status),
            "{}",
            d.id
        );
        assert_eq!(
            (now.last_attempt_at, now.last_body),
            (Some(at), r.body.clone())
        );
    }
    let untouched = store.delivery(&lost.id).await.unwrap().unwrap();
    assert_eq!(
        (untouched.status, untouched.attempts),
        (DeliveryStatus::Pending, 0)
    );
    let doc = docs_of(&app, "webhook_deliveries")
        .await
        .into_iter()
        .find(|d| d.get_str("_id") == Ok(&lost.id))
        .unwrap();
    assert_eq!(doc.get_str("claim"), Ok("other"), "its new holder keeps it");
    assert!(store.record_attempts("mine", &[]).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoints_deliveries_are_paged_by_id_with_a_status_filter() {
    let app = TestApp::new("webhook_delivery_pages", Layout::PerComment).await;
    let store = app.store().webhooks();
    let due = later(3_600 * SECOND);
    let mut all = Vec::new();
    for n in 0..7 {
        let mut d = delivery(&event_id(n), "ep_a", due);
        if n % 3 == 0 {
            d.status = DeliveryStatus::Succeeded;
            d.next_at = None;
            d.attempts = 1;
        }
        all.push(d);
    }
    for n in 0..3 {
        all.push(delivery(&event_id(n), "ep_b", due));
    }
    // Stored in another order than their ids.
    all.reverse();
    store.finish_round(&all, "t").await.unwrap();
    assert_eq!(store.pending().await.unwrap(), 7);

    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = store
            .deliveries_of("ep_a", after.as_deref(), None, 3)
            .await
            .unwrap();
        assert!(page.len() <= 3);
        if page.is_empty() {
            break;
        }
        after = page.last().map(|d| d.id.clone());
        seen.extend(page);
    }
    let mut expected: Vec<Delivery> = all
        .iter()
        .filter(|d| d.endpoint == "ep_a")
        .cloned()
        .collect();
    expected.sort_by(|x, y| x.id.cmp(&y.id));
    assert_eq!(seen, expected, "every one once, in id (event) order");

    let succeeded = store
        .deliveries_of("ep_a", None, Some(DeliveryStatus::Succeeded), 10)
        .await
        .unwrap();
    assert_eq!(
        succeeded
            .iter()
            .map(|d| d.event.clone())
            .collect::<Vec<_>>(),
        [event_id(0), event_id(3), event_id(6)]
    );
    let pending_after = store
        .deliveries_of(
            "ep_a",
            Some(&expected[1].id),
            Some(DeliveryStatus::Pending),
            2,
        )
        .await
        .unwrap();
    assert_eq!(
        pending_after
            .iter()
            .map(|d| d.event.clone())
            .collect::<Vec<_>>(),
        [event_id(2), event_id(4)]
    );
    assert!(store
        .deliveries_of("ep_a", None, Some(DeliveryStatus::Failed), 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store
            .deliveries_of("ep_b", None, None, 10)
            .await
            .unwrap()
            .len(),
        3
    );
    assert!(store
        .deliveries_of("ep_a", None, None, 0)
        .await
        .unwrap()
        .is_empty());
}

/// The record of one of the events `ids`, read from the log.
async fn committed_record(store: &dyn WebhookStore, ids: &BTreeSet<String>) -> EventRecord {
    let ids: Vec<String> = ids.iter().cloned().collect();
    store.events(&ids).await.unwrap().remove(0).record
}

/// The index `name` of `collection`, as the database lists it.
async fn index_spec(app: &TestApp, collection: &str, name: &str) -> Option<Document> {
    let client = mongodb::Client::with_uri_str(server_uri()).await.unwrap();
    let specs: Vec<Document> = futures::TryStreamExt::try_collect(
        client
            .database(&app.database)
            .run_cursor_command(doc! { "listIndexes": collection })
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    specs.into_iter().find(|s| s.get_str("name") == Ok(name))
}

/// The seconds the TTL index `name` of `collection` keeps a document.
async fn kept_for(app: &TestApp, collection: &str, name: &str) -> Option<i64> {
    let spec = index_spec(app, collection, name).await?;
    match spec.get("expireAfterSeconds")? {
        mongodb::bson::Bson::Int32(n) => Some(i64::from(*n)),
        mongodb::bson::Bson::Int64(n) => Some(*n),
        mongodb::bson::Bson::Double(n) => Some(*n as i64),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_and_finished_deliveries_are_kept_for_the_retention_and_pending_ones_until_done() {
    let app = TestApp::new("webhook_retention", Layout::PerComment).await;
    let week = 7 * 86_400;
    assert_eq!(kept_for(&app, "events", "created_ttl").await, Some(week));
    assert_eq!(
        kept_for(&app, "webhook_deliveries", "finished_ttl").await,
        Some(week)
    );
    // Only deliveries that have the field are in the TTL and due-time indexes.
    for name in ["finished_ttl", "due"] {
        let spec = index_spec(&app, "webhook_deliveries", name).await.unwrap();
        assert_eq!(spec.get_bool("sparse"), Ok(true), "{name}: {spec}");
    }
    assert_eq!(
        index_spec(&app, "webhook_deliveries", "status_next_at").await,
        None
    );
    // Started again with another retention: both indexes are changed in place.
    let mut config = store_config(&app.database, &Settings::new(Layout::PerComment));
    config.event_retention = Retention(std::time::Duration::from_secs(86_400));
    Store::connect(&config).await.unwrap();
    assert_eq!(kept_for(&app, "events", "created_ttl").await, Some(86_400));
    assert_eq!(
        kept_for(&app, "webhook_deliveries", "finished_ttl").await,
        Some(86_400)
    );

    // Only a finished delivery has the date the TTL index reads; a redelivery removes it.
    let store = app.store().webhooks();
    let lease = later(60 * SECOND);
    let deliveries: Vec<Delivery> = (0..2)
        .map(|n| delivery(&event_id(n), "ep_one", later(-SECOND)))
        .collect();
    store.finish_round(&deliveries, "x").await.unwrap();
    let claimed = store
        .claim_deliveries(Micros::now(), lease, "t", 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    let done = AttemptRecord {
        at: Micros::now(),
        status: Some(204),
        error: None,
        body: None,
        then: DeliveryStatus::Succeeded,
        next_at: None,
    };
    assert!(store
        .record_attempt(&deliveries[0].id, "t", &done)
        .await
        .unwrap());
    let finished = |id: String| {
        let app = &app;
        async move {
            docs_of(app, "webhook_deliveries")
                .await
                .into_iter()
                .find(|d| d.get_str("_id") == Ok(&id))
                .and_then(|d| d.get_datetime("finished").ok().copied())
        }
    };
    let date = finished(deliveries[0].id.clone())
        .await
        .expect("a finished date");
    assert_eq!(date.timestamp_millis(), done.at.0 / 1000);
    assert_eq!(finished(deliveries[1].id.clone()).await, None, "pending");
    store
        .redeliver(&deliveries[0].id, Micros::now())
        .await
        .unwrap();
    assert_eq!(
        finished(deliveries[0].id.clone()).await,
        None,
        "pending again"
    );
    store.disable_endpoint("ep_one", "gone").await.unwrap();
    assert!(finished(deliveries[1].id.clone()).await.is_some(), "failed");
}
