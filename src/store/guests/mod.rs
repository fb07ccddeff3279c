//! What guest posting keeps: the proofs of work already spent (`guest_proofs`), each under its
//! challenge until the challenge expires (a TTL index removes it then), so that every replica
//! refuses a replay.

use std::time::Duration;

use async_trait::async_trait;
use mongodb::bson::{doc, DateTime, Document};
use mongodb::Database;

use crate::store::api::GuestStore;
use crate::store::shared::error::{is_duplicate_key, StoreResult};
use crate::store::shared::metrics::{CommandCounter, Counted};
use crate::store::shared::ttl::{ensure_ttl, Ttl};

/// The collection of spent proofs.
pub(crate) const PROOFS: &str = "guest_proofs";

/// The spent proofs.
pub(crate) struct Guests {
    db: Database,
    proofs: Counted<Document>,
}

impl Guests {
    pub(crate) fn new(db: &Database, commands: &CommandCounter) -> Self {
        Self {
            db: db.clone(),
            proofs: Counted::new(db, PROOFS, commands),
        }
    }

    /// The TTL index that removes a spent proof once its challenge has expired.
    pub(crate) async fn ensure_indexes(&self) -> StoreResult<()> {
        let ttl = Ttl {
            name: "expires",
            field: "expires_at",
            keep: Duration::ZERO,
            sparse: false,
        };
        ensure_ttl(&self.db, PROOFS, &ttl).await
    }
}

#[async_trait]
impl GuestStore for Guests {
    async fn spend_proof(&self, challenge: &str, expires: i64) -> StoreResult<bool> {
        let until = DateTime::from_millis(expires.saturating_mul(1_000));
        let spent = self
            .proofs
            .insert_one(doc! { "_id": challenge, "expires_at": until })
            .await;
        match spent {
            Ok(_) => Ok(true),
            Err(err) if is_duplicate_key(&err) => Ok(false),
            Err(err) => Err(err.into()),
        }
    }
}
