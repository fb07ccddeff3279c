//! Proof of work for guest posts, in ALTCHA's open format (no third party, no tracking): the
//! server hands out a challenge, the guest's browser finds the secret number behind it, and the
//! post carries the number back as its proof.
//!
//! - A challenge is `{algorithm: "SHA-256", challenge, salt, signature, maxnumber}`, where
//!   `salt` is random hex followed by `?expires=<unix seconds>`, `challenge` is
//!   hex(SHA-256(salt + number)) for a secret random `number` up to `maxnumber`, and
//!   `signature` is hex(HMAC-SHA256(sub-key, challenge)): the server keeps nothing until a proof
//!   comes back.
//! - A proof is ALTCHA's payload, base64 of the JSON `{algorithm, challenge, number, salt,
//!   signature}`. It holds when the signature is the server's, the salt has not expired, and
//!   the number hashes to the challenge. Each challenge is accepted once: the caller keeps the
//!   spent ones until they expire (see [`Proven::challenge`]).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use rand::Rng as _;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::secrets::{Purpose, ServerKey, SubKey};
use super::DomainError;

/// The one algorithm handed out and accepted.
pub const ALGORITHM: &str = "SHA-256";

/// How long a challenge may be answered, by default.
pub const DEFAULT_TTL_SECS: i64 = 600;

/// Longest proof accepted, in bytes of its text (a real one is about 300).
const MAX_PROOF_BYTES: usize = 2_048;

/// A challenge, as handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// Always [`ALGORITHM`].
    pub algorithm: &'static str,
    /// hex(SHA-256(salt + number)).
    pub challenge: String,
    /// Random hex and `?expires=<unix seconds>`.
    pub salt: String,
    /// hex(HMAC-SHA256(sub-key, challenge)).
    pub signature: String,
    /// The largest the secret number may be.
    pub max_number: u64,
}

/// A proof that held: what to keep so that it is accepted once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proven {
    /// The challenge answered (keep it as spent).
    pub challenge: String,
    /// Until when (unix seconds): past it, the proof is refused anyway.
    pub expires: i64,
}

/// ALTCHA's payload, as a client sends it.
#[derive(Debug, Deserialize)]
struct Payload {
    algorithm: String,
    challenge: String,
    number: u64,
    salt: String,
    signature: String,
}

/// Makes and checks proofs of work under one sub-key of the server key.
#[derive(Debug, Clone)]
pub struct Proofs {
    key: SubKey,
    max_number: u64,
    ttl_secs: i64,
}

impl Proofs {
    /// Proofs under `key`, with secret numbers up to `max_number` (at least 1), answerable for
    /// `ttl_secs`.
    pub fn new(key: &ServerKey, max_number: u64, ttl_secs: i64) -> Self {
        Self {
            key: key.derive(Purpose::GuestProofs),
            max_number: max_number.max(1),
            ttl_secs: ttl_secs.max(1),
        }
    }

    /// A new challenge at `now` (unix seconds).
    pub fn challenge(&self, now: i64) -> Challenge {
        let mut rng = rand::thread_rng();
        let random: [u8; 12] = rng.gen();
        let salt = format!(
            "{}?expires={}",
            hex(&random),
            now.saturating_add(self.ttl_secs)
        );
        let number = rng.gen_range(0..=self.max_number);
        self.challenge_for(salt, number)
    }

    /// The challenge of `salt` and `number`.
    fn challenge_for(&self, salt: String, number: u64) -> Challenge {
        let challenge = hex(&Sha256::digest(format!("{salt}{number}").as_bytes()));
        let signature = hex(&self.key.mac(challenge.as_bytes()));
        Challenge {
            algorithm: ALGORITHM,
            challenge,
            salt,
            signature,
            max_number: self.max_number,
        }
    }

