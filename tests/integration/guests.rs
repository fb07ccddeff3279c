//! Guests' proofs of work in ALTCHA's format: a challenge this server makes is solved by
//! ALTCHA's own library (in Node), and the proof it sends holds; one changed by a byte does not.

use std::time::Duration;

use serde_json::{json, Value};
use threadql::domain::proof::Proofs;
use threadql::domain::ServerKey;

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
