//! What guest posting keeps:
//! - the proofs of work already spent (`guest_proofs`), each under its challenge until the
//!   challenge expires (a TTL index removes it then), so that every replica refuses a replay;
//! - what moderators, and nobody else, see of each guest (`guest_details`, by guest id): a
//!   collection no public read, export or event touches;
//! - the networks banned from guest posting (`network_bans`, by block);
//! - whether a name was used by a signed-in user: the `name_keys` of their `people` document,
//!   kept by the draw of each of their comments' numbers (`shared::numbers`).

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use futures::TryStreamExt as _;
use mongodb::bson::{doc, DateTime, Document};
use mongodb::Database;

use crate::domain::{Cidr, Event, GuestDetails, GuestNetwork, Micros, NetworkBan};
use crate::store::api::{GuestStore, MAX_NETWORK_BANS};
use crate::store::events::EventLog;
use crate::store::moderation::BanTerms;
use crate::store::shared::bson::corrupt;
use crate::store::shared::bson::{micros_of, string_of};
use crate::store::shared::connect::index_model;
use crate::store::shared::error::{is_duplicate_key, StoreResult};
use crate::store::shared::metrics::{CommandCounter, Counted};
use crate::store::shared::name_keys::NAME_KEYS;
use crate::store::shared::ttl::{ensure_ttl, Ttl};

/// The collection of spent proofs.
pub(crate) const PROOFS: &str = "guest_proofs";
/// The collection of what moderators see of guests.
pub(crate) const DETAILS: &str = "guest_details";
/// The collection of network bans.
pub(crate) const NETWORK_BANS: &str = "network_bans";

/// What guest posting keeps.
pub(crate) struct Guests {
    db: Database,
    events: EventLog,
    proofs: Counted<Document>,
    details: Counted<Document>,
    bans: Counted<Document>,
    people: Counted<Document>,
}

impl Guests {
    pub(crate) fn new(db: &Database, commands: &CommandCounter, events: EventLog) -> Self {
        Self {
            db: db.clone(),
            events,
            proofs: Counted::new(db, PROOFS, commands),
            details: Counted::new(db, DETAILS, commands),
            bans: Counted::new(db, NETWORK_BANS, commands),
            people: Counted::new(db, crate::store::moderation::held::PEOPLE, commands),
        }
    }

    /// The TTL index that removes a spent proof once its challenge has expired, and the index
    /// of the names signed-in users posted under.
    pub(crate) async fn ensure_indexes(&self) -> StoreResult<()> {
        let ttl = Ttl {
            name: "expires",
            field: "expires_at",
            keep: Duration::ZERO,
            sparse: false,
        };
        ensure_ttl(&self.db, PROOFS, &ttl).await?;
        self.people
            .create_index(index_model(NAME_KEYS, doc! { NAME_KEYS: 1 }, false))
            .await?;
        Ok(())
    }
}

fn details_doc(guest: &str, details: &GuestDetails) -> Document {
    let mut stored = doc! {
        "_id": guest,
        "network": details.network.as_str(),
        "at": details.at.0,
    };
    if let Some(email) = &details.email {
        stored.insert("email", email);
    }
    if let Some(website) = &details.website {
        stored.insert("website", website);
    }
    stored
}

fn details_of(doc: &Document) -> StoreResult<GuestDetails> {
    Ok(GuestDetails {
        email: string_of(doc, "email")?,
        website: string_of(doc, "website")?,
        network: GuestNetwork::from_stored(
            string_of(doc, "network")?.ok_or_else(|| corrupt("guest details without a network"))?,
        ),
        at: micros_of(doc, "at")?.unwrap_or(Micros(0)),
    })
}

fn ban_doc(ban: &NetworkBan) -> Document {
    let terms = BanTerms {
        until: ban.until,
        reason: ban.reason.clone(),
        by: ban.by.clone(),
        at: ban.at,
    };
    terms.to_doc(&ban.network.to_string())
}

fn ban_of(doc: &Document) -> StoreResult<NetworkBan> {
    let (network, terms) = BanTerms::of(doc, "a network ban")?;
    Ok(NetworkBan {
        network: Cidr::parse(network).map_err(|e| corrupt(format!("a network ban: {e}")))?,
        until: terms.until,
        reason: terms.reason,
        by: terms.by,
        at: terms.at,
    })
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

    async fn name_taken(&self, name_key: &str) -> StoreResult<bool> {
        let found = self
            .people
            .find_one(doc! { NAME_KEYS: name_key })
            .projection(doc! { "_id": 1 })
            .await?;
        Ok(found.is_some())
    }

    async fn keep_details(&self, guest: &str, details: &GuestDetails) -> StoreResult<()> {
        self.details
            .replace_one(doc! { "_id": guest }, details_doc(guest, details))
            .upsert(true)
            .await?;
        Ok(())
    }

    async fn details_of(&self, guests: &[String]) -> StoreResult<HashMap<String, GuestDetails>> {
        if guests.is_empty() {
            return Ok(HashMap::new());
        }
        let docs: Vec<Document> = self
            .details
            .find(doc! { "_id": { "$in": guests } })
            .await?
            .try_collect()
            .await?;
        docs.iter()
            .map(|d| {
                let id = d
                    .get_str("_id")
                    .map_err(|_| corrupt("guest details without an id"))?;
                Ok((id.to_owned(), details_of(d)?))
            })
            .collect()
    }

    async fn ban_network(&self, ban: &NetworkBan, events: &[Event]) -> StoreResult<()> {
        let id = ban.network.to_string();
        self.events
            .replace_with(&self.bans, &id, &ban_doc(ban), events)
            .await
    }

    async fn unban_network(
        &self,
        network: &Cidr,
        announce: &(dyn for<'b> Fn(&'b NetworkBan) -> Vec<Event> + Send + Sync),
    ) -> StoreResult<Option<NetworkBan>> {
        let id = network.to_string();
        self.events
            .remove_with(&self.bans, &id, &ban_of, announce)
            .await
    }

    async fn network_bans(&self) -> StoreResult<Vec<NetworkBan>> {
        let now = Micros::now();
        let docs: Vec<Document> = self
            .bans
            .find(doc! { "$or": [
                { "until": { "$exists": false } },
                { "until": { "$gt": now.0 } },
            ] })
            .sort(doc! { "at": -1, "_id": -1 })
            .limit(i64::try_from(MAX_NETWORK_BANS).unwrap_or(i64::MAX))
            .await?
            .try_collect()
            .await?;
        docs.iter().map(ban_of).collect()
    }
}