    /// Checks a proof at `now` (unix seconds); `BAD_USER_INPUT`, saying why, when it does not
    /// hold. Whether it was spent already is the caller's to check (with the challenge).
    pub fn check(&self, proof: &str, now: i64) -> Result<Proven, DomainError> {
        let bad = |why: &str| DomainError::bad_input(format!("the proof of work {why}"));
        if proof.len() > MAX_PROOF_BYTES {
            return Err(bad("is too long"));
        }
        let bytes = STANDARD
            .decode(proof.trim())
            .map_err(|_| bad("is not base64"))?;
        let payload: Payload =
            serde_json::from_slice(&bytes).map_err(|_| bad("is not ALTCHA's payload"))?;
        if payload.algorithm != ALGORITHM {
            return Err(bad("names another algorithm than SHA-256"));
        }
        let expected = hex(&self.key.mac(payload.challenge.as_bytes()));
        if !same(expected.as_bytes(), payload.signature.as_bytes()) {
            return Err(bad("answers a challenge this server did not give"));
        }
        let expires = expiry(&payload.salt).ok_or_else(|| bad("has a salt without its expiry"))?;
        if expires <= now {
            return Err(bad(
                "answers an expired challenge: ask for a new one (guestChallenge)",
            ));
        }
        let hashed = hex(&Sha256::digest(
            format!("{}{}", payload.salt, payload.number).as_bytes(),
        ));
        if payload.number > self.max_number
            || !same(hashed.as_bytes(), payload.challenge.as_bytes())
        {
            return Err(bad("has the wrong number"));
        }
        Ok(Proven {
            challenge: payload.challenge,
            expires,
        })
    }
}

/// The expiry a salt carries (`…?expires=<unix seconds>`, other parameters allowed).
fn expiry(salt: &str) -> Option<i64> {
    let (_, query) = salt.split_once('?')?;
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("expires="))
        .and_then(|n| n.parse().ok())
}

/// Lower-case hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares in time that does not depend on where two values differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proofs(max: u64) -> Proofs {
        Proofs::new(&ServerKey::generate(), max, 600)
    }

    /// What a client does: tries every number up to the maximum.
    fn solve(c: &Challenge) -> Option<u64> {
        (0..=c.max_number)
            .find(|n| hex(&Sha256::digest(format!("{}{n}", c.salt).as_bytes())) == c.challenge)
    }

    fn payload(c: &Challenge, number: u64) -> String {
        let json = serde_json::json!({
            "algorithm": c.algorithm, "challenge": c.challenge, "number": number,
            "salt": c.salt, "signature": c.signature,
        });
        STANDARD.encode(json.to_string())
    }

    #[test]
    fn a_solved_challenge_proves_once_its_number_is_found() {
        let p = proofs(500);
        let c = p.challenge(1_000);
        assert!(c.salt.ends_with("?expires=1600"), "{}", c.salt);
        let n = solve(&c).expect("a number up to the maximum");
        let proven = p.check(&payload(&c, n), 1_001).expect("a valid proof");
        assert_eq!(proven.challenge, c.challenge);
        assert_eq!(proven.expires, 1_600);
    }

    #[test]
    fn forged_expired_and_wrong_proofs_are_refused_with_their_reason() {
        let p = proofs(300);
        let c = p.challenge(1_000);
        let n = solve(&c).expect("solved");
        let why = |proof: &str, now: i64| match p.check(proof, now) {
            Err(DomainError::BadInput(why)) => why,
            other => panic!("refused as bad input, got {other:?}"),
        };
        assert!(why(&payload(&c, n), 1_600).contains("expired"));
        assert!(why(&payload(&c, n + 1), 1_001).contains("wrong number"));
        // Another key's challenge, however well solved.
        let other = Proofs::new(&ServerKey::generate(), 300, 600);
        let theirs = other.challenge(1_000);
        let m = solve(&theirs).expect("solved");
        assert!(why(&payload(&theirs, m), 1_001).contains("did not give"));
        // A salt whose expiry was moved: the challenge no longer matches its signature.
        let mut moved = c.clone();
        moved.salt = moved.salt.replace("1600", "9999");
        assert!(why(&payload(&moved, n), 1_001).contains("wrong number"));
        assert!(why("not base64!", 1_001).contains("base64"));
        assert!(why(&STANDARD.encode("{}"), 1_001).contains("payload"));
        assert!(why(&"A".repeat(3_000), 1_001).contains("too long"));
        let mut sha1 = c.clone();
        sha1.algorithm = "SHA-1";
        assert!(why(&payload(&sha1, n), 1_001).contains("algorithm"));
    }

    #[test]
    fn expiries_are_read_from_the_salt() {
        assert_eq!(expiry("abc?expires=12"), Some(12));
        assert_eq!(expiry("abc?x=1&expires=12"), Some(12));
        assert_eq!(expiry("abc"), None);
        assert_eq!(expiry("abc?expires=soon"), None);
    }
}
