//! Guests' proofs of work in ALTCHA's format: a challenge this server makes is solved by
//! ALTCHA's own library (in Node), and the proof it sends holds; one changed by a byte does not.

use std::time::Duration;

use serde_json::{json, Value};
use threadql::domain::proof::Proofs;
use threadql::domain::ServerKey;
use threadql::store::Storage as _;

use crate::node;

/// Seconds since the epoch.
fn unix_now() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
}

#[tokio::test]
async fn altchas_own_library_solves_a_challenge_and_its_proof_holds() {
    node::require("altcha-lib").await;
    let proofs = Proofs::new(&ServerKey::generate(), 20_000, 600);
    let now = unix_now();
    let challenge = proofs.challenge(now);
    let given = json!({
        "algorithm": challenge.algorithm,
        "challenge": challenge.challenge,
        "salt": challenge.salt,
        "signature": challenge.signature,
        "maxnumber": challenge.max_number,
    });
    let out = node::run(
        &["proof.mjs", &given.to_string()],
        &[],
        Duration::from_secs(120),
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let solved: Value = serde_json::from_slice(&out.stdout).expect("the solution as JSON");
    let payload = solved["payload"].as_str().expect("a payload");
    let proven = proofs
        .check(payload, now + 1)
        .expect("ALTCHA's proof holds");
    assert_eq!(proven.challenge, challenge.challenge);
    assert_eq!(proven.expires, now + 600);
    // Another server's key, or a later time, refuses the same proof.
    let other = Proofs::new(&ServerKey::generate(), 20_000, 600);
    assert!(other.check(payload, now + 1).is_err());
    assert!(proofs.check(payload, now + 600).is_err());
}

/// A proof is spent once, whichever replica sees it first: a second store over the same
/// database refuses it as a replay, and a proof of another challenge is not affected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_proof_is_refused_by_every_replica() {
    let app =
        crate::support::TestApp::new("guest_proofs", threadql::domain::Layout::PerComment).await;
    let other = threadql::store::Store::connect(&crate::support::store_config(
        &app.database,
        &crate::support::Settings::new(threadql::domain::Layout::PerComment),
    ))
    .await
    .expect("a second store");
    let expires = unix_now() + 600;
    let spent = app.store().guests();
    assert!(spent.spend_proof("c1", expires).await.expect("spend"));
    assert!(!other
        .guests()
        .spend_proof("c1", expires)
        .await
        .expect("replay"));
    assert!(!spent.spend_proof("c1", expires).await.expect("replay"));
    assert!(other
        .guests()
        .spend_proof("c2", expires)
        .await
        .expect("spend"));
}
